"""The HTTP API's request filters and response bodies, and their conversion from engine objects."""

from __future__ import annotations

import dataclasses
import typing
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from fastapi import HTTPException, Query
from pydantic import BaseModel, ConfigDict, computed_field, create_model

from app.inputs import STATUSES, make_filter
from app.services import catching_up_note
from schema.models import Attempt, Task, TaskEvent
from schema.stats_types import StreamEvent, Summary, TaskFilter, TaskRow

_STATUS_HELP = f"any of {', '.join(STATUSES)}; repeatable"


def filter_query(
    date_from: str | None = Query(None, description="created at or after (ISO date or datetime)"),
    date_to: str | None = Query(None, description="created before; a plain date includes that day"),
    status: list[str] = Query([], description=_STATUS_HELP),
    agent: list[str] = Query([], description="repeatable"),
    customer: list[str] = Query([], description="repeatable"),
    needs_review: bool = Query(False, description="only completed tasks with a low confidence"),
) -> TaskFilter:
    """FastAPI dependency: the dashboard filters from the query string."""
    try:
        return make_filter(date_from, date_to, status, agent, customer, needs_review)
    except ValueError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc


def model_of(source: type, name: str, *, exclude: tuple[str, ...] = (), base: type[BaseModel] = BaseModel,
             **overrides: Any) -> type[BaseModel]:
    """A response model with the fields of an engine dataclass, read from its attributes.

    The dataclass stays the one definition: money (Decimal) is sent as a JSON number, and
    `overrides` (name=(type, default)) replaces or adds fields such as nested lists.
    """
    hints = typing.get_type_hints(source)
    fields: dict[str, Any] = {}
    for item in dataclasses.fields(source):
        if item.name in exclude or item.name in overrides:
            continue
        kind = hints[item.name]
        kind = {Decimal: float, Decimal | None: float | None}.get(kind, kind)
        fields[item.name] = (kind, ...)
    fields.update(overrides)
    return create_model(name, __base__=base, __doc__=source.__doc__, **fields)


class _FromAttributes(BaseModel):
    model_config = ConfigDict(from_attributes=True)


TaskOut = model_of(TaskRow, "TaskOut", base=_FromAttributes)


class TaskPage(BaseModel):
    tasks: list[TaskOut]  # type: ignore[valid-type]
    next_cursor: str | None
    total: int | None = None  # tasks the filters select, read from the rollups
    total_is_estimate: bool = False  # True: `total` is an estimate (rollups far behind on a read-only session)


AttemptOut = model_of(Attempt, "AttemptOut", base=_FromAttributes, exclude=("task_id", "agent", "pid"))
EventOut = model_of(TaskEvent, "EventOut", base=_FromAttributes)


class _TaskDetailBase(_FromAttributes):
    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy refuses it
    @property
    def document_url(self) -> str:
        """Where the submitted PDF is served."""
        return f"/api/tasks/{self.id}/document"  # type: ignore[attr-defined]


# The stored URI is a server path: the API offers `document_url` instead.
TaskDetail = model_of(Task, "TaskDetail", base=_TaskDetailBase,
                      exclude=("document_uri", "locked_by", "lease_expires_at", "current_attempt_id",
                               "attempt_base", "waiting_since", "run_after", "updated_at"),
                      attempts_left=(int, ...), attempts=(list[AttemptOut], []),  # type: ignore[valid-type]
                      events=(list[EventOut], []))  # type: ignore[valid-type]


class FileResult(BaseModel):
    file: str
    status: int  # 201 created, 200 duplicate (not run), 422 rejected
    outcome: Literal["created", "rejected", "duplicate"]
    task_id: int | None = None
    pages: int | None = None
    sha256: str | None = None
    error: str | None = None
    duplicate_of: dict[str, Any] | None = None
    einvoice: str | None = None  # the e-invoice standard the file is or embeds (read without a model)


class SubmitResponse(BaseModel):
    created: int
    rejected: int
    duplicates: int
    files: list[FileResult]
    batch_id: int | None = None            # the batch the created tasks belong to
    held: bool = False                     # True: nothing runs until POST /api/batches/{id}/release
    forecast: dict[str, Any] | None = None  # tokens, costs and ETA forecast before it ran
    warning: str | None = None             # the agent cannot run (or is paused): the tasks wait


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
    catching_up: bool = False
    as_of: datetime | None = None
    backlog: int = 0
    note: str | None = None

    @classmethod
    def of(cls, summary: Summary, charts: dict[str, Any]) -> SummaryOut:
        tokens = summary.input_tokens + summary.output_tokens
        return cls(counts=summary.counts, total=summary.total, input_tokens=summary.input_tokens,
                   output_tokens=summary.output_tokens,
                   avg_tokens_per_task=tokens / summary.tasks_with_usage if summary.tasks_with_usage else None,
                   llm_cost_usd=float(summary.llm_cost_usd), compute_cost_usd_measured=float(summary.compute_cost_usd),
                   avg_confidence=summary.avg_confidence, median_latency_s=summary.median_latency_s,
                   p95_latency_s=summary.p95_latency_s, charts=charts,
                   unpriced_attempts=summary.unpriced_attempts,
                   compute_pending_attempts=summary.compute_pending_attempts,
                   spend_per_task=summary.spend_per_task, catching_up=summary.catching_up, as_of=summary.as_of,
                   backlog=summary.backlog, note=catching_up_note(summary))


class ChartsOut(BaseModel):
    """The dashboard's chart series for one filter."""

    bucket_seconds: int
    throughput: list[dict[str, Any]]
    cost_by_agent: list[dict[str, Any]]
    cost_by_customer: list[dict[str, Any]]
    latency_bins: list[dict[str, Any]]
    confidence_bins: list[dict[str, Any]]
    catching_up: bool = False
    as_of: datetime | None = None


def event_data(event: StreamEvent) -> dict[str, Any]:
    """The JSON body of one SSE `task` event."""
    return {"id": event.id, "task_id": event.task_id, "agent": event.agent, "status": event.status.value,
            "prev_status": event.prev_status.value if event.prev_status else None}


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
