"""The HTTP API of a running app: submit, list, read, retry, cancel, summary, health, metrics, auth."""

from __future__ import annotations

import base64

import pytest

from schema import queue
from tests.e2e.app_harness import TOKEN, complete, make_pdf, start_app


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory)
    yield server, conn
    teardown()


def _files(*docs: tuple[str, bytes]):
    return [("files", (name, data, "application/pdf")) for name, data in docs]


def test_health_reports_database_and_listen(app_server):
    server, _ = app_server
    response = server.client().get("/healthz")
    assert response.status_code == 200
    assert response.json()["database"] == "ok" and response.json()["listen"] == "live"


def test_submit_many_files_reports_each(app_server):
    server, conn = app_server
    good_a, good_b = make_pdf("api good a"), make_pdf("api good b", pages=3)
    with server.operator() as http:
        response = http.post("/api/tasks", data={"customer": "Api Co", "priority": "7"},
                             files=_files(("a.pdf", good_a), ("b.pdf", good_b), ("bad.pdf", b"not a pdf at all")))
    assert response.status_code == 207
    body = response.json()
    assert (body["created"], body["rejected"]) == (2, 1)
    by_name = {f["file"]: f for f in body["files"]}
    assert by_name["a.pdf"]["status"] == 201 and by_name["b.pdf"]["pages"] == 3
    assert by_name["bad.pdf"]["status"] == 422 and "not a PDF" in by_name["bad.pdf"]["error"]
    task = queue.get_task(conn, by_name["b.pdf"]["task_id"])
    assert (task.customer, task.priority, task.submitted_by, task.pages) == ("Api Co", 7, "operator", 3)


def test_duplicate_is_offered_then_rerun_on_request(app_server):
    server, _ = app_server
    doc = make_pdf("api duplicate")
    with server.operator() as http:
        first = http.post("/api/tasks", files=_files(("dup.pdf", doc))).json()["files"][0]
        again = http.post("/api/tasks", files=_files(("dup-copy.pdf", doc)))
        rerun = http.post("/api/tasks", data={"duplicates": "rerun"}, files=_files(("dup.pdf", doc)))
    assert again.status_code == 200
    offered = again.json()["files"][0]
    assert offered["outcome"] == "duplicate" and offered["duplicate_of"]["id"] == first["task_id"]
    assert rerun.status_code == 201 and rerun.json()["files"][0]["task_id"] != first["task_id"]
    # The re-run is linked to the task it repeats, as a re-run from the upload page is.
    assert queue.get_task(_conn(app_server), rerun.json()["files"][0]["task_id"]).parent_id == first["task_id"]


def _conn(app_server):
    return app_server[1]


def test_default_priority_is_the_uis_and_oversize_says_its_real_size(app_server):
    server, conn = app_server
    with server.operator() as http:
        plain = http.post("/api/tasks", files=_files(("default-priority.pdf", make_pdf("default priority"))))
        big = http.post("/api/tasks", files=_files(("big.pdf", b"%PDF-" + b"0" * 52_400_000)))
    assert queue.get_task(conn, plain.json()["files"][0]["task_id"]).priority == 5
    assert big.status_code == 422
    assert big.json()["files"][0]["error"] == "big.pdf: 52.4 MB is over the 50 MB limit"


def test_a_wrong_bearer_token_is_named_as_such(app_server):
    server, _ = app_server
    wrong = server.client(Authorization="Bearer not-the-token").get("/api/tasks")
    missing = server.client().get("/api/tasks")
    assert (wrong.status_code, missing.status_code) == (401, 401)
    assert wrong.json()["detail"].startswith("wrong token")
    assert missing.json()["detail"].startswith("sign in first")


def test_all_rejected_is_422(app_server):
    server, _ = app_server
    with server.operator() as http:
        response = http.post("/api/tasks", files=_files(("empty.pdf", b"")))
    assert response.status_code == 422
    assert "empty" in response.json()["files"][0]["error"]


def test_list_pages_with_a_cursor_and_filters(app_server):
    server, conn = app_server
    queue.configure_agent(conn, "documents")
    ids = {queue.enqueue(conn, agent="documents", document_uri=f"/x/{i}.pdf", customer="Cursor Co").id
           for i in range(7)}
    seen, cursor = [], None
    with server.operator() as http:
        while True:
            params = {"customer": "Cursor Co", "limit": 3, **({"cursor": cursor} if cursor else {})}
            page = http.get("/api/tasks", params=params).json()
            seen += [t["id"] for t in page["tasks"]]
            cursor = page["next_cursor"]
            if not cursor:
                break
        assert http.get("/api/tasks", params={"status": "nonsense"}).status_code == 422
        # A cursor of the id alone, as given before the order was by submission, still pages on.
        legacy = base64.urlsafe_b64encode(f"before:{sorted(ids)[3]}".encode()).decode().rstrip("=")
        page = http.get("/api/tasks", params={"customer": "Cursor Co", "cursor": legacy}).json()
        assert [t["id"] for t in page["tasks"]] == sorted(ids, reverse=True)[4:]
        naive = base64.urlsafe_b64encode(f"before:{sorted(ids)[3]}:2026-01-01T00:00:00".encode()).decode()
        assert http.get("/api/tasks", params={"cursor": naive}).status_code == 422
    assert seen == sorted(ids, reverse=True)


