"""What an operator sees, on a desktop (1440 px) and a phone (390 px), in light and dark: confirmations,
disabled actions, long names, dates, filters in the URL, dark mode, error pages, offline API docs,
upload messages, the header and the charts' ticks."""

from __future__ import annotations

import base64
import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect

from schema import queue
from tests.e2e.app_harness import TOKEN, complete, make_pdf
from tests.e2e.browser_helpers import DESKTOP, DROP_FILES, PHONE, confirm_dialog, page_width, visit
from tests.unit.agents.agents_samples import no_pages_pdf

LONG_NAME = ("Consolidated annual financial statements of Halcyon Maritime Holdings and subsidiaries "
             "for the year ended 31 December 2023 (audited, restated).pdf")
# Records whether NiceGUI's "connection lost" popup was ever visible, every 20 ms from the first script.
POPUP_WATCH = """
window.__popupSeen = false; window.__looks = 0;
setInterval(() => {
  const popup = document.getElementById('popup');
  if (popup && getComputedStyle(popup).visibility !== 'hidden' && getComputedStyle(popup).opacity > 0.05) {
    window.__popupSeen = true;
  }
  window.__looks += 1;
}, 20);
"""


def open_page(browser, server, viewport=DESKTOP) -> Page:
    """A signed-in page in a fresh browser context of the given size."""
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto(f"{server.url}/login?token={TOKEN}")
    return page


@pytest.fixture
def desktop(browser, app_server):
    page = open_page(browser, app_server[0])
    yield page
    page.context.close()


@pytest.fixture
def phone(browser, app_server):
    page = open_page(browser, app_server[0], PHONE)
    yield page
    page.context.close()


def completed_tasks(conn, customer: str, n: int) -> list[int]:
    """`n` completed tasks of the customer, under an agent of their own so no other test's task is claimed."""
    agent = "agent-" + customer.lower().replace(" ", "-")
    queue.configure_agent(conn, agent)
    ids = [queue.enqueue(conn, agent=agent, document_uri=f"/x/{customer}-{i}.pdf", document_name=f"{customer} {i}.pdf",
                         customer=customer).id for i in range(n)]
    for claim in queue.claim(conn, agent=agent, worker_id="w-ui", limit=n):
        complete(conn, claim.attempt_id)
    return ids


def dashboard_for(page: Page, server, **query: str) -> None:
    page.goto(f"{server.url}/dashboard?" + "&".join(f"{k}={v}" for k, v in query.items()))
    page.wait_for_function("() => window.did_handshake === true")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 5")


def test_bulk_retry_says_how_many_and_what_it_costs_before_it_runs(desktop, app_server):
    server, conn = app_server
    ids = completed_tasks(conn, "Confirm Co", 3)
    dashboard_for(desktop, server, customer="Confirm%20Co")
    for task_id in ids:
        expect(desktop.locator(f'[data-testid="status-{task_id}"]')).to_have_text("completed")
    desktop.locator(".q-table thead .q-checkbox").click()
    expect(desktop.locator('[data-testid="retry-selected"]')).to_be_enabled()
    expect(desktop.locator('[data-testid="cancel-selected"]')).to_be_disabled()
    desktop.locator('[data-testid="retry-selected"]').click()
    expect(desktop.locator('[data-testid="confirm-body"]')).to_contain_text("spends tokens again")
    confirm_dialog(desktop, "Re-extract 3 completed documents?", accept=False)
    assert conn.execute("SELECT count(*) AS n FROM tasks WHERE parent_id = ANY(%s)", [ids]).fetchone()["n"] == 0
    desktop.locator('[data-testid="retry-selected"]').click()
    confirm_dialog(desktop, "Re-extract 3 completed documents?")
    expect(desktop.locator(".q-notification").filter(has_text="3 tasks")).to_have_count(1)
    assert conn.execute("SELECT count(*) AS n FROM tasks WHERE parent_id = ANY(%s)", [ids]).fetchone()["n"] == 3


