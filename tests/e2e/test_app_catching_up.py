"""A bulk load on a running app: the API and the dashboard answer at once from what is folded and
say they are catching up; no read folds the backlog."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from schema import queue, rollups
from tests.e2e.app_harness import TOKEN, start_app
from tests.e2e.browser_helpers import visit

BULK = rollups.PENDING_EXACT_MAX + 1_000


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    # No worker, and the app's own fold loop rests an hour after its first (empty) fold: the backlog stays.
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory, QUIRE_WORKER="off",
                                       QUIRE_ROLLUP_FOLD_SECONDS="3600")
    queue.configure_agent(conn, "bulk")
    conn.execute("INSERT INTO tasks (agent, customer, document_uri, estimated_tokens) "
                 "SELECT 'bulk', 'Bulk Co', 'file:///bulk/' || g, 1000 FROM generate_series(1, %s) g", [BULK])
    yield server, conn
    teardown()


def test_the_api_answers_from_what_is_folded_and_says_it_is_catching_up(app_server):
    server, conn = app_server
    with server.operator() as http:
        summary = http.get("/api/summary").json()
        charts = http.get("/api/charts").json()
        page = http.get("/api/tasks", params={"limit": 5}).json()
    assert summary["catching_up"] is True and summary["total"] == 0
    assert summary["backlog"] > rollups.PENDING_EXACT_MAX and summary["as_of"]
    assert "Catching up" in summary["note"]
    assert charts["catching_up"] is True
    assert len(page["tasks"]) == 5 and page["total_is_estimate"] is True  # the rows themselves are current
    assert rollups.rollup_pending_count(conn) == BULK  # the reads folded nothing


def test_the_dashboard_shows_the_catching_up_note(app_server, browser):
    server, _ = app_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/login?token={TOKEN}")
        visit(page, f"{server.url}/dashboard")
        expect(page.locator('[data-testid="catching-up"]')).to_contain_text("Catching up")
    finally:
        context.close()
