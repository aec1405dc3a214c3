"""The pages in Debian's Chromium: drag-and-drop upload, live dashboard, filters, table actions,
the live/polling indicator, task detail and sign-in."""

from __future__ import annotations

import base64
import time

import psycopg
import pytest
from playwright.sync_api import Page, expect

from schema import queue
from tests.e2e.app_harness import TOKEN, complete, make_pdf
from tests.e2e.browser_helpers import DROP_FILES, confirm_dialog, visit

TEXT_IS = "([sel, want]) => { const el = document.querySelector(sel); return !!el && el.innerText.trim() === want; }"
CHART_DATA = "(sel) => JSON.stringify((document.querySelector(sel).data || []).map(t => [t.x, t.y]))"
KPIS = ["enqueued", "processing", "completed", "failed", "cancelled", "tokens", "llm-cost", "median-latency",
        "confidence"]
CHARTS = ["throughput", "cost_agent", "cost_customer", "latency", "confidence"]


@pytest.fixture
def page(browser, app_server) -> Page:
    server, _ = app_server
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto(f"{server.url}/login?token={TOKEN}")
    yield page
    context.close()


def kpi(page: Page, name: str) -> int:
    return int(page.locator(f'[data-testid="kpi-{name}"]').inner_text().replace(",", ""))


def wait_kpi(page: Page, name: str, value: int, timeout_ms: int = 15_000) -> None:
    """Waits for a figure to show a value: that the update arrives, not how fast (bench/events.py)."""
    page.wait_for_function(TEXT_IS, arg=[f'[data-testid="kpi-{name}"]', f"{value:,}"], timeout=timeout_ms)


def choose(page: Page, testid: str, option: str) -> None:
    """Picks one option of a multiple select, leaving only that one selected."""
    field = page.locator(f'[data-testid="{testid}"]')
    clear = page.locator(".q-select", has=field).locator(".q-field__focusable-action")  # shown once a value is set
    if clear.count():
        clear.first.click()
    field.click()
    page.locator(".q-menu .q-item", has_text=option).first.click()
    page.keyboard.press("Escape")


def test_drop_several_pdfs_with_one_bad(page, app_server):
    server, conn = app_server
    visit(page, f"{server.url}/")
    page.locator('[data-testid="upload-customer"]').fill("Drop Co")
    files = [{"name": f"{n}.pdf", "b64": base64.b64encode(make_pdf(n, pages=i + 1)).decode()}
             for i, n in enumerate(["alpha", "beta", "gamma"])]
    files.insert(2, {"name": "broken.pdf", "b64": base64.b64encode(b"this is not a pdf").decode()})
    page.evaluate(DROP_FILES, files)
    rows = page.locator('[data-testid="batch-row"]')
    expect(rows).to_have_count(4)
    broken = rows.filter(has_text="broken.pdf")
    expect(broken.locator('[data-testid="file-status"]')).to_have_text("rejected")
    expect(broken.locator('[data-testid="file-message"]')).to_contain_text("not a PDF")
    expect(rows.filter(has_text="gamma.pdf").locator('[data-testid="file-message"]')).to_contain_text("3 pages")
    tasks = {t.document_name: t for t in (queue.get_task(conn, i) for i in range(1, 4))}
    assert set(tasks) == {"alpha.pdf", "beta.pdf", "gamma.pdf"}
    assert {(t.customer, t.submitted_by, t.priority) for t in tasks.values()} == {("Drop Co", "operator", 5)}
    # Stored and held under review until the forecast is submitted: nothing is claimable before.
    assert queue.claim(conn, agent="documents", worker_id="w-drop", limit=3) == []
    page.locator('[data-testid="forecast-submit"]').click()
    expect(page.locator('[data-testid="forecast-state"]')).to_have_text("submitted")
    # The batch follows its tasks live: a completed task shows up without a reload.
    claims = queue.claim(conn, agent="documents", worker_id="w-drop", limit=3)
    complete(conn, next(c.attempt_id for c in claims if c.task.document_name == "alpha.pdf"))
    expect(rows.filter(has_text="alpha.pdf").locator('[data-testid="file-status"]')).to_have_text("completed")
    expect(page.locator('[data-testid="batch-summary"]')).to_contain_text("1 rejected")
    # Dropping a file again offers the earlier task instead of running it twice.
    page.evaluate(DROP_FILES, files[:1])
    again = rows.nth(4)
    expect(again.locator('[data-testid="file-status"]')).to_have_text("already submitted")
    again.locator('[data-testid="run-again"]').click()
    expect(again.locator('[data-testid="file-status"]')).to_have_text("enqueued")


