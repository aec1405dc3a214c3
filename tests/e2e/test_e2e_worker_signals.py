"""SIGTERM: a worker stops claiming, lets runs finish within the grace period, hands back the rest."""

from __future__ import annotations

import os
import signal

import pytest

from schema import db
from tests.waiting import wait_until
from tests.worker_helpers import Proc, make_invoice_pdf, quire, quire_env


def submit(env, tmp_path, count: int) -> None:
    pdfs = [str(make_invoice_pdf(tmp_path / "in" / f"inv-{n}.pdf", number=f"INV-{n:04d}")) for n in range(count)]
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0  # configures the agent; submit only reads
    done = quire("submit", *pdfs, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def in_flight(dsn: str) -> list[dict]:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT id, task_id, pid FROM task_attempts "
                            "WHERE status = 'processing' AND pid IS NOT NULL").fetchall()


def attempts(dsn: str) -> dict[int, str]:
    with db.connect(dsn) as conn:
        return {r["id"]: r["status"] for r in
                conn.execute("SELECT id, status::text AS status FROM task_attempts")}


@pytest.mark.slow
def test_e2e_worker_sigterm_lets_runs_in_flight_finish(db_dsn, tmp_path):
    # No callback URL: runs hand their report to the worker through their report file.
    env = quire_env(db_dsn, tmp_path, shutdown_grace_seconds=60, worker_concurrency=2, poll_seconds=60)
    submit(env, tmp_path, 4)
    worker = Proc.worker(env, tmp_path)
    try:
        running = wait_until(lambda: len(in_flight(db_dsn)) == 2 and in_flight(db_dsn), timeout=60,
                             message="two runs in flight")
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
        states = attempts(db_dsn)
        assert all(states[r["id"]] == "completed" for r in running), states
        assert set(states.values()) == {"completed"}, states
        with db.connect(db_dsn) as conn:
            tasks = conn.execute("SELECT t.status::text AS status, count(a.id) AS n FROM tasks t "
                                 "LEFT JOIN task_attempts a ON a.task_id = t.id GROUP BY t.id").fetchall()
        # Nothing was claimed after the signal: unfinished tasks were never started.
        assert all((t["status"], t["n"]) in {("completed", 1), ("enqueued", 0)} for t in tasks), tasks
        assert any(e["event"] == "stopping" and e["in_flight"] >= 1 for e in worker.events())
    finally:
        worker.stop()


@pytest.mark.slow
def test_e2e_worker_sigterm_hands_back_what_outlasts_the_grace(db_dsn, tmp_path):
    env = quire_env(db_dsn, tmp_path, shutdown_grace_seconds=0, worker_concurrency=2, poll_seconds=60)
    submit(env, tmp_path, 2)
    worker = Proc.worker(env, tmp_path)
    try:
        running = wait_until(lambda: in_flight(db_dsn), timeout=60, message="a run in flight")
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
        states = attempts(db_dsn)
        assert all(states[r["id"]] in ("handed_back", "completed") for r in running), states
        assert "handed_back" in states.values(), states
        for run in running:
            with pytest.raises(ProcessLookupError):
                os.killpg(run["pid"], 0)
        with db.connect(db_dsn) as conn:
            back = conn.execute("SELECT t.status::text AS status, t.run_after <= now() AS due, "
                                "t.attempt_count - t.attempt_base AS spent FROM tasks t JOIN task_attempts a "
                                "ON a.task_id = t.id WHERE a.status = 'handed_back'").fetchall()
        assert back and all(r == {"status": "enqueued", "due": True, "spent": 0} for r in back), back
        assert any(e["entity"] == "task" and e["event"] == "handed_back" for e in worker.events())
    finally:
        worker.stop()
