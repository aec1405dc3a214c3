"""The review API behind Databricks Apps: roles (viewer, reviewer, operator), claim next, save with
typed values, 409 on a stale claim with nothing written, approve, the export files, the review
event stream and the OpenAPI description."""

from __future__ import annotations

import io
import threading

import pytest

from schema import queue
from tests.e2e.app_harness import SseReader, start_app
from tests.review_fixtures import complete_with, invoice_lines, invoice_pdf, invoice_result, make_reviewable
from tests.waiting import wait_until

REVIEWER = "rita@example.com"
OPERATOR = "otto@example.com"
VIEWER = "val@example.com"
AGENT = "documents"


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory, DATABRICKS_APP_NAME="quire-e2e",
                                       QUIRE_REVIEWERS=f"{REVIEWER},rex@example.com", QUIRE_OPERATORS=OPERATOR)
    queue.configure_agent(conn, AGENT, settings={"review_sample": 0.0})
    yield server, conn
    teardown()


def as_user(server, email: str):
    return server.client(**{"X-Forwarded-Email": email})


def test_roles_decide_who_reviews_and_who_operates(app_server):
    server, conn = app_server
    task_id = make_reviewable(conn, 1, agent=AGENT)
    with as_user(server, VIEWER) as http:
        assert http.get("/api/review/queue").json()[0]["task_id"] == task_id
        refused = http.post("/api/review/next")
        assert refused.status_code == 403 and "reviewer role" in refused.json()["detail"]
    with as_user(server, REVIEWER) as http:
        claimed = http.post("/api/review/next")
        assert claimed.status_code == 200 and claimed.json()["task_id"] == task_id
        assert claimed.json()["claimed_by"] == REVIEWER
        # A reviewer cannot retry or cancel.
        assert http.post(f"/api/tasks/{task_id}/retry").status_code == 403
        body = claimed.json()
        done = http.post(f"/api/review/{body['id']}/approve", json={"claim_token": body["claim_token"]})
        assert done.status_code == 200 and done.json()["status"] == "approved", done.text
        assert http.post("/api/review/next").status_code == 204
    with as_user(server, OPERATOR) as http:
        other = make_reviewable(conn, 2, agent=AGENT)
        assert http.post(f"/api/review/tasks/{other}/claim").json()["claimed_by"] == OPERATOR
        assert http.post(f"/api/tasks/{task_id}/retry").status_code == 200
    complete_child(conn, task_id, 1)


def complete_child(conn, parent: int, n: int) -> int:
    """Completes a re-extraction child as its agent would (nothing else may be queued meanwhile)."""
    child = conn.execute("SELECT id FROM tasks WHERE parent_id = %s", (parent,)).fetchone()["id"]
    complete_with(conn, child, AGENT, invoice_result(n, invoice_pdf(n)), 0.95)
    return child


def test_saves_are_typed_and_a_stale_claim_gets_409_with_nothing_written(app_server):
    server, conn = app_server
    task_id = make_reviewable(conn, 3, agent=AGENT, wrong={"total": 5.0})
    with as_user(server, REVIEWER) as http:
        item = http.post(f"/api/review/tasks/{task_id}/claim").json()
        rid, token = item["id"], item["claim_token"]
        bad = http.post(f"/api/review/{rid}/save", json={"claim_token": token,
                                                         "fields": {"currency": "EURO", "total": "1.190,00"}})
        assert bad.status_code == 422 and "ISO 4217" in bad.json()["detail"]
        bad_date = http.post(f"/api/review/{rid}/save", json={"claim_token": token, "fields": {"issue_date": "31.02.2024"}})
        assert bad_date.status_code == 422 and "not a date" in bad_date.json()["detail"]
        total_text = next(t for name, t, _ in invoice_lines(3) if name == "total").split(": ")[1]
        saved = http.post(f"/api/review/{rid}/save", json={"claim_token": token, "fields": {"total": total_text},
                                                           "reason": "as printed"})
        expected = next(v for name, _, v in invoice_lines(3) if name == "total")
        assert saved.status_code == 200 and saved.json()["values"]["total"] == expected
        assert saved.json()["extraction"]["fields"]["total"]["value"] == 5.0
        assert [(c["field"], c["old_value"], c["new_value"], c["actor"], c["reason"])
                for c in saved.json()["corrections"]] == [("total", 5.0, expected, REVIEWER, "as printed")]
    # An operator re-extracts the document meanwhile: the reviewer's next save is refused whole.
    with as_user(server, OPERATOR) as http:
        assert http.post(f"/api/tasks/{task_id}/retry").status_code == 200
    with as_user(server, REVIEWER) as http:
        stale = http.post(f"/api/review/{rid}/approve", json={"claim_token": token, "fields": {"tax": "1,00"}})
        assert stale.status_code == 409 and "re-extracted meanwhile" in stale.json()["detail"]
        after = http.get(f"/api/review/{rid}").json()
    assert after["status"] == "superseded" and len(after["corrections"]) == 1
    # The re-extraction is reviewed afresh, even though it is confident; the old review stays.
    child = complete_child(conn, task_id, 3)
    with as_user(server, VIEWER) as http:
        queued = {e["task_id"]: e["reason"] for e in http.get("/api/review/queue").json()}
    assert queued[child] == "re-extraction"


