"""Operator control: a paused agent starts nothing new, a waiting task says why, held time is apart."""

from __future__ import annotations

from datetime import timedelta

import pytest

from schema import customers, forecast, queue, stats, stats_types, worker_queries
from schema.errors import InvalidArgument, UnknownAgent
from schema.waiting import WaitReason, task_wait_reason_list
from tests.factories import make_agent, make_task


def _clock(conn):
    return conn.execute("SELECT now() AS n").fetchone()["n"]


@pytest.mark.parametrize("cap", [None, 2])  # the unthrottled claim and admission under the agent's lock
def test_claims_skip_a_paused_agent_until_resumed(conn, cap):
    make_agent(conn, max_concurrent_tasks=cap)
    make_agent(conn, "other")
    now = _clock(conn)
    running = make_task(conn, now=now - timedelta(minutes=5))
    (claim,) = queue.claim(conn, agent="docs", worker_id="w", now=now)
    waiting = make_task(conn, now=now - timedelta(minutes=1))
    theirs = make_task(conn, "other", now=now - timedelta(minutes=1))
    paused = queue.pause_agent(conn, "docs", actor="op@example.com", reason="quota spent", now=now)
    assert paused.paused(now) and paused.paused_reason == "quota spent" and paused.paused_by == "op@example.com"
    assert queue.claim(conn, agent="docs", worker_id="w", limit=10, now=now) == []
    claimed = queue.claim_many(conn, worker_id="w", slots={"local": ("local", 10)}, now=now)
    assert [c.task.id for c in claimed] == [theirs.id]
    assert queue.agents_with_backlog(conn, now=now) == []
    # The running task finishes as usual.
    queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {"ok": True}})
    assert queue.get_task(conn, running.id).status.value == "completed"
    resumed = queue.resume_agent(conn, "docs", now=now)
    assert not resumed.paused(now) and resumed.paused_reason is None
    assert [c.task.id for c in queue.claim(conn, agent="docs", worker_id="w", now=now)] == [waiting.id]


def test_a_pause_until_a_time_ends_by_itself_at_that_time(conn):
    make_agent(conn)
    now = _clock(conn)
    task = make_task(conn, now=now - timedelta(minutes=1))
    until = now + timedelta(minutes=30)
    queue.pause_agent(conn, "docs", actor="op", until=until, reason="endpoint quota resets", now=now)
    assert queue.claim(conn, agent="docs", worker_id="w", now=until - timedelta(seconds=1)) == []
    (why,) = task_wait_reason_list(conn, [task.id], now=until - timedelta(seconds=1)).values()
    assert why.reason is WaitReason.AGENT_PAUSED and why.until == until and why.detail == "endpoint quota resets"
    assert queue.agents_with_backlog(conn, now=until) == ["docs"]
    assert [c.task.id for c in queue.claim(conn, agent="docs", worker_id="w", now=until)] == [task.id]


def test_pausing_checks_its_input(conn):
    make_agent(conn)
    with pytest.raises(UnknownAgent):
        queue.pause_agent(conn, "nope", actor="op")
    with pytest.raises(InvalidArgument):
        queue.pause_agent(conn, "docs", actor="op", reason="x" * 501)
    with pytest.raises(UnknownAgent):
        queue.resume_agent(conn, "nope")


