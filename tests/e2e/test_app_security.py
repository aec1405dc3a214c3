"""Bad input against the running app: forged cross-origin changes, oversized bodies before sign-in,
NUL characters, out-of-range values, and the API documentation behind sign-in."""

from __future__ import annotations

import base64
import json

import pytest

from agents.callback import SIGNATURE_HEADER, sign
from bench.fake_http import FakeHttpServer
from schema import queue
from tests.e2e.app_harness import TOKEN, free_port, make_pdf, raw_request, start_app

MB = 1_000_000


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    # One MB a file and three files a request: the upload routes accept at most 4 MB.
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory,
                                       QUIRE_MAX_UPLOAD_MB="1", QUIRE_MAX_BATCH_FILES="3")
    yield server, conn
    teardown()


def session_cookie(server) -> str:
    with server.client(Origin=server.url) as http:
        response = http.post("/auth/session", json={"token": TOKEN})
    assert response.status_code == 204
    return response.cookies["quire_session"]


def test_a_cross_origin_form_with_the_operators_cookie_changes_nothing(app_server):
    server, conn = app_server
    cookie = session_cookie(server)
    task = queue.enqueue(conn, agent="documents", document_uri="/a/csrf.pdf")
    other = f"http://127.0.0.1:{free_port()}"
    form = {"Content-Type": "text/plain", "Cookie": f"quire_session={cookie}"}
    with server.client() as http:
        # What a page served from another port of the same host makes the browser send.
        for foreign in ({"Origin": other}, {"Referer": f"{other}/page.html"}, {"Origin": "null"}, {}):
            refused = http.post(f"/api/tasks/{task.id}/cancel", content=b"x=1", headers={**form, **foreign})
            assert refused.status_code == 403, foreign
        assert "refused" in http.post(f"/api/tasks/{task.id}/cancel", content=b"x=1",
                                      headers={**form, "Origin": other}).json()["detail"]
        assert queue.get_task(conn, task.id).status.value == "enqueued"
        # The same request from the app's own pages works.
        own = http.post(f"/api/tasks/{task.id}/cancel", content=b"x=1", headers={**form, "Origin": server.url})
        assert own.status_code == 200 and own.json()["status"] == "cancelled"
    assert queue.get_task(conn, task.id).cancelled_by == "operator"


def test_a_page_on_another_port_cannot_cancel_through_the_operators_browser(app_server):
    """The reproduction: a signed-in browser opens a page from another port of the same host."""
    from playwright.sync_api import sync_playwright

    from tests.e2e.app_harness import launch_browser

    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="/a/csrf-browser.pdf")
    html = (f'<form id="f" method="POST" enctype="text/plain" action="{server.url}/api/tasks/{task.id}/cancel">'
            '<input name="x" value="1"></form><script>document.getElementById("f").submit()</script>').encode()

    other = FakeHttpServer(lambda request: (200, html, {"Content-Type": "text/html"})).start()
    try:
        with sync_playwright() as playwright:
            browser = launch_browser(playwright)
            try:
                page = browser.new_page()
                page.set_default_timeout(60_000)  # a busy machine: generous, never a timing claim
                page.goto(f"{server.url}/login?token={TOKEN}&next=/dashboard")
                page.wait_for_function("() => window.did_handshake === true")
                with page.expect_response(lambda r: r.url.endswith(f"/api/tasks/{task.id}/cancel")) as answer:
                    page.goto(f"{other.url}/forged.html")
                assert answer.value.status == 403
                assert answer.value.request.header_value("cookie")  # the cookie did travel: only the origin stopped it
            finally:
                browser.close()
    finally:
        other.stop()
    assert queue.get_task(conn, task.id).status.value == "enqueued"


def test_scripts_and_signed_callbacks_need_no_origin(app_server):
    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="/a/script.pdf")
    with server.operator() as http:  # a bearer token, no Origin, no cookie
        assert http.post(f"/api/tasks/{task.id}/cancel").json()["status"] == "cancelled"
    with server.client(Origin=f"http://127.0.0.1:{free_port()}") as http:
        # Not refused for its origin: a callback answers for its signature.
        assert http.post("/api/callbacks/1", content=b"{}").status_code == 404


