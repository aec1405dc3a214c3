"""Task routes: submit documents, list and read tasks, fetch a document, retry and cancel."""

from __future__ import annotations

import base64
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Depends, File, Form, HTTPException, Query, Request, Response, UploadFile
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, StreamingResponse
from psycopg_pool import ConnectionPool
from pydantic import BaseModel

from app import actions, foresight, inputs, services, submitting
from app.api import limits
from app.api.common import get_pool, get_settings
from app.api.schemas import ActionOut, FileResult, SubmitResponse, TaskDetail, TaskOut, TaskPage, filter_query
from app.auth import Identity, no_submit_reason, require_operator, require_user, submit_rights
from schema.errors import NotFound
from schema.forecast import FileFacts
from schema.models import DEFAULT_PRIORITY
from schema.settings import Settings
from schema.stats_types import TaskFilter, TaskRow

router = APIRouter(prefix="/api", tags=["tasks"])
_STATUS = {"created": 201, "duplicate": 200, "rejected": 422}
SUBMIT_SLICE = 25


@router.post("/tasks", response_model=SubmitResponse, status_code=201,
             responses={200: {"description": "only duplicates: nothing was run"},
                        207: {"description": "some files were accepted, some were not"},
                        422: {"description": "no file was accepted"}})
async def submit_tasks(
    request: Request,
    response: Response,
    files: list[UploadFile] = File(..., description="one or many PDF files, or e-invoices as XML or signed .p7m"),
    agent: str | None = Form(None, description="the agent to run (default: QUIRE_DEFAULT_AGENT)"),
    priority: str = Form(str(DEFAULT_PRIORITY), description=f"0..9, 9 the most urgent (default {DEFAULT_PRIORITY})"),
    customer: str | None = Form(None),
    duplicates: Literal["offer", "rerun"] = Form(
        "offer", description="offer: an already-submitted document is not run again; rerun: run it anyway"),
    hold: bool = Form(False, description="store and enqueue the batch held: nothing runs until it is released"),
    who: Identity = Depends(require_user),
    pool: ConnectionPool = Depends(get_pool),
    settings: Settings = Depends(get_settings),
) -> SubmitResponse:
    """Checks every file first, then stores and enqueues each accepted one; one result per file."""
    limit = settings.max_upload_mb * 1_000_000
    if len(files) > settings.max_batch_files:
        raise HTTPException(status_code=413, detail=f"{len(files)} files in one request; at most "
                                                    f"{settings.max_batch_files} (QUIRE_MAX_BATCH_FILES)")
    agent = agent or settings.default_agent
    customer = (customer or "").strip() or None
    try:
        # An empty field is no priority (FastAPI would take it for the default): read the form as sent.
        sent = (await request.form()).get("priority")
        level = limits.parse_priority(sent if isinstance(sent, str) else priority)
        options = submitting.SubmitOptions(agent=agent, priority=level, customer=customer,
                                           rerun_duplicates=duplicates == "rerun", held=hold)
        # A request Postgres could not store is refused whole, before any file is read or kept.
        submitting.check_submission([f.filename or "document.pdf" for f in files], options)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    rights = submit_rights(who, settings)
    refusal = no_submit_reason(who) if rights is None else rights.refusal(who, customer, level)
    if refusal:
        raise HTTPException(status_code=403, detail=refusal)
    try:
        batch_id, _ = await foresight.open_batch(pool, settings, agent=agent, priority=level, customer=customer,
                                                 files=[FileFacts(document_bytes=f.size) for f in files],
                                                 held=hold, submitted_by=who.actor)
    except NotFound as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    options = submitting.SubmitOptions(**{**options.__dict__, "batch_id": batch_id})
    results: list[submitting.SubmitResult] = []
    # Each file is copied to disk a chunk at a time and checked from there, a slice at a time:
    # memory holds one chunk, however many files of whatever size are sent.
    try:
        with tempfile.TemporaryDirectory(prefix="quire-upload-", dir=submitting.spool_root(settings)) as workdir:
            for start in range(0, len(files), SUBMIT_SLICE):
                uploads = []
                for n, f in enumerate(files[start:start + SUBMIT_SLICE], start=start):
                    path = Path(workdir) / f"{n}.upload"
                    await submitting.spool(_chunks(f), path, limit)
                    uploads.append(submitting.Upload(f.filename or "document.pdf", path=path, size=f.size))
                results += await submitting.submit(pool, settings, uploads, options, submitted_by=who.actor)
                for upload in uploads:
                    if upload.path is not None:
                        upload.path.unlink(missing_ok=True)
    finally:
        if not any(r.outcome == "created" for r in results):
            await foresight.drop_batch_if_empty(pool, batch_id)  # no half-written upload is left
    body = [FileResult(file=r.name, status=_STATUS[r.outcome], outcome=r.outcome, task_id=r.task_id,
                       pages=r.pages, sha256=r.sha256, error=r.error, duplicate_of=r.duplicate_of,
                       einvoice=r.einvoice)
            for r in results]
    created = sum(r.outcome == "created" for r in results)
    rejected = sum(r.outcome == "rejected" for r in results)
    plan = None
    if created:
        plan = await foresight.settle_forecast(
            pool, settings, batch_id, agent=agent, priority=level, customer=customer,
            files=[r.file_facts() for r in results if r.outcome == "created"])
    if created and rejected:
        response.status_code = 207
    elif not created:
        response.status_code = 422 if rejected else 200
    return SubmitResponse(created=created, rejected=rejected, duplicates=len(results) - created - rejected,
                          files=body, batch_id=batch_id if created else None, held=hold and bool(created),
                          forecast=plan.as_json() if plan else None, warning=plan.warning if plan else None)


