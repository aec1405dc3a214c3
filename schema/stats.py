"""Read-only figures over the queue: counts, costs and latencies for the CLI, API and dashboard."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql

from schema import rollups, waiting
from schema.models import TaskStatus, assemble, task_status
from schema.sql import fetch_all, fetch_one, q, run_query

# Sortable columns of the task table: the only identifiers ever composed into ORDER BY.
TASK_SORT_KEYS: dict[str, str] = {
    "id": "t.id", "created_at": "t.created_at", "finished_at": "t.finished_at", "status": "t.status",
    "agent": "t.agent", "customer": "t.customer", "priority": "t.priority",
    "document_name": "t.document_name", "pages": "t.pages", "confidence": "t.confidence",
    "tokens": "t.tokens", "llm_cost_usd": "t.llm_cost_usd", "latency_s": "t.latency_s",
}

NOT_NULL_SORT_KEYS = ("id", "created_at", "status", "agent", "priority")


@dataclass(frozen=True)
class TaskFilter:
    """The dashboard filters; an empty or None member selects everything."""

    date_from: datetime | None = None  # created at or after
    date_to: datetime | None = None    # created before
    statuses: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    customers: tuple[str, ...] = ()
    needs_review: bool = False         # completed with a confidence below REVIEW_CONFIDENCE

    def params(self) -> dict[str, Any]:
        return {"date_from": self.date_from, "date_to": self.date_to,
                "statuses": list(self.statuses) or None, "agents": list(self.agents) or None,
                "customers": list(self.customers) or None, "needs_review": self.needs_review}


# A completed result whose overall confidence is below this needs a person to check it: the
# agents lower confidence when a cross-check fails (totals that do not add up, a scan read by OCR).
# SQL's quire_needs_review (migration 0011) holds the same threshold; a test checks they agree.
REVIEW_CONFIDENCE = 0.6


def needs_review(status: str, confidence: float | None) -> bool:
    """Whether a task's result should be checked by a person."""
    return status == "completed" and confidence is not None and confidence < REVIEW_CONFIDENCE


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
    def of(cls, row: dict[str, Any]) -> "StreamEvent":
        """From an event log row ({id, task_id, agent, status, prev_status, actor, at})."""
        return cls._make(row["id"], row["task_id"], row["agent"], row["status"], row.get("prev_status"),
                         row.get("actor"), row.get("at"))

    @classmethod
    def from_notify(cls, item: dict[str, Any]) -> "StreamEvent":
        """From one event of the trigger's NOTIFY payload ({"e", "id", "a", "s", "p"})."""
        return cls._make(item["e"], item["id"], item["a"], item["s"], item.get("p"))

    @classmethod
    def _make(cls, event_id: Any, task_id: Any, agent: str, status: Any, prev_status: Any,
              actor: str | None = None, at: datetime | None = None) -> "StreamEvent":
        """The event of these values, as the constructor makes it from int(id), int(task_id) and
        the statuses (without its field-by-field __init__: the worker reads an event per change)."""
        return assemble(cls, {"id": event_id if type(event_id) is int else int(event_id),
                              "task_id": task_id if type(task_id) is int else int(task_id),
                              "agent": agent, "status": task_status(status),
                              "prev_status": task_status(prev_status) if prev_status else None,
                              "actor": actor, "at": at})


@dataclass(frozen=True)
class Charts:
    """The data behind the dashboard's charts."""

    bucket_seconds: int
    throughput: list[dict[str, Any]] = field(default_factory=list)   # series, bucket, n
    cost_by_agent: list[dict[str, Any]] = field(default_factory=list)
    cost_by_customer: list[dict[str, Any]] = field(default_factory=list)
    latency_bins: list[dict[str, Any]] = field(default_factory=list)  # lo, hi, n
    confidence_bins: list[dict[str, Any]] = field(default_factory=list)  # lo, hi, n


