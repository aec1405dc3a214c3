"""The daemon co-hosted in another asyncio program: claims on LISTEN, stops when told."""

from __future__ import annotations

import asyncio
import logging

from schema import queue
from schema.settings import Settings
from tests.factories import make_agent, make_task
from tests.worker_helpers import counts_by_status
from worker.daemon import WorkerDaemon


async def until(condition, *, timeout: float, message: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await asyncio.to_thread(condition):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.05)


def test_worker_daemon_in_a_host_loop_claims_on_notify_and_stops(db_dsn, conn, tmp_path, caplog):
    make_agent(conn, "bench", executor="noop")
    for _ in range(12):
        make_task(conn, "bench")
    # A poll far longer than the test: work enqueued later is found through LISTEN alone.
    settings = Settings(data_dir=tmp_path, poll_seconds=300, sweep_seconds=300, reconcile_seconds=300)
    daemon = WorkerDaemon(settings, db_dsn, worker_id="w-host", concurrency=3)
    caplog.set_level(logging.INFO, logger="quire.worker")

    async def host() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(daemon.run(stop))
        await until(lambda: counts_by_status(db_dsn) == {"completed": 12}, timeout=30, message="the backlog")
        await until(lambda: daemon.listener.live, timeout=10,
                    message="the LISTEN connection")
        late = await asyncio.to_thread(make_task, conn, "bench")
        await until(lambda: queue.get_task(conn, late.id).status.value == "completed", timeout=10,
                    message="the task enqueued after the backlog")
        stop.set()
        await asyncio.wait_for(running, 30)

    asyncio.run(host())
    events = [r.getMessage() for r in caplog.records if r.name == "quire.worker"]
    assert any('"event":"started"' in e for e in events) and any('"event":"stopped"' in e for e in events)
    assert sum('"event":"claimed"' in e for e in events) == 13
    attempts = conn.execute("SELECT DISTINCT worker_id FROM task_attempts").fetchall()
    assert attempts == [{"worker_id": "w-host"}]
    assert daemon.counters == {"claims": 13, "throttled_claims": 0, "runs_started": 13, "runs_handed_back": 0,
                               "sweeps_recovered": 0}
    assert not daemon.listener.live, "a daemon closes the Listener it runs itself"
