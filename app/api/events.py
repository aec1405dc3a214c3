"""Server-Sent Events: one event per task state change, resumable, fed by the process's LISTEN."""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse
from psycopg_pool import ConnectionPool

from app import inputs, live, services
from app.api.common import get_pool, get_settings
from app.api.schemas import event_data
from app.auth import Identity, require_user
from schema.settings import Settings
from schema.stats_types import StreamEvent

router = APIRouter(tags=["events"])

KEEPALIVE_SECONDS = 15.0
REPLAY_PAGE = 1000
# Event ids are taken before commit, so a lower id can commit after a higher one was sent:
# catch-up reads reach this far below the highest id sent, and duplicates are skipped.
ROUTINE_OVERLAP = 50
LAG_OVERLAP = 1000


def frame(event: str, data: dict, event_id: int | None = None) -> str:
    """One SSE message."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


class SentLog:
    """Which event ids a stream already sent (a bounded window), and the highest one."""

    def __init__(self, high: int, window: int = 20_000) -> None:
        self.high = high
        self._order: deque[int] = deque()
        self._ids: set[int] = set()
        self._window = window

    def fresh(self, event: StreamEvent) -> bool:
        if event.id in self._ids:
            return False
        self._ids.add(event.id)
        self._order.append(event.id)
        if len(self._order) > self._window:
            self._ids.discard(self._order.popleft())
        self.high = max(self.high, event.id)
        return True


async def _catch_up(pool: ConnectionPool, sent: SentLog, after_id: int) -> AsyncIterator[str]:
    while True:
        events = await services.events_after(pool, max(after_id, 0), limit=REPLAY_PAGE)
        for event in events:
            if sent.fresh(event):
                yield frame("task", event_data(event), event.id)
        if len(events) < REPLAY_PAGE:
            return
        after_id = events[-1].id


async def _stream(pool: ConnectionPool, settings: Settings, resume_after: int | None) -> AsyncIterator[str]:
    broadcaster = live.current()
    # Subscribe before reading anything, so no change falls between the read and the stream.
    sub = broadcaster.subscribe()
    try:
        yield "retry: 3000\n\n"
        if resume_after is not None:
            sent = SentLog(resume_after)
            async for chunk in _catch_up(pool, sent, resume_after):
                yield chunk
        else:
            snap = await services.snapshot(pool)
            sent = SentLog(snap["last_event_id"])
            yield frame("snapshot", {**snap, "live": broadcaster.healthy}, snap["last_event_id"])
        last_write = last_poll = time.monotonic()
        while True:
            now = time.monotonic()
            wait = min(KEEPALIVE_SECONDS - (now - last_write), settings.poll_seconds - (now - last_poll))
            woke = await sub.wait(max(wait, 0.0))
            events, lagged = sub.drain() if woke else ([], False)
            now = time.monotonic()
            chunks: list[str] = []
            if lagged or now - last_poll >= settings.poll_seconds:
                # The fallback poll, always on: it also covers a lost LISTEN and an overflowing queue.
                overlap = LAG_OVERLAP if lagged or not broadcaster.healthy else ROUTINE_OVERLAP
                async for chunk in _catch_up(pool, sent, sent.high - overlap):
                    chunks.append(chunk)
                last_poll = now
            chunks += [frame("task", event_data(e), e.id) for e in events if sent.fresh(e)]
            if chunks:
                yield "".join(chunks)
                last_write = now
            elif now - last_write >= KEEPALIVE_SECONDS:
                yield ": keep-alive\n\n"
                last_write = now
    finally:
        sub.close()


@router.get("/api/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "`snapshot` then one `task` event per state change"}})
async def stream_events(last_event_id: str | None = Header(None, alias="Last-Event-ID"),
                        after: int | None = Query(None, ge=0, le=inputs.MAX_ID, description="replay events after this id"),
                        _: Identity = Depends(require_user), pool: ConnectionPool = Depends(get_pool),
                        settings: Settings = Depends(get_settings)) -> StreamingResponse:
    """Task state changes as Server-Sent Events.

    Each `task` event carries `id:` = the event log id and a JSON body {id, task_id, agent, status,
    prev_status}. With `Last-Event-ID` (or `?after=`) the stream replays every change after that id;
    otherwise it starts with a `snapshot` event (newest event id, counts). Keep-alive comments every 15 s.
    """
    resume = after
    if last_event_id and last_event_id.strip().isdigit() and int(last_event_id.strip()) <= inputs.MAX_ID:
        resume = int(last_event_id.strip())
    return StreamingResponse(_stream(pool, settings, resume), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