def test_each_waiting_task_says_why_it_waits(conn):
    now = _clock(conn)
    make_agent(conn, "free")
    make_agent(conn, "capped", max_concurrent_tasks=1)
    make_agent(conn, "tokens", max_tpm=1500)
    make_agent(conn, "paused")
    make_agent(conn, "limited")
    make_agent(conn, "broken")
    worker_queries.agent_set_config_error(conn, "broken", "the executor 'spark' is unknown")
    customers.customer_budget_set(conn, "spent", 0.1, actor="op", now=now)
    old = now - timedelta(minutes=5)
    make_task(conn, "free", customer="spent", now=old - timedelta(minutes=1))
    (spender,) = queue.claim(conn, agent="free", worker_id="w", now=now)
    queue.apply_callback(conn, spender.attempt_id, {"status": "completed", "result": {"ok": True},
                                                    "input_tokens": 10, "output_tokens": 1, "llm_cost_usd": 0.5})
    turn = make_task(conn, "free", now=old)
    budget = make_task(conn, "free", customer="spent", now=old)
    plan = forecast.forecast_batch(conn, agent="free", priority=0, files=[forecast.FileFacts(pages=1)],
                                   workers=1, compute_rate_usd_per_hour=0)
    held = make_task(conn, "free", held=True, now=old,
                     batch_id=forecast.batch_create(conn, plan, customer=None, held=True, submitted_by="op"))
    make_task(conn, "capped", now=old - timedelta(minutes=1))
    queue.claim(conn, agent="capped", worker_id="w", now=now)
    capped = make_task(conn, "capped", now=old)
    make_task(conn, "tokens", estimated_tokens=1000, now=old - timedelta(minutes=1))
    queue.claim(conn, agent="tokens", worker_id="w", now=now)
    tokens = make_task(conn, "tokens", estimated_tokens=1000, now=old)
    paused = make_task(conn, "paused", now=old)
    queue.pause_agent(conn, "paused", actor="op", reason="maintenance", now=now)
    retried = make_task(conn, "limited", now=old)
    (claim,) = queue.claim(conn, agent="limited", worker_id="w", now=now)
    queue.apply_callback(conn, claim.attempt_id, {"status": "failed", "error": "boom", "retryable": True})
    run_after = queue.get_task(conn, retried.id).run_after
    broken = make_task(conn, "broken", now=old)
    ids = [turn.id, budget.id, held.id, capped.id, tokens.id, paused.id, retried.id, broken.id]
    why = task_wait_reason_list(conn, ids, now=now)
    assert {i: w.reason for i, w in why.items()} == {
        turn.id: WaitReason.FAIR_SHARE, budget.id: WaitReason.CUSTOMER_BUDGET, held.id: WaitReason.HELD,
        capped.id: WaitReason.CONCURRENCY_CAP, tokens.id: WaitReason.TOKEN_BUDGET,
        paused.id: WaitReason.AGENT_PAUSED, retried.id: WaitReason.RETRY_BACKOFF,
        broken.id: WaitReason.AGENT_MISCONFIGURED}
    assert why[broken.id].detail == "the executor 'spark' is unknown"
    assert why[retried.id].until == run_after and run_after > now
    assert why[capped.id].detail == "1 of 1 running"
    assert why[paused.id].detail == "maintenance" and why[paused.id].until is None
    assert why[budget.id].until is not None and why[budget.id].until > now
    assert all(w.words for w in why.values())
    # Tasks that are not waiting have no reason; an empty page reads nothing.
    running = queue.claim(conn, agent="free", worker_id="w", now=now)[0].task.id
    assert running not in task_wait_reason_list(conn, [running], now=now)
    assert task_wait_reason_list(conn, []) == {}


def test_the_response_time_median_leaves_out_time_held_by_an_operator(conn):
    make_agent(conn)
    now = _clock(conn)
    plan = forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=1)] * 3,
                                   workers=1, compute_rate_usd_per_hour=0)
    created = now - timedelta(minutes=10)
    batch = forecast.batch_create(conn, plan, customer=None, held=True, submitted_by="op", now=created)
    tasks = [make_task(conn, batch_id=batch, held=True, now=created) for _ in range(3)]
    # Held nine minutes, then each ran six seconds.
    released = created + timedelta(minutes=9)
    assert forecast.batch_release(conn, batch, actor="op", now=released) == 3
    for _ in tasks:
        (claim,) = queue.claim(conn, agent="docs", worker_id="w", now=released)
        queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {"ok": True},
                                                      "confidence": 0.9}, now=released + timedelta(seconds=6))
    done = queue.get_task(conn, tasks[0].id)
    assert done.held_seconds == pytest.approx(540)
    summary = stats.stats_summary_filtered(conn, stats_types.TaskFilter())
    # The histogram's bins are log-spaced: the median is near 6 s, nowhere near 546 s.
    assert summary.median_latency_s is not None and summary.median_latency_s < 10
    rows, _ = stats.task_list_keyset(conn, stats_types.TaskFilter())
    assert [round(r.latency_s) for r in rows] == [6, 6, 6]