def _composed(name: str, order_by: sql.Composable | None = None) -> sql.Composed:
    parts: dict[str, sql.Composable] = {"task_filter": sql.SQL(q("task_filter"))}
    if order_by is not None:
        parts["order_by"] = order_by
    return sql.SQL(q(name)).format(**parts)


def _run(conn: psycopg.Connection, name: str, params: dict[str, Any],
         order_by: sql.Composable | None = None) -> list[dict[str, Any]]:
    return run_query(conn, _composed(name, order_by), params)


def status_counts(conn: psycopg.Connection) -> dict[str, Any]:
    """{"agents": {agent: {status: n}}, "total": {status: n}}."""
    agents: dict[str, dict[str, int]] = {}
    total: dict[str, int] = {}
    for row in stats_totals_all(conn):
        agents.setdefault(row["agent"], {})[row["status"]] = row["tasks"]
        total[row["status"]] = total.get(row["status"], 0) + row["tasks"]
    return {"agents": agents, "total": total}


def stats_summary_direct(conn: psycopg.Connection, flt: TaskFilter) -> Summary:
    """The summary aggregated straight from tasks and attempts (the baseline the rollups replace)."""
    row = _run(conn, "stats_summary_filtered", flt.params())[0]
    return Summary(
        counts={s.value: row[s.value] for s in TaskStatus}, total=row["total"],
        input_tokens=int(row["input_tokens"] or 0), output_tokens=int(row["output_tokens"] or 0),
        llm_cost_usd=row["llm_cost_usd"] or Decimal(0), compute_cost_usd=row["compute_cost_usd"] or Decimal(0),
        tasks_with_usage=row["tasks_with_usage"] or 0, attempts=row["attempts"] or 0,
        avg_confidence=row["avg_confidence"], median_latency_s=row["median_latency_s"],
        p95_latency_s=row["p95_latency_s"], first_created_at=row["first_created_at"],
        last_activity_at=row["last_activity_at"])


STATUSES = tuple(s.value for s in TaskStatus)
SPEND_METRICS = {"llm": "a", "compute": "m", "total": "s"}


def stats_summary_filtered(conn: psycopg.Connection, flt: TaskFilter, *, now: datetime | None = None) -> Summary:
    """The headline figures from the rollups: exact counts and spend, percentiles from histograms."""
    from schema import figures  # it builds on this module's types

    return figures.summary_of(figures.figures_read(conn, flt, now=now, advance=False), now=now)


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


def stats_charts_filtered(conn: psycopg.Connection, flt: TaskFilter, *, now: datetime | None = None) -> Charts:
    """Throughput, cost by agent and customer, latency and confidence distributions, from the rollups."""
    from schema import figures  # it builds on this module's types

    return figures.charts_of(figures.figures_read(conn, flt, now=now, advance=False))


def task_list_keyset(conn: psycopg.Connection, flt: TaskFilter, *, sort: str = "id", descending: bool = True,
                     after: tuple[Any, int] | None = None,
                     limit: int = 25) -> tuple[list[TaskRow], tuple[Any, int] | None]:
    """One page of tasks in the requested order after a cursor, and the cursor of the page after it.

    A cursor is (sort value, id) of the last row shown: the next page starts right after it,
    so a page costs the same at any depth and never shifts under inserts.
    """
    sort = sort if sort in TASK_SORT_KEYS else "id"
    column = sql.SQL(TASK_SORT_KEYS[sort])
    op = sql.SQL("<" if descending else ">")
    # NULLS LAST on a column that has no NULLs would keep a DESC order off its index.
    nulls = sql.SQL("" if sort in NOT_NULL_SORT_KEYS else " NULLS LAST")
    direction = sql.SQL("DESC" if descending else "ASC") + nulls
    tie = sql.SQL("t.id DESC" if descending else "t.id ASC")
    params = {**flt.params(), "limit": limit, "after_value": None, "after_id": None}
    if after is None:
        condition: sql.Composable = sql.SQL("TRUE")
    else:
        params["after_value"], params["after_id"] = after
        if isinstance(after[0], float):
            # A real column read back as a Python float compares unequal to itself as float8: send
            # the text, which Postgres reads as the column's own type.
            params["after_value"] = repr(after[0])
        name = ("task_after_id" if sort == "id" else
                "task_after_cursor_null" if after[0] is None else "task_after_cursor")
        condition = sql.SQL(q(name)).format(sort_value=column, op=op)
    query = sql.SQL(q("task_list_keyset")).format(
        task_filter=sql.SQL(q("task_filter")), after=condition, sort_value=column,
        order_by=sql.SQL("{} {}, {}").format(column, direction, tie))
    rows = run_query(conn, query, params)
    cursor = (rows[-1]["sort_value"], rows[-1]["id"]) if len(rows) == limit else None
    return waiting.with_wait_reasons(conn, [_task_row(r) for r in rows]), cursor


