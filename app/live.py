"""Fans the process's LISTEN connection (worker.listener.Listener) out to NiceGUI pages and SSE subscribers."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from schema.stats_types import StreamEvent
from worker.listener import Listener, ListenerConfig

# The app's reconnect pacing: a restarting database refuses connections for a while, and the
# header's indicator (redrawn every 0.5 s) shows `polling` meanwhile.
LISTENER_CONFIG = ListenerConfig(reconnect_min_seconds=2.0, reconnect_max_seconds=10.0)


E = TypeVar("E")  # what a subscription carries: task events, or review changes


class Subscription(Generic[E]):
    """A bounded, coalescing mailbox of task events for one page or one SSE client.

    A burst of notifications wakes the reader once; it drains everything queued. When the
    reader falls too far behind, or the LISTEN connection was lost, the queue is dropped and
    `lagged` is set: the reader then catches up from the event log, which is durable.
    """

    def __init__(self, group: set[Subscription[E]], max_events: int) -> None:
        self._group = group
        self.max_events = max_events
        self.events: deque[E] = deque()
        self.lagged = False
        self._wake = asyncio.Event()

    def push(self, events: list[E]) -> None:
        if len(self.events) + len(events) > self.max_events:
            self.events.clear()
            self.lagged = True
        else:
            self.events.extend(events)
        self._wake.set()

    def mark_lagged(self) -> None:
        self.events.clear()
        self.lagged = True
        self._wake.set()

    @property
    def pending(self) -> bool:
        return self._wake.is_set()

    def drain(self) -> tuple[list[E], bool]:
        """Everything queued since the last drain, and whether events may have been missed."""
        events, lagged = list(self.events), self.lagged
        self.events.clear()
        self.lagged = False
        self._wake.clear()
        return events, lagged

    async def wait(self, timeout: float) -> bool:
        """True once something is pending, False after `timeout` seconds of quiet."""
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self._group.discard(self)


class Broadcaster:
    """Runs the process's Listener between start() and stop() and fans its events out to subscribers.

    Review changes (channel quire_reviews) go to their own subscribers (`subscribe_reviews`): the
    review page and the review SSE stream. Other consumers in the process (the co-hosted worker)
    register on `listener` themselves.
    """

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self._subscribers: set[Subscription[StreamEvent]] = set()
        self._review_subscribers: set[Subscription[dict]] = set()
        self._buffer: list[StreamEvent] = []
        self._flush_scheduled = False
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        listener.on_events(self._receive)
        listener.on_reviews(self._receive_reviews)
        # Notifications sent while nobody listened are gone: every reader catches up from the log.
        listener.on_missed(self._mark_all_lagged)

    @property
    def healthy(self) -> bool:
        return self.listener.live

    @property
    def connects(self) -> int:
        return self.listener.connects

    @property
    def notifications(self) -> int:
        return self.listener.notifications

    @property
    def events_seen(self) -> int:
        return self.listener.events_seen

    @property
    def last_error(self) -> str | None:
        return self.listener.last_error

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def subscribe(self, *, max_events: int = 10_000) -> Subscription:
        sub = Subscription(self._subscribers, max_events)
        self._subscribers.add(sub)
        return sub

    def subscribe_reviews(self, *, max_events: int = 10_000) -> Subscription:
        """A mailbox of review notifications ({"e", "r", "t", "k"} dicts)."""
        sub = Subscription(self._review_subscribers, max_events)
        self._review_subscribers.add(sub)
        return sub

    def on_health_change(self, callback: Callable[[bool], None]) -> None:
        self.listener.on_live_change(callback)

    async def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.create_task(self.listener.run(self._stop), name="quire-listen")

    async def stop(self) -> None:
        self._stop.set()
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _mark_all_lagged(self) -> None:
        for sub in list(self._subscribers) + list(self._review_subscribers):
            sub.mark_lagged()

    def _receive_reviews(self, items: list[dict]) -> None:
        # Review changes are rare (a person's pace): no burst collapsing needed.
        for sub in list(self._review_subscribers):
            sub.push(items)

    def _receive(self, events: list[StreamEvent]) -> None:
        self._buffer.extend(events)
        if not self._flush_scheduled:
            # Every notification of one network read arrives before this runs: one wake-up per burst.
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        events, self._buffer = self._buffer, []
        for sub in list(self._subscribers):
            sub.push(events)


_current: Broadcaster | None = None


def install(broadcaster: Broadcaster) -> None:
    """Makes `broadcaster` the process's one broadcaster."""
    global _current
    _current = broadcaster


def current() -> Broadcaster:
    if _current is None:
        raise RuntimeError("no broadcaster installed: app.main.run_app wires one at start")
    return _current