def test_detail_document_retry_and_cancel(app_server):
    server, conn = app_server
    doc = make_pdf("api detail")
    with server.operator() as http:
        task_id = http.post("/api/tasks", files=_files(("detail.pdf", doc))).json()["files"][0]["task_id"]
        claim = queue.claim(conn, agent="documents", worker_id="w-api", limit=100)
        attempt = next(c.attempt_id for c in claim if c.task.id == task_id)
        complete(conn, attempt)
        detail = http.get(f"/api/tasks/{task_id}").json()
        assert detail["status"] == "completed" and detail["attempts"][0]["trace_id"] == f"tr-{attempt}"
        assert [e["status"] for e in detail["events"]] == ["enqueued", "processing", "completed"]
        assert detail["result"]["fields"]["total"]["value"] == 1220.0
        pdf = http.get(detail["document_url"])
        assert pdf.status_code == 200 and pdf.content == doc
        assert http.get("/api/tasks/999999").status_code == 404
        assert http.post(f"/api/tasks/{task_id}/cancel").status_code == 409
        child = http.post(f"/api/tasks/{task_id}/retry").json()
        assert child["new_task_id"] != task_id
        assert http.post(f"/api/tasks/{child['new_task_id']}/cancel").json()["status"] == "cancelled"
        assert http.post(f"/api/tasks/{child['new_task_id']}/retry").json()["status"] == "enqueued"
    assert queue.get_task(conn, child["new_task_id"]).cancelled_by == "operator"


def test_summary_follows_filters(app_server):
    server, conn = app_server
    queue.enqueue(conn, agent="documents", document_uri="/x/s.pdf", customer="Summary Co")
    with server.operator() as http:
        everything = http.get("/api/summary").json()
        one = http.get("/api/summary", params={"customer": "Summary Co"}).json()
        none = http.get("/api/summary", params={"date_to": "2000-01-01"}).json()
    assert one["total"] == 1 and everything["total"] > 1 and none["total"] == 0
    assert set(everything["charts"]) >= {"throughput", "cost_by_agent", "cost_by_customer", "latency_bins",
                                         "confidence_bins"}


def test_metrics_exports_queue_figures(app_server):
    server, _ = app_server
    # Metrics name agents and spend: signed-in callers only, unless QUIRE_METRICS_PUBLIC opens them.
    assert server.client().get("/metrics").status_code == 401
    text = server.operator().get("/metrics").text
    for name in ("quire_tasks{", "quire_oldest_enqueued_age_seconds{", "quire_claims_total{",
                 "quire_listen_up 1", "quire_tasks_waiting_for_budget{"):
        assert name in text


def test_nothing_changes_state_anonymously(app_server):
    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="/x/anon.pdf")
    forged = {"X-Forwarded-Email": "admin@example.com", "X-Forwarded-User": "admin"}
    for headers in ({}, forged, {"Authorization": "Bearer wrong"}, {**forged, "Authorization": "Bearer nope"}):
        with server.client(**headers) as http:
            assert http.post(f"/api/tasks/{task.id}/cancel").status_code == 401
            assert http.post(f"/api/tasks/{task.id}/retry").status_code == 401
            assert http.post("/api/tasks", files=_files(("x.pdf", make_pdf("anon")))).status_code == 401
            assert http.get("/api/tasks").status_code == 401
            page = http.get("/dashboard", follow_redirects=False)
            assert page.status_code == 303 and page.headers["location"].startswith("/login")
    assert queue.get_task(conn, task.id).status.value == "enqueued"


def test_session_cookie_from_the_token(app_server):
    server, _ = app_server
    with server.client() as http:
        assert http.post("/auth/session", json={"token": "wrong"}).status_code == 401
        assert http.post("/auth/session", json={"token": TOKEN}).status_code == 204
        assert http.get("/api/tasks", params={"limit": 1}).status_code == 200
        assert http.get("/dashboard").status_code == 200
        http.get("/auth/logout")
        assert http.get("/api/tasks").status_code == 401
    with server.client() as http:
        link = http.get("/login", params={"token": TOKEN, "next": "//evil.example"}, follow_redirects=False)
        assert link.status_code == 303 and link.headers["location"] == "/"
        assert http.get("/api/tasks").status_code == 200


def test_e_invoices_are_submitted_and_served_back_as_plain_text(app_server):
    from tests.unit.agents import einvoice_samples as einvoices

    server, _ = app_server
    fattura = einvoices.fatturapa_xml()
    signed = einvoices.sign_p7m(fattura)
    with server.operator() as http:
        response = http.post("/api/tasks", files=_files(("api-fattura.xml", fattura), ("api-fattura.xml.p7m", signed),
                                                        ("api-order.xml", einvoices.NOT_AN_INVOICE_XML)))
        assert response.status_code == 207
        by_name = {f["file"]: f for f in response.json()["files"]}
        assert (by_name["api-fattura.xml"]["einvoice"], by_name["api-fattura.xml"]["pages"]) == ("FatturaPA", 0)
        assert by_name["api-fattura.xml.p7m"]["einvoice"] == "FatturaPA"
        assert by_name["api-order.xml"]["status"] == 422 and "not an e-invoice" in by_name["api-order.xml"]["error"]
        xml = http.get(f"/api/tasks/{by_name['api-fattura.xml']['task_id']}/document")
        p7m = http.get(f"/api/tasks/{by_name['api-fattura.xml.p7m']['task_id']}/document")
        forecast = http.post("/api/forecast", json={"files": [{"pages": 0, "einvoice": True}]})
    # An uploaded XML is never rendered as markup on the app's origin.
    assert xml.headers["content-type"].startswith("text/plain") and xml.content == fattura
    assert xml.headers["x-content-type-options"] == "nosniff"
    assert p7m.headers["content-type"] == "application/pkcs7-mime" and p7m.content == signed
    assert p7m.headers["content-disposition"].startswith("attachment")
    assert forecast.status_code == 200 and forecast.json()["tokens"] == 0
