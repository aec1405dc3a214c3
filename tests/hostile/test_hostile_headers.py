"""Headers and sessions: no framing from elsewhere, no sniffing, stored PDFs downloaded under a
sandbox, sign-out revokes on the server, page sockets bound to their page, metrics behind sign-in."""

from __future__ import annotations

import re

from schema.settings import Settings
from tests.e2e.app_harness import TOKEN, make_pdf

SOCKET = "/_nicegui_ws/socket.io/"


def test_every_response_forbids_framing_from_elsewhere_and_sniffing(app_server):
    server, _ = app_server
    with server.client() as anonymous, server.operator() as operator:
        answers = [anonymous.get("/login"), anonymous.get("/healthz"), anonymous.get("/api/tasks"),
                   anonymous.get("/dashboard", follow_redirects=False), anonymous.get("/no-such-page"),
                   operator.get("/dashboard"), operator.get("/api/tasks"), operator.get("/docs")]
    for answer in answers:
        assert "frame-ancestors 'self'" in answer.headers.get("content-security-policy", ""), answer.url
        assert answer.headers.get("x-content-type-options") == "nosniff", answer.url


def test_a_stored_pdf_is_a_sandboxed_download(app_server):
    server, _ = app_server
    with server.operator() as http:
        created = http.post("/api/tasks", files=[("files", ("js.pdf", make_pdf("scripted"), "application/pdf"))])
        task_id = created.json()["files"][0]["task_id"]
        document = http.get(f"/api/tasks/{task_id}/document")
    assert document.status_code == 200 and document.content.startswith(b"%PDF-")
    assert document.headers["content-disposition"].startswith("attachment")
    policy = document.headers["content-security-policy"]
    assert "sandbox" in policy and "default-src 'none'" in policy
    assert document.headers["x-content-type-options"] == "nosniff"


def test_signing_out_revokes_the_session_on_the_server(app_server):
    from schema.sessions import session_revoked_list

    server, conn = app_server
    with server.client(Origin=server.url) as http:
        assert http.post("/auth/session", json={"token": TOKEN}).status_code == 204
        cookie = http.cookies["quire_session"]
        assert http.get("/api/tasks").status_code == 200
        http.get("/auth/logout")
    # Recorded in Postgres, where every app process reads it.
    assert len(session_revoked_list(conn)) == 1
    # Whoever kept a copy of the cookie (a shared machine, a leaked log) can no longer use it.
    with server.client(Cookie=f"quire_session={cookie}") as http:
        assert http.get("/api/tasks").status_code == 401
        assert http.get("/dashboard", follow_redirects=False).status_code == 303
    # Another session stays valid.
    with server.client(Origin=server.url) as http:
        assert http.post("/auth/session", json={"token": TOKEN}).status_code == 204
        assert http.get("/api/tasks").status_code == 200


def _page_client_id(server) -> str:
    with server.operator() as http:
        html = http.get("/dashboard").text
    return re.search(r'client_id\W{1,6}([0-9a-f-]{36})', html).group(1)


def _open_socket(http, client_id: str) -> str:
    """Opens an Engine.IO long-poll for the page and joins its namespace; the server's answer to the join."""
    query = {"EIO": "4", "transport": "polling", "client_id": client_id, "implicit_handshake": "true",
             "tab_id": "tab", "document_id": "doc", "next_message_id": "0"}
    opened = http.get(SOCKET, params=query)
    assert opened.status_code == 200, opened.text
    sid = re.search(r'"sid":"([^"]+)"', opened.text).group(1)
    joined = http.post(SOCKET, params={**query, "sid": sid}, content=b"40")
    assert joined.status_code == 200
    return http.get(SOCKET, params={**query, "sid": sid}).text


def test_an_anonymous_socket_cannot_join_a_signed_in_page(app_server):
    server, _ = app_server
    client_id = _page_client_id(server)
    with server.client() as anonymous:
        answer = _open_socket(anonymous, client_id)
    assert answer.startswith("44"), f"an anonymous socket joined the operator's page: {answer[:200]}"
    client_id = _page_client_id(server)
    with server.operator() as operator:  # the page's own caller joins it
        assert _open_socket(operator, client_id).startswith("40")


def test_a_socket_from_another_origin_is_refused(app_server):
    server, _ = app_server
    with server.client(Origin="http://127.0.0.1:1") as foreign:
        assert foreign.get(SOCKET, params={"EIO": "4", "transport": "polling"}).status_code == 403
    with server.client(Origin=server.url) as own:
        assert own.get(SOCKET, params={"EIO": "4", "transport": "polling"}).status_code == 200


def test_metrics_need_a_signed_in_caller_unless_opened(app_server, tmp_path):
    from app.guard import rule_for

    server, _ = app_server
    with server.client() as anonymous:
        assert anonymous.get("/metrics").status_code == 401
    with server.operator() as operator:
        assert "quire_tasks" in operator.get("/metrics").text
    assert not rule_for("GET", "/metrics", Settings(data_dir=tmp_path, metrics_public=True)).needs_identity
