"""The SSE stream of a running app, read with a real HTTP client: completeness, order, resume."""

from __future__ import annotations

import threading

import httpx

from schema import db, queue
from tests.e2e.app_harness import TOKEN, SseReader, complete
from tests.waiting import wait_until


def test_every_state_change_of_100_tasks_arrives_in_order(app_server):
    server, conn = app_server
    reader = SseReader(f"{server.url}/api/events", {"Authorization": f"Bearer {TOKEN}"})
    reader.start()
    assert reader.connected.wait(10)
    wait_until(lambda: reader.messages and reader.messages[0][0] == "snapshot", timeout=10, message="the snapshot")
    start_id = reader.messages[0][1]

    # Four writers at once, as a worker fleet would: enqueue, claim in batches, finish each task.
    # Each drives an agent of its own, so that its claims take exactly its tasks.
    for offset in range(4):
        queue.configure_agent(conn, f"sse{offset}")

    def drive(offset: int) -> list[int]:
        with db.connect(server.dsn) as own:
            agent = f"sse{offset}"
            ids = [queue.enqueue(own, agent=agent, document_uri=f"/sse/{offset}-{i}.pdf").id for i in range(25)]
            claims = []
            for _ in range(10):
                claims += queue.claim(own, agent=agent, worker_id=f"w{offset}", limit=10)
            for n, c in enumerate(claims):
                if n % 5 == 0:
                    queue.cancel(own, c.task.id, actor="sse-test")
                elif n % 7 == 0:
                    queue.apply_callback(own, c.attempt_id, {"status": "failed", "error": "unreadable scan",
                                                             "retryable": False})
                else:
                    complete(own, c.attempt_id)
            return ids

    results: list[list[int]] = []
    threads = [threading.Thread(target=lambda o=o: results.append(drive(o))) for o in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    task_ids = {i for ids in results for i in ids}
    assert len(task_ids) == 100
    expected = {}
    for event in queue_events(conn, start_id):
        expected.setdefault(event["task_id"], []).append(event)
    assert set(expected) == task_ids

    def delivered() -> dict[int, list[dict]]:
        got: dict[int, list[dict]] = {}
        for event in reader.task_events():
            got.setdefault(event["task_id"], []).append(event)
        return got
    wait_until(lambda: sum(len(v) for v in delivered().values()) >= sum(len(v) for v in expected.values()),
               timeout=15, message="every event")
    reader.close()
    got = delivered()
    for task_id, events in expected.items():
        assert [(e["id"], e["status"]) for e in got[task_id]] == [(e["id"], e["status"]) for e in events]
        assert [e["status"] for e in got[task_id]][:2] == ["enqueued", "processing"]
    ids = [e["id"] for e in reader.task_events()]
    assert len(ids) == len(set(ids)), "no event is sent twice"


def queue_events(conn, after_id: int) -> list[dict]:
    from schema.stats import task_events_after

    return [e.__dict__ for e in task_events_after(conn, after_id, limit=100_000)]


def test_resume_with_last_event_id_replays_what_was_missed(app_server):
    server, conn = app_server
    first = queue.enqueue(conn, agent="documents", document_uri="/sse/resume-a.pdf")
    mark = queue_events(conn, 0)[-1]["id"]
    second = queue.enqueue(conn, agent="documents", document_uri="/sse/resume-b.pdf")
    queue.cancel(conn, second.id, actor="sse-test")
    reader = SseReader(f"{server.url}/api/events",
                       {"Authorization": f"Bearer {TOKEN}", "Last-Event-ID": str(mark)})
    reader.start()
    wait_until(lambda: len(reader.task_events()) >= 2, timeout=10, message="the replay")
    replayed = reader.task_events()
    assert [(e["task_id"], e["status"]) for e in replayed[:2]] == [(second.id, "enqueued"), (second.id, "cancelled")]
    assert all(e["task_id"] != first.id for e in replayed)
    assert not [m for m in reader.messages if m[0] == "snapshot"]
    queue.cancel(conn, first.id, actor="sse-test")
    wait_until(lambda: any(e["task_id"] == first.id for e in reader.task_events()), timeout=5,
               message="a live event after the replay")
    reader.close()


def test_events_need_a_signed_in_caller(app_server):
    server, _ = app_server
    with httpx.Client(base_url=server.url, timeout=5) as http:
        assert http.get("/api/events", headers={"X-Forwarded-Email": "x@example.com"}).status_code == 401
