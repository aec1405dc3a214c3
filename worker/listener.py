"""The worker's LISTEN connection: wakes the claim loop on task events, survives database restarts."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Callable

import psycopg

from schema import db
from schema.sql import q
from worker import logs


@dataclass(frozen=True)
class ListenerConfig:
    """How often the connection's health is checked and how long reconnects back off."""

    health_seconds: float = 5.0
    reconnect_min_seconds: float = 0.2
    reconnect_max_seconds: float = 5.0
    connect_timeout_seconds: float = 5.0

    def __post_init__(self):
        if min(self.health_seconds, self.reconnect_min_seconds, self.connect_timeout_seconds) <= 0:
            raise ValueError("listener intervals must be positive")
        if self.reconnect_max_seconds < self.reconnect_min_seconds:
            raise ValueError("reconnect_max_seconds must not be below reconnect_min_seconds")


def parse_events(payload: str) -> list[dict[str, Any]]:
    """The events of one notification (a JSON list of {"e","id","a","s","p"}); [] if unreadable."""
    try:
        events = json.loads(payload)
    except ValueError:
        return []
    if isinstance(events, dict):
        events = [events]
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


class Listener:
    """One autocommit async connection listening on `quire_tasks`; `live` is False while polling."""

    def __init__(self, dsn: str, on_events: Callable[[list[dict[str, Any]]], None], *,
                 worker_id: str, config: ListenerConfig | None = None,
                 on_reconnect: Callable[[], None] | None = None):
        self.dsn = dsn
        self.on_events = on_events
        self.on_reconnect = on_reconnect or (lambda: None)
        self.worker_id = worker_id
        self.config = config or ListenerConfig()
        self.live = False
        self.connects = 0

    async def _connect(self) -> psycopg.AsyncConnection:
        """A new autocommit connection that listens on the channel."""
        conn = await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, connect_timeout=max(1, int(self.config.connect_timeout_seconds)),
            **db.connection_kwargs())
        await conn.execute(q("channel_listen_tasks"))
        return conn

    async def healthy(self, conn: psycopg.AsyncConnection) -> bool:
        """Whether the connection still answers and still listens on the channel."""
        cur = await asyncio.wait_for(conn.execute(q("channel_listening_one")),
                                     self.config.connect_timeout_seconds)
        row = await cur.fetchone()
        return bool(row and row[0])

    def _set_live(self, live: bool, error: BaseException | None = None) -> None:
        """Records and logs a change between listening and polling."""
        if live == self.live:
            return
        self.live = live
        logs.change("worker", "listening" if live else "polling", worker=self.worker_id,
                    connects=self.connects, error=f"{type(error).__name__}: {error}" if error else None)

    async def run(self, stop: asyncio.Event) -> None:
        """Listens until stopped; after any failure reconnects with backoff and listens again."""
        delay = self.config.reconnect_min_seconds
        while not stop.is_set():
            conn = None
            try:
                conn = await self._connect()
                self.connects += 1
                self._set_live(True)
                delay = self.config.reconnect_min_seconds
                # Anything published while we were away is lost: look for work at once.
                self.on_reconnect()
                await self._listen(conn, stop)
            except (psycopg.Error, OSError, asyncio.TimeoutError, RuntimeError) as exc:
                self._set_live(False, exc)
                await self._sleep(stop, delay)
                delay = min(delay * 2, self.config.reconnect_max_seconds)
            finally:
                if conn is not None:
                    await conn.close()
        self._set_live(False)

    async def _listen(self, conn: psycopg.AsyncConnection, stop: asyncio.Event) -> None:
        """Passes notifications on, checking health between them; raises when unhealthy."""
        while not stop.is_set():
            async for notify in conn.notifies(timeout=self.config.health_seconds):
                events = parse_events(notify.payload)
                if events:
                    self.on_events(events)
                if stop.is_set():
                    return
            if not await self.healthy(conn):
                raise RuntimeError("the connection no longer listens on quire_tasks")

    @staticmethod
    async def _sleep(stop: asyncio.Event, seconds: float) -> None:
        """Waits `seconds`, or less if stopped."""
        try:
            await asyncio.wait_for(stop.wait(), seconds)
        except asyncio.TimeoutError:
            pass
