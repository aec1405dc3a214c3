"""When the earliest backing-off task becomes claimable (the claimer's wait when a round ran dry):
exact for every way a task comes to wait past now, and read from indexes, never from the backlog."""

from __future__ import annotations

from datetime import timedelta

from schema import queue, worker_queries
from schema.sql import q
from tests.factories import make_agent, make_task

FAILED = {"status": "failed", "error": "the endpoint timed out", "retryable": True}


def _now(conn):
    return conn.execute("SELECT now() AS t").fetchone()["t"]


def test_nothing_waits_then_a_retryable_failure_backs_off(conn):
    make_agent(conn)
    for _ in range(3):
        make_task(conn)
    assert worker_queries.task_next_due_one(conn) is None  # every task is due now
    [claim] = queue.claim(conn, agent="docs", worker_id="w", limit=1)
    assert queue.apply_callback(conn, claim.attempt_id, FAILED).task_status.value == "enqueued"
    run_after = queue.get_task(conn, claim.task.id).run_after
    wait = worker_queries.task_next_due_one(conn)
    assert wait is not None and 0 < wait <= (run_after - _now(conn)).total_seconds() + 0.5
    # Past its backoff it is due, and nothing else waits.
    assert worker_queries.task_next_due_one(conn, now=run_after + timedelta(seconds=1)) is None


def test_a_task_handed_back_is_due_at_once(conn):
    make_agent(conn)
    make_task(conn)
    [claim] = queue.claim(conn, agent="docs", worker_id="w", limit=1)
    assert queue.hand_back(conn, claim.attempt_id)
    assert worker_queries.task_next_due_one(conn) is None


def test_a_task_made_at_a_later_now_waits_until_then(conn):
    make_agent(conn)
    later = _now(conn) + timedelta(minutes=10)
    make_task(conn, now=later)
    wait = worker_queries.task_next_due_one(conn)
    assert wait is not None and 590 < wait <= 600


def test_the_earliest_of_both_kinds_is_the_answer(conn):
    make_agent(conn)
    make_task(conn)
    [claim] = queue.claim(conn, agent="docs", worker_id="w", limit=1)
    queue.apply_callback(conn, claim.attempt_id, FAILED)
    backoff = (queue.get_task(conn, claim.task.id).run_after - _now(conn)).total_seconds()
    make_task(conn, now=_now(conn) + timedelta(hours=1))
    assert worker_queries.task_next_due_one(conn) <= backoff + 0.5


def test_the_question_reads_indexes_not_the_backlog(conn):
    make_agent(conn)
    queue.enqueue_many(conn, [dict(agent="docs", document_uri=f"/x/{n}.pdf") for n in range(2000)])
    conn.execute("ANALYZE tasks")
    plan = "\n".join(r["QUERY PLAN"] for r in conn.execute(
        "EXPLAIN (ANALYZE, COSTS OFF) " + q("task_next_due_one"), {"now": None}).fetchall())
    assert "tasks_backoff_idx" in plan and "Seq Scan" not in plan, plan
    assert worker_queries.task_next_due_one(conn) is None
