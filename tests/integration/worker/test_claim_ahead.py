"""Claiming ahead: more than the free slots only while runs end faster than a round, never more
runs at once than the slots, and what waited too long, or is left when the worker stops, goes back."""

from __future__ import annotations

import pytest

from schema import queue
from tests.factories import make_agent, make_task
from tests.waiting import wait_until
from worker.claim_config import ClaimerConfig
from worker.claimer import Claimer
from worker.executors import LocalConfig, build_executors
from worker.heartbeats import Heartbeats
from worker.runs import RunTable, RunTableConfig


def services(pool, tmp_path, **config):
    executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs"))
    table = RunTable(pool, executors, RunTableConfig(worker_id="w-ahead"))
    return table, Claimer(table, executors, ClaimerConfig(**config)), Heartbeats(table)


def statuses(conn, tasks) -> list[str]:
    return [queue.get_task(conn, t.id).status.value for t in tasks]


def running(table) -> int:
    return sum(1 for run in table.snapshot() if run.executor.is_alive(run.handle))


def test_runs_that_end_within_their_start_let_the_next_claim_take_more_than_the_slots(pool, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    tasks = [make_task(conn, "bench") for _ in range(20)]
    table, claimer, heartbeats = services(pool, tmp_path, concurrency=3, claim_ahead=2)
    # The first round knows nothing of how long runs take: the free slots only.
    assert claimer.run_once() == 3
    # All three ended within their start: three slots plus twice three, every one started in this
    # round as the runs before it ended, none left waiting.
    assert claimer.run_once() == 9
    assert len(claimer.ahead) == 0 and running(table) == 0
    assert claimer.run_once() == 8  # what is left of the backlog
    heartbeats.run_once()
    assert statuses(conn, tasks) == ["completed"] * 20
    assert table.counters.snapshot()["runs_started"] == 20


def test_a_worker_of_few_slots_claims_ahead_by_more_than_its_slots_from_round_to_round(pool, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    for _ in range(100):
        make_task(conn, "bench")
    table, claimer, heartbeats = services(pool, tmp_path, concurrency=1, claim_ahead=2)
    # Each round's runs all ended at once: the next claim takes one slot plus twice the runs that
    # ended, counted up to sixteen however few the slots.
    assert [claimer.run_once() for _ in range(6)] == [1, 1 + 2 * 1, 1 + 2 * 3, 1 + 2 * 7, 1 + 2 * 15, 1 + 2 * 16]
    assert running(table) == 0 and len(claimer.ahead) == 0
    heartbeats.run_once()
    assert table.counters.snapshot()["runs_started"] == 1 + 3 + 7 + 15 + 31 + 33


def test_tasks_claimed_ahead_wait_for_a_slot_and_never_run_beyond_the_slots(pool, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    make_agent(conn, "slow", executor="noop", settings={"delay_seconds": 60})
    for _ in range(3):
        make_task(conn, "bench")
    table, claimer, heartbeats = services(pool, tmp_path, concurrency=3, claim_ahead=2)
    assert claimer.run_once() == 3  # the quick ones, ended at once
    slow = [make_task(conn, "slow") for _ in range(9)]
    # Nine claimed: three start and run on, six wait for a slot.
    assert claimer.run_once() == 9
    assert running(table) == 3 and len(claimer.ahead) == 6
    assert statuses(conn, slow) == ["processing"] * 9
    # No slot is free: nothing starts, nothing more is claimed, and none of the three runs ended
    # early, so the next claim would take no more than its free slots.
    assert claimer.run_once() == 0
    assert running(table) == 3 and len(claimer.ahead) == 6 and claimer.ahead.extra() == 0
    # One run ends: the oldest task claimed ahead takes its slot.
    first = min((run for run in table.snapshot() if run.executor.is_alive(run.handle)),
                key=lambda run: run.attempt_id)
    first.executor.stop(first.handle)
    assert claimer.run_once() == 1
    assert running(table) == 3 and len(claimer.ahead) == 5
    started = sorted(run.claim.task.id for run in table.snapshot() if run.executor.is_alive(run.handle))
    assert started == [t.id for t in slow[1:4]]
    table.hand_back_all()
    claimer.hand_back_ahead()
    heartbeats.run_once()


def test_a_task_claimed_ahead_that_found_no_slot_in_time_goes_back_with_its_attempt_not_counted(
        pool, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    make_agent(conn, "slow", executor="noop", settings={"delay_seconds": 60})
    for _ in range(2):
        make_task(conn, "bench")
    table, claimer, _ = services(pool, tmp_path, concurrency=2, claim_ahead=2, ahead_wait_seconds=0.05)
    assert claimer.run_once() == 2
    slow = [make_task(conn, "slow") for _ in range(6)]
    assert claimer.run_once() == 6
    assert len(claimer.ahead) == 4
    waiting = [t.id for t in slow[2:]]
    assert claimer.next_wait() <= 0.1  # the claimer looks again when they have waited long enough
    wait_until(lambda: claimer.run_once() == 0 and len(claimer.ahead) == 0, timeout=10)
    for task_id in waiting:
        task = queue.get_task(conn, task_id)
        assert task.status.value == "enqueued"
        assert task.attempt_count - task.attempt_base == 0  # not counted against its budget
        [attempt] = task.attempts
        assert attempt.status.value == "handed_back"
        assert attempt.error == "claimed ahead, and no slot came free in time"
    assert table.counters.snapshot()["runs_handed_back"] == 4
    table.hand_back_all()


@pytest.mark.parametrize("stop", ["paused", "halted"])
def test_what_was_claimed_ahead_for_an_agent_paused_or_halted_since_goes_back_unstarted(pool, conn, tmp_path, stop):
    make_agent(conn, "bench", executor="noop")
    make_agent(conn, "slow", executor="noop", settings={"delay_seconds": 60})
    for _ in range(3):
        make_task(conn, "bench")
    table, claimer, _ = services(pool, tmp_path, concurrency=3, claim_ahead=2)
    assert claimer.run_once() == 3
    slow = [make_task(conn, "slow") for _ in range(9)]
    assert claimer.run_once() == 9
    assert running(table) == 3 and len(claimer.ahead) == 6
    # The operator pauses the agent (or its endpoint's refusal halts it) while six wait for a slot.
    if stop == "paused":
        queue.pause_agent(conn, "slow", actor="operator", reason="quota resets at noon")
        why = "claimed ahead, and then: an operator paused the agent"
    else:
        queue.halt_agent(conn, "slow", "the model endpoint refused it: HTTP 404")
        why = "claimed ahead, and then: the model endpoint refused it: HTTP 404"
    claimer.agents_changed()
    first = next(run for run in table.snapshot() if run.executor.is_alive(run.handle))
    first.executor.stop(first.handle)
    # A slot came free: nothing of the stopped agent starts in it, and what waited goes back.
    assert claimer.run_once() == 0
    assert running(table) == 2 and len(claimer.ahead) == 0
    waiting = [queue.get_task(conn, t.id) for t in slow[3:]]
    assert [t.status.value for t in waiting] == ["enqueued"] * 6
    assert all(t.attempt_count - t.attempt_base == 0 for t in waiting)  # not counted against the budget
    assert {t.attempts[0].error for t in waiting} == {why}
    assert table.counters.snapshot()["runs_started"] == 3 + 3
    table.hand_back_all()


def test_a_pausing_worker_gives_back_what_it_claimed_ahead(pool, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    make_agent(conn, "slow", executor="noop", settings={"delay_seconds": 60})
    make_task(conn, "bench")
    table, claimer, _ = services(pool, tmp_path, concurrency=1, claim_ahead=2)
    assert claimer.run_once() == 1
    slow = [make_task(conn, "slow") for _ in range(3)]
    assert claimer.run_once() == 3 and len(claimer.ahead) == 2
    claimer.paused = True
    assert claimer.run_once() == 0
    assert len(claimer.ahead) == 0
    assert statuses(conn, slow) == ["processing", "enqueued", "enqueued"]
    assert queue.get_task(conn, slow[1].id).attempts[0].error == "worker shut down before the attempt finished"
    table.hand_back_all()


def test_claim_ahead_off_claims_only_the_free_slots(pool, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    for _ in range(10):
        make_task(conn, "bench")
    _, claimer, _ = services(pool, tmp_path, concurrency=3, claim_ahead=0)
    assert [claimer.run_once() for _ in range(4)] == [3, 3, 3, 1]


@pytest.mark.parametrize("config", [dict(claim_ahead=-1), dict(ahead_wait_seconds=0)])
def test_claim_ahead_settings_are_checked(config):
    with pytest.raises(ValueError):
        ClaimerConfig(concurrency=2, **config)
