"""worker.service.service_loop: rounds at the interval or at what a round asks, sooner when woken,
on after a failed round, out at once when stopped."""

from __future__ import annotations

import asyncio

from worker.service import service_loop
from worker.wakeup import Wakeup


def test_a_round_runs_again_when_woken_and_the_loop_ends_when_stopped():
    async def main() -> list[str]:
        stop, wakeup, seen = asyncio.Event(), Wakeup(), []

        def run_once() -> int:
            seen.append("round")
            return 3  # a count, not a wait: the interval applies

        task = asyncio.create_task(service_loop("test", run_once, 3600, stop, wakeup))
        while len(seen) < 1:
            await asyncio.sleep(0.01)
        wakeup.set()
        while len(seen) < 2:
            await asyncio.sleep(0.01)
        stop.set()
        await asyncio.wait_for(task, 30)
        return seen

    assert asyncio.run(main()) == ["round", "round"]


def test_a_round_can_ask_to_go_again_at_once_and_a_failed_round_is_retried():
    async def main() -> list[str]:
        stop, seen = asyncio.Event(), []

        def run_once() -> float:
            seen.append("round")
            if len(seen) == 2:
                raise RuntimeError("the database is away")
            if len(seen) >= 4:
                stop.set()
            return 0.0

        # An hour's interval: only the rounds' own answer and the retry after a failure go on.
        await asyncio.wait_for(service_loop("test", run_once, 3600, stop), 30)
        return seen

    assert asyncio.run(main()) == ["round"] * 4
