"""The foresight API of a running app: forecast, held batches and release, positions, budgets, retry at priority."""

from __future__ import annotations

import pytest

from schema import queue
from tests.e2e.app_harness import complete, make_pdf, start_app


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory)
    queue.configure_agent(conn, "documents", price_input_per_mtok=1.0, price_output_per_mtok=5.0)
    yield server, conn
    teardown()


def test_forecast_from_files_metadata_and_its_bad_input(app_server):
    server, _ = app_server
    body = {"agent": "documents", "priority": 4, "customer": "Api Co",
            "files": [{"pages": 3}, {"size_bytes": 140_000}, {}]}
    with server.operator() as http:
        response = http.post("/api/forecast", json=body)
        assert response.status_code == 200, response.text
        plan = response.json()
        assert plan["documents"] == 3 and plan["pages"] == 3 + 3 + 4
        assert plan["tokens"] == sum(queue.estimate_tokens(pages=p) for p in (3, 3, 4))
        assert plan["llm_cost_usd"] == pytest.approx(plan["tokens"] * (0.85 * 1.0 + 0.15 * 5.0) / 1e6, rel=1e-5)
        assert plan["eta_seconds"] > 0 and "static" in plan["basis"]
        assert http.post("/api/forecast", json={**body, "priority": 12}).status_code == 422
        assert http.post("/api/forecast", json={**body, "files": []}).status_code == 422
        assert http.post("/api/forecast", json={**body, "files": [{"pages": -1}]}).status_code == 422
        assert http.post("/api/forecast", json={**body, "agent": "nobody"}).status_code == 404
    assert server.client().post("/api/forecast", json=body).status_code == 401


def test_a_held_submission_runs_only_once_released(app_server):
    server, conn = app_server
    files = [("files", (f"h{i}.pdf", make_pdf(f"held {i}", pages=i + 1), "application/pdf")) for i in range(2)]
    with server.operator() as http:
        response = http.post("/api/tasks", data={"customer": "Hold Co", "priority": "6", "hold": "true"}, files=files)
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["held"] is True and body["forecast"]["documents"] == 2 and body["forecast"]["pages"] == 3
        batch_id = body["batch_id"]
        ids = [f["task_id"] for f in body["files"]]
        assert queue.claim(conn, agent="documents", worker_id="w-api", limit=5) == []
        spots = http.post("/api/positions", json={"task_ids": ids}).json()
        assert {s["text"] for s in spots} == {"waiting: held"}
        listed = {b["batch_id"]: b for b in http.get("/api/batches").json()}
        assert listed[batch_id]["customer"] == "Hold Co" and listed[batch_id]["held_tasks"] == 2
        assert listed[batch_id]["pages"] == 3 and listed[batch_id]["forecast"]["documents"] == 2
        released = http.post(f"/api/batches/{batch_id}/release")
        assert batch_id not in {b["batch_id"] for b in http.get("/api/batches").json()}
        assert released.status_code == 200 and released.json()["held"] is False
        assert http.post(f"/api/batches/{batch_id}/release").status_code == 409
        assert http.post("/api/batches/999999/release").status_code == 404
        spots = {s["task_id"]: s for s in http.post("/api/positions", json={"task_ids": ids}).json()}
        assert sorted(s["ahead"] for s in spots.values()) == [0, 1] and all(s["eta_seconds"] for s in spots.values())
        claims = queue.claim(conn, agent="documents", worker_id="w-api", limit=5)
        assert {c.task.id for c in claims} == set(ids)
        for c in claims:
            complete(conn, c.attempt_id, tokens=(1000, 200), cost=0.002)
        batch = http.get(f"/api/batches/{batch_id}").json()
        assert batch["done"] and batch["actual_tokens"] == 2400
        assert batch["actual_llm_cost_usd"] == pytest.approx(0.004) and "against" in batch["comparison"]


def test_budgets_over_the_api(app_server):
    server, _ = app_server
    with server.operator() as http:
        response = http.put("/api/customers/Api Budget/budget", json={"monthly_llm_budget_usd": 12.5})
        assert response.status_code == 200 and response.json()["monthly_llm_budget_usd"] == 12.5
        assert http.put("/api/customers/Api Budget/budget", json={"monthly_llm_budget_usd": -1}).status_code == 422
        listed = {b["customer"]: b for b in http.get("/api/customers/budgets").json()}
        assert listed["Api Budget"]["monthly_llm_budget_usd"] == 12.5 and not listed["Api Budget"]["over_budget"]
        cleared = http.put("/api/customers/Api Budget/budget", json={"monthly_llm_budget_usd": None})
        assert cleared.status_code == 200 and cleared.json()["monthly_llm_budget_usd"] is None
    assert server.client().put("/api/customers/x/budget", json={"monthly_llm_budget_usd": 1}).status_code == 401


def test_retry_takes_an_optional_priority(app_server):
    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="/r/api.pdf", priority=1)
    claims = queue.claim(conn, agent="documents", worker_id="w-api", limit=10)
    target = next(c for c in claims if c.task.id == task.id)
    queue.apply_callback(conn, target.attempt_id, {"status": "failed", "error": "x", "retryable": False})
    with server.operator() as http:
        assert http.post(f"/api/tasks/{task.id}/retry", params={"priority": 12}).status_code == 422
        response = http.post(f"/api/tasks/{task.id}/retry", params={"priority": 8})
        assert response.status_code == 200 and response.json()["status"] == "enqueued"
    assert queue.get_task(conn, task.id).priority == 8


def test_a_scans_ocr_work_is_a_number_of_standard_pages_in_plain_words(app_server):
    server, _ = app_server
    with server.operator() as http:
        for bad in (True, "3", -1, 1e12):
            answer = http.post("/api/forecast", json={"files": [{"pages": 2, "scanned": True, "ocr_work": bad}]})
            assert answer.status_code == 422, (bad, answer.text)
            assert "A scan's OCR work must be a number of standard pages from 0 to 1,000,000" in answer.json()["detail"]
        dense = http.post("/api/forecast", json={"files": [{"pages": 2, "scanned": True, "ocr_work": 3.6}]})
        sparse = http.post("/api/forecast", json={"files": [{"pages": 2, "scanned": True, "ocr_work": 0.6}]})
        assert dense.status_code == sparse.status_code == 200
        assert dense.json()["work_seconds"] > sparse.json()["work_seconds"]