def test_unauthenticated_huge_bodies_are_refused_before_they_are_read(app_server):
    server, _ = app_server
    host = f"Host: 127.0.0.1:{server.port}\r\n"
    multipart = "Content-Type: multipart/form-data; boundary=x\r\n"
    # Only the headers are sent: a server that read the body first would never answer.
    status, text = raw_request(server.port, f"POST /api/tasks HTTP/1.1\r\n{host}{multipart}"
                                            f"Content-Length: {300 * MB}\r\n")
    assert status == 401 and "sign in" in text
    status, _ = raw_request(server.port, f"POST /_nicegui/client/abc/upload/1 HTTP/1.1\r\n{host}{multipart}"
                                         f"Content-Length: {300 * MB}\r\n")
    assert status == 401
    status, text = raw_request(server.port, f"POST /api/callbacks/1 HTTP/1.1\r\n{host}"
                                            f"Content-Type: application/json\r\nContent-Length: {50 * MB}\r\n")
    assert status == 413 and "at most 1,000,000 bytes" in text
    # Signed in, an upload may still not exceed every file of a batch at the largest size.
    status, text = raw_request(server.port, f"POST /api/tasks HTTP/1.1\r\n{host}{multipart}"
                                            f"Authorization: Bearer {TOKEN}\r\nContent-Length: {300 * MB}\r\n")
    assert status == 413 and "4,000,000 bytes" in text


def test_a_chunked_body_is_cut_at_its_limit(app_server):
    server, _ = app_server
    head = (f"POST /api/callbacks/1 HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n")
    # No length is declared: the guard counts the bytes and stops past 1 MB.
    status, text = raw_request(server.port, head, chunks=[b" " * 250_000] * 5)
    assert status == 413 and "at most 1,000,000 bytes" in text


def _files(*docs: tuple[str, bytes]):
    return [("files", (name, data, "application/pdf")) for name, data in docs]


def raw_multipart(files: list[tuple[str, bytes]], **fields: str) -> tuple[bytes, str]:
    """A multipart body with file names as given, bytes and all (httpx would percent-encode a NUL)."""
    boundary = "quire-boundary-7f3a"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in fields.items()]
    parts += [f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
              f'Content-Type: application/pdf\r\n\r\n'.encode() + data + b"\r\n" for name, data in files]
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def _counts(conn, server) -> tuple[int, int]:
    tasks = conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"]
    stored = server.data_dir / "files"
    return tasks, sum(1 for p in stored.rglob("*") if p.is_file()) if stored.exists() else 0


def test_nul_bytes_are_refused_whole_with_nothing_written(app_server):
    server, conn = app_server
    before = _counts(conn, server)
    with server.operator() as http:
        body, kind = raw_multipart([("good-a.pdf", make_pdf("nul a")), ("bad\x00.pdf", make_pdf("nul")),
                                    ("good-b.pdf", make_pdf("nul b"))])
        batch = http.post("/api/tasks", content=body, headers={"Content-Type": kind})
        assert batch.status_code == 422 and "NUL" in batch.json()["detail"]
        for field in ({"customer": "Acme\x00"}, {"agent": "documents\x00"}):
            body, kind = raw_multipart([("fine.pdf", make_pdf("nul field"))], **field)
            refused = http.post("/api/tasks", content=body, headers={"Content-Type": kind})
            assert refused.status_code == 422 and "NUL" in refused.json()["detail"], field
        for name in ("customer", "agent", "status", "date_from"):
            for path in ("/api/tasks", "/api/summary", "/api/compute-cost"):
                answer = http.get(path, params={name: "x\x00y"})
                assert (answer.status_code == 422 and "NUL" in answer.text) or name == "date_from", (path, name)
                assert answer.status_code == 422, (path, name)
    assert _counts(conn, server) == before


def test_edge_values_are_clear_4xx(app_server):
    server, _ = app_server
    huge = base64.urlsafe_b64encode(b"before:99999999999999999999999").decode().rstrip("=")
    with server.operator() as http:
        for path in ("/api/tasks", "/api/summary"):
            answer = http.get(path, params={"date_to": "9999-12-31"})
            assert answer.status_code == 422 and "9999-12-31" in answer.json()["detail"]
        assert http.get("/api/tasks", params={"cursor": huge}).status_code == 422
        assert http.get("/api/events", params={"after": "99999999999999999999"}).status_code == 422
        for task_id in ("-1", "0", "99999999999999999999"):
            assert http.get(f"/api/tasks/{task_id}").status_code == 422
            assert http.post(f"/api/tasks/{task_id}/cancel").status_code == 422
            page = http.get(f"/tasks/{task_id}", headers={"Authorization": f"Bearer {TOKEN}"})
            assert page.status_code == 404 and f"There is no task {task_id}" in page.text


