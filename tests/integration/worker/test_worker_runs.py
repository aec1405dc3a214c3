"""The worker's services one round at a time: claim, heartbeat, settle, stop, hand back, sweep."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from schema import queue
from schema.stats_types import StreamEvent
from tests.factories import make_agent, make_task
from tests.waiting import wait_until
from tests.worker_helpers import group_exists, make_invoice_pdf, settle_all
from worker.claim_config import ClaimerConfig
from worker.claimer import Claimer, wants_claim
from worker.executors import LocalConfig, build_executors
from worker.heartbeats import Heartbeats
from worker.runs import RunTable, RunTableConfig
from worker.sweeper import Sweeper


def interpreter(tmp_path: Path, name: str, script: str) -> str:
    """A stand-in for the Python interpreter that the local executor starts (a shell script)."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def services(pool, tmp_path: Path, *, concurrency: int = 4, python: str = sys.executable, rate: float = 0.0,
             stop_grace: float = 5.0):
    executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs", python=python))
    table = RunTable(pool, executors, RunTableConfig(worker_id="w-test", compute_rate_usd_per_hour=rate,
                                                     stop_grace_seconds=stop_grace))
    return table, Claimer(table, executors, ClaimerConfig(concurrency=concurrency)), Heartbeats(table)


def test_worker_claims_up_to_capacity_and_noop_completes(pool, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    tasks = [make_task(conn, "bench") for _ in range(5)]
    table, claimer, heartbeats = services(pool, tmp_path, concurrency=3)
    assert claimer.run_once() == 3
    settle_all(table, heartbeats)
    assert claimer.run_once() == 2
    settle_all(table, heartbeats)
    for task in tasks:
        done = queue.get_task(conn, task.id)
        assert done.status.value == "completed" and done.result["extractor"] == "noop"
        assert [a.status.value for a in done.attempts] == ["completed"]
    assert claimer.run_once() == 0
    assert table.counters.snapshot() == {"claims": 5, "throttled_claims": 0, "runs_started": 5,
                                         "runs_handed_back": 0, "sweeps_recovered": 0,
                                         "runs_detached": 0, "runs_reconciled": 0}


def test_worker_an_ended_run_frees_its_slot_before_it_is_settled_up_to_one_set_of_slots(pool, conn, tmp_path):
    slow = make_agent(conn, "slow", executor="noop", settings={"delay_seconds": 60})
    held = make_task(conn, slow.name)
    make_agent(conn, "bench", executor="noop")
    for _ in range(10):
        make_task(conn, "bench")
    table, _, heartbeats = services(pool, tmp_path, concurrency=3)
    # Nothing claimed ahead: the slots alone are counted here (tests/integration/worker/test_claim_ahead.py).
    claimer = Claimer(table, table.executors, ClaimerConfig(concurrency=3, unsettled_runs=3, claim_ahead=0))
    # FIFO: the slow task (it runs on), then two that end within their start.
    assert claimer.run_once() == 3
    assert table.slots_taken(local=True, unsettled=3) == 1
    assert claimer.run_once() == 2  # the ended runs' slots are free before any settlement
    # Four ended runs wait to be settled, one more than a set of slots: that one holds a slot.
    assert table.slots_taken(local=True, unsettled=3) == 2
    assert claimer.run_once() == 1
    assert table.slots_taken(local=True, unsettled=3) == 3 and claimer.run_once() == 0
    assert len(table) == 6 and counts_by_status(conn) == {"processing": 6, "enqueued": 5}
    heartbeats.run_once()  # settles the five ended runs together; the slow one runs on
    assert len(table) == 1 and counts_by_status(conn) == {"processing": 1, "completed": 5, "enqueued": 5}
    assert claimer.run_once() == 2
    assert queue.get_task(conn, held.id).status.value == "processing"


def counts_by_status(conn) -> dict[str, int]:
    return {r["status"]: r["n"] for r in conn.execute(
        "SELECT status::text, count(*) AS n FROM tasks GROUP BY 1")}


def test_worker_claims_within_the_agent_throttle(pool, conn, tmp_path):
    make_agent(conn, "slow", executor="noop", max_concurrent_tasks=2, settings={"delay_seconds": 30})
    for _ in range(5):
        make_task(conn, "slow")
    table, claimer, _ = services(pool, tmp_path, concurrency=10)
    assert claimer.run_once() == 2
    assert claimer.run_once() == 0
    assert len(table) == 2
    # Both rounds asked for more than the cap admitted while work was left.
    assert claimer.counters.snapshot()["throttled_claims"] == 2
    assert table.hand_back_all() == 2
    assert table.counters.snapshot() == {"claims": 2, "throttled_claims": 2, "runs_started": 2,
                                         "runs_handed_back": 2, "sweeps_recovered": 0,
                                         "runs_detached": 0, "runs_reconciled": 0}


def test_worker_a_throttled_agent_whose_backlog_ran_out_is_not_counted_as_throttled(pool, conn, tmp_path):
    make_agent(conn, "small", executor="noop", max_concurrent_tasks=5, settings={"delay_seconds": 30})
    make_agent(conn, "free", executor="noop", settings={"delay_seconds": 30})
    for agent in ("small", "small", "free"):
        make_task(conn, agent)
    table, claimer, _ = services(pool, tmp_path, concurrency=10)
    assert claimer.run_once() == 3
    assert claimer.counters.snapshot()["throttled_claims"] == 0
    table.hand_back_all()


def test_worker_local_run_without_callback_url_reports_through_its_file(pool, conn, tmp_path):
    make_agent(conn, "docs", executor="local")
    pdf = make_invoice_pdf(tmp_path / "invoice.pdf")
    task = make_task(conn, "docs", document_uri=str(pdf), pages=1)
    table, claimer, heartbeats = services(pool, tmp_path, rate=36.0)
    assert claimer.run_once() == 1
    [run] = table.snapshot()
    assert run.handle.pid and queue.get_attempt(conn, run.attempt_id).pid == run.handle.pid
    settle_all(table, heartbeats)
    done = queue.get_task(conn, task.id)
    assert done.status.value == "completed", done.error
    assert done.result["document_type"] == "invoice"
    assert done.result["fields"]["total"]["value"] == 1200.0
    [attempt] = done.attempts
    assert attempt.input_tokens > 0 and attempt.compute_seconds > 0
    # 36 USD an hour is a cent a second.
    assert float(attempt.compute_cost_usd) == pytest.approx(attempt.compute_seconds / 100, abs=1e-5)
    assert not (tmp_path / "runs" / f"attempt-{attempt.id}").exists()


def test_worker_runs_a_cascade_agent_on_a_signed_e_invoice_without_tokens(pool, conn, tmp_path, monkeypatch):
    from tests.unit.agents import einvoice_samples as einvoices

    # A model the cascade must not call for an e-invoice: nothing listens there.
    monkeypatch.setenv("QUIRE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    make_agent(conn, "docs", executor="local", model="never-called",
               settings={"extractor": "cascade", "review_threshold": 0.85})
    signed = tmp_path / "fattura.xml.p7m"
    signed.write_bytes(einvoices.sign_p7m(einvoices.fatturapa_xml(), "base64"))
    task = make_task(conn, "docs", document_uri=str(signed), pages=0)
    table, claimer, heartbeats = services(pool, tmp_path)
    assert claimer.run_once() == 1
    settle_all(table, heartbeats)
    done = queue.get_task(conn, task.id)
    assert done.status.value == "completed", done.error
    assert done.result["extractor"] == "cascade" and done.result["pages"] == 0
    assert done.result["source"]["standard"] == "FatturaPA"
    assert done.result["fields"]["total"] == {"value": 1830.0, "confidence": 0.99, "stage": "xml", "evidence": None}
    [attempt] = done.attempts
    assert attempt.input_tokens == 0 and attempt.output_tokens == 0


def test_worker_crash_is_reported_as_a_retryable_failure_with_stderr(pool, conn, tmp_path):
    make_agent(conn, "docs", executor="local")
    task = make_task(conn, "docs", max_attempts=3)
    crash = interpreter(tmp_path, "crash", "echo 'segmentation fault in parser' >&2; exit 3")
    table, claimer, heartbeats = services(pool, tmp_path, python=crash)
    claimer.run_once()
    settle_all(table, heartbeats)
    done = queue.get_task(conn, task.id)
    assert done.status.value == "enqueued"
    [attempt] = done.attempts
    assert attempt.status.value == "failed"
    assert "exited with code 3" in attempt.error and "segmentation fault in parser" in attempt.error


def test_worker_document_error_exit_code_is_not_retried(pool, conn, tmp_path):
    make_agent(conn, "docs", executor="local")
    task = make_task(conn, "docs", max_attempts=3)
    table, claimer, heartbeats = services(pool, tmp_path, python=interpreter(tmp_path, "bad", "exit 2"))
    claimer.run_once()
    settle_all(table, heartbeats)
    assert queue.get_task(conn, task.id).status.value == "failed"


def test_worker_cancel_kills_the_process_group(pool, conn, tmp_path):
    make_agent(conn, "docs", executor="local", lease_seconds=3)
    task = make_task(conn, "docs")
    # A shell with a child of its own: killing the group must take both.
    sleeper = interpreter(tmp_path, "sleeper", "sleep 60 & wait")
    table, claimer, heartbeats = services(pool, tmp_path, python=sleeper)
    claimer.run_once()
    [run] = table.snapshot()
    heartbeats.run_once(beat_all=True)
    assert len(table) == 1
    queue.cancel(conn, task.id, actor="operator@example.com")
    heartbeats.run_once(beat_all=True)
    settle_all(table, heartbeats, timeout=10)
    assert run.handle.exit_code is not None and run.handle.exit_code < 0
    wait_until(lambda: not group_exists(run.handle.pid), timeout=5, message="the process group to end")
    done = queue.get_task(conn, task.id)
    assert done.status.value == "cancelled" and done.attempts[0].status.value == "cancelled"
    assert done.attempts[0].compute_seconds is not None


def test_worker_superseded_run_is_stopped(pool, conn, tmp_path):
    make_agent(conn, "docs", executor="local", lease_seconds=3)
    task = make_task(conn, "docs")
    table, claimer, heartbeats = services(pool, tmp_path, python=interpreter(tmp_path, "s", "exec sleep 60"))
    claimer.run_once()
    [run] = table.snapshot()
    # Its lease expires and another worker's attempt completes the task first.
    conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = %s", [task.id])
    queue.sweep(conn)
    conn.execute("UPDATE tasks SET run_after = now() WHERE id = %s", [task.id])
    [other] = queue.claim(conn, agent="docs", worker_id="w-other", limit=1)
    queue.apply_callback(conn, other.attempt_id, {"status": "completed", "result": {"fields": {}}})
    heartbeats.run_once(beat_all=True)
    settle_all(table, heartbeats, timeout=10)
    attempts = {a.id: a.status.value for a in queue.get_task(conn, task.id).attempts}
    assert attempts == {run.attempt_id: "lost", other.attempt_id: "completed"}


def test_worker_hand_back_requeues_at_once(pool, conn, tmp_path):
    make_agent(conn, "docs", executor="local")
    task = make_task(conn, "docs", max_attempts=1)
    table, claimer, _ = services(pool, tmp_path, python=interpreter(tmp_path, "s", "exec sleep 60"))
    claimer.run_once()
    [run] = table.snapshot()
    claimer.paused = True
    assert claimer.run_once() == 0
    assert table.hand_back_all() == 1
    assert not table.executors["local"].is_alive(run.handle)
    done = queue.get_task(conn, task.id)
    # Handing back spends no attempt budget: the task can run again at once.
    assert done.status.value == "enqueued" and done.attempts_left == 1
    assert done.attempts[0].status.value == "handed_back"
    assert conn.execute("SELECT run_after <= now() AS due FROM tasks WHERE id = %s", [task.id]).fetchone()["due"]


def test_worker_sweeper_takes_back_expired_leases(pool, conn):
    make_agent(conn, "docs")
    task = make_task(conn, "docs")
    queue.claim(conn, agent="docs", worker_id="w-dead", limit=1)
    conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = %s", [task.id])
    sweeper = Sweeper(pool, "w-test")
    assert sweeper.run_once() == 1
    assert sweeper.counters.snapshot()["sweeps_recovered"] == 1
    done = queue.get_task(conn, task.id)
    assert done.status.value == "enqueued" and done.attempts[0].status.value == "lost"


def test_worker_start_failure_fails_the_attempt(pool, conn, tmp_path):
    make_agent(conn, "remote", executor="databricks", settings={})
    task = make_task(conn, "remote")
    table, claimer, _ = services(pool, tmp_path)
    claimer.run_once()
    done = queue.get_task(conn, task.id)
    assert done.status.value == "failed" and "job_id" in done.attempts[0].error
    assert len(table) == 0


def test_worker_wakes_on_new_and_freed_work():
    assert wants_claim([StreamEvent.from_notify({"e": 1, "id": 5, "a": "docs", "s": "enqueued", "p": None})])
    assert wants_claim([StreamEvent.from_notify({"e": 2, "id": 5, "a": "docs", "s": "completed", "p": "processing"})])
    assert not wants_claim([StreamEvent.from_notify({"e": 3, "id": 5, "a": "docs", "s": "processing",
                                                     "p": "enqueued"})])
