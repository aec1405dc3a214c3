"""The row and filter types of the dashboard's figures, shared by schema.stats (direct reads)
and schema.figures (reads from the rollups): neither imports the other for them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from schema.models import TaskStatus, assemble, task_status

STATUSES = tuple(s.value for s in TaskStatus)
# A status of the dashboard filter, not of a task: queued, and held for review by an operator (tasks.held).
# The rollups are keyed by task status only, so a filter with it (and not queued, which holds the held)
# reads the tasks themselves, the held ones through their partial index (tasks_held_idx).
HELD = "held"
SPEND_METRICS = {"llm": "a", "compute": "m", "total": "s"}


@dataclass(frozen=True)
class TaskFilter:
    """The dashboard filters; an empty or None member selects everything."""

    date_from: datetime | None = None  # created at or after
    date_to: datetime | None = None    # created before
    statuses: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    customers: tuple[str, ...] = ()
    needs_review: bool = False         # completed with a confidence below REVIEW_CONFIDENCE

    @property
    def selecting_statuses(self) -> tuple[str, ...]:
        """The statuses that select its tasks: held is left out when queued is chosen, since held
        tasks are queued ones and add nothing to it."""
        if HELD in self.statuses and TaskStatus.ENQUEUED.value in self.statuses:
            return tuple(s for s in self.statuses if s != HELD)
        return self.statuses

    @property
    def exact_only(self) -> bool:
        """Whether the rollups cannot answer it (it selects held tasks): read from the tasks."""
        return HELD in self.selecting_statuses

    def held_apart(self) -> tuple[TaskFilter, TaskFilter] | None:
        """A filter of held tasks and other outcomes (held + failed, say) as its two parts: the other
        outcomes, which the rollups answer, and the held tasks, which their index does. None for
        any other filter. Held tasks are queued tasks that never ran, so the two never overlap."""
        others = tuple(s for s in self.selecting_statuses if s != HELD)
        if not self.exact_only or not others:
            return None
        return replace(self, statuses=others), replace(self, statuses=(HELD,))

    def params(self) -> dict[str, Any]:
        return {"date_from": self.date_from, "date_to": self.date_to,
                "statuses": list(self.selecting_statuses) or None, "agents": list(self.agents) or None,
                "customers": list(self.customers) or None, "needs_review": self.needs_review}


# A completed result whose overall confidence is below this needs a person to check it: the
# agents lower confidence when a cross-check fails (totals that do not add up, a scan read by OCR).
# SQL's quire_needs_review (migration 0011) holds the same threshold; a test checks they agree.
REVIEW_CONFIDENCE = 0.6


def needs_review(status: str, confidence: float | None) -> bool:
    """Whether a task's result should be checked by a person."""
    return status == TaskStatus.COMPLETED and confidence is not None and confidence < REVIEW_CONFIDENCE


@dataclass(frozen=True)
class Summary:
    """The headline figures for one filter."""

    counts: dict[str, int]
    total: int
    input_tokens: int
    output_tokens: int
    llm_cost_usd: Decimal
    compute_cost_usd: Decimal
    tasks_with_usage: int
    attempts: int
    avg_confidence: float | None
    median_latency_s: float | None
    p95_latency_s: float | None
    first_created_at: datetime | None
    last_activity_at: datetime | None
    unpriced_attempts: int = 0          # usage reported without a price: never shown as $0
    compute_pending_attempts: int = 0   # finished job runs whose billing has not caught up yet
    spend_per_task: dict[str, dict[str, float | None]] = field(default_factory=dict)  # llm/compute/total: p50, p90
    # A backlog is being folded in the background: the figures count what is folded (see schema.rollups).
    catching_up: bool = False
    as_of: datetime | None = None       # catching up: when the oldest change not counted yet was made
    backlog: int = 0                    # changes not folded yet (an estimate when catching up)


@dataclass(frozen=True)
class TaskRow:
    """A task as the table and the API list show it: state plus its summed spend."""

    id: int
    agent: str
    customer: str | None
    priority: int
    status: TaskStatus
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
    input_tokens: int | None
    output_tokens: int | None
    llm_cost_usd: Decimal | None
    compute_cost_usd: Decimal | None
    held_seconds: float = 0.0               # time held for review, not counted in latency_s
    # Why an enqueued task waits (schema.waiting.WaitReason), until when, and a detail.
    waiting_reason: str | None = None
    waiting_until: datetime | None = None
    waiting_detail: str | None = None