def test_cancel_asks_first_stands_apart_from_retry_and_disabled_icons_look_disabled(desktop, app_server):
    server, conn = app_server
    [done] = completed_tasks(conn, "Apart Co", 1)
    waiting = queue.enqueue(conn, agent="documents", document_uri="/x/apart.pdf", customer="Apart Co")
    dashboard_for(desktop, server, customer="Apart%20Co")
    cancel = desktop.locator(f'[data-testid="cancel-{waiting.id}"]')
    cancel.click()
    expect(desktop.locator('[data-testid="confirm-body"]')).to_contain_text("Work in progress stops")
    confirm_dialog(desktop, "Cancel 1 task?", accept=False)
    assert queue.get_task(conn, waiting.id).status.value == "enqueued"
    # Retry and cancel of one row are apart, in different colours; the inapplicable one is grey and faint.
    retry_box = desktop.locator(f'[data-testid="retry-{waiting.id}"]').bounding_box()
    cancel_box = cancel.bounding_box()
    assert cancel_box["x"] - (retry_box["x"] + retry_box["width"]) >= 8
    style = "(el) => [getComputedStyle(el).color, Number(getComputedStyle(el).opacity)]"
    disabled_color, disabled_opacity = desktop.locator(f'[data-testid="cancel-{done}"]').evaluate(style)
    enabled_color, enabled_opacity = cancel.evaluate(style)
    assert disabled_opacity <= 0.5 < enabled_opacity
    assert disabled_color == "rgb(148, 163, 184)" and enabled_color != disabled_color
    bulk_retry = desktop.locator('[data-testid="retry-selected"]').bounding_box()
    bulk_cancel = desktop.locator('[data-testid="cancel-selected"]').bounding_box()
    assert bulk_cancel["x"] - (bulk_retry["x"] + bulk_retry["width"]) >= 16
    cancel.click()
    confirm_dialog(desktop, "Cancel 1 task?")
    expect(desktop.locator(f'[data-testid="status-{waiting.id}"]')).to_have_text("cancelled")


def test_dates_sit_on_one_line_as_relative_time_with_the_exact_time_on_hover(desktop, app_server):
    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="/x/dates.pdf", customer="Dates Co")
    dashboard_for(desktop, server, customer="Dates%20Co")
    cell = desktop.locator(f'[data-testid="created-{task.id}"]')
    expect(cell).to_have_text(re.compile(r"^(just now|\d+ s ago|\d+ min ago)$"))
    height, line = cell.evaluate("(el) => [el.getBoundingClientRect().height, "
                                 "parseFloat(getComputedStyle(el).lineHeight) || 20]")
    assert height < line * 1.5, "the date wraps"
    cell.hover()
    exact = task.created_at.strftime("%Y-%m-%d %H:%M:%S") + " UTC"
    expect(desktop.locator(".q-tooltip")).to_have_text(exact)


def test_filters_live_in_the_url_and_from_after_to_is_refused(desktop, app_server):
    server, conn = app_server
    completed_tasks(conn, "Url Co", 2)
    queue.enqueue(conn, agent="documents", document_uri="/x/url-wait.pdf", customer="Url Co")
    dashboard_for(desktop, server, customer="Url%20Co", status="completed")
    expect(desktop.locator('[data-testid="kpi-completed"]')).to_have_text("2")
    expect(desktop.locator('[data-testid="kpi-enqueued"]')).to_have_text("0")
    expect(desktop.locator('[data-testid="filter-status"]').locator("xpath=ancestor::label")).to_contain_text(
        "completed")
    # An edit shows in the address bar; a reload keeps it.
    desktop.locator('[data-testid="filter-date-from"]').fill("2020-01-01")
    desktop.wait_for_function("() => location.search.includes('from=2020-01-01')")
    desktop.reload()
    desktop.wait_for_function("() => window.did_handshake === true")
    expect(desktop.locator('[data-testid="filter-date-from"]')).to_have_value("2020-01-01")
    expect(desktop.locator('[data-testid="kpi-completed"]')).to_have_text("2")
    query = parse_qs(urlparse(desktop.url).query)
    assert (query["customer"], query["status"], query["from"]) == (["Url Co"], ["completed"], ["2020-01-01"])
    # "From" after "to": a message, and the figures stay as they were instead of dropping to zero.
    desktop.locator('[data-testid="filter-date-to"]').fill("2019-06-30")
    expect(desktop.locator('[data-testid="filter-error"]')).to_contain_text("is after")
    expect(desktop.locator('[data-testid="kpi-completed"]')).to_have_text("2")
    assert "to=" not in urlparse(desktop.url).query


def test_phone_dashboard_shows_cards_folds_the_filters_and_never_scrolls_sideways(phone, app_server):
    server, conn = app_server
    [done] = completed_tasks(conn, "Phone Co", 1)
    dashboard_for(phone, server, customer="Phone%20Co")
    card = phone.locator(f'[data-testid="card-{done}"]')
    expect(card).to_be_visible()
    # Status and actions come first on the card and are on screen.
    for testid in (f"status-{done}", f"retry-{done}", f"cancel-{done}"):
        box = card.locator(f'[data-testid="{testid}"]').bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], testid
    panel = phone.locator('[data-testid="filter-panel"]')
    expect(phone.locator('[data-testid="filter-date-from"]')).to_be_hidden()
    expect(panel).to_contain_text("1 active")
    panel.locator(".q-expansion-item__container > .q-item").click()
    expect(phone.locator('[data-testid="filter-date-from"]')).to_be_visible()
    assert page_width(phone) <= PHONE["width"]


