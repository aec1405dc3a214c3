"""The database restarts under running workers: they reconnect, listen again and finish the work."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from schema import db, queue
from tests.waiting import wait_until
from tests.worker_helpers import Proc, counts_by_status, free_port, quire, quire_env, wait_for_http

# Enough work that it is still running when the test looks (80 runs of 2 s on 8 slots: 20 s), on a
# busy machine too.
FIRST = 80
CONFIG = """
[agents.bulk]
executor = "noop"
lease_seconds = 5
settings = { delay_seconds = 2.0 }
"""


def listener_events(worker: Proc, event: str) -> list[dict]:
    return [e for e in worker.events() if e["entity"] == "worker" and e["event"] == event]


def in_flight(dsn: str) -> int:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT count(*) AS n FROM task_attempts WHERE status = 'processing'").fetchone()["n"]


def enqueue(dsn: str, count: int) -> None:
    with db.connect(dsn) as conn:
        for n in range(count):
            queue.enqueue(conn, agent="bulk", document_uri=f"/bench/restart-{n}.pdf", max_attempts=20)


@pytest.mark.slow
def test_e2e_worker_reconnects_and_listens_again_after_a_database_restart(tmp_path):
    # The server's own directory lives outside pytest's temporary root: another pytest session
    # resets that root's permissions, and the server runs as an unprivileged user.
    server_dir = Path(tempfile.mkdtemp(prefix="quire-restart-"))
    os.chmod(server_dir, 0o755)
    server_env = {k: v for k, v in quire_env("", server_dir).items() if k != "QUIRE_DATABASE_URL"}
    started = quire("db-url", env=server_env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    dsn = started.stdout.strip()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    (tmp_path / "quire.toml").write_text(CONFIG)
    # A poll far longer than the test: work enqueued after the restart is found through LISTEN.
    env = quire_env(dsn, tmp_path, public_url=base, worker_concurrency=4, poll_seconds=300,
                    sweep_seconds=1, backoff_base_seconds=0.2, backoff_cap_seconds=1)
    procs: list[Proc] = []
    try:
        assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
        enqueue(dsn, FIRST)
        procs.append(Proc.callback_server(env, tmp_path, port))
        wait_for_http(f"{base}/healthz")
        workers = [Proc.worker(env, tmp_path, f"worker-{i}") for i in range(2)]
        procs.extend(workers)
        wait_until(lambda: all(listener_events(w, "listening") for w in workers), timeout=60,
                   message="both workers to listen")
        wait_until(lambda: counts_by_status(dsn).get("completed", 0) >= 8 and in_flight(dsn) >= 2, timeout=60,
                   message="work under way, with runs in flight")

        # The server goes away with runs in flight.
        assert quire("db-stop", env=server_env, cwd=tmp_path).returncode == 0
        wait_until(lambda: all(listener_events(w, "polling") for w in workers), timeout=30,
                   message="both workers to lose their LISTEN connection")
        assert quire("db-url", env=server_env, cwd=tmp_path).returncode == 0
        wait_until(lambda: all(len(listener_events(w, "listening")) >= 2 for w in workers), timeout=30,
                   message="both workers to listen again")

        wait_until(lambda: counts_by_status(dsn) == {"completed": FIRST}, timeout=90, interval=0.2,
                   message="the work in flight at the restart to finish")
        enqueue(dsn, 20)
        wait_until(lambda: counts_by_status(dsn) == {"completed": FIRST + 20}, timeout=30, interval=0.2,
                   message="work enqueued after the restart, found through LISTEN")
        for worker in workers:
            worker.signal(signal.SIGTERM)
        assert [w.wait(timeout=30) for w in workers] == [0, 0]
        with db.connect(dsn) as conn:
            wrong = conn.execute("SELECT task_id FROM task_attempts GROUP BY task_id "
                                 "HAVING count(*) FILTER (WHERE status = 'completed') <> 1").fetchall()
        assert wrong == []
    finally:
        for proc in procs:
            proc.stop()
        quire("db-stop", env=server_env, cwd=tmp_path)
        shutil.rmtree(server_dir, ignore_errors=True)
