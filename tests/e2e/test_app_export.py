"""CSV and XLSX export of the filtered per-task cost table: the files parse back to the filtered rows."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from schema import queue
from tests.e2e.app_harness import complete, start_app
from tests.factories import make_agent, make_task


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory)
    yield server, conn
    teardown()


def seed(conn) -> dict[int, dict]:
    """Tasks of two agents and customers: completed with spend, unpriced, pending compute, enqueued."""
    make_agent(conn, "alpha")
    make_agent(conn, "beta")
    expected: dict[int, dict] = {}
    for n, (agent, customer, cost) in enumerate([("alpha", "Acme", 0.25), ("alpha", "Zeta", None),
                                                 ("beta", "Acme", 0.5), ("alpha", "Acme", 0.125)]):
        task = make_task(conn, agent, customer=customer, document_name=f"doc-{n}.pdf")
        [claim] = queue.claim(conn, agent=agent, worker_id="w")
        complete(conn, claim.attempt_id, tokens=(1000 * (n + 1), 100), cost=cost)
        if n == 3:
            queue.record_compute(conn, claim.attempt_id, compute_seconds=30.0, compute_state="pending")
        else:
            queue.record_compute(conn, claim.attempt_id, compute_seconds=30.0, compute_cost_usd=0.01 * (n + 1),
                                 compute_state="measured")
        expected[task.id] = {"agent": agent, "customer": customer, "llm": cost, "n": n}
    make_task(conn, "alpha", customer="Acme")  # enqueued: filtered out by status below
    return expected


def test_export_matches_the_filtered_rows_as_csv_and_xlsx(app_server):
    server, conn = app_server
    expected = seed(conn)
    params = [("agent", "alpha"), ("status", "completed")]
    with server.operator() as http:
        csv = http.get("/api/export.csv", params=params)
        xlsx = http.get("/api/export.xlsx", params=params)
        everything = http.get("/api/export.csv")
        bad = http.get("/api/export.csv", params=[("status", "nonsense")])
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert "attachment" in csv.headers["content-disposition"]
    assert bad.status_code == 422
    wanted = sorted(t for t, e in expected.items() if e["agent"] == "alpha")
    for table in (pd.read_csv(io.BytesIO(csv.content)), pd.read_excel(io.BytesIO(xlsx.content))):
        assert table["task_id"].tolist() == wanted
        for row in table.itertuples():
            e = expected[row.task_id]
            assert (row.agent, row.customer, row.status) == ("alpha", e["customer"], "completed")
            assert row.input_tokens == 1000 * (e["n"] + 1) and row.output_tokens == 100
            if e["llm"] is None:  # tokens without a price: no cost, flagged
                assert pd.isna(row.llm_cost_usd) and bool(row.llm_unpriced)
            else:
                assert row.llm_cost_usd == pytest.approx(e["llm"]) and not bool(row.llm_unpriced)
            if e["n"] == 3:  # compute waiting for billing: no cost, flagged
                assert pd.isna(row.compute_cost_usd) and bool(row.compute_pending)
            else:
                assert row.compute_cost_usd == pytest.approx(0.01 * (e["n"] + 1)) and not bool(row.compute_pending)
    assert len(pd.read_csv(io.BytesIO(everything.content))) == len(expected) + 1


def test_export_needs_a_signed_in_user(app_server):
    server, _ = app_server
    assert server.client().get("/api/export.csv").status_code == 401
