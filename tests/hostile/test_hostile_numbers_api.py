"""Hostile numbers and names at the API's edge: each answers 422 in plain words (never 500, never a
503 that tells clients to retry), and a refused upload leaves no file and no batch behind."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from schema import db, queue
from tests.e2e.app_harness import make_pdf

FAR_DATES = ["9999-12-31", "9999-12-31T23:59:59", "9999-12-30", "0001-01-01", "1899-12-31"]


def stored_files(server) -> list[Path]:
    return [p for p in (server.data_dir / "files").rglob("*") if p.is_file()] \
        if (server.data_dir / "files").exists() else []


@pytest.mark.parametrize("date", FAR_DATES)
def test_dates_out_of_range_are_refused_on_every_figure(app_server, date):
    server, _ = app_server
    with server.operator() as http:
        for path in ("/api/tasks", "/api/summary", "/api/charts"):
            for key in ("date_from", "date_to"):
                response = http.get(path, params={key: date})
                assert response.status_code == 422, (path, key, response.text)
                assert "Dates must be a date from 2000-01-01 to 2199-12-31" in response.text
        # The dashboard shows its filter's problem instead of failing.
        assert http.get("/dashboard", params={"from": date}).status_code == 200
        assert http.get("/dashboard", params={"to": date}).status_code == 200
    assert "OverflowError" not in server.log()


def test_dates_inside_the_range_still_filter(app_server):
    server, _ = app_server
    with server.operator() as http:
        for path in ("/api/tasks", "/api/summary", "/api/charts"):
            assert http.get(path, params={"date_from": "2000-01-01", "date_to": "2199-12-31"}).status_code == 200


def test_forecast_bounds_sizes_names_and_priorities(app_server):
    server, _ = app_server
    body = {"agent": "documents", "files": [{"pages": 2}]}
    with server.operator() as http:
        assert http.post("/api/forecast", json=body).status_code == 200
        for bad in ({"files": [{"size_bytes": 10**15}]}, {"agent": "docu\x00ments"}, {"agent": "a" * 5000},
                    {"customer": "c\x00"}, {"priority": 5.0}, {"priority": "5.0"}, {"priority": ""},
                    {"priority": True}, {"files": [{"pages": 2.0}]}):
            response = http.post("/api/forecast", json={**body, **bad})
            assert response.status_code == 422, (bad, response.text)
        too_big = http.post("/api/forecast", json={**body, "files": [{"size_bytes": 10**15}]})
        assert "A file's size in bytes (10 GB at most) must be a whole number from 0 to 10,000,000,000" in too_big.text


def test_positions_bound_ids(app_server):
    server, _ = app_server
    with server.operator() as http:
        assert http.post("/api/positions", json={"task_ids": [1]}).status_code == 200
        for bad in (2**63, 2**64, 0, -1, True):
            response = http.post("/api/positions", json={"task_ids": [bad]})
            assert response.status_code == 422, (bad, response.text)
            assert "task id" in response.text


def test_a_long_customer_is_refused_before_anything_is_stored(app_server):
    server, conn = app_server
    before_files = stored_files(server)
    before_batches = conn.execute("SELECT count(*) AS n FROM batches").fetchone()["n"]
    with server.operator() as http:
        response = http.post("/api/tasks", data={"customer": "c" * 5000},
                             files=[("files", ("long.pdf", make_pdf("long customer"), "application/pdf"))])
    assert response.status_code == 422, response.text
    assert "Retry-After" not in response.headers
    assert "at most 200 characters" in response.json()["detail"]
    assert stored_files(server) == before_files
    assert conn.execute("SELECT count(*) AS n FROM batches").fetchone()["n"] == before_batches


@pytest.mark.parametrize("priority", ["5.0", "", " ", "10", "-1", "five", "1e0"])
def test_upload_priorities_are_whole_numbers_from_0_to_9(app_server, priority):
    server, _ = app_server
    with server.operator() as http:
        response = http.post("/api/tasks", data={"priority": priority},
                             files=[("files", ("p.pdf", make_pdf(f"priority {priority!r}"), "application/pdf"))])
    assert response.status_code == 422, response.text
    assert "The priority must be a whole number from 0 to 9" in response.text


@pytest.mark.parametrize("amount, words", [
    (True, "must be a number of dollars"), (False, "must be a number of dollars"),
    ("12", "must be a number of dollars"), (0.001, "whole cents"), (12.345, "whole cents"),
    (-1, "between $0 and $1,000,000,000"), (2e9, "between $0 and $1,000,000,000"),
])
def test_budgets_refuse_booleans_text_and_fractions_of_a_cent_in_plain_words(app_server, amount, words):
    server, _ = app_server
    with server.operator() as http:
        response = http.put("/api/customers/Plain Co/budget", json={"monthly_llm_budget_usd": amount})
        assert response.status_code == 422, response.text
        assert words in response.text, response.text
        assert "monthly_llm_budget_usd must be" not in response.text
        ok = http.put("/api/customers/Plain Co/budget", json={"monthly_llm_budget_usd": 0.01})
        assert ok.status_code == 200 and ok.json()["monthly_llm_budget_usd"] == 0.01


def test_an_error_the_request_caused_is_no_outage(app_server, monkeypatch):
    """A statement that fails on its own data answers 500, never a 503 with Retry-After (clients
    would retry it forever); an outage still answers 503."""
    assert not db.is_outage(psycopg.errors.ProgramLimitExceeded("index row size 5016 exceeds btree maximum"))
    assert not db.is_outage(psycopg.errors.NumericValueOutOfRange("integer out of range"))
    assert db.is_outage(psycopg.OperationalError("connection refused"))
    assert db.is_outage(psycopg.errors.AdminShutdown("terminating connection"))
    assert db.is_outage(psycopg.errors.QueryCanceled("canceling statement due to statement timeout"))
    import asyncio

    from starlette.requests import Request

    from app.api.common import database_unavailable

    request = Request({"type": "http", "method": "POST", "path": "/api/tasks", "headers": [], "query_string": b""})
    refused = asyncio.run(database_unavailable(request, psycopg.errors.ProgramLimitExceeded("too big")))
    away = asyncio.run(database_unavailable(request, psycopg.OperationalError("connection refused")))
    assert refused.status_code == 500 and "retry-after" not in refused.headers
    assert away.status_code == 503 and away.headers["retry-after"]


@pytest.mark.parametrize("priority", ["5.0", "", "10", "x"])
def test_retry_priorities_are_whole_numbers_from_0_to_9(app_server, priority):
    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="file:///r.pdf")
    queue.cancel(conn, task.id, actor="ops")
    with server.operator() as http:
        response = http.post(f"/api/tasks/{task.id}/retry", params={"priority": priority})
        assert response.status_code == 422, response.text
        assert "The priority must be a whole number from 0 to 9" in response.text
        assert http.post(f"/api/tasks/{task.id}/retry", params={"priority": "7"}).status_code == 200


def test_a_request_that_creates_no_task_leaves_no_batch(app_server):
    server, conn = app_server
    before = conn.execute("SELECT count(*) AS n FROM batches").fetchone()["n"]
    with server.operator() as http:
        response = http.post("/api/tasks", files=[("files", ("note.pdf", b"not a pdf at all", "application/pdf"))])
    assert response.status_code == 422, response.text
    assert conn.execute("SELECT count(*) AS n FROM batches").fetchone()["n"] == before


def test_an_enqueue_the_database_refuses_leaves_no_stored_file(conn, tmp_path, monkeypatch):
    """Whatever the database refuses after the files were stored, the files it would orphan go."""
    from app import submitting
    from schema.settings import Settings

    queue.configure_agent(conn, "documents")
    settings = Settings(data_dir=tmp_path)

    def refuse(*args, **kwargs):
        raise psycopg.errors.ProgramLimitExceeded("index row size 5016 exceeds btree version 4 maximum 2704")

    monkeypatch.setattr(queue, "enqueue_many", refuse)
    upload = submitting.Upload("kept.pdf", make_pdf("kept or not"))
    with pytest.raises(psycopg.errors.ProgramLimitExceeded):
        submitting.submit_documents(conn, settings, [upload], submitting.SubmitOptions(agent="documents"), "ops")
    assert not [p for p in settings.files_path.rglob("*") if p.is_file()]