def test_the_dashboard_follows_a_resize_between_table_and_cards(desktop, app_server):
    server, conn = app_server
    [done] = completed_tasks(conn, "Resize Co", 1)
    dashboard_for(desktop, server, customer="Resize%20Co")
    card = desktop.locator(f'[data-testid="card-{done}"]')
    expect(desktop.locator(f'[data-testid="status-{done}"]')).to_be_visible()
    expect(card).to_have_count(0)  # the table on a wide screen
    desktop.set_viewport_size(PHONE)
    expect(card).to_be_visible()
    expect(desktop.locator('[data-testid="filter-date-from"]')).to_be_hidden()  # the filters fold
    assert page_width(desktop) <= PHONE["width"]
    desktop.set_viewport_size(DESKTOP)
    expect(card).to_have_count(0)
    expect(desktop.locator(f'[data-testid="status-{done}"]')).to_be_visible()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_task_detail_truncates_a_long_name_with_a_tooltip_and_fits_the_screen(browser, app_server, viewport):
    server, conn = app_server
    task = queue.enqueue(conn, agent="documents", document_uri="/x/long.pdf", document_name=LONG_NAME, pages=1,
                         customer="Long Name Holdings International")
    page = open_page(browser, server, viewport)
    try:
        visit(page, f"{server.url}/tasks/{task.id}")
        link = page.locator('[data-testid="document-link"]')
        expect(link).to_have_text(LONG_NAME)
        overflowing = link.evaluate("(el) => el.scrollWidth > el.clientWidth && "
                                    "getComputedStyle(el).textOverflow === 'ellipsis'")
        assert overflowing, "the long name is not cut with an ellipsis"
        name_box, badge_box = link.bounding_box(), page.locator('[data-testid="task-status"]').bounding_box()
        overlaps = not (name_box["y"] + name_box["height"] <= badge_box["y"]
                        or badge_box["y"] + badge_box["height"] <= name_box["y"]
                        or name_box["x"] + name_box["width"] <= badge_box["x"]
                        or badge_box["x"] + badge_box["width"] <= name_box["x"])
        assert not overlaps, "the name overlaps the status badge"
        expect(page.locator('[data-testid="document-facts"]')).to_contain_text("· 1 page ·")
        link.hover()
        expect(page.locator(".q-tooltip")).to_have_text(LONG_NAME)
        assert page_width(page) <= viewport["width"]
    finally:
        page.context.close()



@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_task_detail_shows_each_fields_evidence_whole(browser, app_server, viewport):
    """Where a value was read is what an auditor checks it by: beside a wide field (line items) it
    wraps in its column, never cut to a few characters; a narrow screen scrolls the fields sideways."""
    server, conn = app_server
    queue.configure_agent(conn, "evidence")
    task = queue.enqueue(conn, agent="evidence", document_uri="/x/evidence.pdf", document_name="evidence.pdf")
    [claim] = queue.claim(conn, agent="evidence", worker_id="w-evidence")
    quote = "Rechnungsnummer RE-2024-000318 vom 12.03.2024, Kundennummer 48213"
    line = {"description": "Manutenzione impianto di climatizzazione e sostituzione filtri", "quantity": 1.0,
            "unit_price": 1350.0, "amount": 1350.0}
    queue.apply_callback(conn, claim.attempt_id, {
        "status": "completed", "confidence": 0.95,
        "result": {"document_type": "invoice", "extractor": "offline", "model": None, "pages": 1, "fields": {
            "invoice_number": {"value": "RE-2024-000318", "confidence": 0.95, "stage": "rules",
                               "evidence": {"page": 1, "bbox": [90.0, 120.5, 300.0, 131.0], "text": quote}},
            "line_items": {"value": [line, line], "confidence": 1.0}}}})
    page = open_page(browser, server, viewport)
    try:
        visit(page, f"{server.url}/tasks/{task.id}")
        evidence = page.locator('[data-testid="evidence-invoice_number"] .q-label, '
                                '[data-testid="evidence-invoice_number"] div').first
        expect(evidence).to_have_text(f"p. 1 · “{quote}”")
        clipped = evidence.evaluate("(el) => el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1")
        assert not clipped, "the evidence is cut short"
        frame = page.locator('[data-testid="result-fields"]').locator("xpath=..")
        if viewport == DESKTOP:  # the fields fit the card: nothing is hidden to the right
            assert frame.evaluate("(el) => el.scrollWidth <= el.clientWidth + 1"), "the fields overflow their card"
        evidence.scroll_into_view_if_needed()  # on a phone, sideways within the card
        box, frame_box = evidence.bounding_box(), frame.bounding_box()
        assert frame_box["x"] - 1 <= box["x"] and box["x"] + box["width"] <= frame_box["x"] + frame_box["width"] + 1, \
            "the evidence lies outside the fields' frame"
        expect(page.locator('[data-testid="result-fields"]')).to_contain_text("2 lines")
        expect(page.locator('[data-testid="result-fields"]')).to_contain_text("sostituzione filtri")
        assert page_width(page) <= viewport["width"]
    finally:
        page.context.close()

