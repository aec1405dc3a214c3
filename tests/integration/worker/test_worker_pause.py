"""A paused agent in the worker: nothing of it is claimed, and the claimer wakes when a timed pause ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schema import queue
from tests.factories import make_agent, make_task
from tests.integration.worker.test_worker_runs import services


def test_the_claimer_skips_a_paused_agent_and_wakes_when_its_pause_ends(pool, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    make_agent(conn, "capped", executor="noop", max_concurrent_tasks=2)
    for agent in ("bench", "capped"):
        make_task(conn, agent)
    until = datetime.now(UTC) + timedelta(seconds=40)
    queue.pause_agent(conn, "bench", actor="op", until=until, reason="quota")
    queue.pause_agent(conn, "capped", actor="op", reason="maintenance")
    table, claimer, _ = services(pool, tmp_path)
    claimer.config = type(claimer.config)(concurrency=4, poll_seconds=300)
    assert claimer.run_once() == 0
    # Nothing notifies when a pause runs out: the claimer looks again then, not at its 300 s poll.
    assert 30 < claimer.next_wait() <= 41
    queue.resume_agent(conn, "capped")
    claimer.agents_changed()
    assert claimer.run_once() == 1 and [r.claim.task.agent for r in table.snapshot()] == ["capped"]
