"""One LISTEN connection per process, fanned out to NiceGUI pages and SSE subscribers."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from typing import Callable

import psycopg

from schema import db
from schema.stats import StreamEvent

log = logging.getLogger("quire.live")

CHANNEL = "quire_tasks"
APPLICATION_NAME = "quire-listen"


class Subscription:
    """A bounded, coalescing mailbox of task events for one page or one SSE client.

    A burst of notifications wakes the reader once; it drains everything queued. When the
    reader falls too far behind, or the LISTEN connection was lost, the queue is dropped and
    `lagged` is set: the reader then catches up from the event log, which is durable.
    """

    def __init__(self, owner: "Broadcaster", max_events: int) -> None:
        self._owner = owner
        self.max_events = max_events
        self.events: deque[StreamEvent] = deque()
        self.lagged = False
        self._wake = asyncio.Event()

    def push(self, events: list[StreamEvent]) -> None:
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

    def drain(self) -> tuple[list[StreamEvent], bool]:
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
        except asyncio.TimeoutError:
            return False

    def close(self) -> None:
        self._owner._subscribers.discard(self)


def parse_payload(payload: str) -> list[StreamEvent]:
    """The trigger's payload: a JSON list of {"e", "id", "a", "s", "p"}."""
    return [StreamEvent(id=int(item["e"]), task_id=int(item["id"]), agent=item["a"], status=item["s"],
                        prev_status=item.get("p")) for item in json.loads(payload)]


class Broadcaster:
    """Holds the process's LISTEN connection, checks its health and reconnects after loss."""

    def __init__(self, dsn: str, *, health_interval: float = 5.0,
                 retry_delays: tuple[float, ...] = (2.0, 2.0, 5.0, 10.0)) -> None:
        self.dsn = dsn
        self.health_interval = health_interval
        # The first retry waits a little: a restarting database refuses connections for a while.
        self.retry_delays = retry_delays
        self.healthy = False
        self.connects = 0
        self.notifications = 0
        self.events_seen = 0
        self.last_error: str | None = None
        self._subscribers: set[Subscription] = set()
        self._buffer: list[StreamEvent] = []
        self._flush_scheduled = False
        self._task: asyncio.Task | None = None
        self._stop = asyncio.Event()
        self._listeners: list[Callable[[bool], None]] = []

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def subscribe(self, *, max_events: int = 10_000) -> Subscription:
        sub = Subscription(self, max_events)
        self._subscribers.add(sub)
        return sub

    def on_health_change(self, callback: Callable[[bool], None]) -> None:
        self._listeners.append(callback)

    async def start(self) -> None:
        self._stop.clear()
        self._task = asyncio.create_task(self._run(), name="quire-listen")

    async def stop(self) -> None:
        self._stop.set()
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._set_healthy(False)

    async def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                await self._listen()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any loss of the connection: note it, wait, reconnect
                self.last_error = f"{type(exc).__name__}: {exc}".strip()
                log.warning("LISTEN connection lost (%s); polling until it is back", self.last_error)
            self._set_healthy(False)
            delay = self.retry_delays[min(failures, len(self.retry_delays) - 1)]
            failures += 1
            try:
                await asyncio.wait_for(self._stop.wait(), delay)
            except asyncio.TimeoutError:
                pass

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, application_name=APPLICATION_NAME, **db.connection_kwargs())
        async with conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            await self._check(conn)
            self.connects += 1
            if self.connects > 1:
                # Notifications sent while we were away are gone: everyone catches up from the log.
                for sub in list(self._subscribers):
                    sub.mark_lagged()
            self._set_healthy(True)
            while not self._stop.is_set():
                async for notify in conn.notifies(timeout=self.health_interval):
                    self._receive(notify.payload)
                await asyncio.wait_for(self._check(conn), timeout=max(self.health_interval, 3.0))

    @staticmethod
    async def _check(conn: psycopg.AsyncConnection) -> None:
        cur = await conn.execute("SELECT %s = ANY(ARRAY(SELECT pg_listening_channels()))", [CHANNEL])
        row = await cur.fetchone()
        if not row or not row[0]:
            raise RuntimeError(f"the connection is no longer listening on {CHANNEL}")

    def _receive(self, payload: str) -> None:
        self.notifications += 1
        try:
            events = parse_payload(payload)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("unreadable notification %r: %s", payload[:200], exc)
            for sub in list(self._subscribers):
                sub.mark_lagged()
            return
        self.events_seen += len(events)
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

    def _set_healthy(self, healthy: bool) -> None:
        if healthy == self.healthy:
            return
        self.healthy = healthy
        for callback in self._listeners:
            try:
                callback(healthy)
            except Exception:  # a listener's failure must not take the connection down
                log.exception("health listener failed")


_current: Broadcaster | None = None


def install(broadcaster: Broadcaster) -> None:
    """Makes `broadcaster` the process's one broadcaster."""
    global _current
    _current = broadcaster


def current() -> Broadcaster:
    if _current is None:
        raise RuntimeError("no broadcaster installed: app.main.run_app wires one at start")
    return _current
