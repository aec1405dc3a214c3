"""Foresight routes: forecast a batch before it runs, follow and release batches, queue positions,
and customers' monthly LLM budgets."""

from __future__ import annotations

from datetime import date, datetime

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi import Path as PathParam
from psycopg_pool import ConnectionPool
from pydantic import BaseModel, Field

from app import foresight
from app.api import limits
from app.api.common import get_pool, get_settings
from app.api.schemas import model_of
from app.auth import Identity, require_operator, require_user
from schema.errors import InvalidArgument, InvalidTransition, NotFound
from schema.forecast import FileFacts
from schema.models import DEFAULT_PRIORITY
from schema.settings import Settings

router = APIRouter(prefix="/api", tags=["foresight"])


class FileIn(BaseModel):
    pages: limits.FilePages = None
    size_bytes: limits.FileBytes = None
    einvoice: bool = Field(False, description="an e-invoice XML, or a PDF with one embedded: read without a model")
    scanned: bool = Field(False, description="a PDF without a text layer: its pages go through OCR")
    ocr_work: limits.FileOcrWork = Field(None, description=(
        "a scan's OCR work in standard pages (a page of 30 lines of text is 1, a blank page 0.2), "
        "as an upload measures it; default: its pages"))


class ForecastIn(BaseModel):
    agent: limits.Name | None = Field(None, description="default: QUIRE_DEFAULT_AGENT")
    priority: limits.Priority = DEFAULT_PRIORITY
    customer: limits.Name | None = None
    files: list[FileIn] = Field(..., min_length=1, max_length=100_000)


class ForecastOut(BaseModel):
    agent: str
    priority: int
    documents: int
    pages: int
    tokens: int
    llm_cost_usd: float | None  # null: the agent has no prices, the tokens are unpriced
    compute_cost_usd: float
    work_seconds: float
    eta_seconds: float
    ahead_tasks: int
    ahead_exact: bool
    concurrency: float
    max_tpm: int | None
    basis: str
    warning: str | None = None  # the agent cannot run (its documents would wait), or is paused
    scanned_pages: int = 0      # pages without a text layer, read through OCR
    eta_low_seconds: float | None = None   # likely range: 10th to 90th percentile, at least x0.65-x1.35
    eta_high_seconds: float | None = None
    budget_warning: str | None = None      # the batch would take its customer past its monthly budget
    cpu_seconds: float | None = None       # the CPU its local runs need, summed (null: not local, or unknown)


@router.post("/forecast", response_model=ForecastOut)
async def post_forecast(body: ForecastIn, _: Identity = Depends(require_user), pool: ConnectionPool = Depends(get_pool),
                        settings: Settings = Depends(get_settings)) -> ForecastOut:
    """Tokens, LLM and compute cost and ETA of a batch with these files, before anything is stored."""
    try:
        plan = await foresight.forecast_files(pool, settings, agent=body.agent or settings.default_agent,
                                              priority=body.priority, customer=body.customer,
                                              files=[FileFacts(f.pages, f.size_bytes, f.einvoice, f.scanned, f.ocr_work)
                                                     for f in body.files])
    except NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    except InvalidArgument as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    return ForecastOut(**plan.as_json())


class BatchOut(BaseModel):
    batch_id: int
    held: bool
    tasks: int
    finished: int
    done: bool
    forecast: dict
    actual_tokens: int
    actual_llm_cost_usd: float
    actual_compute_cost_usd: float
    actual_seconds: float | None
    discarded: bool = False  # discarded while held: its documents were cancelled
    comparison: str


async def _batch(pool: ConnectionPool, batch_id: int) -> BatchOut:
    try:
        outcome = await foresight.batch_outcome(pool, batch_id)
    except NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    return BatchOut(**{k: getattr(outcome, k) for k in BatchOut.model_fields if k not in ("done", "comparison")},
                    done=outcome.done, comparison=outcome.comparison())


HeldBatchOut = model_of(foresight.HeldBatch, "HeldBatchOut")


@router.get("/batches", response_model=list[HeldBatchOut])  # type: ignore[valid-type]  # a model made at import
async def list_batches(held: bool = Query(True, description="only held batches are listed (true)"),
                       _: Identity = Depends(require_user),
                       pool: ConnectionPool = Depends(get_pool)) -> list[BaseModel]:
    """The batches held for review, newest first: nothing held is hidden."""
    if not held:
        raise HTTPException(status_code=422, detail="Only held batches are listed here: leave held=true, or list tasks with /api/tasks")
    return [HeldBatchOut(**b.__dict__) for b in await foresight.held_batches(pool)]