def task_ids_for_bulk_list(conn: psycopg.Connection, flt: TaskFilter, applicable: tuple[str, ...], *,
                           limit: int) -> list[tuple[int, str]]:
    """The filtered tasks an action applies to (their states among `applicable`), as (id, status),
    by id, at most `limit`: a bulk action acts on the whole filter, not a page of it."""
    query = sql.SQL(q("task_ids_for_bulk_list")).format(task_filter=sql.SQL(q("task_filter")))
    rows = run_query(conn, query, {**flt.params(), "applicable": list(applicable), "limit": limit})
    return [(r["id"], r["status"]) for r in rows]


@dataclass(frozen=True)
class TaskCount:
    """How many tasks a filter selects: exact, or (when exact would be slow) an estimate said to be one."""

    n: int
    exact: bool = True


def task_count(conn: psycopg.Connection, flt: TaskFilter) -> TaskCount:
    """Exact from the rollups, which hold every dashboard filter. An estimate (the planner's) only
    when too many marks wait unfolded on a session that may not fold them (a read-only replica, no
    worker running): the exact figure would read every marked task."""
    rollups.fold_if_behind(conn)
    if rollups.rollup_pending_count(conn) >= rollups.FOLD_ON_READ_AT:
        plan = _run(conn, "task_count_estimate", flt.params())[0]
        return TaskCount(int(plan["QUERY PLAN"][0]["Plan"]["Plan Rows"]), exact=False)
    return TaskCount(sum(r["tasks"] for r in rollups.totals(conn, flt.params())))


def task_list_after(conn: psycopg.Connection, flt: TaskFilter, *, before_id: int | None,
                    limit: int) -> list[TaskRow]:
    """Up to `limit` tasks older than `before_id` (newest first)."""
    rows = _run(conn, "task_list_after", {**flt.params(), "before_id": before_id, "limit": limit})
    return waiting.with_wait_reasons(conn, [_task_row(r) for r in rows])


def _task_row(row: dict[str, Any]) -> TaskRow:
    names = TaskRow.__dataclass_fields__
    values = {k: v for k, v in row.items() if k in names}
    values["status"] = TaskStatus(values["status"])
    if values.get("latency_s") is not None:
        values["latency_s"] = float(values["latency_s"])
    if values.get("held_seconds") is not None:
        values["held_seconds"] = float(values["held_seconds"])
    return TaskRow(**values)


