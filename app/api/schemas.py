"""The HTTP API's request filters and response bodies, and their conversion from engine objects."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import HTTPException, Query
from pydantic import BaseModel

from app.services import STATUSES, make_filter
from schema.models import Task
from schema.stats import StreamEvent, Summary, TaskFilter, TaskRow

def filter_query(
    date_from: str | None = Query(None, description="created at or after (ISO date or datetime)"),
    date_to: str | None = Query(None, description="created before; a plain date includes that day"),
    status: list[str] = Query([], description=f"any of {', '.join(STATUSES)}; repeatable"),
    agent: list[str] = Query([], description="repeatable"),
    customer: list[str] = Query([], description="repeatable"),
    needs_review: bool = Query(False, description="only completed tasks with a low confidence"),
) -> TaskFilter:
    """FastAPI dependency: the dashboard filters from the query string."""
    try:
        return make_filter(date_from, date_to, status, agent, customer, needs_review)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc


class TaskOut(BaseModel):
    id: int
    agent: str
    customer: str | None
    priority: int
    status: str
    document_name: str | None
    document_sha256: str | None
    pages: int | None
    confidence: float | None
    error: str | None
    submitted_by: str | None
    attempt_count: int
    parent_id: int | None
    created_at: datetime
    finished_at: datetime | None
    latency_s: float | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    llm_cost_usd: float | None = None
    compute_cost_usd: float | None = None

    @classmethod
    def of(cls, row: TaskRow) -> "TaskOut":
        values = dict(row.__dict__)
        for key in ("llm_cost_usd", "compute_cost_usd"):
            values[key] = float(values[key]) if values[key] is not None else None
        return cls(**values)


class TaskPage(BaseModel):
    tasks: list[TaskOut]
    next_cursor: str | None
    total: int | None = None  # tasks the filters select, exact (read from the rollups)


class AttemptOut(BaseModel):
    id: int
    attempt_no: int
    status: str
    worker_id: str
    executor: str | None
    job_run_id: str | None
    trace_id: str | None
    estimated_tokens: int
    input_tokens: int | None
    output_tokens: int | None
    llm_cost_usd: float | None
    llm_unpriced: bool = False            # tokens spent without a configured price: cost unknown, not $0
    compute_cost_usd: float | None
    dbus: float | None = None
    compute_state: str | None = None      # measured | pending (billing not in yet) | billed
    compute_seconds: float | None
    started_at: datetime
    finished_at: datetime | None
    error: str | None


class EventOut(BaseModel):
    id: int
    status: str
    prev_status: str | None
    actor: str | None
    at: datetime


class TaskDetail(BaseModel):
    id: int
    agent: str
    customer: str | None
    priority: int
    status: str
    document_name: str | None
    document_sha256: str | None
    document_bytes: int | None
    document_url: str
    pages: int | None
    estimated_tokens: int
    attempt_count: int
    attempts_left: int
    parent_id: int | None
    result: dict[str, Any] | None
    confidence: float | None
    error: str | None
    submitted_by: str | None
    cancelled_by: str | None
    retried_by: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    attempts: list[AttemptOut]
    events: list[EventOut]

    @classmethod
    def of(cls, task: Task) -> "TaskDetail":
        def money(value):
            return float(value) if value is not None else None
        attempts = [AttemptOut(**{**a.__dict__, "status": a.status.value, "llm_cost_usd": money(a.llm_cost_usd),
                                  "compute_cost_usd": money(a.compute_cost_usd), "dbus": money(a.dbus)}) for a in task.attempts]
        events = [EventOut(id=e.id, status=e.status.value, prev_status=e.prev_status.value if e.prev_status else None,
                           actor=e.actor, at=e.at) for e in task.events]
        fields = {k: v for k, v in task.__dict__.items() if k in cls.model_fields}
        return cls(**{**fields, "status": task.status.value, "attempts": attempts, "events": events,
                      "attempts_left": task.attempts_left, "document_url": f"/api/tasks/{task.id}/document"})


class FileResult(BaseModel):
    file: str
    status: int  # 201 created, 200 duplicate (not run), 422 rejected
    outcome: Literal["created", "rejected", "duplicate"]
    task_id: int | None = None
    pages: int | None = None
    sha256: str | None = None
    error: str | None = None
    duplicate_of: dict[str, Any] | None = None


class SubmitResponse(BaseModel):
    created: int
    rejected: int
    duplicates: int
    files: list[FileResult]


class ActionOut(BaseModel):
    task_id: int
    ok: bool
    message: str
    new_task_id: int | None = None
    status: str | None = None


class SummaryOut(BaseModel):
    counts: dict[str, int]
    total: int
    input_tokens: int
    output_tokens: int
    avg_tokens_per_task: float | None
    llm_cost_usd: float
    compute_cost_usd_measured: float
    avg_confidence: float | None
    median_latency_s: float | None
    p95_latency_s: float | None
    charts: dict[str, Any]
    unpriced_attempts: int = 0
    compute_pending_attempts: int = 0
    spend_per_task: dict[str, dict[str, float | None]] = {}

    @classmethod
    def of(cls, summary: Summary, charts: dict[str, Any]) -> "SummaryOut":
        tokens = summary.input_tokens + summary.output_tokens
        return cls(counts=summary.counts, total=summary.total, input_tokens=summary.input_tokens,
                   output_tokens=summary.output_tokens,
                   avg_tokens_per_task=tokens / summary.tasks_with_usage if summary.tasks_with_usage else None,
                   llm_cost_usd=float(summary.llm_cost_usd), compute_cost_usd_measured=float(summary.compute_cost_usd),
                   avg_confidence=summary.avg_confidence, median_latency_s=summary.median_latency_s,
                   p95_latency_s=summary.p95_latency_s, charts=charts,
                   unpriced_attempts=summary.unpriced_attempts,
                   compute_pending_attempts=summary.compute_pending_attempts,
                   spend_per_task=summary.spend_per_task)


class ChartsOut(BaseModel):
    """The dashboard's chart series for one filter."""

    bucket_seconds: int
    throughput: list[dict[str, Any]]
    cost_by_agent: list[dict[str, Any]]
    cost_by_customer: list[dict[str, Any]]
    latency_bins: list[dict[str, Any]]
    confidence_bins: list[dict[str, Any]]


def event_data(event: StreamEvent) -> dict[str, Any]:
    """The JSON body of one SSE `task` event."""
    return {"id": event.id, "task_id": event.task_id, "agent": event.agent, "status": event.status,
            "prev_status": event.prev_status}


def plain(value: Any) -> Any:
    """Decimals to floats and datetimes to ISO strings, recursively, for JSON bodies."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
