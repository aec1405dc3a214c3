"""What the operator sees of foresight in Chromium: the forecast before a batch runs, held and
submitted batches, queue positions moving live, forecast against actual, budgets, and retries at a
chosen priority."""

from __future__ import annotations

import base64

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from schema import queue
from tests.e2e.app_harness import TOKEN, complete, make_pdf, start_app
from tests.e2e.test_app_browser import DROP_FILES, visit


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory)
    queue.configure_agent(conn, "documents", max_concurrent_tasks=2, price_input_per_mtok=3.0,
                          price_output_per_mtok=15.0)
    yield server, conn
    teardown()


@pytest.fixture
def page(browser, app_server) -> Page:
    server, _ = app_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto(f"{server.url}/login?token={TOKEN}")
    yield page
    context.close()


def pick(page: Page, testid: str, option: str) -> None:
    """Chooses one option of a single select (again if a live redraw closed its menu meanwhile)."""
    field = page.locator(f'[data-testid="{testid}"]')
    for attempt in range(3):
        field.click()
        try:
            page.locator(".q-menu .q-item", has_text=option).first.click(timeout=5_000)
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
            continue
        expect(page.locator(".q-select", has=field)).to_contain_text(option)
        return


def test_forecast_before_dispatch_then_positions_move_live_and_forecast_meets_actual(page, app_server, screenshots):
    server, conn = app_server
    visit(page, f"{server.url}/")
    page.locator('[data-testid="upload-customer"]').fill("Foresight Co")
    files = [{"name": f"{n}.pdf", "b64": base64.b64encode(make_pdf(n, pages=p)).decode()}
             for n, p in (("north", 1), ("south", 2), ("west", 3))]
    page.evaluate(DROP_FILES, files)
    panel = page.locator('[data-testid^="forecast-"]').filter(has=page.locator('[data-testid="forecast-state"]'))
    expect(panel.locator('[data-testid="forecast-state"]')).to_have_text("held: not running")
    expect(panel.locator('[data-testid="forecast-documents"]')).to_have_text("3 · 6 pages")
    static_tokens = sum(queue.estimate_tokens(pages=p) for p in (1, 2, 3))
    expect(panel.locator('[data-testid="forecast-tokens"]')).to_have_text(f"~{static_tokens:,}")
    expect(panel.locator('[data-testid="forecast-llm-cost"]')).to_contain_text("$")
    expect(panel.locator('[data-testid="forecast-eta"]')).not_to_have_text("—")
    rows = page.locator('[data-testid="batch-row"]')
    expect(rows.filter(has_text="north.pdf").locator('[data-testid="file-message"]')).to_contain_text("waiting: held")
    # Nothing runs while held.
    assert queue.claim(conn, agent="documents", worker_id="w-f", limit=5) == []
    page.screenshot(path=str(screenshots / "forecast.png"), full_page=True)
    # Urgent work arrives before the batch is submitted: it is ahead of every document of the batch.
    urgent = [queue.enqueue(conn, agent="documents", document_uri=f"/u/{i}.pdf", priority=9, customer="Rush")
              for i in range(2)]
    page.locator('[data-testid="forecast-submit"]').click()
    expect(panel.locator('[data-testid="forecast-state"]')).to_have_text("submitted")
    message = rows.filter(has_text="south.pdf").locator('[data-testid="file-message"]')
    expect(message).to_contain_text("3 ahead")
    expect(message).to_contain_text("ETA")
    # The queue moves: each claim moves the batch's documents up, live, without a reload.
    page.evaluate("window.__sameDocument = true")
    (first,) = queue.claim(conn, agent="documents", worker_id="w-f", limit=1)
    assert first.task.id in {t.id for t in urgent}
    expect(message).to_contain_text("2 ahead")
    page.screenshot(path=str(screenshots / "queue-positions.png"), full_page=True)
    (second,) = queue.claim(conn, agent="documents", worker_id="w-f", limit=1)
    expect(message).to_contain_text("1 ahead")
    complete(conn, first.attempt_id)
    complete(conn, second.attempt_id)
    for _ in range(3):
        (claim,) = queue.claim(conn, agent="documents", worker_id="w-f", limit=1)
        complete(conn, claim.attempt_id, tokens=(1500, 300), cost=0.009)
    comparison = panel.locator('[data-testid="forecast-vs-actual"]')
    expect(comparison).to_contain_text("Forecast against actual: cost")
    expect(comparison).to_contain_text("duration")
    assert page.evaluate("window.__sameDocument") is True