@router.get("/batches/{batch_id}", response_model=BatchOut)
async def get_batch(batch_id: int = PathParam(..., ge=1), _: Identity = Depends(require_user),
                    pool: ConnectionPool = Depends(get_pool)) -> BatchOut:
    """A batch's forecast and what it actually took (so far, until its last task ends)."""
    return await _batch(pool, batch_id)


@router.post("/batches/{batch_id}/release", response_model=BatchOut,
             responses={403: {"description": "not an operator"}, 409: {"description": "not held"}})
async def release_batch(batch_id: int = PathParam(..., ge=1), who: Identity = Depends(require_operator),
                        pool: ConnectionPool = Depends(get_pool)) -> BatchOut:
    """Lets a held batch's tasks be claimed."""
    before = await _batch(pool, batch_id)
    if not before.held:
        raise HTTPException(status_code=409, detail=f"Batch {batch_id} is not held: it was submitted or discarded already")
    await foresight.release_batch(pool, batch_id, actor=who.actor)
    return await _batch(pool, batch_id)


class PositionOut(BaseModel):
    task_id: int
    text: str
    ahead: int | None
    exact: bool
    waiting: str | None
    eta_seconds: float | None
    eta_low_seconds: float | None = None   # likely range: 10th to 90th percentile, at least x0.65-x1.35
    eta_high_seconds: float | None = None


class PositionsIn(BaseModel):
    task_ids: list[limits.TaskId] = Field(..., min_length=1, max_length=2000)


@router.post("/positions", response_model=list[PositionOut])
async def post_positions(body: PositionsIn, _: Identity = Depends(require_user),
                         pool: ConnectionPool = Depends(get_pool),
                         settings: Settings = Depends(get_settings)) -> list[PositionOut]:
    """Queue position and ETA of each enqueued task among those named (others are left out)."""
    spots = await foresight.queue_spots(pool, settings, body.task_ids)
    return [PositionOut(**s.__dict__) for s in spots.values()]


class BudgetOut(BaseModel):
    customer: str
    monthly_llm_budget_usd: float | None
    month: date
    month_llm_cost_usd: float
    over_budget: bool
    updated_by: str | None
    updated_at: datetime | None


class BudgetIn(BaseModel):
    # Checked by the engine, which refuses true/false, text and fractions of a cent in plain words.
    monthly_llm_budget_usd: limits.Dollars = Field(
        ..., description="dollars and whole cents per calendar month (UTC), from 0 to 1,000,000,000; null: none")


def _budget_out(b) -> BudgetOut:
    return BudgetOut(customer=b.customer, month=b.month, month_llm_cost_usd=float(b.month_llm_cost_usd),
                     monthly_llm_budget_usd=float(b.monthly_llm_budget_usd) if b.monthly_llm_budget_usd is not None else None,
                     over_budget=b.over_budget, updated_by=b.updated_by, updated_at=b.updated_at)


@router.get("/customers/budgets", response_model=list[BudgetOut])
async def get_budgets(_: Identity = Depends(require_user), pool: ConnectionPool = Depends(get_pool)) -> list[BudgetOut]:
    """Each budgeted customer, and each with spend this month: LLM spend against budget."""
    return [_budget_out(b) for b in await foresight.budgets(pool)]


@router.put("/customers/{customer}/budget", response_model=BudgetOut,
            responses={403: {"description": "not an operator"}, 422: {"description": "not a valid budget"}})
async def put_budget(body: BudgetIn, customer: str = PathParam(..., min_length=1, max_length=200),
                     who: Identity = Depends(require_operator), pool: ConnectionPool = Depends(get_pool)) -> BudgetOut:
    """Sets or clears a customer's monthly LLM budget; over it, the customer's tasks wait enqueued."""
    try:
        return _budget_out(await foresight.set_budget(pool, customer, body.monthly_llm_budget_usd, actor=who.actor))
    except InvalidArgument as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc


class DiscardOut(BaseModel):
    batch_id: int
    cancelled: int


@router.post("/batches/{batch_id}/discard", response_model=DiscardOut,
             responses={403: {"description": "not an operator"}, 409: {"description": "not held"}})
async def discard_batch(batch_id: int = PathParam(..., ge=1), who: Identity = Depends(require_operator),
                        pool: ConnectionPool = Depends(get_pool)) -> DiscardOut:
    """Discards a held batch: its queued documents are cancelled and nothing of it runs."""
    try:
        cancelled = await foresight.discard_batch(pool, batch_id, actor=who.actor)
    except NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    except InvalidTransition as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from exc
    return DiscardOut(batch_id=batch_id, cancelled=cancelled)
