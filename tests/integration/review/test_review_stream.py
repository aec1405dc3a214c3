"""The review event stream: a change made as soon as a client sees the headers reaches it."""

from __future__ import annotations

import asyncio
import json

from app import live
from app.api.review import review_events
from schema import db, queue
from schema.settings import Settings
from tests.review_fixtures import make_reviewable
from worker.listener import Listener


def test_a_change_made_once_the_stream_began_is_streamed(db_dsn, conn, monkeypatch):
    queue.configure_agent(conn, "docs", settings={"review_sample": 0.0})
    make_reviewable(conn, 1)  # an earlier change: not part of a new stream
    pool = db.make_pool(db_dsn, min_size=1, max_size=2, name="review-stream-test")

    # Not started: the stream finds the change in the log, where its first look reads.
    monkeypatch.setattr(live, "_current", live.Broadcaster(Listener(db_dsn)))

    async def scenario() -> tuple[int, str]:
        response = await review_events(last_event_id=None, after=None, _=None, pool=pool,
                                       settings=Settings(poll_seconds=1))
        # The client has the headers: what it changes now is after the stream's start.
        task_id = await asyncio.to_thread(make_reviewable, conn, 2)
        body = response.body_iterator
        try:
            assert (await anext(body)).startswith("retry:")
            return task_id, await asyncio.wait_for(anext(body), 10)
        finally:
            await body.aclose()

    try:
        task_id, frames = asyncio.run(scenario())
    finally:
        pool.close()
    [data] = [line.removeprefix("data: ") for line in frames.splitlines() if line.startswith("data: ")]
    event = json.loads(data)
    assert (event["task_id"], event["kind"]) == (task_id, "queued")