def test_dark_mode_is_a_toggle_that_is_remembered(desktop, app_server):
    server, _ = app_server
    visit(desktop, f"{server.url}/dashboard")
    is_dark = "() => document.body.classList.contains('body--dark')"
    assert desktop.evaluate(is_dark) is False
    desktop.locator('[data-testid="dark-toggle"]').click()
    desktop.wait_for_function(is_dark)
    desktop.reload()
    desktop.wait_for_function("() => window.did_handshake === true")
    assert desktop.evaluate(is_dark) is True
    visit(desktop, f"{server.url}/")
    assert desktop.evaluate(is_dark) is True
    desktop.locator('[data-testid="dark-toggle"]').click()
    desktop.wait_for_function("() => !document.body.classList.contains('body--dark')")


def test_api_docs_render_without_internet(browser, app_server):
    server, _ = app_server
    context = browser.new_context(viewport=DESKTOP)
    outside: list[str] = []

    def only_local(route) -> None:
        if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()
    context.route("**/*", only_local)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/login?token={TOKEN}")  # the docs are for signed-in callers
        page.goto(f"{server.url}/docs")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("Quire API")
        expect(page.locator(".opblock-summary-path").filter(has_text="/api/tasks").first).to_be_visible()
        assert outside == [], f"the docs reached outside: {outside}"
    finally:
        context.close()


@pytest.mark.parametrize("path", ["/tasks/abc", "/tasks/999999"])
def test_a_missing_task_is_a_404_page_not_raw_json(desktop, app_server, path):
    server, _ = app_server
    response = desktop.goto(f"{server.url}{path}")
    assert response.status == 404
    expect(desktop.locator('[data-testid="not-found"]')).to_contain_text("no such task")
    expect(desktop.locator('[data-testid="not-found"]').get_by_role("link")).to_have_attribute("href", "/dashboard")
    expect(desktop.locator("header")).to_be_visible()


def test_the_header_names_the_operator_once_and_no_connection_popup_at_start(browser, app_server):
    server, _ = app_server
    context = browser.new_context(viewport=DESKTOP)
    context.add_init_script(POPUP_WATCH)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/login?token={TOKEN}")
        visit(page, f"{server.url}/dashboard")
        page.wait_for_function("() => window.__looks > 150", timeout=30_000)
        assert page.evaluate("window.__popupSeen") is False, "the connection-lost popup showed at start"
        header = page.locator("header").inner_text()
        assert header.lower().count("operator") == 1, header
        expect(page.locator('[data-testid="live-indicator"]')).to_have_text("live")
    finally:
        context.close()


def test_the_response_time_histogram_has_whole_number_ticks(desktop, app_server):
    server, conn = app_server
    completed_tasks(conn, "Ticks Co", 3)
    dashboard_for(desktop, server, customer="Ticks%20Co")
    desktop.wait_for_function("() => document.querySelectorAll('[data-testid=chart-latency] .ytick text').length > 1")
    ticks = desktop.evaluate("() => [...document.querySelectorAll('[data-testid=chart-latency] .ytick text')]"
                             ".map(t => t.textContent)")
    assert ticks and all(re.fullmatch(r"[\d,]+", t) for t in ticks), ticks


def _drop(page: Page, *files: tuple[str, bytes]) -> None:
    page.evaluate(DROP_FILES, [{"name": n, "b64": base64.b64encode(d).decode()} for n, d in files])


