"""Chaos: three workers, one SIGKILLed every few seconds and restarted; no task is lost or doubled."""

from __future__ import annotations

import signal
import time

import pytest

from schema import db, queue
from tests.waiting import wait_until
from tests.worker_helpers import (
    Proc,
    counts_by_status,
    free_port,
    kill_orphan_agents,
    make_invoice_pdf,
    quire,
    quire_env,
    wait_for_http,
)

BULK_TASKS = 195
DOCUMENT_TASKS = 5
CONFIG = """
[agents.bulk]
executor = "noop"
lease_seconds = 3
settings = { delay_seconds = 1.0 }

[agents.docs]
executor = "local"
lease_seconds = 3
max_concurrent_tasks = 2
"""


def working(worker: Proc) -> bool:
    return any(e["event"] == "claimed" for e in worker.events())


def terminal_count(dsn: str) -> int:
    counts = counts_by_status(dsn)
    return sum(counts.get(s, 0) for s in ("completed", "failed", "cancelled"))


@pytest.mark.slow
def test_e2e_worker_chaos_sigkill_loses_nothing_and_applies_each_result_once(db_dsn, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    (tmp_path / "quire.toml").write_text(CONFIG)
    env = quire_env(db_dsn, tmp_path, public_url=base, worker_concurrency=6, sweep_seconds=0.5,
                    poll_seconds=2, backoff_base_seconds=0.2, backoff_cap_seconds=1,
                    shutdown_grace_seconds=10)
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
    pdf = str(make_invoice_pdf(tmp_path / "in" / "invoice.pdf"))
    with db.connect(db_dsn) as conn:
        for n in range(BULK_TASKS):
            queue.enqueue(conn, agent="bulk", document_uri=f"/bench/doc-{n}.pdf", max_attempts=25,
                          priority=n % 3)
        for _ in range(DOCUMENT_TASKS):
            queue.enqueue(conn, agent="docs", document_uri=pdf, pages=1, max_attempts=25, priority=2)
    server = Proc.callback_server(env, tmp_path, port)
    workers = [Proc.worker(env, tmp_path, f"worker-{i}") for i in range(3)]
    retired: list[Proc] = []
    try:
        wait_for_http(f"{base}/healthz")
        started = time.monotonic()
        kills = 0
        # Every three seconds, while work remains (for at most 25 s), the next worker in turn is
        # killed as soon as it has claimed work, so that it dies with runs in flight.
        while terminal_count(db_dsn) < BULK_TASKS + DOCUMENT_TASKS and time.monotonic() - started < 25:
            victim = kills % 3
            wait_until(lambda kills=kills: time.monotonic() - started >= 3 * (kills + 1), timeout=4, interval=0.1,
                       message="the next kill")
            wait_until(lambda victim=victim: working(workers[victim])
                       or terminal_count(db_dsn) == BULK_TASKS + DOCUMENT_TASKS,
                       timeout=30, interval=0.1, message=f"worker {victim} to claim work")
            workers[victim].signal(signal.SIGKILL)
            assert workers[victim].wait(timeout=10) == -signal.SIGKILL
            retired.append(workers[victim])
            workers[victim] = Proc.worker(env, tmp_path, f"worker-{victim}-{kills}")
            kills += 1
        wait_until(lambda: terminal_count(db_dsn) == BULK_TASKS + DOCUMENT_TASKS, timeout=60, interval=0.2,
                   message="every task to end")
        assert kills >= 3
        for worker in workers:
            wait_until(lambda worker=worker: any(e["event"] == "started" for e in worker.events()), timeout=30,
                       message="the restarted worker to be up")
            worker.signal(signal.SIGTERM)
        assert [w.wait(timeout=30) for w in workers] == [0, 0, 0]
    finally:
        for proc in [server, *workers, *retired]:
            proc.stop()
        kill_orphan_agents(db_dsn)

    with db.connect(db_dsn) as conn:
        counts = counts_by_status(db_dsn)
        assert counts == {"completed": BULK_TASKS + DOCUMENT_TASKS}, counts
        # Exactly one attempt completed each task, and it is the one the task names.
        wrong = conn.execute("""
            SELECT t.id, t.current_attempt_id, array_agg(a.id) FILTER (WHERE a.status = 'completed') AS won
            FROM tasks t JOIN task_attempts a ON a.task_id = t.id
            GROUP BY t.id HAVING count(*) FILTER (WHERE a.status = 'completed') <> 1
                OR t.current_attempt_id <> min(a.id) FILTER (WHERE a.status = 'completed')""").fetchall()
        assert wrong == []
        # Each task became completed exactly once in its event log.
        doubled = conn.execute("SELECT task_id FROM task_events WHERE status = 'completed' "
                               "GROUP BY task_id HAVING count(*) <> 1").fetchall()
        assert doubled == []
        attempts = {r["status"]: r["n"] for r in conn.execute(
            "SELECT status::text AS status, count(*) AS n FROM task_attempts GROUP BY status")}
        assert attempts.get("lost", 0) > 0, attempts  # the killed workers' runs were recovered
        assert attempts.get("processing", 0) == 0, attempts
        documents = conn.execute("SELECT t.result->>'document_type' AS kind, a.pid FROM tasks t "
                                 "JOIN task_attempts a ON a.id = t.current_attempt_id "
                                 "WHERE t.agent = 'docs'").fetchall()
        # Real agent processes extracted every document. An agent whose worker was killed before
        # it noted the process id keeps running on its own (it has its own process group) and
        # reports back itself, so not every completing attempt carries a pid.
        assert all(d["kind"] == "invoice" for d in documents), documents
        assert any(d["pid"] for d in documents), documents
