"""When a page section is read again: due once something changed, and at most once per interval
however fast the changes come. One per section replaces a dirty flag and a timestamp kept by hand."""

from __future__ import annotations

import math
import time


class Due:
    """A section's refresh: `mark` when what it shows may have changed; `take` says whether to read
    it now (and starts its interval); `settle` after a read that may not have been current."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.marked = False
        # Never read: -inf, not 0, since the monotonic clock starts near zero at boot, and a machine
        # up for less than an interval would hold back a section's first read.
        self.read_at = -math.inf

    def mark(self) -> None:
        self.marked = True

    def ready(self) -> bool:
        """Its interval has passed since the last read."""
        return time.monotonic() - self.read_at >= self.every

    def take(self, *, force: bool = False) -> bool:
        """Whether to read it now: forced, or marked with its interval passed. A read taken clears the
        mark; one refused for the interval leaves it marked for the next turn."""
        if not force and not (self.marked and self.ready()):
            return False
        self.marked, self.read_at = False, time.monotonic()
        return True

    def settle(self, *, current: bool = True) -> None:
        """A read ended: its interval starts now, and it stays marked if what it read was not current."""
        self.read_at = time.monotonic()
        self.marked = self.marked or not current

    def expire(self) -> None:
        """Marked, with its interval over: read at the next turn."""
        self.marked, self.read_at = True, -math.inf
