"""The agent fork server: runs forked from a loaded process behave as processes started afresh."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from schema import queue
from tests.factories import make_agent, make_task
from tests.waiting import wait_until
from tests.worker_helpers import group_exists, make_invoice_pdf, settle_all
from worker.claim_config import ClaimerConfig
from worker.claimer import Claimer
from worker.executors import LocalConfig, build_executors
from worker.executors.forkserver import ForkServer, ForkServerGone
from worker.executors.local import FORK_SERVER_FAILURES
from worker.heartbeats import Heartbeats
from worker.runs import RunTable, RunTableConfig
from worker.tracking import locate_tracking, prepare_store

ROOT = Path(__file__).resolve().parents[3]
TARGET = "tests.fork_target"


@pytest.fixture
def server(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), QUIRE_TEST_VALUE="from the server")
    env.pop("MLFLOW_TRACKING_URI", None)
    fork_server = ForkServer(sys.executable, env, tmp_path)
    assert fork_server.wait_ready(60)
    yield fork_server
    fork_server.close(kill=True)


def spawn(server: ForkServer, tmp_path: Path, *argv: str, **env: str):
    run_dir = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    run_dir.mkdir()
    child = server.spawn(TARGET, list(argv), dict(os.environ, PYTHONPATH=str(ROOT), **env), run_dir,
                         run_dir / "stdout.log", run_dir / "stderr.log")
    return child, run_dir


def exit_code(child) -> int:
    assert child.done.wait(60), "the run to end"
    return os.waitstatus_to_exitcode(child.status)


def test_forked_run_has_its_own_session_directory_files_and_environment(server, tmp_path):
    child, run_dir = spawn(server, tmp_path, "describe", "--flag", QUIRE_TEST_VALUE="the run's own")
    assert exit_code(child) == 0
    seen = json.loads((run_dir / "stdout.log").read_text())
    assert seen["pid"] == child.pid != server.process.pid
    assert seen["pgid"] == seen["sid"] == child.pid  # a kill of its group takes nothing else
    assert seen["cwd"] == str(run_dir)
    assert seen["stdin"] == ""
    assert seen["value"] == "the run's own"
    assert seen["argv"] == ["describe", "--flag"]


def test_forked_run_reports_its_exit_code_and_cpu_time(server, tmp_path):
    child, _ = spawn(server, tmp_path, "burn", "0.3", "7")
    assert exit_code(child) == 7
    assert child.cpu_seconds >= 0.3


def test_forked_run_that_raises_exits_1_with_its_traceback_on_stderr(server, tmp_path):
    child, run_dir = spawn(server, tmp_path, "fail")
    assert exit_code(child) == 1
    assert "a run that fails on purpose" in (run_dir / "stderr.log").read_text()


def test_forked_run_ends_as_a_process_does_after_its_other_threads(server, tmp_path):
    written = tmp_path / "written-by-a-thread"
    child, _ = spawn(server, tmp_path, "thread", "0.3", str(written))
    assert exit_code(child) == 0
    assert written.read_text() == "written"


def test_runs_go_on_side_by_side_and_the_server_serves_after_them(server, tmp_path):
    runs = [spawn(server, tmp_path, "burn", "0.05", str(code))[0] for code in range(5)]
    assert [exit_code(child) for child in runs] == list(range(5))
    assert len({child.pid for child in runs}) == 5
    assert exit_code(spawn(server, tmp_path, "burn", "0", "3")[0]) == 3


def test_killing_a_forked_runs_group_takes_its_children_too(server, tmp_path):
    child, run_dir = spawn(server, tmp_path, "family")
    out = run_dir / "stdout.log"
    grandchild = int(wait_until(lambda: out.exists() and out.read_text().strip(), timeout=30,
                                message="the run to start its own child"))
    os.killpg(child.pid, signal.SIGKILL)
    assert exit_code(child) == -signal.SIGKILL
    wait_until(lambda: not group_exists(child.pid), timeout=10, message="the group to end")
    with pytest.raises(ProcessLookupError):
        os.kill(grandchild, 0)


def test_a_run_outlives_its_fork_server_and_is_still_seen_to_end(server, tmp_path):
    go_on = tmp_path / "go-on"
    child, _ = spawn(server, tmp_path, "wait-for", str(go_on))
    server.process.kill()
    wait_until(lambda: server.gone, timeout=30, message="the server's end to be noticed")
    assert group_exists(child.pid) and not child.done.is_set()
    go_on.touch()
    assert child.done.wait(30), "the run's end to be seen through its pid"
    assert child.status is None and child.cpu_seconds is None  # its server is not there to tell
    with pytest.raises(ForkServerGone):
        spawn(server, tmp_path, "sleep", "0")


def test_bad_requests_are_refused_and_the_server_goes_on(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("MLFLOW_TRACKING_URI", None)
    process = subprocess.Popen([sys.executable, "-m", "agents.forkserver"], env=env, cwd=tmp_path,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        def ask(line: bytes) -> dict:
            process.stdin.write(line + b"\n")
            process.stdin.flush()
            return json.loads(process.stdout.readline())

        assert json.loads(process.stdout.readline()) == {"ready": True}
        assert "bad request" in ask(b"not json")["refused"]
        assert "argv" in ask(json.dumps({"module": TARGET, "argv": "burn"}).encode())["refused"]
        assert "cwd" in ask(json.dumps({"module": TARGET, "argv": [], "env": {}}).encode())["refused"]
        good = {"module": TARGET, "argv": ["burn", "0", "5"], "env": env, "cwd": str(tmp_path),
                "stdout": str(tmp_path / "out"), "stderr": str(tmp_path / "err")}
        pid = ask(json.dumps(good).encode())["started"]
        ended = json.loads(process.stdout.readline())
        assert ended["exited"] == pid and os.waitstatus_to_exitcode(ended["status"]) == 5
        process.stdin.close()
        assert process.wait(timeout=30) == 0  # its stdin closed: it ends
    finally:
        process.kill()
        process.wait()


# -- the local executor with a fork server ---------------------------------------------------------

def local_services(pool, tmp_path: Path, python: str = sys.executable, tracking_uri: str | None = None):
    # However slow the machine, a run waits for the fork server rather than starting afresh (the
    # wait is the shorter of this and a third of the agent's lease).
    executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs", python=python, preload=True,
                                            preload_wait_seconds=120, tracking_uri=tracking_uri))
    table = RunTable(pool, executors, RunTableConfig(worker_id="w-test"))
    return table, Claimer(table, executors, ClaimerConfig(concurrency=4)), Heartbeats(table), executors


def test_worker_local_runs_are_forked_from_the_fork_server_and_trace_to_mlflow(pool, conn, db_dsn, tmp_path,
                                                                              monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri, ours = locate_tracking(db_dsn, None)
    assert ours and prepare_store(db_dsn, uri, artifact_root=tmp_path / "artifacts")
    make_agent(conn, "docs", executor="local", lease_seconds=600)
    pdf = make_invoice_pdf(tmp_path / "invoice.pdf")
    tasks = [make_task(conn, "docs", document_uri=str(pdf), pages=1) for _ in range(2)]
    table, claimer, heartbeats, executors = local_services(pool, tmp_path, tracking_uri=uri)
    try:
        assert claimer.run_once() == 2
        runs = table.snapshot()
        assert all(run.handle.child is not None for run in runs)
        assert {queue.get_attempt(conn, run.attempt_id).pid for run in runs} == {run.handle.pid for run in runs}
        settle_all(table, heartbeats)
        for task in tasks:
            done = queue.get_task(conn, task.id)
            assert done.status.value == "completed", done.error
            assert done.result["fields"]["total"]["value"] == 1200.0
            assert done.attempts[0].compute_seconds > 0
        # Each forked run opened its own connection to the store the server had loaded.
        trace_ids = {queue.get_task(conn, task.id).attempts[0].trace_id for task in tasks}
        assert len(trace_ids) == 2 and None not in trace_ids
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        assert all(client.get_trace(trace_id).info.trace_id == trace_id for trace_id in trace_ids)
    finally:
        executors["local"].close()


def test_worker_runs_start_afresh_when_the_fork_server_cannot_load(pool, conn, tmp_path):
    make_agent(conn, "docs", executor="local")
    pdf = make_invoice_pdf(tmp_path / "invoice.pdf")
    tasks = [make_task(conn, "docs", document_uri=str(pdf), pages=1) for _ in range(5)]
    # An interpreter whose fork server dies while loading; agents it starts directly work.
    starts = tmp_path / "fork-server-starts"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nif [ "$2" = agents.forkserver ]; then echo >> {starts}; exit 1; fi\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    table, claimer, heartbeats, executors = local_services(pool, tmp_path, python=str(python))
    try:
        while (claimed := claimer.run_once()) > 0:
            runs = table.snapshot()
            assert len(runs) == claimed
            assert all(run.handle.child is None and run.handle.process is not None for run in runs)
            settle_all(table, heartbeats)
        assert all(queue.get_task(conn, t.id).status.value == "completed" for t in tasks)
        # Given up after three that died loading: no fork server is started for each run.
        assert len(starts.read_text().splitlines()) == FORK_SERVER_FAILURES
    finally:
        executors["local"].close()
