"""Identity behind Databricks Apps: forwarded headers name the caller, QUIRE_OPERATORS grants the
operator role, the local token means nothing there; viewers are refused retry and cancel."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect, sync_playwright

from schema import queue
from tests.e2e.app_harness import TOKEN, launch_browser, make_pdf, start_app
from tests.e2e.browser_helpers import confirm_dialog

OPERATOR = "ops@example.com"
VIEWER = "viewer@example.com"


SUBMITTER = "clerk@example.com"


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    config = tmp_path_factory.mktemp("config") / "quire.toml"
    config.write_text(f'[agents.documents]\n\n[submitters]\n"{SUBMITTER}" = ["*"]\n')
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory, QUIRE_CONFIG=str(config),
                                       DATABRICKS_APP_NAME="quire-e2e", QUIRE_OPERATORS=f"Admin@example.com, {OPERATOR}")
    queue.configure_agent(conn, "documents")
    yield server, conn
    teardown()


def as_user(server, email: str):
    return server.client(**{"X-Forwarded-Email": email, "X-Forwarded-User": email.split("@")[0]})


def test_without_forwarded_identity_nothing_is_allowed(app_server):
    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="/a/x.pdf")
    # The local operator token is no identity behind Databricks Apps.
    with server.operator() as http:
        assert http.get("/api/tasks").status_code == 401
        assert http.post(f"/api/tasks/{task.id}/cancel").status_code == 401
        assert http.post("/auth/session", json={"token": TOKEN}).status_code == 400
    assert queue.get_task(conn, task.id).status.value == "enqueued"


def test_submitters_submit_viewers_read_and_neither_can_retry_or_cancel(app_server):
    server, conn = app_server
    with as_user(server, VIEWER) as http:
        refused = http.post("/api/tasks", files=[("files", ("v.pdf", make_pdf("viewer"), "application/pdf"))])
        assert refused.status_code == 403 and "may not submit" in refused.json()["detail"]
    with as_user(server, SUBMITTER) as http:
        created = http.post("/api/tasks", files=[("files", ("v.pdf", make_pdf("viewer"), "application/pdf"))])
        assert created.status_code == 201
        task_id = created.json()["files"][0]["task_id"]
        assert http.get(f"/api/tasks/{task_id}").json()["submitted_by"] == SUBMITTER
    with as_user(server, VIEWER) as http:
        assert http.get(f"/api/tasks/{task_id}").status_code == 200
        refused = http.post(f"/api/tasks/{task_id}/cancel")
        assert refused.status_code == 403 and "operator" in refused.json()["detail"]
        assert http.post(f"/api/tasks/{task_id}/retry").status_code == 403
    assert queue.get_task(conn, task_id).status.value == "enqueued"
    with as_user(server, "ADMIN@example.com") as http:  # emails compare without case
        assert http.post(f"/api/tasks/{task_id}/cancel").json()["status"] == "cancelled"
    assert queue.get_task(conn, task_id).cancelled_by == "ADMIN@example.com"


def test_viewer_sees_retry_and_cancel_disabled_and_operator_can_use_them(app_server):
    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="/a/table.pdf", customer="Auth Co")
    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            for email, allowed in ((VIEWER, False), (OPERATOR, True)):
                context = browser.new_context(extra_http_headers={"X-Forwarded-Email": email})
                context.set_default_timeout(30_000)
                page = context.new_page()
                page.goto(f"{server.url}/tasks/{task.id}")
                expect(page.locator('[data-testid="task-status"]')).to_have_text("enqueued")
                detail_cancel = page.locator('[data-testid="detail-cancel"]')
                expect(detail_cancel).to_be_enabled() if allowed else expect(detail_cancel).to_be_disabled()
                page.goto(f"{server.url}/dashboard")
                page.wait_for_function("() => window.did_handshake === true")
                expect(page.locator('[data-testid="identity"]')).to_have_text(email)
                cancel = page.locator(f'[data-testid="cancel-{task.id}"]')
                status = page.locator(f'[data-testid="status-{task.id}"]')
                expect(status).to_have_text("enqueued")
                if allowed:
                    cancel.click()
                    confirm_dialog(page, "Cancel 1 task?")
                    expect(status).to_have_text("cancelled")
                else:
                    expect(cancel).to_be_disabled()
                    expect(page.locator(f'[data-testid="retry-{task.id}"]')).to_be_disabled()
                    # Selecting the row does not enable the bulk buttons either.
                    page.locator(f'tr:has([data-testid="cancel-{task.id}"]) .q-checkbox').click()
                    expect(page.locator('[data-testid="cancel-selected"]')).to_be_disabled()
                    assert queue.get_task(conn, task.id).status.value == "enqueued"
                context.close()
        finally:
            browser.close()
    assert queue.get_task(conn, task.id).cancelled_by == OPERATOR
