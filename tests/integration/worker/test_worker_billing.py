"""Databricks compute per attempt: the billing reconciler's real query runs through the real SDK's
statement execution on a fake warehouse that executes it (DuckDB) against billing fixture tables:
several workspaces, price changes and promotions, corrections, late records, DBUs with no list
price, usage in other units, and a missing grant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schema import billing, db, queue
from tests.factories import make_agent, make_task
from tests.integration.worker.fake_databricks import PAT, FakeDatabricks
from worker.billing import BillingConfig, BillingReconciler

WORKSPACE, OTHER_WORKSPACE = "424242", "777"
SKU = "JOBS_SERVERLESS_COMPUTE"


@pytest.fixture
def fake(monkeypatch):
    for name in ("DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_CONFIG_PROFILE",
                 "DATABRICKS_WORKSPACE_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(billing, "STATEMENT_POLL_SECONDS", 0.05)
    with FakeDatabricks() as server:
        monkeypatch.setenv("DATABRICKS_HOST", server.host)
        monkeypatch.setenv("DATABRICKS_TOKEN", PAT)
        monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/.databrickscfg")
        yield server


@pytest.fixture
def pool(db_dsn):
    pool = db.make_pool(db_dsn, max_size=2)
    yield pool
    pool.close()


def ended_job_runs(conn, count: int) -> list[int]:
    """Completed attempts of job runs 5001, 5002, ... whose compute waits for billing."""
    make_agent(conn, "remote", executor="databricks")
    ids = []
    for n in range(count):
        make_task(conn, "remote")
        [claim] = queue.claim(conn, agent="remote", worker_id="w")
        queue.record_executor_info(conn, claim.attempt_id, job_run_id=str(5001 + n), executor="databricks")
        queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {"fields": {}}})
        queue.record_compute(conn, claim.attempt_id, compute_seconds=60.0, compute_state="pending")
        ids.append(claim.attempt_id)
    return ids


def reconciler(pool, **config) -> BillingReconciler:
    return BillingReconciler(pool, "w", BillingConfig(**{"warehouse_id": "wh-1", "workspace_id": WORKSPACE,
                                                          "final_seconds": 3600, "unbilled_seconds": 3600,
                                                          **config}))


def figures(conn, attempt_id: int):
    a = queue.get_attempt(conn, attempt_id)
    return (a.compute_state, None if a.dbus is None else float(a.dbus),
            None if a.compute_cost_usd is None else float(a.compute_cost_usd), a.compute_unpriced)


def test_billing_counts_this_workspaces_dbus_at_the_effective_price_with_corrections(conn, pool, fake):
    a1, a2, a3, a4 = ended_job_runs(conn, 4)
    wh = fake.workspace.warehouse
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    hour_ago, long_ago = now - timedelta(hours=1), now - timedelta(days=30)
    # The list price changed an hour ago: 0.50 before, 0.40 since, with a promotion at 0.30.
    wh.add_price(SKU, 0.50, start=long_ago - timedelta(days=1), end=hour_ago)
    wh.add_price(SKU, 0.40, start=hour_ago, promotional=0.30)
    # Run 5001: 2 DBU at the old price, 4 at the new (promoted) one; an earlier record of the
    # same run id in another workspace, storage in another unit, and a record dated before the
    # run started are not its.
    wh.add_usage("5001", 2.0, workspace_id=WORKSPACE, start=hour_ago - timedelta(minutes=30), hours=0.5)
    wh.add_usage("5001", 4.0, workspace_id=WORKSPACE, start=hour_ago + timedelta(minutes=5))
    wh.add_usage("5001", 100.0, workspace_id=OTHER_WORKSPACE, start=hour_ago + timedelta(minutes=5))
    wh.add_usage("5001", 50.0, workspace_id=WORKSPACE, start=hour_ago, unit="GB")
    wh.add_usage("5001", 70.0, workspace_id=WORKSPACE, start=long_ago)
    # Run 5002: 10 DBU, retracted and restated as 8.
    wh.add_usage("5002", 10.0, workspace_id=WORKSPACE, start=hour_ago + timedelta(minutes=1))
    wh.add_usage("5002", -10.0, workspace_id=WORKSPACE, start=hour_ago + timedelta(minutes=1),
                 record_type="RETRACTION")
    wh.add_usage("5002", 8.0, workspace_id=WORKSPACE, start=hour_ago + timedelta(minutes=1),
                 record_type="RESTATEMENT")
    # Run 5003: a SKU with no list price at all: its DBUs count, unpriced, never at $0.
    wh.add_usage("5003", 3.0, workspace_id=WORKSPACE, start=hour_ago + timedelta(minutes=2), sku="NEW_SKU")
    # Run 5004: not billed yet.
    wh.chunk_rows, wh.pending_polls = 2, 2
    billing_reconciler = reconciler(pool)
    assert billing_reconciler.run_once() == 3

    assert figures(conn, a1) == ("billed", 6.0, pytest.approx(2 * 0.50 + 4 * 0.30), False)
    assert figures(conn, a2) == ("billed", 8.0, pytest.approx(8 * 0.30), False)
    assert figures(conn, a3) == ("billed", 3.0, None, True)
    assert figures(conn, a4) == ("pending", None, None, False)
    [(_text, params)] = wh.texts
    assert params["workspace_id"] == WORKSPACE and params["run_ids"] == "5001,5002,5003,5004"
    # Usage is read from the day before the oldest run started on, never all history.
    assert (now - timedelta(days=2)).date().isoformat() <= params["since"] < now.date().isoformat()
    assert any(s.chunk_count > 1 for s in wh.statements.values())  # every chunk was read

    # Nothing new: nothing written. Then a late record and a correction arrive.
    assert billing_reconciler.run_once() == 0
    wh.add_usage("5001", 1.0, workspace_id=WORKSPACE, start=now - timedelta(minutes=10))
    wh.add_usage("5003", -3.0, workspace_id=WORKSPACE, start=hour_ago + timedelta(minutes=2), sku="NEW_SKU",
                 record_type="RETRACTION")
    wh.add_usage("5003", 3.0, workspace_id=WORKSPACE, start=hour_ago + timedelta(minutes=2),
                 record_type="RESTATEMENT")
    assert billing_reconciler.run_once() == 2
    assert figures(conn, a1) == ("billed", 7.0, pytest.approx(2 * 0.50 + 5 * 0.30), False)
    assert figures(conn, a3) == ("billed", 3.0, pytest.approx(0.9), False)

    # Quiet long enough, the figures are final and never read again; a run never billed long
    # after it ended is marked so, not pending for ever.
    settled = reconciler(pool, final_seconds=0, unbilled_seconds=0)
    assert settled.run_once() == 4
    assert [figures(conn, a)[0] for a in (a1, a2, a3, a4)] == ["final", "final", "final", "unbilled"]
    assert figures(conn, a4) == ("unbilled", None, None, False)
    texts = len(wh.texts)
    wh.add_usage("5002", 1.0, workspace_id=WORKSPACE, start=now)
    assert settled.run_once() == 0 and len(wh.texts) == texts  # nothing open: no query at all
    assert figures(conn, a2)[1] == 8.0
    # Nothing the executor records later reopens them.
    queue.record_compute(conn, a1, compute_state="pending")
    assert figures(conn, a1)[0] == "final"


def test_a_refused_billing_query_changes_nothing_and_is_retried_next_round(conn, pool, fake):
    [attempt_id] = ended_job_runs(conn, 1)
    wh = fake.workspace.warehouse
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    wh.add_price(SKU, 0.40, start=now - timedelta(days=2))
    wh.add_usage("5001", 5.0, workspace_id=WORKSPACE, start=now - timedelta(minutes=30))
    wh.denied = "system.billing.usage"  # SELECT not granted yet
    billing_reconciler = reconciler(pool, unbilled_seconds=0)
    assert billing_reconciler.run_once() == 0
    assert figures(conn, attempt_id) == ("pending", None, None, False)  # not aged out on a failed query
    wh.denied = None  # granted: the next round reads it
    assert billing_reconciler.run_once() == 1
    assert figures(conn, attempt_id) == ("billed", 5.0, pytest.approx(2.0), False)


def test_the_warehouse_refuses_what_the_platform_refuses(fake):
    from databricks.sdk import WorkspaceClient
    from databricks.sdk.errors import DatabricksError

    client = WorkspaceClient()
    with pytest.raises(DatabricksError, match="wait_timeout"):
        client.statement_execution.execute_statement(statement="SELECT 1", warehouse_id="wh-1", wait_timeout="60s")
    failed = client.statement_execution.execute_statement(statement="SELECT nope FROM system.billing.usage",
                                                          warehouse_id="wh-1", wait_timeout="10s")
    assert failed.status.state.value == "FAILED" and "nope" in failed.status.error.message
    pending = client.statement_execution.execute_statement(statement="SELECT 1 AS one", warehouse_id="wh-1",
                                                           wait_timeout="0s")
    assert pending.status.state.value == "PENDING"
    done = client.statement_execution.get_statement(pending.statement_id)
    assert done.status.state.value == "SUCCEEDED" and done.result.data_array == [["1"]]
    with pytest.raises(billing.BillingQueryFailed, match="INSUFFICIENT_PERMISSIONS"):
        fake.workspace.warehouse.denied = "system.billing.usage"
        billing.usage_for_runs(client, "wh-1", WORKSPACE, ["1"], since=datetime.now().date())


def test_a_run_still_going_is_billed_as_it_goes_and_is_final_only_once_it_ended(conn, pool, fake):
    make_agent(conn, "remote", executor="databricks")
    make_task(conn, "remote")
    [claim] = queue.claim(conn, agent="remote", worker_id="w")
    # Its job run id is stored as it starts: its compute is pending from then on.
    queue.record_executor_info(conn, claim.attempt_id, job_run_id="6001", executor="databricks")
    assert figures(conn, claim.attempt_id)[0] == "pending"
    wh = fake.workspace.warehouse
    now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    wh.add_price(SKU, 0.40, start=now - timedelta(days=2))
    wh.add_usage("6001", 2.0, workspace_id=WORKSPACE, start=now - timedelta(minutes=30))
    eager = reconciler(pool, final_seconds=0, unbilled_seconds=0)
    assert eager.run_once() == 1 and eager.run_once() == 0
    assert figures(conn, claim.attempt_id) == ("billed", 2.0, pytest.approx(0.8), False)  # not final while it runs
    queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {"fields": {}}})
    assert eager.run_once() == 1
    assert figures(conn, claim.attempt_id)[0] == "final"
