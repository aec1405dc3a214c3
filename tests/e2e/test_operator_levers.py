"""Operator levers in Chromium at 1440 and 390 px: held batches after a reload (upload page and
dashboard, submit and discard), a 255-character file name, edit and retry from the task page, and
bulk actions over the whole filter with a preview and an undo window."""

from __future__ import annotations

import base64

import pytest
from playwright.sync_api import Page, expect

from schema import forecast, queue
from tests.e2e.app_harness import TOKEN, make_pdf
from tests.e2e.browser_helpers import DESKTOP, DROP_FILES, PHONE, page_width, visit

VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
# The longest file name most file systems allow.
LONG_NAME = "Quarterly-statement-" + "very-long-name-" * 15 + "x" * 10
LONG_NAME = (LONG_NAME[:251] + ".pdf")


def _page(browser, server, viewport) -> Page:
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto(f"{server.url}/login?token={TOKEN}")
    return page


def _drop(page: Page, files: list[tuple[str, bytes]]) -> None:
    page.evaluate(DROP_FILES, [{"name": n, "b64": base64.b64encode(d).decode()} for n, d in files])


@VIEWPORTS
def test_a_held_batch_survives_a_reload_and_is_submitted_or_discarded_in_its_own_view(browser, app_server, viewport):
    server, conn = app_server
    w = viewport["width"]
    page = _page(browser, server, viewport)
    try:
        visit(page, f"{server.url}/")
        assert len(LONG_NAME) == 255
        _drop(page, [(LONG_NAME, make_pdf(f"long {w}")), (f"second-{w}.pdf", make_pdf(f"second {w}"))])
        expect(page.locator('[data-testid="forecast-state"]').first).to_have_text("held: not running")
        batch_id = max(b["id"] for b in conn.execute("SELECT id FROM batches WHERE held").fetchall())
        # The 255-character name is cut with an ellipsis, whole on hover, and widens nothing.
        name = page.locator('[data-testid="file-name"]', has_text="Quarterly-statement").first
        expect(name).to_have_attribute("title", LONG_NAME)
        assert page_width(page) <= w, "a long file name must not widen the page"
        # After a reload the held batch is still listed, with its files and its actions.
        visit(page, f"{server.url}/")
        view = page.locator(f'[data-testid="forecast-{batch_id}"]')
        expect(view.locator('[data-testid="forecast-state"]')).to_have_text("held: not running")
        expect(view.locator('[data-testid="forecast-submit"]')).to_be_visible()
        expect(page.locator('[data-testid="file-name"]', has_text=f"second-{w}.pdf")).to_be_visible()
        assert page_width(page) <= w
        # The dashboard lists it too, with a link to its own view.
        visit(page, f"{server.url}/dashboard")
        row = page.locator(f'[data-testid="held-batch-{batch_id}"]')
        expect(row).to_contain_text("2 documents held")
        assert page_width(page) <= w
        row.locator(f'[data-testid="held-batch-open-{batch_id}"]').click()
        page.wait_for_url(f"**/?batch={batch_id}")
        view = page.locator(f'[data-testid="forecast-{batch_id}"]')
        view.locator('[data-testid="forecast-discard"]').click()
        expect(view.locator('[data-testid="forecast-state"]')).to_have_text("discarded")
        expect(view.locator('[data-testid="forecast-submit"]')).to_have_count(0)
        statuses = {r["status"] for r in conn.execute(
            "SELECT status::text AS status FROM tasks WHERE batch_id = %s", [batch_id]).fetchall()}
        assert statuses == {"cancelled"}
        # Discarded, it is no longer listed as held; a reload of its view offers no Submit.
        visit(page, f"{server.url}/?batch={batch_id}")
        expect(page.locator(f'[data-testid="forecast-{batch_id}"] [data-testid="forecast-state"]')) \
            .to_have_text("discarded")
        expect(page.locator('[data-testid="forecast-submit"]')).to_have_count(0)
    finally:
        page.context.close()