def _signed_post(server, conn, body: bytes):
    [claim] = queue.claim(conn, agent="edge", worker_id="w-edge", limit=1)
    with server.client() as http:
        return claim, http.post(f"/api/callbacks/{claim.attempt_id}", content=body,
                                headers={SIGNATURE_HEADER: sign(body, claim.callback_secret),
                                         "Content-Type": "application/json"})


@pytest.mark.parametrize("body", [
    {"status": "completed", "result": {}, "llm_cost_usd": 1e8},
    {"status": "completed", "result": {}, "input_tokens": 2**63},
    {"status": "completed", "result": {}, "output_tokens": 2**64 + 1},
    {"status": "completed", "result": {}, "pages": 2**31},
    {"status": "failed", "error": "bad\u0000byte"},
    {"status": "completed", "result": {"fields": {"k\u0000": 1}}},
    {"status": "completed", "result": {"note": "\ud800"}},
], ids=["cost", "input-tokens", "output-tokens", "pages", "nul-error", "nul-key", "lone-surrogate"])
def test_signed_callbacks_out_of_contract_are_422(app_server, body):
    server, conn = app_server
    queue.configure_agent(conn, "edge")
    task = queue.enqueue(conn, agent="edge", document_uri="/a/edge.pdf")
    claim, answer = _signed_post(server, conn, json.dumps(body).encode())
    assert answer.status_code == 422, answer.text
    assert queue.get_task(conn, task.id).status.value == "processing"
    # The attempt still reports fine afterwards: nothing was half-written.
    good = json.dumps({"status": "completed", "result": {"fields": {}}, "input_tokens": 10}).encode()
    with server.client() as http:
        ok = http.post(f"/api/callbacks/{claim.attempt_id}", content=good,
                       headers={SIGNATURE_HEADER: sign(good, claim.callback_secret)})
    assert ok.status_code == 200 and ok.json()["task_status"] == "completed"


def test_deeply_nested_callback_is_422_before_parsing(app_server):
    server, conn = app_server
    queue.configure_agent(conn, "edge")
    queue.enqueue(conn, agent="edge", document_uri="/a/deep.pdf")
    nested = b'{"status":"completed","result":{"a":' + b"[" * 50_000 + b"]" * 50_000 + b"}}"
    _, answer = _signed_post(server, conn, nested)
    assert answer.status_code == 422 and "deeper" in answer.json()["detail"]


def test_api_documentation_needs_sign_in(app_server):
    server, _ = app_server
    with server.client() as http:
        assert http.get("/openapi.json").status_code == 401
        answer = http.get("/docs")
        assert answer.status_code == 303 and answer.headers["location"] == "/login?next=/docs"
    with server.operator() as http:
        assert "/api/tasks" in http.get("/openapi.json").json()["paths"]
        # Only Swagger UI, served offline: ReDoc would load its script from a CDN.
        assert http.get("/docs").status_code == 200 and http.get("/redoc").status_code == 404


def test_health_tells_anonymous_callers_the_states_only(app_server):
    server, _ = app_server
    with server.client() as http:
        assert http.get("/healthz").json() == {"status": "ok", "database": "ok", "listen": "live"}
    with server.operator() as http:
        assert http.get("/healthz").json()["sse_subscribers"] >= 0


def test_the_table_serves_at_most_200_rows_whatever_the_browser_asks(app_server):
    from playwright.sync_api import expect, sync_playwright

    from tests.e2e.app_harness import launch_browser

    server, conn = app_server
    queue.configure_agent(conn, "rows")
    for n in range(230):
        queue.enqueue(conn, agent="rows", document_uri=f"/a/rows-{n}.pdf")
    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(60_000)
            page.goto(f"{server.url}/login?token={TOKEN}&next=/dashboard")
            page.wait_for_function("() => window.did_handshake === true")
            rows = page.locator('[data-testid="task-table"] [data-testid^="status-"]')
            expect(rows).to_have_count(25, timeout=60_000)
            # What a crafted client could send over the page's socket: a page of a million rows.
            page.evaluate("""() => {
                const table = document.querySelector('[data-testid="task-table"]');
                getElement(table.id.slice(1)).$refs.qRef.$emit('request', {pagination:
                    {page: 1, rowsPerPage: 1000000, sortBy: 'id', descending: true}});
            }""")
            expect(rows).to_have_count(200, timeout=60_000)
        finally:
            browser.close()
