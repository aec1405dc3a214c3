"""Operator control in the running app: pause and resume an agent (API and dashboard, at 1440 and
390 px), and waiting tasks that say why they wait, for each reason, in the table and on the task page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from schema import queue
from schema.queue.common import Backoff
from tests.e2e.app_harness import TOKEN
from tests.e2e.browser_helpers import DESKTOP, PHONE, page_width, visit


def test_pause_and_resume_through_the_api_and_the_task_says_why_it_waits(app_server):
    server, conn = app_server
    queue.configure_agent(conn, "api-paused")
    task = queue.enqueue(conn, agent="api-paused", document_uri="/x/api-paused.pdf", document_name="waits.pdf")
    until = (datetime.now(UTC) + timedelta(hours=3)).replace(microsecond=0)
    with server.client() as anonymous:
        assert anonymous.post("/api/agents/api-paused/pause", json={}).status_code == 401
    with server.operator() as http:
        paused = http.post("/api/agents/api-paused/pause",
                           json={"until": until.isoformat(), "reason": "endpoint quota spent"})
        assert paused.status_code == 200, paused.text
        body = paused.json()
        assert body["paused"] is True and body["paused_reason"] == "endpoint quota spent"
        assert body["paused_by"] == "operator" and datetime.fromisoformat(body["paused_until"]) == until
        listed = {a["name"]: a for a in http.get("/api/agents").json()}
        assert listed["api-paused"]["paused"] and not listed["documents"]["paused"]
        detail = http.get(f"/api/tasks/{task.id}").json()
        assert (detail["waiting_reason"], detail["waiting_detail"]) == ("agent_paused", "endpoint quota spent")
        assert datetime.fromisoformat(detail["waiting_until"]) == until
        page = http.get("/api/tasks", params={"agent": "api-paused"}).json()["tasks"]
        assert [(t["id"], t["waiting_reason"]) for t in page] == [(task.id, "agent_paused")]
        assert http.post("/api/agents/nobody/pause", json={}).status_code == 404
        assert http.post("/api/agents/api-paused/pause", json={"until": "2001-01-01T00:00:00Z"}).status_code == 422
        assert http.post("/api/agents/api-paused/pause", json={"reason": "x" * 501}).status_code == 422
        resumed = http.post("/api/agents/api-paused/resume")
        assert resumed.status_code == 200 and resumed.json()["paused"] is False
        assert http.get(f"/api/tasks/{task.id}").json()["waiting_reason"] == "fair_share"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_an_operator_pauses_and_resumes_an_agent_from_the_dashboard(browser, app_server, viewport):
    server, conn = app_server
    name = f"ui-paused-{viewport['width']}"
    queue.configure_agent(conn, name)
    task = queue.enqueue(conn, agent=name, document_uri=f"/x/{name}.pdf", document_name=f"{name}.pdf")
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/login?token={TOKEN}")
        visit(page, f"{server.url}/dashboard")
        agent = page.locator(f'[data-testid="agent-{name}"]')
        expect(agent.locator(f'[data-testid="agent-state-{name}"]')).to_have_text("running")
        expect(page.locator(f'[data-testid="waiting-{task.id}"]')).to_have_text("waiting its turn")
        agent.locator(f'[data-testid="agent-pause-{name}"]').click()
        dialog = page.locator('[data-testid="pause-dialog"]')
        dialog.locator('[data-testid="pause-reason"]').fill("model endpoint quota spent")
        dialog.locator('[data-testid="pause-until"]').fill("yesterday")
        dialog.locator('[data-testid="pause-yes"]').click()
        expect(dialog.locator('[data-testid="pause-error"]')).to_contain_text("Write the time to resume as")
        dialog.locator('[data-testid="pause-until"]').fill("2999-01-31 18:00")
        dialog.locator('[data-testid="pause-yes"]').click()
        expect(dialog).to_have_count(0)
        expect(agent.locator(f'[data-testid="agent-state-{name}"]')).to_have_text("paused")
        expect(page.locator(f'[data-testid="agent-pause-text-{name}"]')).to_contain_text(
            "Paused until 2999-01-31 18:00:00 UTC: model endpoint quota spent (by operator)")
        expect(page.locator(f'[data-testid="waiting-{task.id}"]')).to_have_text(
            "agent paused · until 2999-01-31 18:00:00 UTC")
        assert queue.get_agent(conn, name).paused_reason == "model endpoint quota spent"
        assert page_width(page) <= viewport["width"], "the agents row must not widen the page"
        # The task page says the same.
        page.goto(f"{server.url}/tasks/{task.id}")
        expect(page.locator('[data-testid="waiting-reason"]')).to_contain_text("agent paused")
        expect(page.locator('[data-testid="waiting-reason"]')).to_contain_text("model endpoint quota spent")
        expect(page.locator('[data-testid="queue-position"]')).to_have_text("next in line")  # no ETA while paused
        visit(page, f"{server.url}/dashboard")
        page.locator(f'[data-testid="agent-resume-{name}"]').click()
        expect(page.locator(f'[data-testid="agent-state-{name}"]')).to_have_text("running")
        expect(page.locator(f'[data-testid="waiting-{task.id}"]')).to_have_text("waiting its turn")
        assert not queue.get_agent(conn, name).paused(datetime.now(UTC))
    finally:
        context.close()


def _one_task_waiting_for_each_reason(conn, w: int) -> dict[str, int]:
    """Tasks of agents and a customer of their own (suffixed with the width), each waiting for
    another reason: {words the table shows: task id}."""
    from schema import customers, forecast, worker_queries

    names = {k: f"why-{k}-{w}" for k in ("free", "capped", "tokens", "paused", "retried", "broken")}
    queue.configure_agent(conn, names["free"])
    queue.configure_agent(conn, names["capped"], max_concurrent_tasks=1)
    queue.configure_agent(conn, names["tokens"], max_tpm=1500)
    for k in ("paused", "retried", "broken"):
        queue.configure_agent(conn, names[k])
    worker_queries.agent_set_config_error(conn, names["broken"], "the executor 'spark' is unknown")
    spent = f"Spent Customer {w}"
    customers.customer_budget_set(conn, spent, 0.1, actor="op")

    def task(agent: str, **more) -> int:
        return queue.enqueue(conn, agent=names[agent], document_uri=f"/x/{agent}-{w}-{more.get('customer')}.pdf",
                             document_name=f"why {agent} {w}.pdf", **more).id

    task("free", customer=spent)
    (spender,) = queue.claim(conn, agent=names["free"], worker_id="w-why")
    queue.apply_callback(conn, spender.attempt_id, {"status": "completed", "result": {"ok": True},
                                                    "input_tokens": 10, "output_tokens": 1, "llm_cost_usd": 0.5})
    task("capped")
    queue.claim(conn, agent=names["capped"], worker_id="w-why")
    task("tokens", estimated_tokens=1000)
    queue.claim(conn, agent=names["tokens"], worker_id="w-why")
    task("retried")
    (failing,) = queue.claim(conn, agent=names["retried"], worker_id="w-why")
    base, cap = Backoff.base_seconds, Backoff.cap_seconds
    queue.set_backoff(600, 600)  # its retry waits ten minutes: longer than the test looks at it
    try:
        queue.apply_callback(conn, failing.attempt_id, {"status": "failed", "error": "boom", "retryable": True})
    finally:
        queue.set_backoff(base, cap)
    plan = forecast.forecast_batch(conn, agent=names["free"], priority=0, files=[forecast.FileFacts(pages=1)],
                                   workers=1, compute_rate_usd_per_hour=0)
    batch = forecast.batch_create(conn, plan, customer=None, held=True, submitted_by="op")
    waiting = {
        "waiting its turn": task("free"),
        "customer over budget": task("free", customer=spent),
        "held for review": task("free", batch_id=batch, held=True),
        "agent at its limit of tasks at once": task("capped"),
        "agent at its token budget": task("tokens", estimated_tokens=1000),
        "agent paused": task("paused"),
        "waiting to retry": failing.task.id,
        "agent cannot run": task("broken"),
    }
    queue.pause_agent(conn, names["paused"], actor="op", reason="maintenance")
    return waiting


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_the_table_and_the_task_page_say_why_each_task_waits(browser, app_server, viewport):
    server, conn = app_server
    waiting = _one_task_waiting_for_each_reason(conn, viewport["width"])
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/login?token={TOKEN}")
        visit(page, f"{server.url}/dashboard")  # newest first: these tasks lead the first page
        for words, task_id in waiting.items():
            expect(page.locator(f'[data-testid="waiting-{task_id}"]')).to_contain_text(words)
        # The detail is there on hover.
        expect(page.locator(f'[data-testid="waiting-{waiting["agent cannot run"]}"]')).to_have_attribute(
            "title", "the executor 'spark' is unknown")
        expect(page.locator(f'[data-testid="waiting-{waiting["agent at its limit of tasks at once"]}"]')
               ).to_have_attribute("title", "1 of 1 running")
        assert page_width(page) <= viewport["width"], "the reasons must not widen the page"
        page.goto(f"{server.url}/tasks/{waiting['waiting to retry']}")
        expect(page.locator('[data-testid="waiting-reason"]')).to_contain_text("waiting to retry")
        page.goto(f"{server.url}/tasks/{waiting['customer over budget']}")
        expect(page.locator('[data-testid="waiting-reason"]')).to_contain_text("customer over budget")
        assert page_width(page) <= viewport["width"]
    finally:
        context.close()