def test_a_held_batch_is_submitted_from_the_dashboard(browser, app_server):
    server, conn = app_server
    queue.configure_agent(conn, "held-dash")
    plan = forecast.forecast_batch(conn, agent="held-dash", priority=0, files=[forecast.FileFacts(pages=2)],
                                   workers=1, compute_rate_usd_per_hour=0)
    batch = forecast.batch_create(conn, plan, customer="Dash Co", held=True, submitted_by="op")
    task = queue.enqueue(conn, agent="held-dash", document_uri="/x/held-dash.pdf", batch_id=batch, held=True, pages=2)
    page = _page(browser, server, DESKTOP)
    try:
        visit(page, f"{server.url}/dashboard")
        row = page.locator(f'[data-testid="held-batch-{batch}"]')
        expect(row).to_contain_text("1 document held")
        expect(row).to_contain_text("Dash Co")
        expect(page.locator(f'[data-testid="waiting-{task.id}"]')).to_contain_text("held for review")
        row.locator(f'[data-testid="held-batch-submit-{batch}"]').click()
        expect(row).to_have_count(0)
        assert not queue.get_task(conn, task.id).held
    finally:
        page.context.close()


def test_edit_and_retry_through_the_api_is_recorded_on_the_task(app_server):
    server, conn = app_server
    queue.configure_agent(conn, "edit-api", settings={"extractor": "offline"})
    queue.configure_agent(conn, "edit-api-2", settings={"extractor": "offline"})
    task = queue.enqueue(conn, agent="edit-api", document_uri="/x/edit-api.pdf")
    queue.cancel(conn, task.id, actor="op")
    with server.operator() as http:
        bad = http.post(f"/api/tasks/{task.id}/retry", params={"extractor": "magic"})
        assert bad.status_code == 422 and "There is no extractor" in bad.json()["detail"]
        assert http.post(f"/api/tasks/{task.id}/retry", params={"agent": "nobody"}).status_code == 422
        done = http.post(f"/api/tasks/{task.id}/retry",
                         params={"agent": "edit-api-2", "extractor": "llm", "model": "big-model", "priority": "8"})
        assert done.status_code == 200, done.text
        detail = http.get(f"/api/tasks/{task.id}").json()
        assert detail["agent"] == "edit-api-2" and detail["priority"] == 8
        assert detail["run_overrides"] == {"extractor": "llm", "model": "big-model"}
        (edit,) = detail["edits"]
        assert edit["by"] == "operator" and edit["at"]
        assert edit["changes"]["agent"] == ["edit-api", "edit-api-2"]


@VIEWPORTS
def test_edit_and_retry_from_the_task_page(browser, app_server, viewport):
    server, conn = app_server
    name = f"edit-ui-{viewport['width']}"
    queue.configure_agent(conn, name, settings={"extractor": "offline"})
    task = queue.enqueue(conn, agent=name, document_uri=f"/x/{name}.pdf", document_name=f"{name}.pdf")
    queue.cancel(conn, task.id, actor="op")
    page = _page(browser, server, viewport)
    try:
        visit(page, f"{server.url}/tasks/{task.id}")
        page.locator('[data-testid="detail-edit-retry"]').click()
        dialog = page.locator('[data-testid="edit-dialog"]')
        dialog.locator('[data-testid="edit-extractor"]').click()
        page.locator(".q-menu .q-item", has_text="llm").first.click()
        dialog.locator('[data-testid="edit-model"]').fill("bigger-model")
        dialog.locator('[data-testid="edit-yes"]').click()
        expect(page.locator('[data-testid="task-status"]')).to_have_text("enqueued")
        expect(page.locator('[data-testid="task-edit"]')).to_contain_text("Edited by operator")
        expect(page.locator('[data-testid="task-edit"]')).to_contain_text("extractor offline → llm")
        expect(page.locator('[data-testid="run-overrides"]')).to_contain_text("model bigger-model")
        assert page_width(page) <= viewport["width"]
        assert queue.get_task(conn, task.id).run_overrides == {"extractor": "llm", "model": "bigger-model"}
    finally:
        page.context.close()