def test_dashboard_counts_follow_each_state_change(page, app_server):
    server, conn = app_server
    visit(page, f"{server.url}/dashboard")
    expect(page.locator('[data-testid="live-indicator"]')).to_have_text("live")
    page.evaluate("window.__sameDocument = true")
    queue.configure_agent(conn, "live")  # claims of an agent of its own take exactly this test's task
    start = {name: kpi(page, name) for name in ("enqueued", "processing", "completed", "cancelled")}
    queue.enqueue(conn, agent="live", document_uri="/x/live.pdf", customer="Live Co")
    wait_kpi(page, "enqueued", start["enqueued"] + 1)
    [claim] = queue.claim(conn, agent="live", worker_id="w-live", limit=5)
    wait_kpi(page, "processing", start["processing"] + 1)
    wait_kpi(page, "enqueued", start["enqueued"])
    complete(conn, claim.attempt_id)
    wait_kpi(page, "completed", start["completed"] + 1)
    other = queue.enqueue(conn, agent="live", document_uri="/x/live2.pdf", customer="Live Co")
    wait_kpi(page, "enqueued", start["enqueued"] + 1)
    queue.cancel(conn, other.id, actor="test")
    wait_kpi(page, "cancelled", start["cancelled"] + 1)
    assert page.evaluate("window.__sameDocument") is True


def _figures(page: Page) -> dict[str, str]:
    values = {name: page.locator(f'[data-testid="kpi-{name}"]').inner_text() for name in KPIS}
    values.update({f"chart-{c}": page.evaluate(CHART_DATA, f'[data-testid="chart-{c}"]') for c in CHARTS})
    values["compute"] = page.locator('[data-testid="kpi-compute-cost"]').inner_text()
    values["table"] = page.locator('[data-testid="task-table"] tbody').inner_text()
    return values


def _fetch_compute(page: Page) -> None:
    page.locator('[data-testid="fetch-compute"]').click()
    expect(page.locator('[data-testid="kpi-compute-cost"]')).to_contain_text("$")


def test_a_filter_changes_every_figure(page, app_server):
    server, conn = app_server
    shapes = {"Filter A": dict(enqueued=1, processing=1, completed=2, failed=1, cancelled=1, confidence=0.95,
                               tokens=(900, 100), cost=0.002, compute=0.01, slow=False),
              "Filter B": dict(enqueued=2, processing=2, completed=3, failed=2, cancelled=2, confidence=0.4,
                               tokens=(5000, 800), cost=0.03, compute=0.05, slow=True)}
    for customer, shape in shapes.items():
        agent = f"agent-{customer[-1].lower()}"
        queue.configure_agent(conn, agent)
        n = sum(shape[s] for s in ("enqueued", "processing", "completed", "failed", "cancelled"))
        ids = [queue.enqueue(conn, agent=agent, document_uri=f"/f/{customer}-{i}.pdf", customer=customer).id
               for i in range(n)]
        claims = queue.claim(conn, agent=agent, worker_id="w-filter", limit=n - shape["enqueued"])
        if shape["slow"]:
            time.sleep(1.1)  # B's documents take over a second: a different response time
        done = claims[:shape["completed"]]
        failed = claims[shape["completed"]:shape["completed"] + shape["failed"]]
        cancelled = claims[len(done) + len(failed):len(done) + len(failed) + shape["cancelled"]]
        for c in done:
            complete(conn, c.attempt_id, confidence=shape["confidence"], tokens=shape["tokens"], cost=shape["cost"])
            queue.record_compute(conn, c.attempt_id, compute_seconds=3.0, compute_cost_usd=shape["compute"])
        for c in failed:
            queue.apply_callback(conn, c.attempt_id, {"status": "failed", "error": "unreadable", "retryable": False})
        for c in cancelled:
            queue.cancel(conn, c.task.id, actor="test")
        assert len(ids) == n
    visit(page, f"{server.url}/dashboard")
    choose(page, "filter-customer", "Filter A")
    wait_kpi(page, "completed", 2, timeout_ms=15_000)
    wait_kpi(page, "enqueued", 1, timeout_ms=15_000)
    _fetch_compute(page)
    page.wait_for_function("(sel) => (document.querySelector(sel).data || []).length > 0",
                           arg='[data-testid="chart-confidence"]')
    first = _figures(page)
    choose(page, "filter-customer", "Filter B")
    wait_kpi(page, "completed", 3, timeout_ms=15_000)
    page.wait_for_function("(prev) => " + CHART_DATA.split("=> ", 1)[1].replace("sel", "'[data-testid=\"chart-confidence\"]'")
                           + " !== prev", arg=first["chart-confidence"])
    expect(page.locator('[data-testid="kpi-compute-cost"]')).to_have_text("—")
    _fetch_compute(page)
    second = _figures(page)
    unchanged = [name for name in first if first[name] == second[name]]
    assert not unchanged, f"figures that did not follow the filter: {unchanged}"
    assert (first["confidence"], second["confidence"]) == ("95%", "40%")


