"""A graceful stop loses nothing: real `quire up`, `quire serve` and `quire worker` processes, real signals.

Runs shorter than the grace finish and their reports are applied; longer ones are handed back without
spending attempt budget; the app serves callbacks until the runs in flight have reported.
"""

from __future__ import annotations

import contextlib
import json
import signal
from pathlib import Path

import httpx
import pytest

from schema import db, queue
from tests.worker_helpers import (
    QUIRE_BIN,
    Proc,
    free_port,
    make_invoice_pdf,
    quire,
    quire_env,
    wait_for_http,
    wait_until,
)

TOKEN = "stop-test-token"


def write_config(data_dir: Path, agent_table: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "quire.toml").write_text(f"[agents.documents]\n{agent_table}\n")


def app_proc(env: dict[str, str], cwd: Path, command: str, port: int) -> Proc:
    """`quire up` or `quire serve` on a free port, waited on until it answers."""
    # NiceGUI takes a PYTEST_ variable for its own test mode.
    env = {k: v for k, v in env.items() if not k.startswith(("PYTEST_", "NICEGUI_"))}
    env.update(QUIRE_PORT=str(port), QUIRE_HOST="127.0.0.1", QUIRE_OPERATOR_TOKEN=TOKEN)
    proc = Proc([str(QUIRE_BIN), command], env=env, cwd=cwd, name=command)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/healthz", timeout=60)
    except AssertionError:
        proc.stop()
        raise AssertionError(proc.log_text()[-3000:]) from None
    if proc.process.poll() is not None:
        raise AssertionError(proc.log_text()[-3000:])
    return proc


def enqueue(dsn: str, count: int, *, files: list[Path] | None = None) -> list[int]:
    with db.connect(dsn) as conn:
        return [queue.enqueue(conn, agent="documents",
                              document_uri=str(files[n]) if files else f"/nowhere/doc-{n}.pdf").id
                for n in range(count)]


def attempts(dsn: str) -> list[dict]:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT a.id, a.task_id, a.status::text AS status, a.callbacks_received, "
                            "a.pid, t.status::text AS task_status, t.attempt_count - t.attempt_base AS spent "
                            "FROM task_attempts a JOIN tasks t ON t.id = a.task_id ORDER BY a.id").fetchall()


def processing(dsn: str, *, launched: bool = False) -> list[dict]:
    rows = [a for a in attempts(dsn) if a["status"] == "processing"]
    return [a for a in rows if a["pid"] is not None] if launched else rows


def events(proc: Proc) -> list[dict]:
    """The structured log lines of a process, with or without the app's logging prefix."""
    found = []
    for line in proc.log_text().splitlines():
        if "{" in line:
            with contextlib.suppress(ValueError):
                found.append(json.loads(line[line.index("{"):]))
    return found


def started(proc: Proc) -> int:
    """Runs the process's worker started (a claimed task may still be waiting for its start)."""
    return sum(e.get("entity") == "attempt" and e.get("event") == "started" for e in events(proc))


def task_states(dsn: str) -> dict[int, str]:
    with db.connect(dsn) as conn:
        return {r["id"]: r["status"] for r in conn.execute("SELECT id, status::text AS status FROM tasks")}


def invoices(tmp_path: Path, count: int) -> list[Path]:
    return [make_invoice_pdf(tmp_path / "in" / f"inv-{n}.pdf", number=f"INV-{n:04d}") for n in range(count)]


