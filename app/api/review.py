"""Review routes: the queue, claim next, save, approve, reject, release, page images, figures,
export of approved data, and review events as Server-Sent Events."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Response
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, StreamingResponse
from psycopg_pool import ConnectionPool
from pydantic import BaseModel, Field

from app import inputs, live, reviews, services
from app.api.common import get_pool, get_settings
from app.api.events import frame
from app.api.schemas import filter_query, model_of
from app.auth import Identity, require_reviewer, require_user
from schema.errors import NotFound
from schema.review import QueueEntry, Review, ReviewStatus, StaleReview
from schema.settings import Settings
from schema.stats_types import TaskFilter

router = APIRouter(prefix="/api/review", tags=["review"])

def _id():
    # A fresh parameter per route: FastAPI binds a parameter object to the first name it serves.
    return PathParam(..., ge=1, le=inputs.MAX_ID)

_CONFLICT: dict[int | str, dict[str, Any]] = {409: {"description": "the claim no longer holds (re-extracted, decided, or taken over): nothing was written"},
             403: {"description": "not a reviewer"}, 422: {"description": "a value its field's type refuses"}}


class CorrectionOut(BaseModel):
    field: str
    old_value: Any
    new_value: Any
    actor: str
    at: datetime
    reason: str | None


class ReviewOut(BaseModel):
    """A review: its state, who holds it, the extraction (with evidence) and the values now."""

    id: int
    task_id: int
    status: str
    reason: str
    confidence: float
    claimed_by: str | None
    claim_token: int
    lease_expires_at: datetime | None
    decided_by: str | None
    decided_at: datetime | None
    decision_note: str | None
    agent: str
    customer: str | None
    document_name: str | None
    extraction: dict[str, Any] = Field(description="the agent's result as it reported it")
    values: dict[str, Any] = Field(description="each field's value now: the extraction with the corrections applied")
    corrections: list[CorrectionOut]


def _out(item: Review) -> ReviewOut:
    plain = {k: getattr(item, k) for k in ReviewOut.model_fields if k not in ("extraction", "corrections")}
    return ReviewOut(**plain,
                     extraction=item.result, corrections=[CorrectionOut(**c.__dict__) for c in item.corrections])


QueueOut = model_of(QueueEntry, "QueueOut")  # an open review as the queue lists it


class SaveIn(BaseModel):
    claim_token: int = Field(..., ge=0, description="from the claim: proves the caller still holds the review")
    fields: dict[str, Any] = Field(default_factory=dict,
                                   description="field -> new value: typed JSON, or text parsed by the field's type "
                                               "(dates YYYY-MM-DD, amounts in the document's decimal style, ISO 4217 codes)")
    reason: str | None = Field(None, max_length=2000)


class DecideIn(BaseModel):
    claim_token: int = Field(..., ge=0)
    fields: dict[str, Any] = Field(default_factory=dict, description="last corrections, saved with the decision")
    note: str | None = Field(None, max_length=2000)


class ReleaseIn(BaseModel):
    claim_token: int = Field(..., ge=0)


class FiguresOut(BaseModel):
    """What the corrections teach, for the dashboard's filters."""

    open: int
    held: int
    approved: int
    rejected: int
    review_p50_s: float | None
    review_p90_s: float | None
    approved_per_day: list[tuple[date, int]]
    field_rates: list[dict[str, Any]]
    accuracy: list[dict[str, Any]]


async def _guarded(call):
    try:
        return await call
    except StaleReview as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    except reviews.FieldError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None


@router.get("/queue", response_model=list[QueueOut])  # type: ignore[valid-type]
async def review_queue(flt: TaskFilter = Depends(filter_query), limit: int = Query(50, ge=1, le=500),
                       _: Identity = Depends(require_user), pool: ConnectionPool = Depends(get_pool)):
    """The documents waiting for a person, in claim order: lowest confidence first, then oldest."""
    return [QueueOut(**e.__dict__) for e in await reviews.queue(pool, flt, limit=limit)]


