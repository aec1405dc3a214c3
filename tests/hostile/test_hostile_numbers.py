"""Hostile numbers in signed reports: token counts, Retry-After, and what learning from them does to
claiming. Every report here is one an agent holding a valid key could send."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from app import foresight as app_foresight
from schema import db, forecast, positions, queue
from schema.errors import InvalidPayload
from schema.forecast import FileFacts
from schema.settings import Settings
from tests.factories import make_agent

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
EVERY_AGENT = {"slots": {"local": ("local", 50)}}


def enqueue(conn, agent: str, n: int = 1, **fields):
    """Tasks with no token estimate of their own: the claim replaces theirs with what was learned."""
    return [queue.enqueue(conn, agent=agent, document_uri=f"file:///{agent}/{i}.pdf", pages=fields.get("pages", 1),
                          **{k: v for k, v in fields.items() if k != "pages"}, now=T0)
            for i in range(n)]


def claim_all(conn, now=None):
    return queue.claim_many(conn, worker_id="w", now=now, **EVERY_AGENT)


def completed(tokens: int, **more):
    return {"status": "completed", "result": {"document_type": "invoice", "fields": {}}, "pages": 1,
            "input_tokens": tokens, "output_tokens": tokens, **more}


def test_reports_of_a_trillion_tokens_are_refused_and_every_agent_goes_on_claiming(conn):
    make_agent(conn, "poisoned")
    make_agent(conn, "healthy")
    enqueue(conn, "poisoned", 3)
    for claim in claim_all(conn, now=T0):
        with pytest.raises(InvalidPayload, match="input_tokens"):
            queue.apply_callback(conn, claim.attempt_id, completed(10**12), now=T0)
    enqueue(conn, "poisoned", 2)
    enqueue(conn, "healthy", 2)
    claimed = claim_all(conn, now=T0 + timedelta(minutes=5))
    assert {c.task.agent for c in claimed} == {"poisoned", "healthy"}


def test_learned_reservations_stay_in_range_at_the_contracts_bounds(conn):
    """Three reports at the bound teach a huge cost per page; a document of a million pages (or
    a petabyte, or two billion characters) must still be claimable, its reservation clamped."""
    make_agent(conn, "greedy")
    make_agent(conn, "healthy")
    enqueue(conn, "greedy", 3)
    for claim in claim_all(conn, now=T0):
        outcome = queue.apply_callback(conn, claim.attempt_id, completed(10**8), now=T0)
        assert outcome.task_status.value == "completed"
    enqueue(conn, "greedy", 1, pages=1_000_000)
    enqueue(conn, "greedy", 1, pages=None, document_bytes=10**15)
    enqueue(conn, "greedy", 1, pages=3, document_chars=2**31 - 1)
    enqueue(conn, "healthy", 2)
    claimed = claim_all(conn, now=T0 + timedelta(minutes=5))
    assert len(claimed) == 5
    reserved = [r["estimated_tokens"] for r in conn.execute(
        "SELECT a.estimated_tokens FROM task_attempts a JOIN tasks t ON t.id = a.task_id "
        "WHERE t.agent = 'greedy' AND a.attempt_no = 1 AND a.status = 'processing'")]
    assert reserved and max(reserved) <= 2 * 10**8
    # The forecast reads the same learned line for a file of a petabyte.
    plan = forecast.forecast_batch(conn, agent="greedy", priority=0, files=[FileFacts(document_bytes=10**15)],
                                   workers=2, compute_rate_usd_per_hour=0.1)
    assert 0 < plan.tokens <= 2 * 10**8


def test_rates_learned_before_the_bound_cannot_stop_claiming(conn):
    """A database that learned from a trillion-token report before the bound existed still claims."""
    make_agent(conn, "old")
    conn.execute("INSERT INTO agent_token_rates (agent, document_type, samples, w, sp, st, spp, spt, updated_at) "
                 "VALUES ('old', '*', 3, 3, 3, 6e12, 3, 6e12, now())")
    enqueue(conn, "old", 2)
    assert len(claim_all(conn, now=T0)) == 2


def test_a_retry_after_pauses_an_agent_for_an_hour_at_most(conn):
    make_agent(conn, "limited")
    enqueue(conn, "limited", 2)
    first, second = claim_all(conn, now=T0)
    failed = {"status": "failed", "error": "HTTP 429", "retryable": True, "rate_limited": 1}
    with pytest.raises(InvalidPayload, match="retry_after_seconds"):
        queue.apply_callback(conn, first.attempt_id, {**failed, "retry_after_seconds": 10**7}, now=T0)
    # A day's Retry-After (a daily quota) is a valid report, but pauses the agent an hour at most.
    queue.apply_callback(conn, second.attempt_id, {**failed, "retry_after_seconds": 86_400}, now=T0)
    agent = queue.get_agent(conn, "limited")
    assert agent.throttled_until is not None
    assert agent.throttled_until <= T0 + timedelta(hours=1)


def spots(dsn, tmp_path, task_id):
    """The queue spot the API answers for one task (position and ETA)."""
    pool = db.make_pool(dsn, max_size=2)
    try:
        return asyncio.run(app_foresight.queue_spots(pool, Settings(data_dir=tmp_path), [task_id]))[task_id]
    finally:
        pool.close()


def test_positions_of_a_paused_agent_say_so_and_the_pause_counts_in_its_eta(conn, db_dsn, tmp_path):
    make_agent(conn, "limited")
    enqueue(conn, "limited", 1)
    (claim,) = claim_all(conn)
    # The app reads positions at the database's clock: this test runs on it too.
    queue.apply_callback(conn, claim.attempt_id, {"status": "failed", "error": "HTTP 429", "retryable": True,
                                                  "rate_limited": 1, "retry_after_seconds": 3000})
    (task,) = enqueue(conn, "limited", 1)
    spot = positions.task_positions(conn, [task.id])[task.id]
    assert spot.waiting == "agent paused"
    assert spot.agent_paused_seconds is not None and 2900 < spot.agent_paused_seconds <= 3000
    assert "paused its agent" in spot.describe()
    assert spots(db_dsn, tmp_path, task.id).eta_seconds >= 2900


def test_positions_of_an_agent_that_cannot_run_promise_no_eta(conn, db_dsn, tmp_path):
    make_agent(conn, "refused")
    (task,) = enqueue(conn, "refused", 1)
    conn.execute("UPDATE agents SET config_error = 'the model endpoint refused it: HTTP 404 model not found'")
    spot = positions.task_positions(conn, [task.id], now=T0)[task.id]
    assert spot.waiting == "agent cannot run"
    assert "cannot run" in spot.describe() and "404" in spot.describe()
    spot = spots(db_dsn, tmp_path, task.id)
    assert spot.eta_seconds is None and "cannot run" in spot.text
