"""A misconfigured agent is found before anything is claimed for it: its tasks wait, none fails."""

from __future__ import annotations

import pytest

from schema import queue
from tests.factories import make_agent, make_task
from worker.agent_check import check_agents, config_error

LLM_ENV = {"QUIRE_LLM_MODEL": "gpt-test", "QUIRE_LLM_BASE_URL": "http://127.0.0.1:9/v1"}


@pytest.mark.parametrize("settings, env, executor, model, expected", [
    ({"extractor": "llm"}, {}, "local", None, "needs a model"),
    ({"extractor": "llm"}, {"QUIRE_LLM_MODEL": "m"}, "local", None, "needs an endpoint"),
    ({"extractor": "llm"}, {"QUIRE_LLM_BASE_URL": "http://x"}, "local", "my-model", None),
    ({"extractor": "llm"}, LLM_ENV, "local", None, None),
    ({"extractor": "vision"}, LLM_ENV, "local", None, "unknown extractor 'vision'"),
    ({}, {}, "databricks", None, "names no job"),
    ({"job_id": "abc"}, {}, "databricks", None, "names no job"),
    ({"job_id": 0}, {}, "databricks", None, "names no job"),
    # The bundle's job reaches the app as QUIRE_AGENT_JOB_ID (app.yaml, valueFrom the job resource).
    ({"extractor": "llm"}, {"QUIRE_AGENT_JOB_ID": "77"}, "databricks", None, None),
    ({}, {"QUIRE_AGENT_JOB_ID": "not-a-job"}, "databricks", None, "names no job"),
    ({"job_id": 42, "extractor": "llm"}, {}, "databricks", None, None),
    ({}, {}, "kubernetes", None, "unknown executor 'kubernetes'"),
    ({}, {}, "local", None, None),
    ({"delay_seconds": 1}, {}, "noop", None, None),
])
def test_config_error_names_what_is_wrong(conn, settings, env, executor, model, expected):
    agent = make_agent(conn, "checked", executor=executor, model=model, settings=settings)
    error = config_error(agent, env=env)
    if expected is None:
        assert error is None
    else:
        assert expected in error


def test_a_misconfigured_agent_is_not_claimed_for_and_its_tasks_wait(conn):
    make_agent(conn, "llm-docs", settings={"extractor": "llm"})
    make_agent(conn, "llm-capped", max_concurrent_tasks=2, settings={"extractor": "llm"})
    make_agent(conn, "fine")
    waiting = [make_task(conn, "llm-docs"), make_task(conn, "llm-capped")]
    make_task(conn, "fine")
    problems = check_agents(conn, env={})
    assert set(problems) == {"llm-docs", "llm-capped"} and "QUIRE_LLM_MODEL" in problems["llm-docs"]
    assert queue.get_agent(conn, "llm-docs").config_error == problems["llm-docs"]
    assert queue.get_agent(conn, "fine").config_error is None
    assert queue.agents_with_backlog(conn) == ["fine"]
    assert queue.claim(conn, agent="llm-docs", worker_id="w", limit=5) == []  # unthrottled
    assert queue.claim(conn, agent="llm-capped", worker_id="w", limit=5) == []  # throttled
    assert queue.claim_throttled(conn, agent="llm-capped", worker_id="w", limit=5) == []
    # The worker's claim over every agent at once takes only the runnable agent's task.
    assert [c.task.agent for c in queue.claim_many(conn, worker_id="w", slots={"local": ("local", 9)})] == ["fine"]
    for task in waiting:
        again = queue.get_task(conn, task.id)
        assert again.status.value == "enqueued" and again.attempts == [] and again.attempt_count == 0
    # Fixed in the environment: the next check clears the reason and the tasks are claimed.
    assert check_agents(conn, env=LLM_ENV) == {}
    assert queue.get_agent(conn, "llm-docs").config_error is None
    assert [c.task.id for c in queue.claim(conn, agent="llm-docs", worker_id="w")] == [waiting[0].id]
    assert [c.task.id for c in queue.claim(conn, agent="llm-capped", worker_id="w")] == [waiting[1].id]


def test_checking_again_changes_nothing_that_did_not_change(conn):
    make_agent(conn, "odd", executor="kubernetes")
    check_agents(conn)
    stamp = conn.execute("SELECT xmin::text AS x FROM agents WHERE name = 'odd'").fetchone()["x"]
    check_agents(conn)
    assert conn.execute("SELECT xmin::text AS x FROM agents WHERE name = 'odd'").fetchone()["x"] == stamp