@dataclass(frozen=True)
class StreamEvent:
    """One row of the event log, as the SSE stream sends it."""

    id: int
    task_id: int
    agent: str
    status: TaskStatus
    prev_status: TaskStatus | None
    actor: str | None = None
    at: datetime | None = None

    @classmethod
    def of(cls, row: dict[str, Any]) -> StreamEvent:
        """From an event log row ({id, task_id, agent, status, prev_status, actor, at})."""
        return cls._make(row["id"], row["task_id"], row["agent"], row["status"], row.get("prev_status"),
                         row.get("actor"), row.get("at"))

    @classmethod
    def from_notify(cls, item: dict[str, Any]) -> StreamEvent:
        """From one event of the trigger's NOTIFY payload ({"e", "id", "a", "s", "p"})."""
        return cls._make(item["e"], item["id"], item["a"], item["s"], item.get("p"))

    @classmethod
    def _make(cls, event_id: Any, task_id: Any, agent: str, status: Any, prev_status: Any,
              actor: str | None = None, at: datetime | None = None) -> StreamEvent:
        """The event of these values, as the constructor makes it from int(id), int(task_id) and
        the statuses (without its field-by-field __init__: the worker reads an event per change)."""
        return assemble(cls, {"id": event_id if type(event_id) is int else int(event_id),
                              "task_id": task_id if type(task_id) is int else int(task_id),
                              "agent": agent, "status": task_status(status),
                              "prev_status": task_status(prev_status) if prev_status else None,
                              "actor": actor, "at": at})


def page_touched(flt: TaskFilter, shown: set[int], events: list[StreamEvent]) -> bool:
    """Whether these events can change the first page of the filter's tasks, newest first.

    A task shown changed, or one may have joined the filter: submitted (at the top), or taking one of
    the filter's statuses (a completion, where the filter is the review queue). Events carry agent
    and status only: a task of another agent never joins; customer and dates are not known here, so
    they do not rule one out.
    """
    for e in events:
        if e.task_id in shown:
            return True
        if flt.agents and e.agent not in flt.agents:
            continue
        if e.prev_status is None:
            if not flt.statuses or e.status in flt.statuses or HELD in flt.statuses:
                return True
        elif e.status in flt.statuses or (flt.needs_review and e.status == TaskStatus.COMPLETED):
            return True
    return False


@dataclass(frozen=True)
class Charts:
    """The data behind the dashboard's charts."""

    bucket_seconds: int
    throughput: list[dict[str, Any]] = field(default_factory=list)   # series, bucket, n
    cost_by_agent: list[dict[str, Any]] = field(default_factory=list)
    cost_by_customer: list[dict[str, Any]] = field(default_factory=list)
    latency_bins: list[dict[str, Any]] = field(default_factory=list)  # lo, hi, n
    confidence_bins: list[dict[str, Any]] = field(default_factory=list)  # lo, hi, n
    catching_up: bool = False           # as Summary.catching_up
    as_of: datetime | None = None


def cost_rows(rows: list[dict[str, Any]], key: str, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Spend per agent or customer (tasks that ran at least once), most expensive first."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if not r["attempted"]:
            continue
        name = r[key] if r[key] is not None else "(none)"
        entry = out.setdefault(name, {"key": name, "llm_cost_usd": Decimal(0), "compute_cost_usd": Decimal(0),
                                      "tokens": 0, "tasks": 0})
        entry["llm_cost_usd"] += r["llm_cost_usd"] or 0
        entry["compute_cost_usd"] += r["compute_cost_usd"] or 0
        entry["tokens"] += (r["input_tokens"] or 0) + (r["output_tokens"] or 0)
        entry["tasks"] += r["attempted"]
    ordered = sorted((e for e in out.values() if e["tasks"]), key=lambda e: (-e["llm_cost_usd"], e["key"]))
    return ordered[:limit] if limit else ordered


# Throughput buckets are counted from this Monday: a chart's 7-day buckets are ISO weeks, which the
# rollups hold whole (grain 'w'), and every shorter round bucket divides a day.
CHART_ORIGIN = datetime(2000, 1, 3, tzinfo=UTC)


def bucket_for_span(start: datetime | None, end: datetime | None, *, max_buckets: int = 60) -> timedelta:
    """The smallest round bucket that splits the span into at most `max_buckets` parts."""
    steps = [10, 30, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400]
    span = (end - start).total_seconds() if start and end else 0
    for seconds in steps:
        if span / seconds <= max_buckets:
            return timedelta(seconds=seconds)
    return timedelta(seconds=steps[-1])
