"""A cancel bites: the run of a cancelled task is signalled through LISTEN at once and gone within 2 s."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import threading

from bench.fake_http import FakeHttpServer, Request
from schema import queue
from schema.settings import Settings
from schema.stats_types import StreamEvent
from tests.factories import make_agent, make_task
from tests.integration.worker.test_worker_runs import interpreter, services
from tests.waiting import wait_until, wait_until_async
from tests.worker_helpers import REPO, group_running, make_invoice_pdf, settle_all
from worker import daemon as daemon_module
from worker.daemon import WorkerDaemon
from worker.executors import LocalConfig


def test_worker_cancel_kills_a_local_run_within_two_seconds(db_dsn, conn, tmp_path, monkeypatch):
    # A lease of 300 s: the next heartbeat is 100 s away, so only the cancel's event can stop the run.
    make_agent(conn, "docs", executor="local", lease_seconds=300)
    task = make_task(conn, "docs")
    # It ignores SIGTERM (and so does its child): only the kill after the cancel grace ends it.
    stubborn = interpreter(tmp_path, "stubborn", "trap '' TERM; sleep 60 & wait")
    monkeypatch.setattr(daemon_module, "LocalConfig", functools.partial(LocalConfig, python=stubborn))
    settings = Settings(data_dir=tmp_path, poll_seconds=300, sweep_seconds=300, reconcile_seconds=300,
                        agent_preload=False)
    daemon = WorkerDaemon(settings, db_dsn, worker_id="w-cancel", concurrency=1)

    def started_pid():
        row = conn.execute("SELECT pid FROM task_attempts WHERE task_id = %s AND status = 'processing'",
                           [task.id]).fetchone()
        return row and row["pid"]

    async def host() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(daemon.run(stop))
        try:
            pid = await wait_until_async(started_pid, blocking=True, timeout=30, message="the run to start")
            await wait_until_async(lambda: daemon.listener.live, timeout=10, message="the LISTEN connection")
            assert group_running(pid)
            await asyncio.to_thread(queue.cancel, conn, task.id, actor="operator@example.com")
            await wait_until_async(lambda: not group_running(pid), timeout=2.0,
                                   message="the cancelled run's processes to be gone")
            # The compute measured up to the kill stays on the attempt.
            await wait_until_async(
                lambda: queue.get_task(conn, task.id).attempts[0].compute_seconds is not None,
                blocking=True, timeout=10, message="the cancelled attempt's compute")
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)

    asyncio.run(host())
    done = queue.get_task(conn, task.id)
    assert done.status.value == "cancelled" and done.attempts[0].status.value == "cancelled"


class HangingChat:
    """A model endpoint that takes every request and never answers (until closed)."""

    def __init__(self):
        self.asked = threading.Event()
        self.release = threading.Event()
        self.server = FakeHttpServer(self._hang).start()

    def _hang(self, request: Request) -> None:
        self.asked.set()
        self.release.wait(60)

    @property
    def url(self) -> str:
        return f"{self.server.url}/v1"

    def close(self) -> None:
        self.release.set()
        self.server.stop()


def test_agent_stopped_mid_call_reports_a_failure_with_its_spend_and_exits(tmp_path):
    endpoint = HangingChat()
    out = tmp_path / "report.json"
    env = {**os.environ, "QUIRE_LLM_BASE_URL": endpoint.url, "QUIRE_LLM_MODEL": "fake-hang",
           "PYTHONPATH": str(REPO)}
    env.pop("MLFLOW_TRACKING_URI", None)
    pdf = make_invoice_pdf(tmp_path / "inv.pdf")
    agent = subprocess.Popen([sys.executable, "-m", "agents", "run", "--document", str(pdf), "--extractor", "llm",
                              "--out", str(out)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        assert endpoint.asked.wait(60), "the agent never called its model"
        agent.send_signal(signal.SIGTERM)
        wait_until(lambda: agent.poll() is not None, timeout=2.0, message="the stopped agent to exit")
    finally:
        if agent.poll() is None:
            agent.kill()
        agent.wait()
        endpoint.close()
    report = json.loads(out.read_text())
    assert report["status"] == "failed" and "stopped by the orchestrator" in report["error"]
    assert "input_tokens" in report and report["retryable"] is True


def test_the_spend_a_cancelled_run_reports_before_it_ends_is_kept(pool, conn, tmp_path):
    make_agent(conn, "docs", executor="local", lease_seconds=300)
    task = make_task(conn, "docs")
    # An agent that, asked to stop, writes what it spent so far to its report file and exits.
    reporting = interpreter(tmp_path, "reporting", """
out=""; while [ $# -gt 0 ]; do [ "$1" = "--out" ] && out="$2"; shift; done
sleep 60 & child=$!
report='{"status": "failed", "error": "stopped", "retryable": true, "input_tokens": 1200, "output_tokens": 30, '\
'"llm_cost_usd": 0.0042}'
trap 'kill $child; printf "%s" "$report" > "$out.partial"; mv "$out.partial" "$out"; exit 1' TERM
wait""")
    table, claimer, heartbeats = services(pool, tmp_path, python=reporting, rate=3.6)
    claimer.run_once()
    [_run] = table.snapshot()
    queue.cancel(conn, task.id, actor="operator@example.com")
    events = [StreamEvent.from_notify({"e": 1, "id": task.id, "a": "docs", "s": "cancelled", "p": "processing"})]
    assert table.note_cancelled(events)
    heartbeats.run_once()
    settle_all(table, heartbeats, timeout=10)
    done = queue.get_task(conn, task.id)
    attempt = done.attempts[0]
    assert done.status.value == "cancelled" and attempt.status.value == "cancelled"
    assert (attempt.input_tokens, attempt.output_tokens) == (1200, 30)
    assert float(attempt.llm_cost_usd) == 0.0042
    assert attempt.compute_seconds is not None and attempt.compute_cost_usd is not None