def stats_totals_all(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Per agent and status over every task: counts, attempts, tokens and spend, from the rollups."""
    rollups.fold_if_behind(conn)
    return rollups.totals(conn, TaskFilter().params())


def task_list_by_ids(conn: psycopg.Connection, ids: list[int]) -> list[dict[str, Any]]:
    """Status, error and confidence of the given tasks."""
    return fetch_all(conn, "task_list_by_ids", {"ids": ids})


def task_find_by_sha256(conn: psycopg.Connection, sha256s: list[str]) -> dict[str, dict[str, Any]]:
    """For each already-submitted sha256, the task to offer (completed first, else newest)."""
    if not sha256s:
        return {}
    return {r["document_sha256"]: r for r in fetch_all(conn, "task_find_by_sha256", {"sha256s": sha256s})}


def task_sha256_in_use(conn: psycopg.Connection, sha256s: list[str]) -> set[str]:
    """The documents among these that some task refers to."""
    return {r["document_sha256"] for r in fetch_all(conn, "task_sha256_in_use_list", {"sha256s": sha256s})}


def bucket_for_span(start: datetime | None, end: datetime | None, *, max_buckets: int = 60) -> timedelta:
    """The smallest round bucket that splits the span into at most `max_buckets` parts."""
    steps = [10, 30, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400]
    span = (end - start).total_seconds() if start and end else 0
    for seconds in steps:
        if span / seconds <= max_buckets:
            return timedelta(seconds=seconds)
    return timedelta(seconds=steps[-1])


def stats_charts_direct(conn: psycopg.Connection, flt: TaskFilter, *, start: datetime | None,
                        end: datetime | None, bins: int = 20) -> Charts:
    """Charts aggregated straight from tasks and attempts (the baseline the rollups replace)."""
    bucket = bucket_for_span(start, end)
    origin = datetime(2000, 1, 1, tzinfo=timezone.utc)
    params = flt.params()
    throughput = _run(conn, "stats_throughput_series", {**params, "bucket": bucket, "origin": origin})
    latency = _run(conn, "stats_latency_histogram", {**params, "bins": bins})
    latency_bins = []
    for r in latency:
        width = (r["hi"] - r["lo"]) / bins if r["hi"] > r["lo"] else 1.0
        latency_bins.append({"lo": r["lo"] + (r["bin"] - 1) * width, "hi": r["lo"] + r["bin"] * width, "n": r["n"]})
    confidence_bins = [{"lo": (r["bin"] - 1) / 10, "hi": r["bin"] / 10, "n": r["n"]}
                       for r in _run(conn, "stats_confidence_histogram", params)]
    return Charts(bucket_seconds=int(bucket.total_seconds()), throughput=throughput,
                  cost_by_agent=_run(conn, "stats_cost_by_agent", params),
                  cost_by_customer=_run(conn, "stats_cost_by_customer", params),
                  latency_bins=latency_bins, confidence_bins=confidence_bins)


def stats_compute_measured_filtered(conn: psycopg.Connection, flt: TaskFilter) -> dict[str, Any]:
    """Compute spend measured by the executors for the filtered tasks."""
    return _run(conn, "stats_compute_measured_filtered", flt.params())[0]


def stats_filter_options(conn: psycopg.Connection) -> dict[str, list[str]]:
    """{"agent": [...], "customer": [...]} for the filter controls."""
    options: dict[str, list[str]] = {"agent": [], "customer": []}
    for row in fetch_all(conn, "stats_filter_options"):
        options[row["kind"]].append(row["value"])
    return options


def task_events_after(conn: psycopg.Connection, after_id: int, *, limit: int = 1000) -> list[StreamEvent]:
    """Events with an id above `after_id`, in id order."""
    return [StreamEvent.of(r) for r in fetch_all(conn, "task_events_after", {"after_id": after_id, "limit": limit})]


def task_events_last_id(conn: psycopg.Connection) -> int:
    return fetch_one(conn, "task_events_last_id")["last_id"]


def stats_queue_health(conn: psycopg.Connection, *, now: datetime | None = None) -> list[dict[str, Any]]:
    """Per agent: oldest enqueued age in seconds and tasks waiting for token budget."""
    return fetch_all(conn, "stats_queue_health", {"now": now})


def health_ping(conn: psycopg.Connection) -> bool:
    return fetch_one(conn, "health_ping")["ok"] == 1
