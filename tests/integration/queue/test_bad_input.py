"""Bad arguments raise a clear error and write nothing."""

import pytest

from schema import customers, forecast, queue, settlement
from schema.errors import (
    InvalidArgument,
    InvalidPayload,
    TransactionInProgress,
    UnknownAgent,
    UnknownAttempt,
    UnknownTask,
)
from tests.factories import make_agent, make_task

TABLES = ("tasks", "task_attempts", "task_events", "agents")


def snapshot(conn):
    return {t: conn.execute(f"SELECT count(*) AS n, md5(coalesce(string_agg(x::text, ',' ORDER BY x::text), '')) AS h "
                            f"FROM {t} x").fetchone() for t in TABLES}


@pytest.fixture
def claimed(conn):
    make_agent(conn)
    make_task(conn)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    return c


@pytest.mark.parametrize("call, error, message", [
    (lambda c, _: queue.enqueue(c, agent="nope", document_uri="x"), UnknownAgent, "nope"),
    (lambda c, _: queue.enqueue(c, agent="docs", document_uri="x", priority=10), InvalidArgument, "priority"),
    (lambda c, _: queue.enqueue(c, agent="docs", document_uri="x", priority=-1), InvalidArgument, "priority"),
    (lambda c, _: queue.enqueue(c, agent="docs", document_uri="x", priority="3"), InvalidArgument, "priority"),
    (lambda c, _: queue.enqueue(c, agent="docs", document_uri="x", priority=True), InvalidArgument, "priority"),
    (lambda c, _: queue.enqueue(c, agent="docs", document_uri=""), InvalidArgument, "document_uri"),
    (lambda c, _: queue.enqueue(c, agent="docs", document_uri="x", estimated_tokens=0), InvalidArgument, "estimated"),
    (lambda c, _: queue.enqueue(c, agent="docs", document_uri="x", document_sha256="abc"), InvalidArgument, "sha256"),
    (lambda c, _: queue.enqueue(c, agent="docs", document_uri="x", parent_id=999), UnknownTask, "999"),
    (lambda c, _: queue.claim(c, agent="nope", worker_id="w"), UnknownAgent, "nope"),
    (lambda c, _: queue.claim(c, agent="docs", worker_id="w", limit=0), InvalidArgument, "limit"),
    (lambda c, _: queue.cancel(c, 999, actor="ops"), UnknownTask, "999"),
    (lambda c, _: queue.retry(c, 999, actor="ops"), UnknownTask, "999"),
    (lambda c, _: queue.get_task(c, 999), UnknownTask, "999"),
    (lambda c, _: queue.heartbeat(c, 999), UnknownAttempt, "999"),
    (lambda c, _: queue.apply_callback(c, 999, {"status": "completed", "result": {}}), UnknownAttempt, "999"),
    (lambda c, a: queue.apply_callback(c, a.attempt_id, []), InvalidPayload, "object"),
    (lambda c, a: queue.apply_callback(c, a.attempt_id, {"status": "done"}), InvalidPayload, "status"),
    (lambda c, a: queue.apply_callback(c, a.attempt_id, {"status": "completed"}), InvalidPayload, "result"),
    (lambda c, a: queue.apply_callback(c, a.attempt_id, {"status": "failed"}), InvalidPayload, "error"),
    (lambda c, a: queue.apply_callback(c, a.attempt_id, {"status": "completed", "result": {}, "input_tokens": -1}),
     InvalidPayload, "input_tokens"),
    (lambda c, a: queue.apply_callback(c, a.attempt_id, {"status": "completed", "result": {}, "confidence": 2}),
     InvalidPayload, "confidence"),
    (lambda c, a: queue.apply_callback(c, a.attempt_id, {"status": "completed", "result": {}, "extra": 1}),
     InvalidPayload, "extra"),
    (lambda c, a: queue.apply_callback(c, a.attempt_id, {"status": "failed", "error": "x", "retryable": "yes"}),
     InvalidPayload, "retryable"),
    (lambda c, _: queue.configure_agent(c, "Bad Name!"), InvalidArgument, "agent"),
    (lambda c, _: queue.configure_agent(c, "docs", max_tpm=0), InvalidArgument, "max_tpm"),
    (lambda c, _: queue.configure_agent(c, "docs", colour="red"), InvalidArgument, "colour"),
])
def test_bad_arguments_raise_and_write_nothing(conn, claimed, call, error, message):
    before = snapshot(conn)
    with pytest.raises(error, match=message):
        call(conn, claimed)
    assert snapshot(conn) == before


def test_engine_calls_refuse_an_open_transaction(conn, claimed):
    conn.autocommit = False
    conn.execute("SELECT 1")
    with pytest.raises(TransactionInProgress):
        queue.claim(conn, agent="docs", worker_id="w")
    conn.rollback()


@pytest.mark.parametrize("call", [
    lambda conn, c: settlement.settle_ended(conn, [settlement.Ended(c.attempt_id)]),
    lambda conn, c: customers.customer_budget_set(conn, "acme", 10, actor="ops"),
    lambda conn, c: forecast.batch_release(conn, 1, actor="ops"),
    lambda conn, c: queue.cancel(conn, c.task.id, actor="ops"),
], ids=["settlement", "customers", "forecast", "queue"])
def test_every_engine_module_refuses_an_open_transaction_alike(conn, claimed, call):
    conn.autocommit = False
    conn.execute("SELECT 1")
    with pytest.raises(TransactionInProgress, match="commit or roll back first"):
        call(conn, claimed)
    conn.rollback()