def test_exports_hold_the_corrected_values_and_who_approved(app_server):
    server, conn = app_server
    task_id = make_reviewable(conn, 4, agent=AGENT, customer="Export Co", wrong={"currency": "USD"})
    with as_user(server, REVIEWER) as http:
        item = http.post(f"/api/review/tasks/{task_id}/claim").json()
        http.post(f"/api/review/{item['id']}/approve",
                  json={"claim_token": item["claim_token"], "fields": {"currency": "eur"}}).raise_for_status()
        rows = http.get("/api/review/export.json", params={"customer": "Export Co"}).json()
        xlsx = http.get("/api/review/export.xlsx", params={"customer": "Export Co"})
        csv = http.get("/api/review/export.csv", params={"customer": "Export Co"}).text
    assert [(r["task_id"], r["fields"]["currency"], r["approved_by"], r["corrected_fields"]) for r in rows] == [
        (task_id, "EUR", REVIEWER, ["currency"])]
    import openpyxl

    sheet = openpyxl.load_workbook(io.BytesIO(xlsx.content)).active
    head = [c.value for c in sheet[1]]
    values = dict(zip(head, [c.value for c in sheet[2]]))
    assert values["currency"] == "EUR" and values["approved_by"] == REVIEWER and values["task_id"] == task_id
    assert len(csv.strip().splitlines()) == 2


def test_review_events_stream_and_the_api_is_documented(app_server):
    server, conn = app_server
    reader = SseReader(f"{server.url}/api/review/events", {"X-Forwarded-Email": VIEWER})
    reader.start()
    assert reader.connected.wait(10)
    task_id = make_reviewable(conn, 5, agent=AGENT)
    with as_user(server, REVIEWER) as http:
        item = http.post(f"/api/review/tasks/{task_id}/claim").json()
        http.post(f"/api/review/{item['id']}/reject", json={"claim_token": item["claim_token"], "note": "blank"})

    def kinds() -> list[str]:
        return [d["kind"] for e, _, d in reader.messages if e == "review" and d["task_id"] == task_id]
    wait_until(lambda: kinds() == ["queued", "claimed", "rejected"], timeout=15)
    reader.close()
    with as_user(server, VIEWER) as http:
        spec = http.get("/openapi.json").json()
    for path in ("/api/review/next", "/api/review/{review_id}/save", "/api/review/{review_id}/approve",
                 "/api/review/{review_id}/reject", "/api/review/export.csv", "/api/review/figures"):
        assert path in spec["paths"], path


def test_reviewers_racing_over_http_each_get_their_own_document(app_server):
    server, conn = app_server
    tasks = {make_reviewable(conn, n, agent=AGENT) for n in range(10, 22)}
    got: dict[str, list[int]] = {}
    start = threading.Barrier(3)

    def reviewer(email: str) -> None:
        mine = got.setdefault(email, [])
        with as_user(server, email) as http:
            start.wait(timeout=20)
            while True:
                claimed = http.post("/api/review/next")
                if claimed.status_code == 204:
                    return
                body = claimed.json()
                http.post(f"/api/review/{body['id']}/approve", json={"claim_token": body["claim_token"]}) \
                    .raise_for_status()
                mine.append(body["task_id"])

    threads = [threading.Thread(target=reviewer, args=(email,)) for email in (REVIEWER, OPERATOR, "rex@example.com")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    everything = [t for ids in got.values() for t in ids]
    assert len(everything) == len(set(everything)) and set(everything) >= tasks
