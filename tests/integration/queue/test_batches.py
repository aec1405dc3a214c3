"""Enqueue in batches, claim across agents in one statement, settle ended runs together."""

import json

import psycopg
import pytest

from schema import queue, settlement
from schema.errors import InvalidArgument, UnknownAgent, UnknownTask
from schema.queue import enqueueing
from tests.factories import make_agent, make_task

DONE = {"status": "completed", "result": {"ok": True}, "confidence": 0.9, "pages": 2,
        "input_tokens": 100, "output_tokens": 20, "llm_cost_usd": 0.01}


def test_enqueue_many_is_one_statement_in_order_with_one_notification(conn, db_dsn):
    make_agent(conn)
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN quire_tasks")
        tasks = queue.enqueue_many(conn, [dict(agent="docs", document_uri=f"/d/{n}.pdf", priority=n % 10,
                                               pages=n + 1) for n in range(120)], submitted_by="alice")
        notes = [json.loads(n.payload) for n in listener.notifies(timeout=2.0, stop_after=3)]
    assert [t.document_uri for t in tasks] == [f"/d/{n}.pdf" for n in range(120)]
    assert [t.priority for t in tasks] == [n % 10 for n in range(120)]
    assert tasks[3].estimated_tokens == queue.estimate_tokens(pages=4)
    # 120 events in one statement: chunks of 50 per notification, all of one statement.
    assert [len(n) for n in notes] == [50, 50, 20]
    actors = conn.execute("SELECT DISTINCT actor FROM task_events").fetchall()
    assert actors == [{"actor": "alice"}]


def test_enqueue_many_is_all_or_nothing(conn):
    make_agent(conn)
    with pytest.raises(UnknownAgent, match="nobody"):
        queue.enqueue_many(conn, [dict(agent="docs", document_uri="/a.pdf"), dict(agent="nobody", document_uri="/b.pdf")])
    with pytest.raises(UnknownTask):
        queue.enqueue_many(conn, [dict(agent="docs", document_uri="/a.pdf", parent_id=999_999)])
    with pytest.raises(InvalidArgument, match="task 2: priority"):
        queue.enqueue_many(conn, [dict(agent="docs", document_uri="/a.pdf"),
                                  dict(agent="docs", document_uri="/b.pdf", priority=12)])
    with pytest.raises(InvalidArgument, match="unknown fields"):
        queue.enqueue_many(conn, [dict(agent="docs", document_uri="/a.pdf", colour="red")])
    assert conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"] == 0
    assert queue.enqueue_many(conn, []) == []


def _analyzed(conn) -> bool:
    return conn.execute("SELECT reltuples >= 0 AS done FROM pg_class WHERE oid = 'tasks'::regclass").fetchone()["done"]


def test_a_bulk_enqueue_analyzes_a_never_analyzed_tasks_table_once_it_is_no_longer_small(conn, monkeypatch):
    make_agent(conn)
    conn.execute("ALTER TABLE tasks SET (autovacuum_enabled = false)")  # only the enqueue may analyze
    assert not _analyzed(conn)
    # Below the size, even a bulk batch leaves the planner's statistics to autovacuum.
    queue.enqueue_many(conn, [dict(agent="docs", document_uri=f"/small/{n}.pdf") for n in range(150)])
    assert not _analyzed(conn)
    monkeypatch.setattr(enqueueing, "FIRST_ANALYZE_BYTES", 1)
    # Past it, single enqueues and small batches still never analyze (one round trip each)...
    queue.enqueue(conn, agent="docs", document_uri="/one.pdf")
    queue.enqueue_many(conn, [dict(agent="docs", document_uri=f"/few/{n}.pdf")
                              for n in range(queue.FIRST_ANALYZE_BATCH - 1)])
    assert not _analyzed(conn)
    # ...and a bulk batch does, once.
    queue.enqueue_many(conn, [dict(agent="docs", document_uri=f"/bulk/{n}.pdf")
                              for n in range(queue.FIRST_ANALYZE_BATCH)])
    assert _analyzed(conn)
    stats = conn.execute("SELECT count(*) AS n FROM pg_stats WHERE tablename = 'tasks'").fetchone()["n"]
    assert stats > 0
    assert not queue.analyze_if_never_analyzed(conn)


def test_the_first_analyze_does_not_wait_for_a_table_autovacuum_holds(conn, db_dsn, monkeypatch):
    make_agent(conn)
    conn.execute("ALTER TABLE tasks SET (autovacuum_enabled = false)")
    monkeypatch.setattr(enqueueing, "FIRST_ANALYZE_BYTES", 1)
    batch = [dict(agent="docs", document_uri=f"/d/{n}.pdf") for n in range(queue.FIRST_ANALYZE_BATCH)]
    conn.execute("SET lock_timeout = '5s'")  # waiting would fail the enqueue, not hang the test
    with psycopg.connect(db_dsn) as vacuum:
        vacuum.execute("LOCK TABLE tasks IN SHARE UPDATE EXCLUSIVE MODE")  # what a vacuum holds
        assert len(queue.enqueue_many(conn, batch)) == len(batch)
        assert not _analyzed(conn)
    assert len(queue.enqueue_many(conn, batch)) == len(batch)  # the next bulk batch analyzes
    assert _analyzed(conn)