def test_retry_and_cancel_from_the_table(page, app_server):
    server, conn = app_server
    queue.configure_agent(conn, "table")
    waiting = queue.enqueue(conn, agent="table", document_uri="/t/wait.pdf", customer="Table Co")
    broken = queue.enqueue(conn, agent="table", document_uri="/t/broken.pdf", customer="Table Co")
    bulk = [queue.enqueue(conn, agent="table", document_uri=f"/t/bulk{i}.pdf", customer="Table Co") for i in range(2)]
    claim = next(c for c in queue.claim(conn, agent="table", worker_id="w-t", limit=10) if c.task.id == broken.id)
    for c in queue.claim(conn, agent="table", worker_id="w-t", limit=10):
        queue.hand_back(conn, c.attempt_id)
    queue.apply_callback(conn, claim.attempt_id, {"status": "failed", "error": "scan unreadable", "retryable": False})
    visit(page, f"{server.url}/dashboard")
    choose(page, "filter-customer", "Table Co")
    status = lambda task: page.locator(f'[data-testid="status-{task.id}"]')  # noqa: E731
    expect(status(broken)).to_have_text("failed")
    page.locator(f'[data-testid="cancel-{waiting.id}"]').click()
    confirm_dialog(page, "Cancel 1 task?")
    expect(status(waiting)).to_have_text("cancelled")
    page.locator(f'[data-testid="retry-{broken.id}"]').click()
    confirm_dialog(page, "Run 1 failed or cancelled task again?")
    expect(status(broken)).to_have_text("enqueued")
    assert queue.get_task(conn, waiting.id).cancelled_by == "operator"
    assert queue.get_task(conn, broken.id).retried_by == "operator"
    for task in bulk:
        page.locator("tr", has=status(task)).locator(".q-checkbox").click()
    expect(page.locator('[data-testid="cancel-selected"]')).to_be_enabled()
    page.locator('[data-testid="cancel-selected"]').click()
    confirm_dialog(page, "Cancel 2 tasks?")
    for task in bulk:
        expect(status(task)).to_have_text("cancelled")
    assert {queue.get_task(conn, t.id).status.value for t in bulk} == {"cancelled"}


