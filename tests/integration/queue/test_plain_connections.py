"""The engine on plain psycopg connections: default tuple rows, autocommit or not.

Every call commits what it did and leaves no transaction open, and a throttled claim holds its cap
exactly when racing claimers all use plain connections.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from schema import queue, stats, worker_queries
from schema.migrate import migrate, pending
from schema.stats_types import TaskFilter

DONE = {"status": "completed", "result": {"ok": True}, "confidence": 0.9, "input_tokens": 10,
        "output_tokens": 5, "llm_cost_usd": 0.001}
FAILED = {"status": "failed", "error": "boom", "retryable": True}


@pytest.fixture(params=["transactional", "autocommit"])
def plain(request, db_dsn):
    """A connection exactly as psycopg.connect makes it (tuple rows), autocommit or not."""
    with psycopg.connect(db_dsn, autocommit=request.param == "autocommit") as connection:
        yield connection


def idle(conn) -> bool:
    return conn.info.transaction_status == TransactionStatus.IDLE


def test_every_engine_call_works_and_commits_on_a_plain_connection(plain, conn):
    def call(fn, *args, **kwargs):
        result = fn(plain, *args, **kwargs)
        assert idle(plain), f"{fn.__name__} left a transaction open"
        return result

    assert call(migrate) == [] and call(pending) == []
    call(queue.configure_agent, "free")
    call(queue.configure_agent, "capped", max_concurrent_tasks=2, max_tpm=100_000)
    assert [a.name for a in call(queue.list_agents)] == ["capped", "free"]
    assert call(queue.get_agent, "capped").max_tpm == 100_000
    free = [call(queue.enqueue, agent="free", document_uri=f"/x/f{n}.pdf") for n in range(3)]
    capped = [call(queue.enqueue, agent="capped", document_uri=f"/x/c{n}.pdf") for n in range(3)]
    assert call(queue.agents_with_backlog) == ["capped", "free"]
    # Seen from another connection: committed.
    assert conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"] == 6

    unthrottled = call(queue.claim, agent="free", worker_id="plain", limit=2)
    throttled = call(queue.claim, agent="capped", worker_id="plain", limit=5)  # no `now`: the clock path
    assert len(unthrottled) == 2 and len(throttled) == 2
    assert len(call(queue.claim_many, worker_id="plain", slots={"local": ("local", 1)})) == 1
    assert conn.execute("SELECT count(*) AS n FROM tasks WHERE status = 'processing'").fetchone()["n"] == 5

    assert call(queue.heartbeat, unthrottled[0].attempt_id) is True
    call(queue.record_executor_info, unthrottled[0].attempt_id, pid=4242, executor="local")
    call(queue.record_compute, unthrottled[0].attempt_id, compute_seconds=1.5, compute_cost_usd=0.01)
    assert call(queue.apply_callback, unthrottled[0].attempt_id, DONE).applied
    assert call(queue.apply_callback, unthrottled[1].attempt_id, FAILED).task_status.value == "enqueued"
    assert call(queue.get_attempt, unthrottled[0].attempt_id).pid == 4242
    assert call(queue.hand_back, throttled[0].attempt_id) is True
    later = conn.execute("SELECT now() + interval '1 day' AS t").fetchone()["t"]
    assert call(queue.sweep, now=later) == 2  # the leases of the two claims left expired by then
    assert call(queue.cancel, free[2].id, actor="op").status.value == "cancelled"
    assert call(queue.retry, free[2].id, actor="op").status.value == "enqueued"
    child = call(queue.retry, free[0].id, actor="op")
    assert child.parent_id == free[0].id
    assert call(queue.get_task, free[0].id).status.value == "completed"
    assert call(worker_queries.task_next_due_one) is not None  # the failed task backs off
    assert call(worker_queries.attempt_list_running_ids) == []
    assert call(worker_queries.agent_set_config_error, "capped", "broken") is True
    assert call(queue.claim, agent="capped", worker_id="plain", limit=5) == []
    assert call(worker_queries.agent_set_config_error, "capped", None) is True

    counts = call(stats.status_counts)
    assert counts["total"]["completed"] == 1 and sum(counts["total"].values()) == 7
    summary = call(stats.stats_summary_filtered, TaskFilter())
    assert summary.total == 7 and summary.input_tokens == 10
    rows, _ = call(stats.task_list_keyset, TaskFilter(), sort="id", descending=True, limit=50)
    assert len(rows) == 7 and rows[0].id == child.id
    assert call(stats.task_count, TaskFilter()).n == 7
    assert call(stats.stats_filter_options)["agent"] == ["capped", "free"]
    assert call(stats.task_events_last_id) > 0
    assert call(stats.health_ping) is True
    assert [t.status.value for t in map(lambda t: call(queue.get_task, t.id), capped)].count("enqueued") == 3


def test_throttled_claims_racing_on_plain_connections_keep_the_cap_exact(db_dsn, conn):
    queue.configure_agent(conn, "capped", max_concurrent_tasks=5)
    for n in range(60):
        queue.enqueue(conn, agent="capped", document_uri=f"/x/{n}.pdf")
    claimed: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def claimer(n: int) -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=n % 2 == 0) as plain:
                start.wait()
                for _ in range(10):
                    got = queue.claim(plain, agent="capped", worker_id=f"w{n}", limit=3)
                    with lock:
                        claimed.extend(c.task.id for c in got)
        except BaseException as exc:  # reported below, with the thread's own error
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(claimed) == len(set(claimed)) == 5
    assert conn.execute("SELECT count(*) AS n FROM tasks WHERE status = 'processing'").fetchone()["n"] == 5