@router.post("/next", response_model=ReviewOut, responses={204: {"description": "nothing waits"}, **_CONFLICT})
async def claim_next(flt: TaskFilter = Depends(filter_query), who: Identity = Depends(require_reviewer),
                     pool: ConnectionPool = Depends(get_pool), settings: Settings = Depends(get_settings)):
    """Claims the next document (or gives back the one the caller holds) for the lease
    (QUIRE_REVIEW_LEASE_SECONDS); keep its `claim_token` for every save."""
    item = await reviews.claim_next(pool, settings, who.actor, flt)
    return Response(status_code=204) if item is None else _out(item)


@router.post("/tasks/{task_id}/claim", response_model=ReviewOut, responses=_CONFLICT)
async def claim_task(task_id: int = _id(), who: Identity = Depends(require_reviewer),
                     pool: ConnectionPool = Depends(get_pool), settings: Settings = Depends(get_settings)) -> ReviewOut:
    """Claims the review of one task; 409 when it is decided or another reviewer holds it."""
    item = await reviews.claim_task(pool, settings, who.actor, task_id)
    if item is None:
        raise HTTPException(status_code=404, detail=f"task {task_id} has no review")
    if item.status is not ReviewStatus.OPEN or item.claimed_by != who.name:
        raise HTTPException(status_code=409, detail=f"review {item.id} is {item.status.value}"
                                                    + (f", held by {item.claimed_by}" if item.claimed_by else ""))
    return _out(item)


@router.get("/figures", response_model=FiguresOut)
async def review_figures(flt: TaskFilter = Depends(filter_query), _: Identity = Depends(require_user),
                         pool: ConnectionPool = Depends(get_pool)) -> FiguresOut:
    """Backlog, approvals per day, correction rate per field, accuracy per agent, extractor and model,
    time to review (median, p90): all counted from the trail."""
    return FiguresOut(**(await reviews.figures(pool, flt)).__dict__)


def _export_route(kind: Literal["csv", "xlsx", "json"]):
    async def route(flt: TaskFilter = Depends(filter_query), _: Identity = Depends(require_user),
                    pool: ConnectionPool = Depends(get_pool)) -> Response:
        data = await reviews.export(pool, flt, kind)
        name = f"quire-approved-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.{kind}"
        return Response(content=data, media_type=reviews.EXPORT_MEDIA_TYPES[kind],
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})
    route.__doc__ = (f"Approved documents for the dashboard's filters as {kind.upper()}: every field as approved "
                     "(corrections applied), the corrected fields, who approved and when.")
    route.__name__ = f"export_approved_{kind}"
    return route


_EXPORT_KINDS: tuple[Literal["csv", "xlsx", "json"], ...] = ("csv", "xlsx", "json")
for _kind in _EXPORT_KINDS:
    router.add_api_route(f"/export.{_kind}", _export_route(_kind), methods=["GET"], response_class=Response,
                         responses={200: {"content": {reviews.EXPORT_MEDIA_TYPES[_kind].split(";")[0]: {}},
                                          "description": "one row per approved document"}})


