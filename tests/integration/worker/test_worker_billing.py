"""Databricks compute per attempt: the billing reconciler reads system.billing.usage through the real
SDK's statement execution against a fake warehouse, every chunk, every pending run, no cap."""

from __future__ import annotations

import pytest

from schema import billing, db, queue
from tests.factories import make_agent, make_task
from tests.integration.worker.fake_databricks import PAT, FakeDatabricks
from worker.billing import BillingConfig, BillingReconciler


@pytest.fixture
def fake(monkeypatch):
    for name in ("DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_CONFIG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(billing, "STATEMENT_POLL_SECONDS", 0.05)
    with FakeDatabricks() as server:
        monkeypatch.setenv("DATABRICKS_HOST", server.host)
        monkeypatch.setenv("DATABRICKS_TOKEN", PAT)
        monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/.databrickscfg")
        yield server


def finished_job_runs(conn, count: int) -> list[int]:
    """Attempts of ended job runs 5001, 5002, ... whose compute waits for billing."""
    make_agent(conn, "remote", executor="databricks")
    ids = []
    for n in range(count):
        make_task(conn, "remote")
        [claim] = queue.claim(conn, agent="remote", worker_id="w")
        queue.record_executor_info(conn, claim.attempt_id, job_run_id=str(5001 + n), executor="databricks")
        queue.record_compute(conn, claim.attempt_id, compute_seconds=60.0, compute_state="pending")
        ids.append(claim.attempt_id)
    return ids


def test_billing_is_written_per_attempt_from_every_chunk_and_pending_stays_null(conn, db_dsn, fake):
    attempts = finished_job_runs(conn, 7)
    ws = fake.workspace
    ws.chunk_rows, ws.pending_polls, ws.has_account_prices = 2, 1, False
    ws.billing = [{"job_run_id": str(5001 + n), "dbus": 0.5 * (n + 1), "cost_usd": 0.35 * (n + 1)}
                  for n in range(5)]  # runs 5006 and 5007 are not billed yet
    pool = db.make_pool(db_dsn, max_size=2)
    try:
        reconciler = BillingReconciler(pool, "w", BillingConfig(warehouse_id="wh-1", runs_per_statement=3))
        assert reconciler.run_once() == 5
        # Pages of 3 runs, each answer read over several chunks; account prices missing -> list prices.
        texts = ws.statement_texts
        assert "account_prices" in texts[0][0] and not reconciler.account_prices
        assert [p["run_ids"] for _, p in texts[1:]] == ["5001,5002,5003", "5004,5005,5006", "5007"]
        assert any(s.chunk_count > 1 for s in ws.statements.values())
        for n, attempt_id in enumerate(attempts):
            attempt = queue.get_attempt(conn, attempt_id)
            if n < 5:
                assert attempt.compute_state == "billed"
                assert (float(attempt.dbus), float(attempt.compute_cost_usd)) == (0.5 * (n + 1), round(0.35 * (n + 1), 6))
            else:
                assert attempt.compute_state == "pending" and attempt.compute_cost_usd is None
        assert reconciler.run_once() == 0  # billed attempts are never written twice
        ws.billing.append({"job_run_id": "5007", "dbus": 2.0, "cost_usd": 1.4})
        assert reconciler.run_once() == 1
        assert float(queue.get_attempt(conn, attempts[6]).compute_cost_usd) == 1.4
        assert queue.get_attempt(conn, attempts[5]).compute_state == "pending"
        # Nothing the executor records later takes a billed attempt back to pending.
        queue.record_compute(conn, attempts[0], compute_state="pending")
        assert queue.get_attempt(conn, attempts[0]).compute_state == "billed"
    finally:
        pool.close()


def test_account_prices_are_used_where_the_workspace_has_them(conn, db_dsn, fake):
    [attempt_id] = finished_job_runs(conn, 1)
    fake.workspace.billing = [{"job_run_id": "5001", "dbus": 3.0, "cost_usd": 1.2}]
    pool = db.make_pool(db_dsn, max_size=2)
    try:
        reconciler = BillingReconciler(pool, "w", BillingConfig(warehouse_id="wh-1"))
        assert reconciler.run_once() == 1 and reconciler.account_prices
        [(text, params)] = fake.workspace.statement_texts
        assert "system.billing.account_prices" in text and params == {"run_ids": "5001"}
        assert float(queue.get_attempt(conn, attempt_id).dbus) == 3.0
    finally:
        pool.close()
