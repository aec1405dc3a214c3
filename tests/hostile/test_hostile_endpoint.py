"""A model endpoint that refuses the agent itself (404 model not found, 401, 403): the task fails at
once with that answer, the agent is halted (its other tasks wait, every other agent goes on), and
upload, forecast and positions say the agent cannot run instead of promising an ETA."""

from __future__ import annotations

import pytest

from agents import errors
from agents.fields import Usage
from agents.llm import ChatClient, Endpoint
from agents.runner import run
from schema import queue
from schema.models import TaskStatus
from tests.e2e.app_harness import TOKEN, launch_browser, make_pdf, start_app
from tests.factories import make_agent, make_task
from tests.unit.agents.agents_fakes import FakeChatServer
from tests.worker_helpers import make_invoice_pdf

REFUSALS = [(404, {"error": {"message": "The model `no-such-model` does not exist", "code": "model_not_found"}}),
            (401, {"error": {"message": "Incorrect API key provided"}}),
            (403, {"error": {"message": "You do not have access to this model"}})]


class _Tracer:
    def span(self, *args, **kwargs):
        return _Span()


class _Span:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set_outputs(self, *args):
        pass


@pytest.mark.parametrize("status, body", REFUSALS)
def test_the_agent_reports_a_refusal_at_once_and_as_final(status, body, monkeypatch):
    with FakeChatServer([(status, body)]) as server:
        client = ChatClient(Endpoint(server.url, "no-such-model", dict))
        with pytest.raises(errors.AgentError) as caught:
            client.complete([{"role": "user", "content": "hi"}], _Tracer(), Usage())
        assert len(server.requests) == 1, "a refusal is not retried"
    assert isinstance(caught.value, errors.EndpointRefused)
    assert str(status) in str(caught.value) and not caught.value.retryable


def test_the_runs_report_says_the_agent_cannot_run(tmp_path, monkeypatch):
    document = make_invoice_pdf(tmp_path / "inv.pdf")
    with FakeChatServer([REFUSALS[0]]) as server:
        monkeypatch.setenv("QUIRE_LLM_BASE_URL", server.url)
        monkeypatch.setenv("QUIRE_LLM_MODEL", "no-such-model")
        outcome = run(str(document), "llm")
    payload = outcome.payload
    assert payload["status"] == "failed" and payload["retryable"] is False
    assert payload["agent_cannot_run"] is True and "404" in payload["error"]


def refusal(error: str = "EndpointRefused: LLM endpoint answered HTTP 404: model not found") -> dict:
    return {"status": "failed", "error": error, "retryable": False, "agent_cannot_run": True}


def test_a_refusal_fails_its_task_once_and_halts_only_its_agent(conn):
    make_agent(conn, "refused")
    make_agent(conn, "healthy")
    tasks = [make_task(conn, "refused") for _ in range(3)]
    (first,) = queue.claim(conn, agent="refused", worker_id="w")
    outcome = queue.apply_callback(conn, first.attempt_id, refusal())
    assert outcome.task_status is TaskStatus.FAILED
    failed = queue.get_task(conn, first.task.id)
    assert failed.attempt_count == 1 and "404" in failed.error
    agent = queue.get_agent(conn, "refused")
    assert agent.cannot_run and "404" in agent.halt_reason
    # Its other tasks wait, claimed by no one; another agent's are claimed as before.
    make_task(conn, "healthy")
    claimed = queue.claim_many(conn, worker_id="w", slots={"local": ("local", 10)})
    assert [c.task.agent for c in claimed] == ["healthy"]
    assert all(queue.get_task(conn, t.id).status is TaskStatus.ENQUEUED for t in tasks[1:])
    # An operator clears it (the key was fixed): its tasks are claimed again.
    assert queue.clear_agent_halt(conn, "refused")
    assert {c.task.agent for c in queue.claim_many(conn, worker_id="w", slots={"local": ("local", 10)})} == {"refused"}


def test_a_new_configuration_clears_the_halt(conn):
    make_agent(conn, "refused", model="no-such-model")
    assert queue.halt_agent(conn, "refused", "the model endpoint refused it: HTTP 404")
    # Re-applying the same configuration changes nothing; a new model is a new chance.
    assert queue.configure_agent(conn, "refused", model="no-such-model").halt_reason
    assert queue.configure_agent(conn, "refused", model="gpt-real").halt_reason is None


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory)
    queue.configure_agent(conn, "documents")
    queue.configure_agent(conn, "stuck")
    yield server, conn
    teardown()


def test_upload_forecast_and_positions_warn_when_the_agent_cannot_run(app_server):
    server, conn = app_server
    queue.halt_agent(conn, "stuck", "the model endpoint refused it: HTTP 404 model not found")
    with server.operator() as http:
        plan = http.post("/api/forecast", json={"agent": "stuck", "files": [{"pages": 1}]})
        assert plan.status_code == 200 and "cannot run" in plan.json()["warning"]
        upload = http.post("/api/tasks", data={"agent": "stuck"},
                           files=[("files", ("s.pdf", make_pdf("stuck agent"), "application/pdf"))])
        assert upload.status_code == 201, upload.text
        assert "cannot run" in upload.json()["warning"] and "404" in upload.json()["warning"]
        task_id = upload.json()["files"][0]["task_id"]
        (spot,) = http.post("/api/positions", json={"task_ids": [task_id]}).json()
        assert spot["eta_seconds"] is None and "cannot run" in spot["text"]
        problems = {p["agent"]: p for p in http.get("/api/agents/problems").json()}
        assert problems["stuck"]["halted"] and "404" in problems["stuck"]["reason"]
        # A healthy agent's upload carries no warning.
        fine = http.post("/api/tasks", data={"agent": "documents"},
                         files=[("files", ("f.pdf", make_pdf("fine agent"), "application/pdf"))])
        assert fine.status_code == 201 and fine.json()["warning"] is None
        # Viewers may not clear; an operator may, once.
        assert server.client().post("/api/agents/stuck/clear-halt").status_code == 401
        assert http.post("/api/agents/stuck/clear-halt").status_code == 204
        assert http.post("/api/agents/stuck/clear-halt").status_code == 409
        (spot,) = http.post("/api/positions", json={"task_ids": [task_id]}).json()
        assert spot["eta_seconds"] is not None


def test_the_dashboard_names_a_halted_agent_and_an_operator_clears_it(app_server):
    from playwright.sync_api import expect, sync_playwright

    server, conn = app_server
    queue.halt_agent(conn, "stuck", "the model endpoint refused it: HTTP 404 model not found")
    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            page = browser.new_page()
            page.goto(f"{server.url}/login?token={TOKEN}&next=/dashboard")
            banner = page.get_by_test_id("agent-halted-stuck")
            expect(banner).to_contain_text("needs attention", timeout=20_000)
            expect(banner).to_contain_text("404")
            page.get_by_test_id("agent-clear-stuck").click()
            expect(banner).to_have_count(0, timeout=20_000)
        finally:
            browser.close()
    assert queue.get_agent(conn, "stuck").halt_reason is None
