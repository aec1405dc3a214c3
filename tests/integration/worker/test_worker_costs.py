"""The cost reconciler against real MLflow traces in the tracking database beside the queue's."""

from __future__ import annotations

import pytest

from schema import db, queue
from tests.factories import make_agent, make_task
from worker.costs import CostReconciler
from worker.tracking import locate_tracking, prepare_store


@pytest.fixture
def tracking(db_dsn, tmp_path, monkeypatch):
    # mlflow.set_tracking_uri exports MLFLOW_TRACKING_URI; it must not outlive the test (setenv
    # first, so that the variable's absence is what teardown restores).
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    uri, ours = locate_tracking(db_dsn, None)
    assert ours and prepare_store(db_dsn, uri, artifact_root=tmp_path / "artifacts")
    return uri


def make_trace(uri: str, *, input_tokens: int, output_tokens: int, cost: float | None) -> str:
    """A trace like an agent's: a root span and one model call carrying usage (and cost)."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("quire")
    with (
        mlflow.start_span(name="agent", span_type="AGENT") as root,
        mlflow.start_span(name="model", span_type="CHAT_MODEL") as call,
    ):
        call.set_attribute("mlflow.chat.tokenUsage", {"input_tokens": input_tokens,
                                                      "output_tokens": output_tokens,
                                                      "total_tokens": input_tokens + output_tokens})
        if cost is not None:
            call.set_attribute("mlflow.llm.cost", {"input_cost": cost / 2, "output_cost": cost / 2,
                                                   "total_cost": cost})
    mlflow.flush_trace_async_logging()
    return root.trace_id


def reported_without_usage(conn, agent: str, trace_id: str) -> int:
    make_task(conn, agent)
    [claim] = queue.claim(conn, agent=agent, worker_id="w-test", limit=1)
    queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {"fields": {}},
                                                  "trace_id": trace_id})
    return claim.attempt_id


def test_worker_cost_reconciler_records_spend_from_traces_once(db_dsn, conn, tracking):
    make_agent(conn, "docs", price_input_per_mtok=1.0, price_output_per_mtok=5.0)
    with_cost = reported_without_usage(conn, "docs", make_trace(tracking, input_tokens=1200,
                                                                output_tokens=300, cost=0.0456))
    priced = reported_without_usage(conn, "docs", make_trace(tracking, input_tokens=1_000_000,
                                                             output_tokens=200_000, cost=None))
    missing = reported_without_usage(conn, "docs", "tr-00000000000000000000000000000000")
    pool = db.make_pool(db_dsn, max_size=2)
    try:
        reconciler = CostReconciler(pool, "w-test", tracking)
        assert reconciler.run_once() == 2
        assert reconciler.run_once() == 0  # recorded once; the missing trace is not read again
        first = queue.get_attempt(conn, with_cost)
        assert (first.input_tokens, first.output_tokens, float(first.llm_cost_usd)) == (1200, 300, 0.0456)
        second = queue.get_attempt(conn, priced)
        # No cost in the trace: the agent's prices, 1 USD and 5 USD per million tokens.
        assert (second.input_tokens, float(second.llm_cost_usd)) == (1_000_000, 2.0)
        assert queue.get_attempt(conn, missing).usage_recorded_at is None
        # A report that arrives later does not count the spend a second time.
        outcome = queue.apply_callback(conn, with_cost, {"status": "completed", "result": {},
                                                         "input_tokens": 1, "output_tokens": 1})
        assert not outcome.usage_recorded and queue.get_attempt(conn, with_cost).input_tokens == 1200
        assert reconciler.verify_once() == 0
    finally:
        pool.close()


def test_worker_cost_reconciler_flags_reported_spend_that_the_trace_contradicts(db_dsn, conn, tracking):
    make_agent(conn, "docs")
    trace_id = make_trace(tracking, input_tokens=500, output_tokens=50, cost=0.01)
    make_task(conn, "docs")
    [claim] = queue.claim(conn, agent="docs", worker_id="w-test", limit=1)
    queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {}, "trace_id": trace_id,
                                                  "input_tokens": 400, "output_tokens": 50})
    pool = db.make_pool(db_dsn, max_size=2)
    try:
        assert CostReconciler(pool, "w-test", tracking).verify_once() == 1
    finally:
        pool.close()