@VIEWPORTS
def test_bulk_retry_over_the_whole_filter_shows_the_count_first_and_can_be_undone(browser, app_server, viewport):
    server, conn = app_server
    agent = f"bulk-{viewport['width']}"
    queue.configure_agent(conn, agent)
    ids = []
    for i in range(30):  # more than a page of the table (25 rows)
        task = queue.enqueue(conn, agent=agent, document_uri=f"/x/{agent}-{i}.pdf", document_name=f"{agent}-{i}.pdf")
        queue.cancel(conn, task.id, actor="op")
        ids.append(task.id)

    def statuses():
        return {r["status"] for r in conn.execute(
            "SELECT status::text AS status FROM tasks WHERE id = ANY(%s)", [ids]).fetchall()}

    page = _page(browser, server, viewport)
    try:
        visit(page, f"{server.url}/dashboard?agent={agent}&status=cancelled")
        page.locator('[data-testid="retry-all"]').click()
        dialog = page.locator('[data-testid="confirm-dialog"]')
        expect(dialog.locator('[data-testid="confirm-title"]')).to_have_text("Run 30 failed or cancelled tasks again?")
        expect(dialog).to_contain_text("every matching task on all pages (30)")
        dialog.locator('[data-testid="confirm-yes"]').click()
        pending = page.locator('[data-testid="bulk-pending"]')
        expect(pending).to_contain_text("Retrying 30 tasks in")
        pending.locator('[data-testid="bulk-undo"]').click()
        expect(pending).to_be_hidden()
        expect(page.locator(".q-notification", has_text="Undone: no task was retried")).to_be_visible()
        assert statuses() == {"cancelled"}
        assert page_width(page) <= viewport["width"]
        # Again, left to run: every one of the 30 is retried, not only the page shown.
        page.locator('[data-testid="retry-all"]').click()
        dialog.locator('[data-testid="confirm-yes"]').click()
        expect(pending).to_contain_text("Retrying 30 tasks in")
        expect(page.locator(".q-notification", has_text="30 tasks retried")).to_be_visible(timeout=30_000)
        assert statuses() == {"enqueued"}
    finally:
        page.context.close()


@VIEWPORTS
def test_the_header_stays_on_one_line_and_toasts_stay_below_it(browser, app_server, viewport, tmp_path):
    server, _ = app_server
    page = _page(browser, server, viewport)
    try:
        for path in ("/", "/dashboard"):
            visit(page, f"{server.url}{path}")
            nav = page.locator("nav.quire-nav")
            # (On a phone the API link is hidden: the docs are a desktop matter.)
            for link in nav.locator("a:visible").all():
                assert link.bounding_box()["height"] < 40, "a nav link wrapped onto two lines"
            nav_box = nav.bounding_box()
            pill = page.locator(".quire-live").bounding_box()
            assert pill["height"] < 40, "the live pill wrapped"
            assert abs((pill["y"] + pill["height"] / 2) - (nav_box["y"] + nav_box["height"] / 2)) < 8, \
                "the live pill sits on the nav's line"
            assert pill["x"] + pill["width"] <= viewport["width"] and page_width(page) <= viewport["width"]
        visit(page, f"{server.url}/dashboard?customer=nobody-at-all")
        page.locator('[data-testid="retry-all"]').click()  # nothing matches: a toast says so
        toast = page.locator(".q-notification").first
        expect(toast).to_be_visible()
        # Once it has slid in, the toast sits wholly below the header.
        page.wait_for_function("""() => {
            const toast = document.querySelector('.q-notification');
            const header = document.querySelector('.q-header').getBoundingClientRect();
            return toast && toast.getBoundingClientRect().top >= header.bottom;
        }""")
    finally:
        page.context.close()
