"""The process's LISTEN connection and its fan-out: coalescing, bounded queues, reconnect after loss,
and one connection shared by the pages, the SSE streams and a co-hosted worker."""

from __future__ import annotations

import asyncio

import psycopg

from app.live import Broadcaster
from schema import db, queue
from schema.models import TaskStatus
from schema.settings import Settings
from tests.factories import make_agent, make_task
from tests.waiting import wait_until_async
from worker.daemon import WorkerDaemon
from worker.listener import Listener, ListenerConfig, parse_events

# Backends of this database that listen or check a LISTEN: by the listener's name, or by what they run.
LISTENING_BACKENDS = """
SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND (application_name = %(name)s OR query ~* '^\\s*LISTEN\\M' OR query ILIKE '%%pg_listening_channels%%')
"""


def _listening_backends(dsn: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as admin:
        return [pid for (pid,) in admin.execute(LISTENING_BACKENDS, {"name": ListenerConfig().application_name})]


def _terminate(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)


def test_notify_payloads_decode_into_typed_events_once():
    [event] = parse_events('[{"e": 7, "id": 3, "a": "docs", "s": "processing", "p": "enqueued"}]')
    assert (event.id, event.task_id, event.agent, event.status, event.prev_status) == (
        7, 3, "docs", TaskStatus.PROCESSING, TaskStatus.ENQUEUED)
    assert event.status.cancellable and not event.status.retryable
    for unreadable in ('not json', '[{"e": 1}]', '[{"e": 1, "id": 2, "a": "x", "s": "lost", "p": null}]', '3'):
        assert parse_events(unreadable) is None, unreadable


def test_every_subscriber_gets_each_change_once_and_a_burst_wakes_once(db_dsn):
    async def scenario():
        broadcaster = Broadcaster(Listener(db_dsn))
        await broadcaster.start()
        await wait_until_async(lambda: broadcaster.healthy)
        first, second = broadcaster.subscribe(), broadcaster.subscribe()
        with db.connect(db_dsn) as conn:
            make_agent(conn)
            await asyncio.to_thread(lambda: [make_task(conn) for _ in range(20)])
        await wait_until_async(lambda: len(first.events) >= 20 and len(second.events) >= 20)
        events, lagged = first.drain()
        assert not lagged and [e.status for e in events] == ["enqueued"] * 20
        assert len({e.id for e in events}) == 20 and not first.pending
        assert len(second.drain()[0]) == 20
        assert broadcaster.notifications == 20 and broadcaster.events_seen == 20
        second.close()
        assert broadcaster.subscribers == 1
        await broadcaster.stop()
        assert not broadcaster.healthy
    asyncio.run(scenario())


def test_an_overflowing_subscriber_is_told_to_catch_up(db_dsn):
    async def scenario():
        broadcaster = Broadcaster(Listener(db_dsn))
        await broadcaster.start()
        await wait_until_async(lambda: broadcaster.healthy)
        small = broadcaster.subscribe(max_events=5)
        with db.connect(db_dsn) as conn:
            make_agent(conn)
            await asyncio.to_thread(lambda: [make_task(conn) for _ in range(8)])
        await wait_until_async(lambda: small.lagged)
        events, lagged = small.drain()
        assert lagged and len(events) < 8
        await broadcaster.stop()
    asyncio.run(scenario())


def test_an_unreadable_notification_tells_subscribers_to_catch_up(db_dsn):
    async def scenario():
        broadcaster = Broadcaster(Listener(db_dsn))
        await broadcaster.start()
        await wait_until_async(lambda: broadcaster.healthy)
        sub = broadcaster.subscribe()
        with psycopg.connect(db_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_notify('quire_tasks', 'not json')")
        await wait_until_async(lambda: sub.lagged, message="the lag flag")
        assert sub.drain() == ([], True) and broadcaster.healthy and broadcaster.events_seen == 0
        await broadcaster.stop()
    asyncio.run(scenario())


def test_reconnects_after_its_backend_is_killed_and_resyncs(db_dsn):
    async def scenario():
        broadcaster = Broadcaster(Listener(db_dsn, config=ListenerConfig(reconnect_min_seconds=0.2)))
        changes: list[bool] = []
        broadcaster.on_health_change(changes.append)
        await broadcaster.start()
        await wait_until_async(lambda: broadcaster.healthy)
        sub = broadcaster.subscribe()
        [pid] = await asyncio.to_thread(_listening_backends, db_dsn)
        await asyncio.to_thread(_terminate, db_dsn, pid)
        await wait_until_async(lambda: not broadcaster.healthy)
        await wait_until_async(lambda: broadcaster.healthy)
        assert changes == [True, False, True] and broadcaster.connects == 2 and broadcaster.last_error
        assert sub.drain()[1], "subscribers catch up from the log after a reconnect"
        with db.connect(db_dsn) as conn:
            make_agent(conn)
            task = make_task(conn)
            queue.cancel(conn, task.id, actor="t")
        await wait_until_async(lambda: len(sub.events) >= 2)
        assert [e.status for e in sub.drain()[0]] == ["enqueued", "cancelled"]
        await broadcaster.stop()
    asyncio.run(scenario())


def test_a_cohosted_worker_shares_the_one_listen_connection_and_both_recover(db_dsn, conn, tmp_path):
    make_agent(conn, "bench", executor="noop")
    # A poll far longer than the test: the worker finds work through notifications alone.
    settings = Settings(data_dir=tmp_path, poll_seconds=300, sweep_seconds=300, reconcile_seconds=300)

    def status(task_id: int) -> str:
        return queue.get_task(conn, task_id).status.value

    async def enqueue_and_follow(sub, count: int) -> None:
        """Enqueues tasks; the worker completes them and the subscriber sees every step."""
        tasks = await asyncio.to_thread(lambda: [make_task(conn, "bench") for _ in range(count)])
        ids = {t.id for t in tasks}
        await wait_until_async(lambda: all(status(i) == "completed" for i in ids), blocking=True, timeout=20,
                               message="the worker to finish")
        seen: set[tuple[int, str]] = set()

        def collected() -> bool:
            seen.update((e.task_id, e.status) for e in sub.drain()[0])
            return {(i, s) for i in ids for s in ("enqueued", "processing", "completed")} <= seen
        await wait_until_async(collected, message="the subscriber to see every change")

    async def scenario():
        listener = Listener(db_dsn, config=ListenerConfig(reconnect_min_seconds=0.2))
        broadcaster = Broadcaster(listener)
        daemon = WorkerDaemon(settings, db_dsn, worker_id="w-cohost", concurrency=2, listener=listener)
        await broadcaster.start()
        stop = asyncio.Event()
        running = asyncio.create_task(daemon.run(stop))
        try:
            await wait_until_async(lambda: listener.live, message="the LISTEN connection")
            await wait_until_async(lambda: daemon.table is not None, blocking=True, timeout=20,
                                   message="the worker to start")
            sub = broadcaster.subscribe()
            await enqueue_and_follow(sub, 3)
            [pid] = await asyncio.to_thread(_listening_backends, db_dsn)

            await asyncio.to_thread(_terminate, db_dsn, pid)
            await wait_until_async(lambda: listener.connects == 2 and listener.live, message="the reconnect")
            assert sub.lagged, "subscribers catch up from the log after a reconnect"
            sub.drain()
            [again] = await asyncio.to_thread(_listening_backends, db_dsn)
            assert again != pid
            # With a 300 s poll, the worker finds this work only by being woken through the new connection.
            await enqueue_and_follow(sub, 2)
            assert await asyncio.to_thread(_listening_backends, db_dsn) == [again]
            counters = daemon.counters
            assert counters["claims"] == 5 and counters["runs_started"] == 5
            assert counters["throttled_claims"] == 0 and counters["runs_handed_back"] == 0
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)
        # The worker leaves the connection to its owner: still listening after the worker stopped.
        assert listener.live
        await broadcaster.stop()
        assert not listener.live
        # The server ends a closed connection's backend a moment after the client hangs up.
        await wait_until_async(lambda: _listening_backends(db_dsn) == [], blocking=True,
                               message="the LISTEN backend to go away")

    asyncio.run(scenario())