@router.get("/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "`review` events: queued, claimed, corrected, approved, rejected, ..."}})
async def review_events(last_event_id: str | None = Header(None, alias="Last-Event-ID"),
                        after: int | None = Query(None, ge=0, le=inputs.MAX_ID),
                        _: Identity = Depends(require_user), pool: ConnectionPool = Depends(get_pool),
                        settings: Settings = Depends(get_settings)) -> StreamingResponse:
    """Review changes as Server-Sent Events: `id:` = the review event id, body {id, review_id,
    task_id, kind, actor}. With `Last-Event-ID` (or `?after=`) the stream replays what came after."""
    resume = after
    if last_event_id and last_event_id.strip().isdigit() and int(last_event_id.strip()) <= inputs.MAX_ID:
        resume = int(last_event_id.strip())
    # Where a new stream starts, read before the response begins: the client may act as soon as it
    # sees the headers, and a change it makes then must come after this point, not before it.
    high = resume if resume is not None else await reviews.last_event_id(pool)
    return StreamingResponse(_stream(pool, settings, high), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _stream(pool: ConnectionPool, settings: Settings, high: int) -> AsyncIterator[str]:
    sub = live.current().subscribe_reviews()
    try:
        yield "retry: 3000\n\n"
        last_write = time.monotonic()
        # From `high` on, once subscribed: what changed between the two is in the log, not notified.
        catch_up = True
        while True:
            if catch_up:
                # After a resume, a lost LISTEN or the fallback poll: the log is the truth.
                rows = await reviews.events_after(pool, high)
                chunks = [frame("review", {"id": r["id"], "review_id": r["review_id"], "task_id": r["task_id"],
                                           "kind": r["kind"], "actor": r["actor"]}, r["id"]) for r in rows]
                if rows:
                    high = rows[-1]["id"]
                if chunks:
                    yield "".join(chunks)
                    last_write = time.monotonic()
            woke = await sub.wait(min(15.0, settings.poll_seconds))
            sub.drain()
            catch_up = True  # notifications say something changed; the log says what, in order, once
            if not woke and time.monotonic() - last_write >= 15.0:
                yield ": keep-alive\n\n"
                last_write = time.monotonic()
    finally:
        sub.close()


@router.get("/tasks/{task_id}/pages/{page}.png", response_class=FileResponse,
            responses={200: {"content": {"image/png": {}}}})
async def page_image(task_id: int = _id(), page: int = PathParam(..., ge=1, le=100_000),
                     _: Identity = Depends(require_user), pool: ConnectionPool = Depends(get_pool),
                     settings: Settings = Depends(get_settings)):
    """A page of the task's document, rendered on the server (cached)."""
    task = await _task(pool, task_id)
    try:
        path = await reviews.page_png(settings, task.document_uri, task.document_sha256, page)
    except (FileNotFoundError, IndexError) as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return FileResponse(path, media_type="image/png", headers={"Cache-Control": "private, max-age=86400"})


async def _task(pool: ConnectionPool, task_id: int):
    try:
        return await services.task_detail(pool, task_id)
    except NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc


@router.get("/{review_id}", response_model=ReviewOut)
async def get_review(review_id: int = _id(), _: Identity = Depends(require_user),
                     pool: ConnectionPool = Depends(get_pool)) -> ReviewOut:
    """One review with its extraction, its values now and its trail of corrections."""
    return _out(await _guarded(reviews.read(pool, review_id)))


@router.post("/{review_id}/save", response_model=ReviewOut, responses=_CONFLICT)
async def save(body: SaveIn, review_id: int = _id(), who: Identity = Depends(require_reviewer),
               pool: ConnectionPool = Depends(get_pool), settings: Settings = Depends(get_settings)) -> ReviewOut:
    """Saves corrections (one trail row per changed field) and renews the lease."""
    return _out(await _guarded(reviews.save(pool, settings, review_id, body.claim_token, who.actor, body.fields,
                                            body.reason)))


@router.post("/{review_id}/approve", response_model=ReviewOut, responses=_CONFLICT)
async def approve(body: DecideIn, review_id: int = _id(), who: Identity = Depends(require_reviewer),
                  pool: ConnectionPool = Depends(get_pool)) -> ReviewOut:
    """Approves the document: the extraction plus its corrections (and any given here) is the data."""
    return _out(await _guarded(reviews.decide(pool, review_id, body.claim_token, who.actor, ReviewStatus.APPROVED,
                                              values=body.fields, note=body.note)))


@router.post("/{review_id}/reject", response_model=ReviewOut, responses=_CONFLICT)
async def reject(body: DecideIn, review_id: int = _id(), who: Identity = Depends(require_reviewer),
                 pool: ConnectionPool = Depends(get_pool)) -> ReviewOut:
    """Rejects the document, with an optional note saying why."""
    return _out(await _guarded(reviews.decide(pool, review_id, body.claim_token, who.actor, ReviewStatus.REJECTED,
                                              values=body.fields, note=body.note)))


@router.post("/{review_id}/release", responses={409: {"description": "the claim no longer holds"}})
async def release(body: ReleaseIn, review_id: int = _id(), who: Identity = Depends(require_reviewer),
                  pool: ConnectionPool = Depends(get_pool)) -> dict:
    """Hands the document back to the queue now instead of at the end of the lease."""
    if not await reviews.release(pool, review_id, body.claim_token, who.actor):
        raise HTTPException(status_code=409, detail="this claim no longer holds")
    return {"review_id": review_id, "released": True}
