"""The process's LISTEN broadcaster: fan-out, coalescing, bounded queues, reconnect after loss."""

from __future__ import annotations

import asyncio
import time

import psycopg

from app.live import APPLICATION_NAME, Broadcaster, parse_payload
from schema import db, queue
from tests.factories import make_agent, make_task


async def _until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_payload_format():
    [event] = parse_payload('[{"e": 7, "id": 3, "a": "docs", "s": "processing", "p": "enqueued"}]')
    assert (event.id, event.task_id, event.agent, event.status, event.prev_status) == (7, 3, "docs", "processing",
                                                                                       "enqueued")


def test_every_subscriber_gets_each_change_once_and_a_burst_wakes_once(db_dsn):
    async def scenario():
        broadcaster = Broadcaster(db_dsn)
        await broadcaster.start()
        await _until(lambda: broadcaster.healthy)
        first, second = broadcaster.subscribe(), broadcaster.subscribe()
        with db.connect(db_dsn) as conn:
            make_agent(conn)
            await asyncio.to_thread(lambda: [make_task(conn) for _ in range(20)])
        await _until(lambda: len(first.events) >= 20 and len(second.events) >= 20)
        events, lagged = first.drain()
        assert not lagged and [e.status for e in events] == ["enqueued"] * 20
        assert len({e.id for e in events}) == 20 and not first.pending
        assert len(second.drain()[0]) == 20
        second.close()
        assert broadcaster.subscribers == 1
        await broadcaster.stop()
    asyncio.run(scenario())


def test_an_overflowing_subscriber_is_told_to_catch_up(db_dsn):
    async def scenario():
        broadcaster = Broadcaster(db_dsn)
        await broadcaster.start()
        await _until(lambda: broadcaster.healthy)
        small = broadcaster.subscribe(max_events=5)
        with db.connect(db_dsn) as conn:
            make_agent(conn)
            await asyncio.to_thread(lambda: [make_task(conn) for _ in range(8)])
        await _until(lambda: small.lagged)
        events, lagged = small.drain()
        assert lagged and len(events) < 8
        await broadcaster.stop()
    asyncio.run(scenario())


def test_reconnects_after_its_backend_is_killed_and_resyncs(db_dsn):
    async def scenario():
        broadcaster = Broadcaster(db_dsn, retry_delays=(0.2,))
        changes: list[bool] = []
        broadcaster.on_health_change(changes.append)
        await broadcaster.start()
        await _until(lambda: broadcaster.healthy)
        sub = broadcaster.subscribe()
        with psycopg.connect(db_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE application_name = %s AND datname = current_database()", [APPLICATION_NAME])
        await _until(lambda: not broadcaster.healthy)
        await _until(lambda: broadcaster.healthy)
        assert changes == [True, False, True] and broadcaster.connects == 2
        assert sub.drain()[1], "subscribers catch up from the log after a reconnect"
        with db.connect(db_dsn) as conn:
            make_agent(conn)
            task = make_task(conn)
            queue.cancel(conn, task.id, actor="t")
        await _until(lambda: len(sub.events) >= 2)
        assert [e.status for e in sub.drain()[0]] == ["enqueued", "cancelled"]
        await broadcaster.stop()
    asyncio.run(scenario())