def test_indicator_falls_back_to_polling_and_returns_to_live(page, app_server):
    server, conn = app_server
    visit(page, f"{server.url}/dashboard")
    indicator = page.locator('[data-testid="live-indicator"]')
    expect(indicator).to_have_text("live")
    # Every text the indicator shows is recorded in the page, however briefly it shows it: on a
    # busy machine the 2 s before the first reconnect can pass between two looks of the test.
    page.evaluate("""() => {
        window.quireIndicator = [];
        const read = () => {
            const text = document.querySelector('[data-testid="live-indicator"]')?.textContent.trim();
            if (text && text !== window.quireIndicator.at(-1)) window.quireIndicator.push(text);
        };
        read();
        new MutationObserver(read).observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")
    dbname = conn.info.dbname
    with psycopg.connect(server.dsn, autocommit=True) as admin:
        killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE application_name = 'quire-listen' AND datname = %s", [dbname]).fetchall()
    assert killed == [(True,)]
    page.wait_for_function("() => window.quireIndicator.includes('polling')", timeout=20_000)
    expect(indicator).to_have_text("live", timeout=20_000)
    shown = page.evaluate("() => window.quireIndicator")
    assert shown[:2] == ["live", "polling"] and shown[-1] == "live", shown
    before = kpi(page, "enqueued")
    queue.enqueue(conn, agent="documents", document_uri="/x/after-reconnect.pdf")
    wait_kpi(page, "enqueued", before + 1)


def test_task_detail_shows_attempts_result_and_timeline(page, app_server):
    server, conn = app_server
    queue.configure_agent(conn, "detail")
    task = queue.enqueue(conn, agent="detail", document_uri="/x/detail.pdf", document_name="detail.pdf",
                         customer="Detail Co")
    [claim] = queue.claim(conn, agent="detail", worker_id="w-detail", limit=5)
    visit(page, f"{server.url}/tasks/{task.id}")
    expect(page.locator('[data-testid="task-status"]')).to_have_text("processing")
    complete(conn, claim.attempt_id, confidence=0.87)
    expect(page.locator('[data-testid="task-status"]')).to_have_text("completed")
    expect(page.locator('[data-testid="result-fields"]')).to_contain_text(f"INV-{claim.attempt_id}")
    # Each field shows where on the document it was read.
    expect(page.locator('[data-testid="evidence-invoice_number"]')).to_contain_text(f"p. 1 · “INV-{claim.attempt_id}”")
    expect(page.locator('[data-testid="attempts"]')).to_contain_text(f"tr-{claim.attempt_id}")
    expect(page.locator('[data-testid="timeline"]')).to_contain_text("completed")
    assert page.locator('[data-testid="document-link"]').get_attribute("href") == f"/api/tasks/{task.id}/document"


def test_a_low_confidence_result_is_flagged_for_review(page, app_server):
    server, conn = app_server
    queue.configure_agent(conn, "review")
    doubtful = queue.enqueue(conn, agent="review", document_uri="/x/doubt.pdf", customer="Review Co")
    sure = queue.enqueue(conn, agent="review", document_uri="/x/sure.pdf", customer="Review Co")
    claims = {c.task.id: c for c in queue.claim(conn, agent="review", worker_id="w-review", limit=5)}
    complete(conn, claims[doubtful.id].attempt_id, confidence=0.42)
    complete(conn, claims[sure.id].attempt_id, confidence=0.93)
    visit(page, f"{server.url}/tasks/{doubtful.id}")
    expect(page.locator('[data-testid="task-status"]')).to_have_text("completed")
    expect(page.locator('[data-testid="task-needs-review"]')).to_have_text("needs review")
    visit(page, f"{server.url}/tasks/{sure.id}")
    expect(page.locator('[data-testid="task-status"]')).to_have_text("completed")
    expect(page.locator('[data-testid="task-needs-review"]')).to_have_count(0)
    with server.operator() as http:
        flagged = http.get("/api/summary", params={"customer": "Review Co", "needs_review": "true"}).json()
        both = http.get("/api/summary", params={"customer": "Review Co"}).json()
    assert (flagged["total"], both["total"]) == (1, 2)


def test_sign_in_with_the_token(browser, app_server):
    server, _ = app_server
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/dashboard")
    expect(page).to_have_url(f"{server.url}/login?next=/dashboard")
    page.locator('[data-testid="login-token"]').fill("not-it")
    page.locator('[data-testid="login-submit"]').click()
    expect(page.locator('[data-testid="login-error"]')).to_have_text("That is not the operator token.")
    page.locator('[data-testid="login-token"]').fill(TOKEN)
    page.locator('[data-testid="login-submit"]').click()
    expect(page).to_have_url(f"{server.url}/dashboard")
    expect(page.locator('[data-testid="identity"]')).to_have_text("operator")
    context.close()


def test_e_invoices_are_taken_and_a_page_xml_mismatch_shows_on_the_task(page, app_server, tmp_path):
    from agents.extract import extract_document
    from tests.unit.agents import einvoice_samples as einvoices

    server, conn = app_server
    visit(page, f"{server.url}/")
    page.locator('[data-testid="upload-review"]').click()  # run at once, no forecast to release
    files = [{"name": "fattura.xml", "b64": base64.b64encode(einvoices.fatturapa_xml()).decode()},
             {"name": "order.xml", "b64": base64.b64encode(einvoices.NOT_AN_INVOICE_XML).decode()}]
    page.evaluate(DROP_FILES, files)
    rows = page.locator('[data-testid="batch-row"]')
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="fattura.xml").locator('[data-testid="file-message"]')).to_contain_text(
        "FatturaPA e-invoice · task")
    expect(rows.filter(has_text="order.xml").locator('[data-testid="file-message"]')).to_contain_text(
        "not an e-invoice")
    # What the agent reports for a Factur-X PDF whose page shows another total than its XML.
    planted = tmp_path / "planted.pdf"
    planted.write_bytes(einvoices.planted_pdf())
    result = extract_document(str(planted))
    result.pop("usage")
    queue.configure_agent(conn, "audit")
    task = queue.enqueue(conn, agent="audit", document_uri=str(planted), document_name="planted.pdf")
    [claim] = queue.claim(conn, agent="audit", worker_id="w-audit", limit=1)
    queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "confidence": 0.9, "result": result,
                                                  "input_tokens": 0, "output_tokens": 0})
    visit(page, f"{server.url}/tasks/{task.id}")
    expect(page.locator('[data-testid="result-source"]')).to_have_text("e-invoice XML · Factur-X · EN 16931")
    expect(page.locator('[data-testid="result-finding"]').filter(has_text="Total")).to_have_text(
        "Total: the e-invoice XML states 1,440.00, the page shows 1,540.00")
