"""The figures routes of a running app read the rollups: /api/charts, the task total, /metrics."""

from __future__ import annotations

import re

import pytest

from schema import queue
from tests.e2e.app_harness import complete, start_app


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory, QUIRE_WORKER="off")
    queue.configure_agent(conn, "figures")
    for _ in range(2):
        queue.enqueue(conn, agent="figures", document_uri="/x/c.pdf", customer="Chart Co")
    for claim in queue.claim(conn, agent="figures", worker_id="w", limit=2):
        complete(conn, claim.attempt_id, confidence=0.8, tokens=(1000, 100), cost=0.01)
    queue.enqueue(conn, agent="figures", document_uri="/x/c.pdf", customer="Other Co")  # never claimed
    yield server, conn
    teardown()


def test_charts_route_follows_the_filters(app_server):
    server, _ = app_server
    with server.operator() as http:
        everything = http.get("/api/charts").json()
        one = http.get("/api/charts", params={"customer": "Other Co"}).json()
        bad = http.get("/api/charts", params={"status": "nope"})
    assert bad.status_code == 422
    assert sum(r["n"] for r in everything["throughput"] if r["series"] == "submitted") == 3
    assert sum(r["n"] for r in everything["throughput"] if r["series"] == "completed") == 2
    assert [r["key"] for r in everything["cost_by_agent"]] == ["figures"]
    assert everything["cost_by_agent"][0]["llm_cost_usd"] == pytest.approx(0.02)
    assert sum(b["n"] for b in everything["confidence_bins"]) == 2 and everything["confidence_bins"][0]["lo"] == 0.8
    assert sum(r["n"] for r in one["throughput"] if r["series"] == "submitted") == 1
    assert one["cost_by_agent"] == [] and one["latency_bins"] == []


def test_summary_and_task_list_carry_spend_splits_and_an_exact_total(app_server):
    server, _ = app_server
    with server.operator() as http:
        summary = http.get("/api/summary").json()
        page = http.get("/api/tasks", params={"customer": "Chart Co", "limit": 1}).json()
    assert summary["total"] == 3 and summary["unpriced_attempts"] == 0
    assert summary["spend_per_task"]["llm"]["tasks"] == 2
    assert 0.008 < summary["spend_per_task"]["llm"]["p50"] < 0.0125  # within the 0.01 bin (factor 1.25)
    assert page["total"] == 2 and page["total_is_estimate"] is False and len(page["tasks"]) == 1 and page["next_cursor"]


def test_metrics_reads_the_rollups_through_prometheus_client(app_server):
    server, _ = app_server
    text = server.operator().get("/metrics").text
    assert re.search(r'^quire_tasks\{agent="figures",status="completed"\} 2\.0$', text, re.MULTILINE)
    assert re.search(r'^quire_claims_total\{agent="figures"\} 2\.0$', text, re.MULTILINE)
    assert re.search(r'^quire_tokens_total\{agent="figures",direction="input"\} 2000\.0$', text, re.MULTILINE)
    for family in ("quire_claim_latency_seconds", "quire_callback_apply_seconds", "quire_extraction_seconds",
                   "quire_model_call_tokens"):
        assert f"# TYPE {family} histogram" in text
    assert "# TYPE quire_callback_outcomes_total counter" in text or "# TYPE quire_callback_outcomes counter" in text


def test_an_app_without_a_worker_folds_in_the_background(app_server):
    # Runs last in this module: it adds a task. No read folds; the app's own loop does, in steps.
    from schema import rollups
    from tests.waiting import wait_until

    server, conn = app_server
    queue.enqueue(conn, agent="figures", document_uri="/x/c.pdf", customer="Late Co")
    # Nothing else folds here (QUIRE_WORKER=off, and reads never fold): only the app's loop empties the marks.
    wait_until(lambda: rollups.rollup_pending_count(conn) == 0, timeout=60, message="the app's fold")
    with server.operator() as http:
        summary = http.get("/api/summary").json()
        charts = http.get("/api/charts").json()
    assert summary["total"] == 4 and summary["catching_up"] is False and summary["note"] is None
    assert charts["catching_up"] is False
