"""Claiming ahead: when runs end faster than a claim's round trip, each claim takes more than the
free slots, and the extra tasks start here, in claim order, as slots free."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from schema.models import Claim
from worker.claim_config import ClaimerConfig
from worker.inflight import Run


@dataclass
class Waiting:
    """A task claimed ahead of a free slot."""

    claim: Claim
    claimed_at: float  # monotonic


# Runs that ended early count up to the slots, or up to this many where the slots are fewer: a
# worker of two slots claims up to 2 + 2 x 16 tasks at once when every run ends at once, since a
# round trip costs it as much as one of sixteen slots (claims of 2 drained half as fast as pgqueuer).
MIN_SPAN = 16


class ClaimedAhead:
    """The tasks one worker claimed ahead of its free local slots, and how many it may claim ahead.

    A claim's round trip costs about the same for one task as for sixteen (one statement, one
    commit, one notification). When every run a round started has ended by the next round (runs
    of a few milliseconds or less), the slots turn over faster than the claims can fill them, and
    claims of only the free slots leave the worker waiting on its own statements. Then each claim
    may take `factor` times the runs that ended so early on top of the free slots; those tasks wait
    here, never running more than the slots allow, and start as slots free, within the same round
    when runs end within their start. The runs that ended early count up to the slots, or up to
    MIN_SPAN where the slots are fewer, so from round to round the claims grow to at most
    `factor` times that beyond the free slots. Runs that last longer than a round trip (any real
    agent run) never end so early: nothing is claimed ahead for them. A task that waited
    `max_wait_seconds` without a slot goes back to the queue (its attempt not counted).
    """

    def __init__(self, config: ClaimerConfig):
        # The claimer's config, checked when made: claim_ahead not negative, the wait positive.
        self.factor = config.claim_ahead
        self.max_wait_seconds = config.ahead_wait_seconds
        self.concurrency = config.concurrency
        self._waiting: deque[Waiting] = deque()
        self._started: list[Run] = []  # the local runs the last round started

    def __len__(self) -> int:
        return len(self._waiting)

    def extra(self) -> int:
        """How many tasks the next claim may take beyond the free local slots: `factor` times the
        runs the last round started that have ended already (counted up to the slots, or MIN_SPAN)."""
        if not self.factor or not self._started:
            return 0
        ended = sum(1 for run in self._started if run.exit is not None or not run.executor.is_alive(run.handle))
        return self.factor * min(ended, max(self.concurrency, MIN_SPAN))

    def round_begins(self) -> None:
        """Forgets the runs of the round before (extra() has read them)."""
        self._started = []

    def started(self, runs: Iterable[Run | None]) -> None:
        """Notes the local runs this round started."""
        self._started.extend(run for run in runs if run is not None and run.executor.local)

    def wait(self, claims: Iterable[Claim]) -> None:
        """Keeps claims that found no free slot, in claim order, behind those waiting already."""
        now = time.monotonic()
        self._waiting.extend(Waiting(claim, now) for claim in claims)

    def take(self, n: int) -> list[Claim]:
        """Up to n waiting claims, the oldest first."""
        taken: list[Claim] = []
        while self._waiting and len(taken) < n:
            taken.append(self._waiting.popleft().claim)
        return taken

    def take_expired(self) -> list[Claim]:
        """The waiting claims that waited too long for a slot."""
        limit = time.monotonic() - self.max_wait_seconds
        expired = []
        while self._waiting and self._waiting[0].claimed_at <= limit:
            expired.append(self._waiting.popleft().claim)
        return expired

    def take_all(self) -> list[Claim]:
        """Every waiting claim (the worker pauses)."""
        return self.take(len(self._waiting))

    def next_expiry_in(self) -> float | None:
        """Seconds until the oldest waiting claim has waited too long, or None when none waits."""
        if not self._waiting:
            return None
        return max(0.0, self._waiting[0].claimed_at + self.max_wait_seconds - time.monotonic())
