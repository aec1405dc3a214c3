"""State changes are logged and notified once per statement, with small payloads."""

import json

import psycopg

from schema import queue
from tests.factories import make_agent, make_task


def test_state_changes_notify_with_compact_payloads(conn, db_dsn):
    make_agent(conn)
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN quire_tasks")
        tasks = [make_task(conn) for _ in range(3)]
        claims = queue.claim(conn, agent="docs", worker_id="w", limit=3)
        queue.heartbeat(conn, claims[0].attempt_id)  # changes no status: notifies nothing
        queue.apply_callback(conn, claims[0].attempt_id, {"status": "completed", "result": {}})
        notes = [json.loads(n.payload) for n in listener.notifies(timeout=2.0, stop_after=5)]
    assert len(notes) == 5  # three inserts, one claim statement, one completion
    assert [len(n) for n in notes] == [1, 1, 1, 3, 1]
    assert notes[3] == sorted(notes[3], key=lambda e: e["e"])
    assert {e["id"] for e in notes[3]} == {t.id for t in tasks}
    assert all(e["s"] == "processing" and e["p"] == "enqueued" and e["a"] == "docs" for e in notes[3])
    assert notes[4][0]["s"] == "completed" and notes[4][0]["id"] == claims[0].task.id
    event_ids = [e["e"] for n in notes for e in n]
    assert event_ids == sorted(event_ids)
    logged = conn.execute("SELECT count(*) AS n FROM task_events").fetchone()["n"]
    assert logged == len(event_ids)


def test_large_batches_are_split_below_the_payload_limit(conn, db_dsn):
    make_agent(conn)
    for _ in range(130):
        make_task(conn)
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN quire_tasks")
        queue.claim(conn, agent="docs", worker_id="w", limit=130)
        notes = [n.payload for n in listener.notifies(timeout=2.0, stop_after=3)]
    assert [len(json.loads(p)) for p in notes] == [50, 50, 30]
    assert max(len(p.encode()) for p in notes) < 8000
