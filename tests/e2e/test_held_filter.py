""""Held" as a status of the dashboard's filter, in Chromium at 1440 and 390 px and through the API:
the table, the figures and the charts count the held tasks only (the rollups do not key them: the
filter reads the tasks themselves)."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from schema import forecast, queue
from tests.e2e.app_harness import TOKEN, complete
from tests.e2e.browser_helpers import DESKTOP, PHONE, page_width, visit
from tests.waiting import wait_until

VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])


def _customer_with_held_batch(conn, w: int) -> tuple[str, list[int], int, int]:
    """A customer with two held tasks, one queued unheld and one completed: (customer, held ids,
    queued id, completed id)."""
    customer, agent = f"Held Filter {w}", f"held-filter-{w}"
    queue.configure_agent(conn, agent)
    plan = forecast.forecast_batch(conn, agent=agent, priority=0, files=[forecast.FileFacts(pages=2)] * 2,
                                   workers=1, compute_rate_usd_per_hour=0)
    batch = forecast.batch_create(conn, plan, customer=customer, held=True, submitted_by="op")
    held = [queue.enqueue(conn, agent=agent, document_uri=f"/x/held-{w}-{i}.pdf", document_name=f"held {w} {i}.pdf",
                          customer=customer, batch_id=batch, held=True, pages=2).id for i in range(2)]
    done = queue.enqueue(conn, agent=agent, document_uri=f"/x/done-{w}.pdf", document_name=f"done {w}.pdf",
                         customer=customer).id
    [claim] = queue.claim(conn, agent=agent, worker_id="w-held", limit=1)
    complete(conn, claim.attempt_id)
    queued = queue.enqueue(conn, agent=agent, document_uri=f"/x/queued-{w}.pdf", document_name=f"queued {w}.pdf",
                           customer=customer).id
    return customer, held, queued, done


@VIEWPORTS
def test_the_held_filter_shows_only_held_tasks_in_table_figures_and_charts(browser, app_server, viewport):
    server, conn = app_server
    w = viewport["width"]
    customer, held, queued, done = _customer_with_held_batch(conn, w)
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/login?token={TOKEN}")
        visit(page, f"{server.url}/dashboard?customer={customer.replace(' ', '%20')}")
        expect(page.locator('[data-testid="kpi-enqueued"]')).to_have_text("3")
        # The status filter offers held; chosen, it goes into the address, and a reload keeps it.
        panel = page.locator('[data-testid="filter-panel"]')
        if viewport is PHONE:  # the filters fold on a phone once the page has loaded: unfold them
            expect(page.locator('[data-testid="filter-status"]')).to_be_hidden()
            panel.locator(".q-expansion-item__container > .q-item").click()
        expect(page.locator('[data-testid="filter-status"]')).to_be_visible()
        page.locator('[data-testid="filter-status"]').click()
        page.locator(".q-menu .q-item", has_text="held").first.click()
        page.keyboard.press("Escape")
        page.wait_for_function("() => location.search.includes('status=held')")
        visit(page, page.url)
        expect(page.locator('[data-testid="filter-status"]').locator("xpath=ancestor::label")).to_contain_text("held")
        # The figures count the two held tasks: both queued, nothing else.
        expect(page.locator('[data-testid="kpi-enqueued"]')).to_have_text("2")
        expect(page.locator('[data-testid="kpi-completed"]')).to_have_text("0")
        # The table lists them and only them, each saying why it waits.
        for task_id in held:
            expect(page.locator(f'[data-testid="waiting-{task_id}"]')).to_contain_text("held for review")
        for task_id in (queued, done):
            expect(page.locator(f'[data-testid="status-{task_id}"]')).to_have_count(0)
        assert page_width(page) <= w, "the held filter must not widen the page"
    finally:
        context.close()


def test_the_held_filter_through_the_api_is_exact_and_follows_a_release(app_server):
    server, conn = app_server
    customer, held, queued, done = _customer_with_held_batch(conn, 1)
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    params = {"status": "held", "customer": customer}
    page = http.get("/api/tasks", params=params).json()
    assert sorted(t["id"] for t in page["tasks"]) == sorted(held)
    assert page["total"] == 2
    summary = http.get("/api/summary", params=params).json()
    assert summary["counts"]["enqueued"] == 2 and summary["total"] == 2
    assert summary["counts"]["completed"] == 0
    charts = http.get("/api/charts", params=params).json()
    assert charts["latency_bins"] == [] and charts["confidence_bins"] == []
    # Held or completed: the union of both.
    both = http.get("/api/tasks", params={**params, "status": ["held", "completed"]}).json()
    assert sorted(t["id"] for t in both["tasks"]) == sorted([*held, done])
    # Released, they are queued like any other and the held filter is empty.
    batch = conn.execute("SELECT batch_id FROM tasks WHERE id = %s", [held[0]]).fetchone()["batch_id"]
    assert http.post(f"/api/batches/{batch}/release").status_code == 200
    # Figures are shared for up to a second between readers: the next read after that is exact.
    wait_until(lambda: http.get("/api/summary", params=params).json()["total"] == 0)
    assert http.get("/api/tasks", params=params).json()["total"] == 0
    enqueued = http.get("/api/tasks", params={**params, "status": "enqueued"}).json()
    assert sorted(t["id"] for t in enqueued["tasks"]) == sorted([*held, queued])
