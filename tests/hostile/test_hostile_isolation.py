"""One worker, real claims on real Postgres, and agents poisoned every way the hostile-input probes
found: reports of impossible token counts, learned figures at the bounds, a day-long Retry-After,
a model endpoint that answers 404, a configuration that cannot run, and learned data that breaks
the agent's own claim. A healthy agent (and a healthy throttled one) must drain all the same."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import pytest

from schema import db, queue
from schema.models import TaskStatus
from tests.factories import make_agent, make_task
from tests.unit.agents.agents_fakes import FakeChatServer
from tests.waiting import wait_until
from tests.worker_helpers import make_invoice_pdf
from worker.agent_check import check_agents
from worker.claimer import Claimer, ClaimerConfig
from worker.executors import LocalConfig, build_executors
from worker.executors.base import Launch
from worker.executors.noop import NoopExecutor, NoopHandle
from worker.heartbeats import Heartbeats
from worker.runs import RunTable, RunTableConfig

RESULT = {"document_type": "invoice", "extractor": "hostile", "model": None, "pages": 1, "fields": {}}
# The report each poisoned agent's runs send, signed and delivered like any other.
REPORTS = {
    "overflow": {"status": "completed", "result": RESULT, "pages": 1,
                 "input_tokens": 10**12, "output_tokens": 10**12},
    "greedy": {"status": "completed", "result": RESULT, "pages": 1,
               "input_tokens": 10**8, "output_tokens": 10**8},
    "parked": {"status": "failed", "error": "HTTP 429: daily quota", "retryable": True,
               "rate_limited": 1, "retry_after_seconds": 86_400},
}
# Learned data no report within the contract can teach (it came from before the bounds, or from a
# hand): its line overflows even double precision, so the agent's own claim fails on it.
CORRUPT_RATES = ("INSERT INTO agent_token_rates (agent, document_type, samples, w, sp, st, spp, spt, updated_at) "
                 "VALUES (%s, '*', 3, 3, 1, 1e308, 1, 1e308, now())")
# What three reports at the contract's bound (2 * 10^8 tokens for a one-page document) teach.
GREEDY_RATES = ("INSERT INTO agent_token_rates (agent, document_type, samples, w, sp, st, spp, spt, updated_at) "
                "VALUES ('greedy', '*', 3, 3, 3, 6e8, 3, 6e8, now())")


@pytest.fixture
def pool(db_dsn):
    p = db.make_pool(db_dsn, max_size=4)
    yield p
    p.close()


class HostileExecutor(NoopExecutor):
    """Runs nothing: each run reports what its agent's `report` setting holds."""

    name = "hostile"

    def _report(self, handle: NoopHandle, launch: Launch) -> None:
        handle.report = dict(launch.agent.settings["report"])


@pytest.mark.timeout(900)
def test_a_healthy_agent_drains_while_others_are_poisoned_every_way(pool, conn, tmp_path, monkeypatch):
    with FakeChatServer([(404, {"error": {"message": "The model `no-such-model` does not exist"}})]) as endpoint:
        monkeypatch.setenv("QUIRE_LLM_BASE_URL", endpoint.url)
        monkeypatch.delenv("QUIRE_LLM_MODEL", raising=False)
        make_agent(conn, "healthy", executor="noop")
        make_agent(conn, "healthy_throttled", executor="noop", max_concurrent_tasks=2)
        for name in REPORTS:
            make_agent(conn, name, executor="hostile", settings={"report": REPORTS[name]})
        make_agent(conn, "refused", executor="local", model="no-such-model", settings={"extractor": "llm"})
        make_agent(conn, "misconfigured", executor="local", settings={"extractor": "llm"})  # no model
        make_agent(conn, "broken", executor="noop")
        make_agent(conn, "broken_throttled", executor="noop", max_concurrent_tasks=2)
        for name in ("broken", "broken_throttled"):
            conn.execute(CORRUPT_RATES, [name])
        conn.execute(GREEDY_RATES)

        invoice = str(make_invoice_pdf(tmp_path / "invoice.pdf"))
        healthy = [make_task(conn, "healthy") for _ in range(30)] + \
                  [make_task(conn, "healthy_throttled") for _ in range(10)]
        poisoned = {name: [make_task(conn, name, estimated_tokens=None, pages=1) for _ in range(4)]
                    for name in ("overflow", "parked", "broken", "broken_throttled", "misconfigured")}
        # More than the worker can claim before the first refusal is settled (two rounds of its 4 slots).
        poisoned["refused"] = [make_task(conn, "refused", document_uri=invoice, pages=1) for _ in range(12)]
        # Documents whose learned reservation (2 * 10^8 tokens a page) is far past an integer.
        poisoned["greedy"] = [make_task(conn, "greedy", estimated_tokens=None, pages=p)
                              for p in (1, 1000, 1_000_000)]

        executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs", python=sys.executable))
        executors["hostile"] = HostileExecutor()
        assert set(check_agents(conn, executors=executors)) == {"misconfigured"}
        table = RunTable(pool, executors, RunTableConfig(worker_id="w-hostile"))
        claimer, heartbeats = Claimer(table, executors, ClaimerConfig(concurrency=4)), Heartbeats(table)

        def status(task) -> TaskStatus:
            return queue.get_task(conn, task.id).status

        def drained() -> bool:
            claimer.agents_changed()  # no LISTEN here: read the agents (halts, pauses) every round
            claimer.run_once()
            heartbeats.run_once()
            halted = {a.name for a in queue.list_agents(conn) if getattr(a, "halt_reason", None)}
            return (all(status(t) is TaskStatus.COMPLETED for t in healthy + poisoned["greedy"])
                    and all(status(t).terminal for t in poisoned["overflow"])
                    and {"refused", "broken", "broken_throttled"} <= halted and len(table) == 0)

        wait_until(drained, timeout=600, interval=0.1, message="the healthy agents to drain")

    now = datetime.now(UTC)
    agents = {a.name: a for a in queue.list_agents(conn)}
    # Reports beyond a real run are refused: the tasks fail with the reason, once each.
    for task in poisoned["overflow"]:
        done = queue.get_task(conn, task.id)
        assert done.status is TaskStatus.FAILED and "input_tokens" in done.error and done.attempt_count == 1
    # Reservations at the bounds are clamped, never overflow.
    reserved = conn.execute("SELECT max(estimated_tokens) AS n FROM task_attempts WHERE agent = 'greedy'").fetchone()
    assert reserved["n"] <= 2 * 10**8
    # A day's Retry-After pauses the agent an hour at most; its tasks wait, none failed.
    assert agents["parked"].throttled_until <= now + timedelta(hours=1)
    assert all(not status(t).terminal for t in poisoned["parked"])
    # The endpoint's 404 failed the tasks it reached once each, without retries, and halted the agent.
    refused = [queue.get_task(conn, t.id) for t in poisoned["refused"]]
    failed = [t for t in refused if t.status is TaskStatus.FAILED]
    assert failed and all(t.attempt_count == 1 and "404" in t.error for t in failed)
    assert len(endpoint.requests) == len(failed)
    assert any(t.status is TaskStatus.ENQUEUED for t in refused), "its other tasks wait"
    assert "404" in agents["refused"].halt_reason
    # A configuration that cannot run, and learned data that breaks a claim: nothing ran.
    assert agents["misconfigured"].config_error
    for name in ("broken", "broken_throttled"):
        assert "claiming its tasks failed" in agents[name].halt_reason
    for name in ("misconfigured", "broken", "broken_throttled"):
        assert all(queue.get_task(conn, t.id).attempt_count == 0 for t in poisoned[name]), name
