"""The process's one LISTEN connection on `quire_tasks`: keeps it healthy and hands events to its consumers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg

from schema import db
from schema.sql import q
from schema.stats_types import StreamEvent
from worker import logs

Events = list[StreamEvent]
# Notified (with an empty payload) when the agents table changes.
AGENTS_CHANNEL = "quire_agents"
# Notified with a JSON list of {"e": event id, "r": review id, "t": task id, "k": kind} per review change.
REVIEWS_CHANNEL = "quire_reviews"


@dataclass(frozen=True)
class ListenerConfig:
    """How often the connection's health is checked and how long reconnects back off."""

    health_seconds: float = 5.0
    reconnect_min_seconds: float = 0.2
    reconnect_max_seconds: float = 5.0
    connect_timeout_seconds: float = 5.0
    # How the connection shows in pg_stat_activity: one such backend per process.
    application_name: str = "quire-listen"

    def __post_init__(self) -> None:
        if min(self.health_seconds, self.reconnect_min_seconds, self.connect_timeout_seconds) <= 0:
            raise ValueError("listener intervals must be positive")
        if self.reconnect_max_seconds < self.reconnect_min_seconds:
            raise ValueError("reconnect_max_seconds must not be below reconnect_min_seconds")


def parse_events(payload: str) -> Events | None:
    """The events of one notification (a JSON list of {"e","id","a","s","p"}); None if unreadable."""
    try:
        items = orjson.loads(payload)  # every task event passes here: at half json.loads's cost
        if isinstance(items, dict):
            items = [items]
        if not isinstance(items, list):
            return None
        return [StreamEvent.from_notify(item) for item in items]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class _Handlers:
    """Callbacks of one kind; each may be removed again, and one failing does not stop the others."""

    def __init__(self, kind: str, owner: str):
        self.kind = kind
        self.owner = owner
        self._items: list[Callable[..., None]] = []

    def add(self, handler: Callable[..., None]) -> Callable[[], None]:
        """Registers `handler`; returns the function that removes it."""
        self._items.append(handler)
        return lambda: self._items.remove(handler) if handler in self._items else None

    def __call__(self, *args: Any) -> None:
        """Calls every handler with `args`."""
        for handler in list(self._items):
            try:
                handler(*args)
            except Exception as exc:  # a consumer's failure must not take the connection down
                logs.problem(f"{self.kind} handler", exc, listener=self.owner)


