"""Read-only figures over the queue: counts, costs and latencies for the CLI, API and dashboard."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql

from schema.sql import fetch_all, fetch_one, q, run_query

# Sortable columns of the task table: the only identifiers ever composed into ORDER BY.
TASK_SORT_KEYS: dict[str, str] = {
    "id": "t.id", "created_at": "t.created_at", "finished_at": "t.finished_at", "status": "t.status",
    "agent": "t.agent", "customer": "t.customer", "priority": "t.priority",
    "document_name": "t.document_name", "pages": "t.pages", "confidence": "t.confidence",
    "tokens": "t.tokens", "llm_cost_usd": "t.llm_cost_usd", "latency_s": "(t.finished_at - t.created_at)",
}


@dataclass(frozen=True)
class TaskFilter:
    """The dashboard filters; an empty or None member selects everything."""

    date_from: datetime | None = None  # created at or after
    date_to: datetime | None = None    # created before
    statuses: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    customers: tuple[str, ...] = ()

    def params(self) -> dict[str, Any]:
        return {"date_from": self.date_from, "date_to": self.date_to,
                "statuses": list(self.statuses) or None, "agents": list(self.agents) or None,
                "customers": list(self.customers) or None}


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


@dataclass(frozen=True)
class TaskRow:
    """A task as the table and the API list show it: state plus its summed spend."""

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
    input_tokens: int | None
    output_tokens: int | None
    llm_cost_usd: Decimal | None
    compute_cost_usd: Decimal | None


@dataclass(frozen=True)
class StreamEvent:
    """One row of the event log, as the SSE stream sends it."""

    id: int
    task_id: int
    agent: str
    status: str
    prev_status: str | None
    actor: str | None = None
    at: datetime | None = None


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
    for row in fetch_all(conn, "stats_status_counts"):
        agents.setdefault(row["agent"], {})[row["status"]] = row["n"]
        total[row["status"]] = total.get(row["status"], 0) + row["n"]
    return {"agents": agents, "total": total}


def stats_summary_filtered(conn: psycopg.Connection, flt: TaskFilter) -> Summary:
    row = _run(conn, "stats_summary_filtered", flt.params())[0]
    statuses = ("enqueued", "processing", "completed", "failed", "cancelled")
    return Summary(
        counts={s: row[s] for s in statuses}, total=row["total"],
        input_tokens=int(row["input_tokens"] or 0), output_tokens=int(row["output_tokens"] or 0),
        llm_cost_usd=row["llm_cost_usd"] or Decimal(0), compute_cost_usd=row["compute_cost_usd"] or Decimal(0),
        tasks_with_usage=row["tasks_with_usage"] or 0, attempts=row["attempts"] or 0,
        avg_confidence=row["avg_confidence"], median_latency_s=row["median_latency_s"],
        p95_latency_s=row["p95_latency_s"], first_created_at=row["first_created_at"],
        last_activity_at=row["last_activity_at"])


def task_list_page(conn: psycopg.Connection, flt: TaskFilter, *, sort: str = "id", descending: bool = True,
                   limit: int = 25, offset: int = 0) -> tuple[list[TaskRow], int]:
    """One page of tasks in the requested order, and how many tasks match in all."""
    column = TASK_SORT_KEYS.get(sort, "t.id")
    direction = sql.SQL("DESC NULLS LAST" if descending else "ASC NULLS LAST")
    tie = sql.SQL("t.id DESC" if descending else "t.id ASC")
    order_by = sql.SQL("{} {}, {}").format(sql.SQL(column), direction, tie)
    params = {**flt.params(), "limit": limit, "offset": offset}
    rows = _run(conn, "task_list_page", params, order_by)
    total = _run(conn, "task_count_filtered", flt.params())[0]["n"]
    return [_task_row(r) for r in rows], total


def task_list_after(conn: psycopg.Connection, flt: TaskFilter, *, before_id: int | None,
                    limit: int) -> list[TaskRow]:
    """Up to `limit` tasks older than `before_id` (newest first)."""
    rows = _run(conn, "task_list_after", {**flt.params(), "before_id": before_id, "limit": limit})
    return [_task_row(r) for r in rows]


def _task_row(row: dict[str, Any]) -> TaskRow:
    names = TaskRow.__dataclass_fields__
    values = {k: v for k, v in row.items() if k in names}
    if values.get("latency_s") is not None:
        values["latency_s"] = float(values["latency_s"])
    return TaskRow(**values)


def task_list_by_ids(conn: psycopg.Connection, ids: list[int]) -> list[dict[str, Any]]:
    """Status, error and confidence of the given tasks."""
    return fetch_all(conn, "task_list_by_ids", {"ids": ids})


def task_find_by_sha256(conn: psycopg.Connection, sha256s: list[str]) -> dict[str, dict[str, Any]]:
    """For each already-submitted sha256, the task to offer (completed first, else newest)."""
    if not sha256s:
        return {}
    return {r["document_sha256"]: r for r in fetch_all(conn, "task_find_by_sha256", {"sha256s": sha256s})}


def bucket_for_span(start: datetime | None, end: datetime | None, *, max_buckets: int = 60) -> timedelta:
    """The smallest round bucket that splits the span into at most `max_buckets` parts."""
    steps = [10, 30, 60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400]
    span = (end - start).total_seconds() if start and end else 0
    for seconds in steps:
        if span / seconds <= max_buckets:
            return timedelta(seconds=seconds)
    return timedelta(seconds=steps[-1])


def stats_charts_filtered(conn: psycopg.Connection, flt: TaskFilter, *, start: datetime | None,
                          end: datetime | None, bins: int = 20) -> Charts:
    """Throughput, cost by agent and customer, latency and confidence distributions."""
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


def attempt_job_run_ids_filtered(conn: psycopg.Connection, flt: TaskFilter) -> list[str]:
    return [r["job_run_id"] for r in _run(conn, "attempt_job_run_ids_filtered", flt.params())]


def billing_compute_cost_for_runs(run_ids: list[str], *, warehouse_id: str, client=None) -> dict[str, Any]:
    """List-price compute cost of Databricks job runs, from the billing system tables (slow)."""
    from databricks.sdk import WorkspaceClient
    from databricks.sdk.service.sql import StatementParameterListItem, StatementState

    if not run_ids:
        return {"cost_usd": 0.0, "dbus": 0.0, "runs": 0}
    client = client or WorkspaceClient()
    response = client.statement_execution.execute_statement(
        warehouse_id=warehouse_id, statement=q("billing_compute_cost_for_runs"), wait_timeout="50s",
        parameters=[StatementParameterListItem(name="run_ids", value=",".join(run_ids))])
    while response.status and response.status.state in (StatementState.PENDING, StatementState.RUNNING):
        time.sleep(1.0)
        response = client.statement_execution.get_statement(response.statement_id)
    if response.status is None or response.status.state != StatementState.SUCCEEDED:
        error = response.status.error.message if response.status and response.status.error else "unknown error"
        raise RuntimeError(f"billing query failed: {error}")
    rows = (response.result.data_array if response.result else None) or []
    return {"cost_usd": sum(float(r[2] or 0) for r in rows), "dbus": sum(float(r[1] or 0) for r in rows),
            "runs": len(rows)}


def stats_filter_options(conn: psycopg.Connection) -> dict[str, list[str]]:
    """{"agent": [...], "customer": [...]} for the filter controls."""
    options: dict[str, list[str]] = {"agent": [], "customer": []}
    for row in fetch_all(conn, "stats_filter_options"):
        options[row["kind"]].append(row["value"])
    return options


def task_events_after(conn: psycopg.Connection, after_id: int, *, limit: int = 1000) -> list[StreamEvent]:
    """Events with an id above `after_id`, in id order."""
    return [StreamEvent(**r) for r in fetch_all(conn, "task_events_after", {"after_id": after_id, "limit": limit})]


def task_events_last_id(conn: psycopg.Connection) -> int:
    return fetch_one(conn, "task_events_last_id")["last_id"]


def stats_queue_health(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Per agent: oldest enqueued age in seconds and tasks waiting for token budget."""
    return fetch_all(conn, "stats_queue_health")


def stats_attempt_counts(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Per agent and attempt status: attempts and callbacks received."""
    return fetch_all(conn, "stats_attempt_counts")


def health_ping(conn: psycopg.Connection) -> bool:
    return fetch_one(conn, "health_ping")["ok"] == 1