async def _chunks(upload: UploadFile):
    while chunk := await upload.read(submitting.SPOOL_CHUNK):
        yield chunk


def _cursor(row: TaskRow) -> str:
    """The next page starts after this task: its id and when it was submitted (the list's order)."""
    return base64.urlsafe_b64encode(f"before:{row.id}:{row.created_at.isoformat()}".encode()).decode().rstrip("=")


def _before(cursor: str | None) -> tuple[datetime | None, int] | None:
    """(submitted, id) of the last task shown. A cursor from before the order was by submission holds
    the id alone: the task's own submission time is looked up with it."""
    if not cursor:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        task_id, _, created = text.removeprefix("before:").partition(":")
        before = int(task_id)
        if not inputs.valid_id(before):
            raise ValueError(before)
        at = datetime.fromisoformat(created) if created else None
        if at is not None and at.tzinfo is None:
            raise ValueError(created)
        return at, before
    except ValueError as exc:
        raise HTTPException(status_code=422, detail="cursor not understood: pass next_cursor back as given") from exc


@router.get("/tasks", response_model=TaskPage)
async def list_tasks(flt: TaskFilter = Depends(filter_query), cursor: str | None = Query(None),
                     limit: int = Query(50, ge=1, le=500), _: Identity = Depends(require_user),
                     pool: ConnectionPool = Depends(get_pool)) -> TaskPage:
    """Tasks newest first; pass `next_cursor` back as `cursor` for the following page."""
    rows = await services.tasks_before(pool, flt, before=_before(cursor), limit=limit)
    next_cursor = _cursor(rows[-1]) if len(rows) == limit else None
    count = await services.task_count(pool, flt)
    return TaskPage(tasks=[TaskOut.model_validate(r) for r in rows], next_cursor=next_cursor,
                    total=count.n, total_is_estimate=not count.exact)


async def _task_or_404(pool: ConnectionPool, task_id: int):
    try:
        return await services.task_detail(pool, task_id)
    except NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc


@router.get("/tasks/{task_id}", response_model=TaskDetail)
async def get_task(task_id: int = PathParam(..., ge=1, le=inputs.MAX_ID), _: Identity = Depends(require_user),
                   pool: ConnectionPool = Depends(get_pool)) -> BaseModel:
    """One task with its attempts (run and trace ids, tokens, cost), result and timeline."""
    return TaskDetail.model_validate(await _task_or_404(pool, task_id))


