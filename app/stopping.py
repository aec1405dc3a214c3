"""Stops the app in an order that loses nothing: callbacks are served until in-flight runs report."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from schema import worker_queries

log = logging.getLogger("quire.app")
SIGNALS = (signal.SIGTERM, signal.SIGINT)


def drain_before_exit(drain: Callable[[], Awaitable[Any]], hurry: Callable[[], None]) -> None:
    """Takes SIGTERM and SIGINT from the web server while it runs (call it from a startup handler).

    The first signal runs `drain` and only then hands the signal on to the server, so every route,
    the callback routes among them, serves until the drain ends; a second signal calls `hurry`; a
    third goes to the server at once.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # signals reach the main thread only
    loop = asyncio.get_running_loop()
    server_handlers: dict[int, Any] = {sig: signal.getsignal(sig) for sig in SIGNALS}
    received: list[int] = []
    running: list[asyncio.Task] = []

    def hand_on(sig: int) -> None:
        """Passes the signal to the handler the server had installed."""
        handler = server_handlers.get(sig)
        if callable(handler):
            handler(sig, None)

    async def finish(sig: int) -> None:
        """Drains, then lets the server stop."""
        try:
            await drain()
        except Exception:  # the server must stop all the same
            log.exception("draining before the app stops")
        hand_on(sig)

    def on_signal(sig: int, frame: Any) -> None:
        received.append(sig)
        if len(received) == 1:
            log.info("stopping: serving callbacks until runs in flight report")
            loop.call_soon_threadsafe(lambda: running.append(loop.create_task(finish(sig))))
        elif len(received) == 2:
            loop.call_soon_threadsafe(hurry)
        else:
            hand_on(sig)

    for sig in SIGNALS:
        signal.signal(sig, on_signal)


async def runs_reported(pool, *, grace_seconds: float, poll_seconds: float = 0.5,
                        hurried: asyncio.Event | None = None) -> None:
    """Waits until every run in flight now has ended (reported, or handed back), or the grace ends."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_seconds

    def running(ids: list[int] | None) -> list[int]:
        with pool.connection(timeout=5) as conn:
            return worker_queries.attempt_list_running_ids(conn, ids=ids)

    ids: list[int] | None = None
    while loop.time() < deadline and not (hurried and hurried.is_set()):
        try:
            ids = await asyncio.to_thread(running, ids)
        except Exception as exc:  # without the database nothing can report anyway
            log.warning("stopping: cannot tell which runs are in flight: %s", exc)
            return
        if not ids:
            return
        await asyncio.sleep(min(poll_seconds, max(0.0, deadline - loop.time())))
