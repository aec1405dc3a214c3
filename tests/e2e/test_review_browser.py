"""The review page in a real browser, signed in as a reviewer behind Databricks Apps: a batch of 20
documents reviewed with the keyboard alone at 1440 px (the export holds the corrections), text
picked from the page with a click, and the phone view at 390 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from schema import queue
from tests.e2e.app_harness import start_app
from tests.e2e.browser_helpers import DESKTOP, PHONE, page_width
from tests.review_fixtures import invoice_lines, make_reviewable

REVIEWER = "ann@example.com"
VIEWER = "vic@example.com"
AGENT = "documents"


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory,
                                       DATABRICKS_APP_NAME="quire-e2e", QUIRE_REVIEWERS=f"{REVIEWER}, rob@example.com")
    queue.configure_agent(conn, AGENT, settings={"review_sample": 0.0})
    yield server, conn, tmp_path_factory.mktemp("review-docs")
    teardown()


def open_as(browser, server, email: str, viewport: dict):
    context = browser.new_context(viewport=viewport, extra_http_headers={"X-Forwarded-Email": email})
    context.set_default_timeout(20_000)
    return context, context.new_page()


def wait_ready(page, task_id: int | None = None) -> None:
    page.wait_for_function("() => window.did_handshake === true")
    if task_id is not None:
        expect(page.locator('[data-testid="review-document"]')).to_have_text(f"rechnung-{task_id}.pdf")


def correct_total(n: int) -> str:
    return next(text for name, text, _ in invoice_lines(n) if name == "total").split(": ")[1]


def test_a_reviewer_works_through_a_batch_with_the_keyboard_alone(browser, app_server, screenshots):
    server, conn, docs = app_server
    numbers = list(range(101, 121))
    for n in numbers:
        make_reviewable(conn, n, agent=AGENT, low=("total",), directory=docs,
                        wrong={"total": 1.0} if n % 4 == 0 else None)
    context, page = open_as(browser, server, REVIEWER, DESKTOP)
    try:
        page.goto(f"{server.url}/review")
        wait_ready(page)
        expect(page.locator('[data-testid="review-keys"]')).to_contain_text("approve, open next")
        done: set[int] = set()
        for step in range(len(numbers)):
            name = page.locator('[data-testid="review-document"]')
            expect(name).to_have_text(re.compile(r"rechnung-\d+\.pdf"))
            n = int(re.search(r"\d+", name.inner_text()).group())
            assert n not in done
            expect(page.locator('[data-testid="field-issuer"]')).to_have_class(re.compile("selected"))
            if step == 0:
                # The page image is drawn with the selected field's box over it.
                expect(page.locator('[data-testid="page-image"] img')).to_be_visible()
                expect(page.locator('[data-testid="page-image"] rect.quire-box-active')).to_have_count(1)
                page.screenshot(path=str(screenshots / "review-1440-light.png"))
            if n % 5 == 0:
                page.keyboard.press("Shift+R")
                note = page.locator('[data-testid="reject-note"]')
                expect(note).to_be_focused()
                page.keyboard.type("duplicate of an earlier invoice")
                page.keyboard.press("Enter")
            else:
                if n % 4 == 0:
                    for _ in range(6):  # issuer -> total
                        page.keyboard.press("j")
                    expect(page.locator('[data-testid="field-total"]')).to_have_class(re.compile("selected"))
                    page.keyboard.press("Enter")
                    field = page.locator('[data-testid="input-total"]')
                    expect(field).to_be_focused()
                    page.keyboard.press("Control+A")
                    page.keyboard.type("12x")  # refused: not an amount
                    page.keyboard.press("Enter")
                    expect(page.locator('[data-testid="error-total"]')).to_contain_text("1.234,56")
                    page.keyboard.press("Control+A")
                    page.keyboard.type(correct_total(n))
                    page.keyboard.press("Enter")
                    expect(page.locator('[data-testid="note-total"]')).to_contain_text("corrected")
                else:
                    page.keyboard.press("Space")  # accept the first field
                    expect(page.locator('[data-testid="note-issuer"]')).to_have_text("accepted")
                page.keyboard.press("Control+Enter")
            done.add(n)
            if step < len(numbers) - 1:
                expect(page.locator('[data-testid="review-document"]')).not_to_have_text(f"rechnung-{n}.pdf")
        expect(page.locator('[data-testid="review-empty"]')).to_be_visible()
        expect(page.locator('[data-testid="review-count"]')).to_contain_text("20 reviewed this session")
    finally:
        context.close()
    assert done == set(numbers)

    with server.client(**{"X-Forwarded-Email": REVIEWER}) as http:
        exported = {row["task_id"]: row for row in http.get("/api/review/export.json").json()}
        csv = http.get("/api/review/export.csv").text
    by_number = {int(re.search(r"\d+", r["document_name"]).group()): r for r in exported.values()}
    assert sorted(by_number) == [n for n in numbers if n % 5]
    for n, row in by_number.items():
        assert row["approved_by"] == REVIEWER
        expected_total = next(v for name, _, v in invoice_lines(n) if name == "total")
        assert row["fields"]["total"] == expected_total
        assert row["corrected_fields"] == (["total"] if n % 4 == 0 else [])
    assert csv.splitlines()[0].startswith("review_id,task_id,agent,customer,document_name,document_type,approved_by")
    assert sum(REVIEWER in line for line in csv.splitlines()) == len(by_number)
    # The dashboard shows what the corrections teach, counted from the trail.
    context, page = open_as(browser, server, REVIEWER, DESKTOP)
    try:
        page.goto(f"{server.url}/dashboard")
        page.wait_for_function("() => window.did_handshake === true")
        expect(page.locator('[data-testid="review-kpi-approved"]')).to_have_text(str(len(by_number)))
        rates = page.locator('[data-testid="review-field-rates"]')
        corrected = sum(1 for n in by_number if n % 4 == 0)
        share = round(100 * corrected / len(by_number))
        expect(rates.get_by_role("row", name=f"total {len(by_number)} {corrected} {share}%", exact=True)).to_have_count(1)
        expect(page.locator('[data-testid="review-accuracy"]')).to_contain_text("documents · offline · none")
        task_id = exported[next(iter(exported))]["task_id"]
        page.goto(f"{server.url}/tasks/{task_id}")
        expect(page.locator('[data-testid="review-history"]')).to_contain_text(f"approved by {REVIEWER}")
    finally:
        context.close()
    rejected = conn.execute("SELECT count(*) AS n FROM reviews WHERE status = 'rejected' AND decided_by = %s "
                            "AND decision_note = 'duplicate of an earlier invoice'", (REVIEWER,)).fetchone()["n"]
    assert rejected == 4


def test_clicking_text_on_the_page_fills_the_selected_field(browser, app_server):
    server, conn, docs = app_server
    task_id = make_reviewable(conn, 201, agent=AGENT, low=("total",), wrong={"total": 2.0}, directory=docs)
    context, page = open_as(browser, server, REVIEWER, DESKTOP)
    try:
        page.goto(f"{server.url}/review/{task_id}")
        wait_ready(page)
        page.locator('[data-testid="field-total"]').click()
        expect(page.locator('[data-testid="page-image"] rect.quire-box-active')).to_have_attribute("data-field", "total")
        evidence = conn.execute("SELECT result -> 'fields' -> 'total' -> 'evidence' -> 'bbox' AS b, "
                                "result -> 'page_sizes' -> 0 AS s FROM tasks WHERE id = %s", (task_id,)).fetchone()
        (_x0, y0, x1, y1), (width, _) = evidence["b"], evidence["s"]
        image = page.locator('[data-testid="page-image"] img')
        box = image.bounding_box()
        scale = box["width"] / width
        # The amount is the last word of "Gesamt: 1.442,42": click near the right end of the box.
        image.click(position={"x": (x1 - 8) * scale, "y": (y0 + y1) / 2 * scale})
        field = page.locator('[data-testid="input-total"]')
        expect(field).to_have_value(correct_total(201))
        expect(field).to_be_focused()  # the value and the focus arrive apart; Enter needs the focus
        page.keyboard.press("Enter")
        expect(page.locator('[data-testid="note-total"]')).to_contain_text("corrected")
    finally:
        context.close()
    trail = conn.execute("SELECT field, old_value, new_value, actor FROM review_corrections c "
                         "JOIN reviews r ON r.id = c.review_id WHERE r.task_id = %s", (task_id,)).fetchall()
    expected = next(v for name, _, v in invoice_lines(201) if name == "total")
    assert [(t["field"], t["old_value"], t["new_value"], t["actor"]) for t in trail] == [("total", 2.0, expected, REVIEWER)]


def test_the_phone_view_is_read_only_with_approve_and_reject(browser, app_server, screenshots):
    server, conn, docs = app_server
    first = make_reviewable(conn, 301, agent=AGENT, low=("total",), directory=docs)
    second = make_reviewable(conn, 302, agent=AGENT, low=("total",), directory=docs)
    context, page = open_as(browser, server, "rob@example.com", PHONE)
    try:
        page.goto(f"{server.url}/review/{first}")
        wait_ready(page)
        phone = page.locator('[data-testid="review-phone"]')
        expect(phone).to_be_visible()
        expect(page.locator('[data-testid="review-approve"]')).to_be_hidden()
        expect(page.locator('[data-testid="input-total"]')).to_be_hidden()
        expect(phone.locator('[data-testid="phone-invoice_number"]')).to_have_text("RE-2024-301")
        expect(phone.locator('[data-testid="phone-total"]')).to_have_text(correct_total(301))
        assert page_width(page) <= PHONE["width"]
        page.screenshot(path=str(screenshots / "review-390-light.png"), full_page=True)
        page.locator('[data-testid="phone-approve"]').click()
        expect(page.locator('[data-testid="review-document"]')).to_have_text("rechnung-302.pdf")
        page.locator('[data-testid="phone-reject"]').click()
        page.locator('[data-testid="reject-note"]').fill("unreadable scan")
        page.locator('[data-testid="reject-confirm"]').click()
        expect(page.locator('[data-testid="review-empty"]')).to_be_visible()
    finally:
        context.close()
    rows = conn.execute("SELECT task_id, status::text AS status, decided_by FROM reviews WHERE task_id = ANY(%s) "
                        "ORDER BY task_id", ([first, second],)).fetchall()
    assert [(r["task_id"], r["status"], r["decided_by"]) for r in rows] == [
        (first, "approved", "rob@example.com"), (second, "rejected", "rob@example.com")]


def test_a_viewer_reads_a_review_but_cannot_act(browser, app_server):
    server, conn, docs = app_server
    task_id = make_reviewable(conn, 401, agent=AGENT, low=("total",), directory=docs)
    context, page = open_as(browser, server, VIEWER, DESKTOP)
    try:
        page.goto(f"{server.url}/review/{task_id}")
        wait_ready(page, None)
        expect(page.locator('[data-testid="review-banner"]')).to_contain_text("needs the reviewer role")
        expect(page.locator('[data-testid="review-approve"]')).to_be_disabled()
    finally:
        context.close()
    assert conn.execute("SELECT claimed_by FROM reviews WHERE task_id = %s", (task_id,)).fetchone()["claimed_by"] is None