class Listener:
    """One autocommit async connection listening on `quire_tasks`, shared by every consumer in the process.

    Consumers register handlers: `on_events` (each readable notification's events),
    `on_missed` (notifications may have been lost: after every (re)connect and after an unreadable
    one, so consumers catch up from the tables) and `on_live_change` (listening vs polling).
    Its owner runs it (`run(stop)`); the other consumers only register.
    """

    def __init__(self, dsn: str, *, name: str | None = None, config: ListenerConfig | None = None):
        self.dsn = dsn
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.config = config or ListenerConfig()
        self.live = False
        self.connects = 0
        self.notifications = 0
        self.events_seen = 0
        self.last_error: str | None = None
        self._events = _Handlers("events", self.name)
        self._missed = _Handlers("missed", self.name)
        self._live_change = _Handlers("live change", self.name)
        self._agents = _Handlers("agents", self.name)
        self._reviews = _Handlers("reviews", self.name)

    def on_events(self, handler: Callable[[Events], None]) -> Callable[[], None]:
        """Calls `handler(events)` in the loop for every readable notification; returns its remover."""
        return self._events.add(handler)

    def on_missed(self, handler: Callable[[], None]) -> Callable[[], None]:
        """Calls `handler()` whenever notifications may have been lost; returns its remover."""
        return self._missed.add(handler)

    def on_agents_changed(self, handler: Callable[[], None]) -> Callable[[], None]:
        """Calls `handler()` when an agent's configuration changed (channel quire_agents)."""
        return self._agents.add(handler)

    def on_reviews(self, handler: Callable[[list[dict[str, Any]]], None]) -> Callable[[], None]:
        """Calls `handler(items)` for each review notification (channel quire_reviews)."""
        return self._reviews.add(handler)

    def on_live_change(self, handler: Callable[[bool], None]) -> Callable[[], None]:
        """Calls `handler(live)` when the connection starts or stops listening; returns its remover."""
        return self._live_change.add(handler)

    async def _connect(self) -> psycopg.AsyncConnection:
        """A new autocommit connection that listens on the channel."""
        conn = await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, connect_timeout=max(1, int(self.config.connect_timeout_seconds)),
            application_name=self.config.application_name, **db.connection_kwargs())
        try:
            await conn.execute(q("channel_listen_tasks"))
            await conn.execute(q("channel_listen_agents"))
            await conn.execute(q("channel_listen_reviews"))
        except BaseException:
            await conn.close()
            raise
        return conn

    async def healthy(self, conn: psycopg.AsyncConnection) -> bool:
        """Whether the connection still answers and still listens on the channel."""
        cur = await asyncio.wait_for(conn.execute(q("channel_listening_one")),
                                     self.config.connect_timeout_seconds)
        row = await cur.fetchone()
        return bool(row and row[0])

    def _set_live(self, live: bool, error: str | None = None) -> None:
        """Records, logs and announces a change between listening and polling."""
        if live == self.live:
            return
        self.live = live
        logs.change("worker", "listening" if live else "polling", listener=self.name,
                    connects=self.connects, error=error)
        self._live_change(live)

    async def run(self, stop: asyncio.Event) -> None:
        """Listens until stopped; after any failure reconnects with backoff and listens again."""
        delay = self.config.reconnect_min_seconds
        try:
            while not stop.is_set():
                connects = self.connects
                try:
                    await self._session(stop)
                except Exception as exc:  # no connection, or a lost one: poll until it is back
                    self._lost(exc)
                    if self.connects > connects:  # it had connected: the backoff starts again
                        delay = self.config.reconnect_min_seconds
                    await self._sleep(stop, delay)
                    delay = min(delay * 2, self.config.reconnect_max_seconds)
        finally:
            self._set_live(False)

    async def _session(self, stop: asyncio.Event) -> None:
        """One connection's life: connect, listen, pass notifications on until stopped or lost."""
        conn = await self._connect()
        try:
            self.connects += 1
            # Anything published while nobody listened is lost: consumers catch up first.
            self._missed()
            self._set_live(True)
            await self._listen(conn, stop)
        finally:
            await conn.close()

    def _lost(self, exc: BaseException) -> None:
        """Notes why the connection is gone and switches to polling."""
        self.last_error = f"{type(exc).__name__}: {exc}".strip()
        self._set_live(False, self.last_error)

    async def _listen(self, conn: psycopg.AsyncConnection, stop: asyncio.Event) -> None:
        """Passes notifications on, checking health between them; raises when unhealthy."""
        while not stop.is_set():
            async for notify in conn.notifies(timeout=self.config.health_seconds):
                if notify.channel == AGENTS_CHANNEL:
                    self._agents()
                elif notify.channel == REVIEWS_CHANNEL:
                    self._receive_reviews(notify.payload)
                else:
                    self._receive(notify.payload)
                if stop.is_set():
                    return
            if not await self.healthy(conn):
                raise RuntimeError("the connection no longer listens on quire_tasks")

    def _receive(self, payload: str) -> None:
        """Counts one notification and hands its events on; an unreadable one counts as missed."""
        self.notifications += 1
        events = parse_events(payload)
        if events is None:
            logs.problem("read notification", f"unreadable payload {payload[:200]!r}", listener=self.name)
            self._missed()
            return
        self.events_seen += len(events)
        if events:
            self._events(events)

    def _receive_reviews(self, payload: str) -> None:
        """Hands a review notification on; an unreadable one counts as missed."""
        try:
            items = json.loads(payload)
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise ValueError(payload[:200])
        except ValueError:
            logs.problem("read notification", f"unreadable review payload {payload[:200]!r}", listener=self.name)
            self._missed()
            return
        self._reviews(items)

    @staticmethod
    async def _sleep(stop: asyncio.Event, seconds: float) -> None:
        """Waits `seconds`, or less if stopped."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)
