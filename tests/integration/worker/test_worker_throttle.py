"""The adaptive throttle end to end: LLM agent runs against an endpoint whose quota is below max_tpm."""

from __future__ import annotations

import sys

import pytest

from bench.fake_llm import RateLimitedChat
from schema import queue
from tests.factories import make_agent, make_task
from tests.worker_helpers import make_invoice_pdf, wait_until
from worker.claim_config import ClaimerConfig
from worker.claimer import Claimer
from worker.executors import LocalConfig, build_executors
from worker.heartbeats import Heartbeats
from worker.runs import RunTable, RunTableConfig

# A run of the agent's LLM extractor on one invoice sends one request of 1,049 tokens: the quota
# takes four a minute, so the first wave's second round of four meets it and waits out one
# Retry-After, and the learned limits then hold the second wave until the minute frees.
QUOTA = 4500
MAX_TPM = 4 * QUOTA


# Agent processes and Retry-After waits take minutes on a busy machine; the deadlines are generous.
@pytest.mark.timeout(1500)
def test_worker_backs_off_an_agent_whose_endpoint_rate_limits_until_the_429s_stop(pool, conn, tmp_path,
                                                                                   monkeypatch):
    with RateLimitedChat(QUOTA, latency_seconds=0.01) as endpoint:
        monkeypatch.setenv("QUIRE_LLM_BASE_URL", endpoint.url)
        make_agent(conn, "llm", executor="local", max_tpm=MAX_TPM, lease_seconds=300, model="fake-quota",
                   settings={"extractor": "llm"})
        tasks = [make_task(conn, "llm", document_uri=str(make_invoice_pdf(tmp_path / f"inv-{n}.pdf",
                                                                         number=f"INV-{n}")), pages=1)
                 for n in range(8)]
        executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs", python=sys.executable))
        table = RunTable(pool, executors, RunTableConfig(worker_id="w-throttle"))
        claimer, heartbeats = Claimer(table, executors, ClaimerConfig(concurrency=4)), Heartbeats(table)
        lowest: list[int] = []

        def all_done() -> bool:
            claimer.agents_changed()  # no LISTEN here: read the adaptive limits every round
            claimer.run_once()
            heartbeats.run_once()
            agent = queue.get_agent(conn, "llm")
            if agent.effective_tpm is not None:
                lowest.append(agent.effective_tpm)
            return all(queue.get_task(conn, t.id).status.value == "completed" for t in tasks)

        wait_until(all_done, timeout=600, interval=0.2, message="every task to complete")
        first_wave = endpoint.stats()["rate_limited"]
        agent = queue.get_agent(conn, "llm")
        assert first_wave > 0, "the quota below max_tpm must have been met"
        assert agent.rate_limited_total >= 1, "the agents reported the 429s"
        assert lowest and min(lowest) < MAX_TPM, "the effective TPM backed off"

        # A second wave runs at the learned limits: the endpoint refuses nothing more.
        more = [make_task(conn, "llm", document_uri=str(make_invoice_pdf(tmp_path / f"more-{n}.pdf",
                                                                        number=f"MORE-{n}")), pages=1)
                for n in range(3)]
        tasks[:] = more
        wait_until(all_done, timeout=600, interval=0.2, message="the second wave to complete")
        assert endpoint.stats()["rate_limited"] == first_wave