def test_upload_messages_and_the_drop_zone(desktop, app_server):
    server, conn = app_server
    visit(desktop, f"{server.url}/")
    # A file dragged over the zone lights it up in blue; it does not grey out.
    overlay = desktop.evaluate("""async () => {
      const transfer = new DataTransfer();
      transfer.items.add(new File([new Uint8Array([37, 80, 68, 70])], 'x.pdf', {type: 'application/pdf'}));
      document.querySelector('.q-uploader').dispatchEvent(
        new DragEvent('dragover', {dataTransfer: transfer, bubbles: true, cancelable: true}));
      for (let i = 0; i < 100 && !document.querySelector('.q-uploader__dnd'); i++) {
        await new Promise(r => setTimeout(r, 20));
      }
      const dnd = document.querySelector('.q-uploader__dnd');
      const style = getComputedStyle(dnd);
      const result = [style.backgroundColor, style.outlineColor];
      dnd.dispatchEvent(new DragEvent('dragleave', {bubbles: true}));
      return result;
    }""")
    assert overlay == ["rgba(37, 99, 235, 0.1)", "rgb(37, 99, 235)"], overlay
    one_page = make_pdf("upload messages one page")
    _drop(desktop, ("one-page.pdf", one_page), ("no-pages.pdf", no_pages_pdf()), ("notes.pdf", b"plain text"))
    rows = desktop.locator('[data-testid="batch-row"]')
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="one-page.pdf").locator('[data-testid="file-message"]')).to_contain_text(
        re.compile(r"^1 page · task \d+"))
    expect(rows.filter(has_text="no-pages.pdf").locator('[data-testid="file-message"]')).to_have_text(
        "the PDF has no pages")
    expect(desktop.locator(".q-notification.bg-warning")).to_have_count(1)  # "1 of 3 files queued, 2 rejected"
    # The same file again is offered; running it again leaves no outdated warning on screen.
    _drop(desktop, ("one-page.pdf", one_page))
    again = rows.nth(3)
    expect(again.locator('[data-testid="file-status"]')).to_have_text("already submitted")
    again.locator('[data-testid="run-again"]').click()
    expect(again.locator('[data-testid="file-status"]')).to_have_text("enqueued")
    expect(desktop.locator(".q-notification").filter(has_text="queued again as task")).to_have_count(1)
    expect(desktop.locator(".q-notification.bg-warning")).to_have_count(0)
    new_id = int(re.search(r"task (\d+)", again.locator('[data-testid="file-message"]').inner_text()).group(1))
    first_id = int(re.search(r"task (\d+)", rows.first.locator('[data-testid="file-message"]').inner_text()).group(1))
    assert queue.get_task(conn, new_id).parent_id == first_id


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_every_page_fits_the_screen_in_either_theme(browser, app_server, viewport, theme):
    server, conn = app_server
    [task_id] = completed_tasks(conn, f"Fit {viewport['width']} {theme}", 1)
    page = open_page(browser, server, viewport)
    try:
        visit(page, f"{server.url}/")
        if theme == "dark":
            page.locator('[data-testid="dark-toggle"]').click()
            page.wait_for_function("() => document.body.classList.contains('body--dark')")
        card_background = "rgb(17, 26, 43)" if theme == "dark" else "rgb(255, 255, 255)"
        for path in ("/", "/dashboard", f"/tasks/{task_id}", "/review"):
            visit(page, f"{server.url}{path}")
            if path == "/dashboard" and viewport is PHONE:
                expect(page.locator(f'[data-testid="card-{task_id}"]')).to_be_attached()
            assert page_width(page) <= viewport["width"], f"{path} scrolls sideways"
            background = page.locator(".quire-card").first.evaluate("(el) => getComputedStyle(el).backgroundColor")
            assert background == card_background, (path, background)
            expect(page.locator('[data-testid="live-indicator"]')).to_be_visible()
    finally:
        page.context.close()


def test_signing_in_from_a_shared_link_keeps_its_filters(browser, app_server):
    server, conn = app_server
    completed_tasks(conn, "Link Co", 2)
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/dashboard?customer=Link%20Co&status=completed")
        assert urlparse(page.url).path == "/login"  # one middleware guards every page
        page.locator('[data-testid="login-token"]').fill(TOKEN)
        page.locator('[data-testid="login-submit"]').click()
        page.wait_for_function("() => location.pathname === '/dashboard' && window.did_handshake === true")
        assert parse_qs(urlparse(page.url).query) == {"customer": ["Link Co"], "status": ["completed"]}
        expect(page.locator('[data-testid="kpi-completed"]')).to_have_text("2")
    finally:
        context.close()
