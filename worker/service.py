"""The one loop every side service of the worker runs in: claimer, heartbeats, sweeper, cost reconciler."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from worker import logs
from worker.wakeup import Wakeup, pause

# After a failed round (the database away, say) a service tries again this soon at the latest.
RETRY_SECONDS = 1.0


async def service_loop(name: str, run_once: Callable[[], float | Any | None], interval: float,
                       stop: asyncio.Event, wakeup: Wakeup | None = None, *,
                       run: Callable[..., Any] = asyncio.to_thread, worker_id: str | None = None,
                       gather_seconds: float | Callable[[], float] = 0.0, first_wait: float = 0.0) -> None:
    """Runs `run_once` (blocking, so through `run`) until `stop` is set.

    Between rounds it waits `interval` seconds, or the float a round returned (0: go again at once),
    and less when `wakeup` is raised; a round that raises is logged and retried soon. After a wait,
    `gather_seconds` more (or what a callable returns then) let work that arrives together be
    handled in one round. The first round comes after `first_wait` seconds (or when woken).
    """
    if first_wait > 0:
        await pause(stop, first_wait, wakeup)
    while not stop.is_set():
        try:
            result = await run(run_once)
            wait = result if isinstance(result, float) else interval
        except Exception as exc:  # one failed round must not end the service
            logs.problem(name, exc, worker=worker_id)
            wait = min(interval, RETRY_SECONDS)
        await pause(stop, wait, wakeup)
        gather = gather_seconds() if callable(gather_seconds) else gather_seconds
        if gather and wait > 0 and not stop.is_set():
            await asyncio.sleep(gather)