def runs_dir_empty(data_dir: Path) -> bool:
    runs = data_dir / "runs"
    return not runs.exists() or not any(runs.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_quire_up_lets_runs_in_flight_finish_and_report(db_dsn, tmp_path, stop_signal):
    write_config(tmp_path, 'executor = "noop"\nsettings = { delay_seconds = 6 }')
    env = quire_env(db_dsn, tmp_path, shutdown_grace_seconds=30, worker_concurrency=4, poll_seconds=60)
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
    ids = enqueue(db_dsn, 4)
    app = app_proc(env, tmp_path, "up", free_port())
    try:
        wait_until(lambda: started(app) == 4, timeout=60, message="four runs in flight")
        app.signal(stop_signal)
        app.wait(timeout=90)
        rows = attempts(db_dsn)
        assert [a["status"] for a in rows] == ["completed"] * 4, rows
        assert task_states(db_dsn) == {i: "completed" for i in ids}
        # Each run's report came in through the app's callback route, which served on while they ran
        # (on a busy machine the worker may apply a report file first: the callback is then a duplicate).
        logged = events(app)
        through_route = {e["attempt"] for e in logged if e.get("entity") == "attempt" and e.get("event") == "callback"}
        assert through_route == {a["id"] for a in rows}, app.log_text()[-3000:]
        assert any(e.get("event") == "drained" and e.get("handed_back") == 0 for e in logged)
        assert "Traceback" not in app.log_text()
    finally:
        app.stop()


@pytest.mark.slow
def test_quire_up_hands_back_runs_longer_than_the_grace_without_spending_an_attempt(db_dsn, tmp_path):
    write_config(tmp_path, 'executor = "noop"\nsettings = { delay_seconds = 600 }')
    env = quire_env(db_dsn, tmp_path, shutdown_grace_seconds=1, worker_concurrency=2, poll_seconds=60)
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
    ids = enqueue(db_dsn, 2)
    app = app_proc(env, tmp_path, "up", free_port())
    try:
        wait_until(lambda: started(app) == 2, timeout=60, message="two runs in flight")
        app.signal(signal.SIGTERM)
        app.wait(timeout=60)
        rows = attempts(db_dsn)
        assert [a["status"] for a in rows] == ["handed_back"] * 2, rows
        assert all(a["task_status"] == "enqueued" and a["spent"] == 0 for a in rows), rows
        assert task_states(db_dsn) == {i: "enqueued" for i in ids}
    finally:
        app.stop()


@pytest.mark.slow
def test_worker_stopped_first_finishes_its_runs_through_the_app(db_dsn, tmp_path):
    env = quire_env(db_dsn, tmp_path, shutdown_grace_seconds=60, worker_concurrency=2, poll_seconds=60,
                    worker="off")
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
    port = free_port()
    app = app_proc(env, tmp_path, "serve", port)
    worker = None
    try:
        enqueue(db_dsn, 4, files=invoices(tmp_path, 4))
        worker = Proc.worker({**env, "QUIRE_PUBLIC_URL": f"http://127.0.0.1:{port}"}, tmp_path)
        running = wait_until(lambda: len(processing(db_dsn, launched=True)) == 2 and processing(db_dsn),
                             timeout=60, message="two runs in flight")
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=90) == 0
        rows = {a["id"]: a for a in attempts(db_dsn)}
        assert all(rows[r["id"]]["status"] == "completed" for r in running), rows
        assert {a["status"] for a in rows.values()} == {"completed"}, rows
        states = task_states(db_dsn)
        # Nothing was claimed after the signal; what was claimed finished.
        assert sorted(states.values()).count("completed") == len(rows)
        assert set(states.values()) <= {"completed", "enqueued"}, states
        assert runs_dir_empty(tmp_path)
        assert app.process.poll() is None  # the app was not involved in the worker's stop
    finally:
        if worker:
            worker.stop()
        app.stop()


@pytest.mark.slow
def test_app_stopped_first_serves_callbacks_until_runs_report_and_the_worker_loses_nothing(db_dsn, tmp_path):
    env = quire_env(db_dsn, tmp_path, shutdown_grace_seconds=60, worker_concurrency=2, poll_seconds=60,
                    worker="off")
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
    port = free_port()
    app = app_proc(env, tmp_path, "serve", port)
    worker = None
    try:
        ids = enqueue(db_dsn, 6, files=invoices(tmp_path, 6))
        worker = Proc.worker({**env, "QUIRE_PUBLIC_URL": f"http://127.0.0.1:{port}"}, tmp_path)
        running = wait_until(lambda: len(processing(db_dsn, launched=True)) == 2 and processing(db_dsn),
                             timeout=60, message="two runs in flight")
        app.signal(signal.SIGTERM)
        app.wait(timeout=90)
        rows = {a["id"]: a for a in attempts(db_dsn)}
        # The runs in flight when the app was told to stop reported to it before it went.
        assert all(rows[r["id"]]["status"] == "completed" and rows[r["id"]]["callbacks_received"] >= 1
                   for r in running), rows
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
        # The rest run with nobody to call back: the worker applies the reports they wrote.
        wait_until(lambda: set(task_states(db_dsn).values()) == {"completed"}, timeout=180,
                   message="every task to complete without the app")
        assert {a["status"] for a in attempts(db_dsn)} == {"completed"}
        assert len(attempts(db_dsn)) == len(ids)  # nothing ran twice
        assert any(e.get("event") == "report_file_applied" for e in worker.events()), worker.log_text()[-3000:]
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
        assert runs_dir_empty(tmp_path)
    finally:
        if worker:
            worker.stop()
        app.stop()


@pytest.mark.slow
def test_worker_applies_a_written_report_when_it_stops_instead_of_handing_back(db_dsn, tmp_path):
    """A run that finished but could not deliver (its callback host is gone) is applied, not handed back."""
    # A grace shorter than the agents' own retries of their callback (about 30 s).
    env = quire_env(db_dsn, tmp_path, shutdown_grace_seconds=10, worker_concurrency=2, poll_seconds=60)
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
    ids = enqueue(db_dsn, 2, files=invoices(tmp_path, 2))
    # Nothing listens on this port: every callback is refused, as in the stop the issue describes.
    worker = Proc.worker({**env, "QUIRE_PUBLIC_URL": f"http://127.0.0.1:{free_port()}"}, tmp_path)
    try:
        wait_until(lambda: len(processing(db_dsn, launched=True)) == 2, timeout=60, message="two runs in flight")
        wait_until(lambda: any((tmp_path / "runs").glob("attempt-*/report.json")), timeout=60,
                   message="a run to write its report")
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=90) == 0
        rows = attempts(db_dsn)
        assert [a["status"] for a in rows] == ["completed"] * 2, rows
        assert task_states(db_dsn) == {i: "completed" for i in ids}
        assert runs_dir_empty(tmp_path)
    finally:
        worker.stop()
