"""The daemon co-hosted in another asyncio program: claims on LISTEN, stops when told."""

from __future__ import annotations

import asyncio
import logging
import os

from schema import queue
from schema.settings import Settings
from tests.factories import make_agent, make_task
from tests.waiting import wait_until, wait_until_async
from tests.worker_helpers import counts_by_status, drop_tracking_store
from worker.daemon import WorkerDaemon
from worker.tracking import tracking_store_state


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
        await wait_until_async(lambda: counts_by_status(db_dsn) == {"completed": 12}, blocking=True, timeout=30,
                               message="the backlog")
        await wait_until_async(lambda: daemon.listener.live, timeout=10, message="the LISTEN connection")
        late = await asyncio.to_thread(make_task, conn, "bench")
        await wait_until_async(lambda: queue.get_task(conn, late.id).status.value == "completed", blocking=True,
                               timeout=10, message="the task enqueued after the backlog")
        stop.set()
        await asyncio.wait_for(running, 30)

    asyncio.run(host())
    # One JSON object per line; the lines of one claim round or settlement share a record.
    events = [line for r in caplog.records if r.name == "quire.worker" for line in r.getMessage().splitlines()]
    assert any('"event":"started"' in e for e in events) and any('"event":"stopped"' in e for e in events)
    assert sum('"event":"claimed"' in e for e in events) == 13
    attempts = conn.execute("SELECT DISTINCT worker_id FROM task_attempts").fetchall()
    assert attempts == [{"worker_id": "w-host"}]
    assert daemon.counters == {"claims": 13, "throttled_claims": 0, "runs_started": 13, "runs_handed_back": 0,
                               "sweeps_recovered": 0, "runs_detached": 0, "runs_reconciled": 0}
    assert not daemon.listener.live, "a daemon closes the Listener it runs itself"


def _alive(pid: int) -> bool:
    """Whether a process of that id still runs (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_measure_of_ocr_gives_way_to_work_and_to_a_stop(db_dsn, conn, tmp_path, monkeypatch, caplog):
    # The measure takes tens of seconds of CPU: beside a backlog that came just after the worker
    # went idle, it slowed the drain by a third. It runs in a process of its own at the lowest
    # priority; a run that starts kills it, and it is taken again at the next idle moment; a stop
    # kills it too, and nothing is recorded.
    from schema import calibration
    from worker import daemon as daemon_module

    monkeypatch.setattr(daemon_module, "IDLE_BEFORE_CALIBRATION", 0.2)
    make_agent(conn, "quick", executor="noop")
    settings = Settings(data_dir=tmp_path, poll_seconds=300, sweep_seconds=300, reconcile_seconds=300,
                        ocr_calibration=True)
    caplog.set_level(logging.INFO, logger="quire.worker")
    daemon = WorkerDaemon(settings, db_dsn, worker_id="w-measure", concurrency=1)

    async def scenario() -> int:
        stop = asyncio.Event()
        running = asyncio.create_task(daemon.run(stop))
        await wait_until_async(lambda: daemon.measure_pid is not None, timeout=30, message="a measure to begin")
        first = daemon.measure_pid
        assert os.getpriority(os.PRIO_PROCESS, first) == 19, "the lowest CPU priority"
        task = await asyncio.to_thread(make_task, conn, "quick")
        await wait_until_async(lambda: queue.get_task(conn, task.id).status.value == "completed", blocking=True,
                               timeout=30, message="the task that came during the measure")
        await wait_until_async(lambda: not _alive(first), timeout=10, message="the measure to be given up")
        await wait_until_async(lambda: daemon.measure_pid != first, timeout=30,
                               message="a new measure at the next idle moment")
        second = daemon.measure_pid
        stop.set()
        await asyncio.wait_for(running, 30)
        return second

    second = asyncio.run(scenario())
    assert not _alive(second), "a stop kills the measure under way"
    assert calibration.ocr_calibration_latest(conn) is None
    lines = [line for r in caplog.records if r.name == "quire.worker" for line in r.getMessage().splitlines()]
    assert not any('"during":"measure OCR"' in line for line in lines), lines


def test_a_first_start_sets_up_mlflow_once_the_worker_idles_and_a_stop_leaves_it_to_finish(db_dsn, conn, tmp_path):
    # MLflow's first set-up takes seconds of CPU and the queue server's time: with no work of an
    # agent that traces, it waits until the worker has no run, instead of slowing the drain. It runs
    # in a process of its own (seconds, longer on a busy machine at its lower priority): a worker
    # stopped meanwhile does not wait for it, and the set-up still ends done.
    drop_tracking_store(db_dsn)
    make_agent(conn, "slow", executor="noop", settings={"delay_seconds": 8})
    task = make_task(conn, "slow")
    settings = Settings(data_dir=tmp_path, poll_seconds=300, sweep_seconds=300, reconcile_seconds=300)
    daemon = WorkerDaemon(settings, db_dsn, worker_id="w-later", concurrency=1)

    async def scenario() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(daemon.run(stop))
        await wait_until_async(lambda: queue.get_task(conn, task.id).status.value == "processing", blocking=True,
                               timeout=30, message="the run")
        await asyncio.sleep(2)  # twice the idle time the set-up waits for, and well within the run
        assert daemon.tracking_setup is None, "the set-up began beside a run of work that does not trace"
        await wait_until_async(lambda: queue.get_task(conn, task.id).status.value == "completed", blocking=True,
                               timeout=60, message="the run to end")
        await wait_until_async(lambda: daemon.tracking_setup is not None, timeout=30,
                               message="the set-up once the worker idles")
        stop.set()
        await asyncio.wait_for(running, 60)

    asyncio.run(scenario())
    wait_until(lambda: tracking_store_state(db_dsn) == "ready", timeout=180, interval=0.5,
               message="MLflow's set-up to finish on its own")