def test_claim_many_shares_each_pool_between_agents_in_priority_order(conn):
    make_agent(conn, "a", executor="noop")
    make_agent(conn, "b", executor="noop")
    make_agent(conn, "capped", executor="noop", max_concurrent_tasks=1)
    make_agent(conn, "remote", executor="databricks")
    low = [make_task(conn, "a", priority=1) for _ in range(3)]
    high = [make_task(conn, "b", priority=8) for _ in range(2)]
    make_task(conn, "capped", priority=9)
    far = make_task(conn, "remote")
    claims = queue.claim_many(conn, worker_id="w", slots={"noop": ("local", 4), "databricks": ("remote", 5)})
    ids = [c.task.id for c in claims]
    # Throttled agents are left to admission; the local pool's four slots go to the best tasks.
    assert ids == [high[0].id, high[1].id, low[0].id, low[1].id, far.id]
    attempt = queue.get_attempt(conn, claims[0].attempt_id)
    assert attempt.executor == "noop" and attempt.worker_id == "w"
    assert queue.claim_many(conn, worker_id="w", slots={"noop": ("local", 0)}) == []
    [capped] = queue.claim_throttled(conn, agent="capped", worker_id="w", limit=5)
    assert capped.task.agent == "capped"
    assert queue.claim_throttled(conn, agent="capped", worker_id="w", limit=5) == []


def test_settle_ended_completes_plain_reports_together_and_leaves_the_rest(conn):
    make_agent(conn, lease_seconds=600)
    for _ in range(4):
        make_task(conn)
    c1, c2, c3, c4 = queue.claim(conn, agent="docs", worker_id="w", limit=4)
    # c3 reported by itself before the worker settles it: only its compute is left to record.
    queue.apply_callback(conn, c3.attempt_id, DONE)
    failed = {"status": "failed", "error": "boom", "retryable": True, "result": None}
    out = settlement.settle_ended(conn, [
        settlement.Ended(c1.attempt_id, report=DONE, compute_seconds=1.5, compute_cost_usd=0.002),
        settlement.Ended(c2.attempt_id, report=DONE, compute_seconds=2.0),
        settlement.Ended(c3.attempt_id, report=DONE, compute_seconds=3.0),
        settlement.Ended(c4.attempt_id, report=failed, compute_seconds=4.0)])
    assert out[c1.attempt_id].completed and out[c2.attempt_id].completed
    assert not out[c3.attempt_id].completed and not out[c3.attempt_id].report_due
    assert out[c3.attempt_id].reported_status == "completed"
    assert out[c4.attempt_id].report_due and not out[c4.attempt_id].completed
    one = queue.get_task(conn, c1.task.id)
    assert one.status.value == "completed" and one.result == {"ok": True} and one.pages == 2
    [attempt] = one.attempts
    assert attempt.status.value == "completed" and attempt.input_tokens == 100
    assert attempt.compute_seconds == 1.5 and float(attempt.compute_cost_usd) == 0.002
    assert attempt.callbacks_received == 1 and attempt.reported_status == "completed"
    assert queue.get_attempt(conn, c3.attempt_id).compute_seconds == 3.0
    assert queue.get_task(conn, c4.task.id).status.value == "processing"
    # Settling again changes nothing: the reports are not applied or counted twice.
    again = settlement.settle_ended(conn, [settlement.Ended(c1.attempt_id, report=DONE)])
    assert not again[c1.attempt_id].completed and not again[c1.attempt_id].report_due
    assert queue.get_attempt(conn, c1.attempt_id).callbacks_received == 1
    events = conn.execute("SELECT count(*) AS n FROM task_events WHERE status = 'completed'").fetchone()["n"]
    assert events == 3


def test_settle_ended_ignores_a_report_for_a_cancelled_task(conn):
    make_agent(conn)
    make_task(conn)
    [c] = queue.claim(conn, agent="docs", worker_id="w")
    queue.cancel(conn, c.task.id, actor="op")
    out = settlement.settle_ended(conn, [settlement.Ended(c.attempt_id, report=DONE, compute_seconds=1.0)])
    assert not out[c.attempt_id].completed and not out[c.attempt_id].report_due
    assert queue.get_task(conn, c.task.id).status.value == "cancelled"


def seq_scans(conn) -> dict[str, int]:
    """How often tasks and task_attempts were read whole, as of now (this backend's counts included)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {r["relname"]: r["seq_scan"] for r in conn.execute(
        "SELECT relname, seq_scan FROM pg_stat_user_tables WHERE relname IN ('tasks', 'task_attempts')")}


def test_settlements_and_throttled_claims_read_the_queue_tables_by_index_even_while_they_look_small(conn):
    # A new queue's tables look small to the planner until statistics are gathered, and a plan
    # made then is kept by the connection: it must not scan tasks or task_attempts whole, or every
    # batch would read every task and attempt for as long as the connection keeps it.
    make_agent(conn, lease_seconds=600)
    make_agent(conn, "capped", max_concurrent_tasks=5)
    for _ in range(6):
        make_task(conn)
        make_task(conn, "capped")
    claims = queue.claim(conn, agent="docs", worker_id="w", limit=6)
    before = seq_scans(conn)
    claims += queue.claim_throttled(conn, agent="capped", worker_id="w", limit=3)
    assert len(claims) == 9
    out = settlement.settle_ended(conn, [settlement.Ended(c.attempt_id, report=DONE, compute_seconds=1.0)
                                         for c in claims])
    assert all(out[c.attempt_id].completed for c in claims)
    assert seq_scans(conn) == before