# A stored PDF is what someone uploaded: it is downloaded, never shown in the app's origin, and
# under a sandbox even if a browser were to render it (no script, no form, no plugin).
_DOCUMENT_HEADERS = {"Content-Security-Policy": "sandbox; default-src 'none'; frame-ancestors 'none'",
                     "X-Content-Type-Options": "nosniff"}


def _attachment(name: str) -> str:
    from urllib.parse import quote

    return f"attachment; filename*=UTF-8''{quote(name)}"


@router.get("/tasks/{task_id}/document", response_class=Response,
            responses={200: {"content": {"application/pdf": {}, "text/plain": {}, "application/pkcs7-mime": {}}}})
async def get_document(task_id: int = PathParam(..., ge=1, le=inputs.MAX_ID), _: Identity = Depends(require_user),
                       pool: ConnectionPool = Depends(get_pool)):
    """The submitted document, as a download: a PDF, an e-invoice XML (as plain text) or a signed .p7m."""
    task = await _task_or_404(pool, task_id)
    name = task.document_name or f"task-{task.id}.pdf"
    uri = task.document_uri
    if uri.startswith("/Volumes/") and not Path("/Volumes").exists():
        from databricks.sdk import WorkspaceClient

        download = WorkspaceClient().files.download(uri)
        if download.contents is None:
            raise HTTPException(status_code=502, detail=f"the Volume sent no content for {uri}")
        return StreamingResponse(download.contents, media_type=_media_type(uri),
                                 headers=_DOCUMENT_HEADERS | {"Content-Disposition": _attachment(name)})
    path = Path(uri.removeprefix("file://"))
    if not path.is_file():
        raise HTTPException(status_code=404, detail=f"the document of task {task_id} is no longer stored")
    return FileResponse(path, media_type=_media_type(uri), headers=_DOCUMENT_HEADERS,
                        filename=name, content_disposition_type="attachment")


def _media_type(uri: str) -> str:
    """What a stored document is served as, by its stored suffix (an XML never as markup)."""
    suffix = Path(uri).suffix.lower()
    if suffix == ".xml":
        return "text/plain; charset=utf-8"
    if suffix == ".p7m":
        return "application/pkcs7-mime"
    return "application/pdf"


def _one(results: list[actions.ActionResult]) -> ActionOut:
    result = results[0]
    if not result.ok:
        raise HTTPException(status_code=422 if result.invalid else 404 if result.not_found else 409,
                            detail=result.message)
    return ActionOut(task_id=result.task_id, ok=True, message=result.message, new_task_id=result.new_task_id,
                     status=result.status)


@router.post("/tasks/{task_id}/retry", response_model=ActionOut,
             responses={403: {"description": "not an operator"}, 409: {"description": "state does not allow it"}})
async def retry_task(task_id: int = PathParam(..., ge=1, le=inputs.MAX_ID),
                     priority: str | None = Query(None, description="0..9: run it at this priority (default: its own)"),
                     agent: limits.Name | None = Query(None, description="edit and retry: run it with this agent"),
                     extractor: limits.Name | None = Query(None, description="edit and retry: offline, llm or cascade"),
                     model: limits.Name | None = Query(None, description="edit and retry: the model its run calls"),
                     who: Identity = Depends(require_operator), pool: ConnectionPool = Depends(get_pool)) -> ActionOut:
    """Re-runs a failed or cancelled task; a completed one gets a re-extraction child task. With an
    agent, extractor, model or priority it is an edit and retry: the change is recorded on the task
    that runs (`edits`: who, when, each field from and to)."""
    level = None
    if priority is not None:
        try:
            level = limits.parse_priority(priority)
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
    return _one(await actions.retry_tasks(pool, [task_id], actor=who.actor, priority=level, agent=agent,
                                          extractor=extractor, model=model))


@router.post("/tasks/{task_id}/cancel", response_model=ActionOut,
             responses={403: {"description": "not an operator"}, 409: {"description": "state does not allow it"}})
async def cancel_task(task_id: int = PathParam(..., ge=1, le=inputs.MAX_ID), who: Identity = Depends(require_operator),
                      pool: ConnectionPool = Depends(get_pool)) -> ActionOut:
    """Cancels an enqueued or processing task."""
    return _one(await actions.cancel_tasks(pool, [task_id], actor=who.actor))
