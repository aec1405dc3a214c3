"""A misconfigured agent, end to end: `quire migrate` says so, a worker claims nothing for it and fails
nothing, and the dashboard shows why its tasks wait."""

from __future__ import annotations

import signal

import pytest
from playwright.sync_api import expect, sync_playwright

from schema import db, queue
from tests.e2e.app_harness import TOKEN, launch_browser, start_app
from tests.worker_helpers import Proc, quire, quire_env, wait_until
from worker.agent_check import check_agents

CONFIG = """
[agents.documents]
executor = "noop"

[agents.contracts]
settings = { extractor = "llm" }
"""


@pytest.mark.slow
def test_a_worker_leaves_a_misconfigured_agents_tasks_waiting(db_dsn, tmp_path):
    (tmp_path / "quire.toml").write_text(CONFIG)
    env = quire_env(db_dsn, tmp_path, poll_seconds=60)  # no QUIRE_LLM_* in this environment
    migrated = quire("migrate", env=env, cwd=tmp_path)
    assert migrated.returncode == 0 and "agent 'contracts' will not run" in migrated.stderr, migrated.stderr
    with db.connect(db_dsn) as conn:
        assert "QUIRE_LLM_MODEL" in queue.get_agent(conn, "contracts").config_error
        waiting = queue.enqueue(conn, agent="contracts", document_uri="/x/contract.pdf")
        done = queue.enqueue(conn, agent="documents", document_uri="/x/invoice.pdf")
    worker = Proc.worker(env, tmp_path)
    try:
        with db.connect(db_dsn) as conn:
            wait_until(lambda: queue.get_task(conn, done.id).status.value == "completed", timeout=60,
                       message="the other agent's task to complete")
            # Claims went round the agents with work at least once: the misconfigured one was skipped.
            task = queue.get_task(conn, waiting.id)
            assert task.status.value == "enqueued" and task.attempts == [], task
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    finally:
        worker.stop()


@pytest.mark.slow
def test_the_dashboard_shows_why_an_agent_does_not_run(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory)
    try:
        queue.configure_agent(conn, "documents")
        queue.configure_agent(conn, "remote", executor="databricks")
        assert set(check_agents(conn)) == {"remote"}
        with sync_playwright() as playwright:
            browser = launch_browser(playwright)
            try:
                page = browser.new_page()
                page.goto(f"{server.url}/login?token={TOKEN}")
                page.goto(f"{server.url}/dashboard")
                banner = page.locator('[data-testid="agent-config-errors"]')
                expect(banner).to_be_visible(timeout=20_000)
                expect(banner).to_contain_text("Agent remote is not running")
                expect(banner).to_contain_text("names no job")
                # Fixed: the banner goes away with the next refresh.
                queue.configure_agent(conn, "remote", executor="databricks", settings={"job_id": 7})
                check_agents(conn)
                page.reload()
                expect(page.locator('[data-testid="kpi-enqueued"]')).to_be_visible(timeout=20_000)
                expect(banner).to_be_hidden()
            finally:
                browser.close()
    finally:
        teardown()
