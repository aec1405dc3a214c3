"""A wake-up flag any thread may raise, and the pause every service loop takes between rounds."""

from __future__ import annotations

import asyncio
import contextlib


class Wakeup:
    """An asyncio.Event bound to one loop that threads can set safely."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        self.loop = loop or asyncio.get_running_loop()
        self.event = asyncio.Event()
        # Raised and not yet consumed: a burst of runs ending wakes the loop once, not once each.
        self._pending = False

    def set(self) -> None:
        """Raises the flag; safe from any thread."""
        if self._pending:
            return
        self._pending = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            self.loop.call_soon_threadsafe(self.event.set)

    async def wait(self, timeout: float | None) -> bool:
        """Waits until set or timed out; True if it was set, and then the flag is cleared."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout)
        except TimeoutError:
            return False
        # Consumed before cleared: a set() from now on schedules a new event.set after this clear.
        self._pending = False
        self.event.clear()
        return True


async def pause(stop: asyncio.Event, seconds: float | None, wakeup: Wakeup | None = None) -> None:
    """Returns after `seconds`, or earlier when woken or stopped."""
    waits: list[asyncio.Future[bool]] = [asyncio.ensure_future(stop.wait())]
    if wakeup is not None:
        waits.append(asyncio.ensure_future(wakeup.wait(None)))
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