def test_budgets_show_spend_and_over_budget_tasks_wait_visibly(page, app_server, screenshots):
    server, conn = app_server
    visit(page, f"{server.url}/dashboard")
    page.locator('[data-testid="budget-customer"]').fill("Budget Co")
    page.locator('[data-testid="budget-amount"]').fill("0.01")
    page.locator('[data-testid="budget-save"]').click()
    row = page.locator('[data-testid="budget-row-Budget Co"]')
    expect(row.locator('[data-testid="budget-text"]')).to_have_text("$0.00 of $0.0100")
    tasks = [queue.enqueue(conn, agent="documents", document_uri=f"/b/{i}.pdf", priority=8, customer="Budget Co")
             for i in range(2)]
    (claim,) = queue.claim(conn, agent="documents", worker_id="w-b", limit=1)
    assert claim.task.id == tasks[0].id
    complete(conn, claim.attempt_id, cost=0.02)
    expect(row.locator('[data-testid="budget-over"]')).to_have_text("over budget: tasks waiting", timeout=30_000)
    expect(row.locator('[data-testid="budget-text"]')).to_have_text("$0.0200 of $0.0100")
    page.screenshot(path=str(screenshots / "budgets.png"), full_page=True)
    assert queue.claim(conn, agent="documents", worker_id="w-b", limit=5) == []
    visit(page, f"{server.url}/tasks/{tasks[1].id}")
    expect(page.locator('[data-testid="task-status"]')).to_have_text("enqueued")
    expect(page.locator('[data-testid="queue-position"]')).to_have_text("waiting: budget")
    # Clearing the budget lets the task go; the page says so without a reload.
    visit(page, f"{server.url}/dashboard")
    page.locator('[data-testid="budget-clear-Budget Co"]').click()
    expect(row.locator('[data-testid="budget-text"]')).to_contain_text("no budget")
    (claim,) = queue.claim(conn, agent="documents", worker_id="w-b", limit=1)
    assert claim.task.id == tasks[1].id
    complete(conn, claim.attempt_id)


def test_retry_at_a_higher_priority_from_row_bulk_and_detail(page, app_server):
    server, conn = app_server
    failed = []
    for i in range(4):
        task = queue.enqueue(conn, agent="documents", document_uri=f"/r/{i}.pdf", priority=9, customer="Retry Co")
        (claim,) = queue.claim(conn, agent="documents", worker_id="w-r", limit=1)
        assert claim.task.id == task.id
        queue.apply_callback(conn, claim.attempt_id, {"status": "failed", "error": "unreadable", "retryable": False})
        conn.execute("UPDATE tasks SET priority = 1 WHERE id = %s", [task.id])  # it was bulk work
        failed.append(task.id)
    visit(page, f"{server.url}/dashboard")
    pick(page, "retry-priority", "9 · urgent")
    page.locator(f'[data-testid="retry-{failed[0]}"]').click()
    page.locator('[data-testid="confirm-yes"]').click()  # the table asks before it retries
    expect(page.locator(f'[data-testid="status-{failed[0]}"]')).to_have_text("enqueued")
    assert queue.get_task(conn, failed[0]).priority == 9
    pick(page, "retry-priority", "7 · high")
    for task_id in failed[1:3]:
        page.locator("tr", has=page.locator(f'[data-testid="status-{task_id}"]')).locator(".q-checkbox").click()
    page.locator('[data-testid="retry-selected"]').click()
    page.locator('[data-testid="confirm-yes"]').click()
    for task_id in failed[1:3]:
        expect(page.locator(f'[data-testid="status-{task_id}"]')).to_have_text("enqueued")
        assert queue.get_task(conn, task_id).priority == 7
    visit(page, f"{server.url}/tasks/{failed[3]}")
    pick(page, "detail-retry-priority", "5 · normal")
    page.locator('[data-testid="detail-retry"]').click()
    page.locator('[data-testid="confirm-yes"]').click()
    expect(page.locator('[data-testid="task-status"]')).to_have_text("enqueued")
    assert queue.get_task(conn, failed[3]).priority == 5
    # Left alone, the retry keeps the task's own priority.
    claims = queue.claim(conn, agent="documents", worker_id="w-r", limit=2)
    assert [c.task.priority for c in sorted(claims, key=lambda c: -c.task.priority)] == [9, 7]
