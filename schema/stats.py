"""Read-only figures over the queue: counts, costs and latencies for the CLI, API and dashboard."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql

from schema import figures, rollups, waiting
from schema.models import TaskStatus
from schema.sql import fetch_all, fetch_one, fetch_row, q, run_query
from schema.stats_types import (
    CHART_ORIGIN,
    HELD,
    STATUSES,
    Charts,
    StreamEvent,
    Summary,
    TaskFilter,
    TaskRow,
    bucket_for_span,
)

# Sortable columns of the task table: the only identifiers ever composed into ORDER BY.
TASK_SORT_KEYS: dict[str, str] = {
    "id": "t.id", "created_at": "t.created_at", "finished_at": "t.finished_at", "status": "t.status",
    "agent": "t.agent", "customer": "t.customer", "priority": "t.priority",
    "document_name": "t.document_name", "pages": "t.pages", "confidence": "t.confidence",
    "tokens": "t.tokens", "llm_cost_usd": "t.llm_cost_usd", "latency_s": "t.latency_s",
}

NOT_NULL_SORT_KEYS = ("id", "created_at", "status", "agent", "priority")
# The table's order unless another column is picked: newest submission first, the id breaking ties
# (one index; a date range ending in the past starts at its end).
NEWEST_FIRST = "created_at"
# Sorts on what the view adds to the task row (summed spend, latency): their pages read the view whole.
VIEW_SORT_KEYS = ("tokens", "llm_cost_usd", "latency_s")


def task_filter(params: dict[str, Any]) -> tuple[sql.Composable, dict[str, Any]]:
    """The SQL of the dashboard filters in `params` (TaskFilter.params()) over tasks `t`, and the
    parameters it reads: only the conditions the filter sets, each as the planner can match it to an
    index (stats.sql, task_filter_*). One task status, agent or customer is compared as a value, for
    which an index led by it is read in order and a partial index of the status matches (`= ANY` of
    an array allows neither)."""
    def one_or_many(key: str, values: list[str] | None, one: str, many: str) -> list[sql.Composable]:
        if not values:
            return []
        if len(values) == 1:
            extra[key] = values[0]
            return [sql.SQL(q(one))]
        return [sql.SQL(q(many))]

    extra: dict[str, Any] = {}
    conditions: list[sql.Composable] = [sql.SQL(q(fragment)) for fragment, used in (
        ("task_filter_from", params.get("date_from")), ("task_filter_to", params.get("date_to"))) if used is not None]
    chosen = params.get("statuses") or []
    statuses = [s for s in chosen if s != HELD]
    by_status: list[sql.Composable] = []
    if len(statuses) == 1 and statuses[0] in STATUSES:  # (a name no task has is compared as text: no cast to fail)
        extra["task_status"] = statuses[0]
        by_status.append(sql.SQL(q("task_filter_status")))
    elif statuses:
        extra["task_statuses"] = statuses
        by_status.append(sql.SQL(q("task_filter_statuses")))
    if HELD in chosen:
        by_status.append(sql.SQL(q("task_filter_held")))
    if by_status:
        conditions.append(sql.SQL("({})").format(sql.SQL(" OR ").join(by_status)))
    conditions += one_or_many("agent", params.get("agents"), "task_filter_agent", "task_filter_agents")
    conditions += one_or_many("customer", params.get("customers"), "task_filter_customer", "task_filter_customers")
    if params.get("needs_review"):
        conditions.append(sql.SQL(q("task_filter_review")))
    composed = sql.SQL("({})").format(sql.SQL(" AND ").join(conditions)) if conditions else sql.SQL("TRUE")
    return composed, {**params, **extra}


def _composed(name: str, params: dict[str, Any],
              order_by: sql.Composable | None = None) -> tuple[sql.Composed, dict[str, Any]]:
    where, params = task_filter(params)
    parts: dict[str, sql.Composable] = {"task_filter": where}
    if order_by is not None:
        parts["order_by"] = order_by
    return sql.SQL(q(name)).format(**parts), params


def _run(conn: psycopg.Connection, name: str, params: dict[str, Any],
         order_by: sql.Composable | None = None) -> list[dict[str, Any]]:
    return run_query(conn, *_composed(name, params, order_by))


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


def stats_summary_filtered(conn: psycopg.Connection, flt: TaskFilter, *, now: datetime | None = None) -> Summary:
    """The headline figures from the rollups: exact counts and spend, percentiles from histograms."""
    return figures.summary_of(figures.figures_read(conn, flt, now=now, advance=False), now=now)


def stats_charts_filtered(conn: psycopg.Connection, flt: TaskFilter, *, now: datetime | None = None) -> Charts:
    """Throughput, cost by agent and customer, latency and confidence distributions, from the rollups."""
    return figures.charts_of(figures.figures_read(conn, flt, now=now, advance=False))


def task_list_keyset(conn: psycopg.Connection, flt: TaskFilter, *, sort: str = NEWEST_FIRST, descending: bool = True,
                     after: tuple[Any, int] | None = None,
                     limit: int = 25) -> tuple[list[TaskRow], tuple[Any, int] | None]:
    """One page of tasks in the requested order after a cursor, and the cursor of the page after it.

    A cursor is (sort value, id) of the last row shown: the next page starts right after it,
    so a page costs the same at any depth and never shifts under inserts.
    """
    sort = sort if sort in TASK_SORT_KEYS else NEWEST_FIRST
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
                "task_after_row" if sort in NOT_NULL_SORT_KEYS else
                "task_after_cursor_null" if after[0] is None else "task_after_cursor")
        condition = sql.SQL(q(name)).format(sort_value=column, op=op)
    where, params = task_filter(params)
    query = sql.SQL(q("task_list_keyset" if sort in VIEW_SORT_KEYS else "task_list_keyset_by_task")).format(
        task_filter=where, after=condition, sort_value=column,
        order_by=sql.SQL("{} {}, {}").format(column, direction, tie))
    rows = run_query(conn, query, params)
    cursor = (rows[-1]["sort_value"], rows[-1]["id"]) if len(rows) == limit else None
    return waiting.with_wait_reasons(conn, [_task_row(r) for r in rows]), cursor


def task_ids_for_bulk_list(conn: psycopg.Connection, flt: TaskFilter, applicable: tuple[str, ...], *,
                           limit: int) -> list[tuple[int, str]]:
    """The filtered tasks an action applies to (their states among `applicable`), as (id, status),
    by id, at most `limit`: a bulk action acts on the whole filter, not a page of it."""
    where, params = task_filter({**flt.params(), "applicable": list(applicable), "limit": limit})
    rows = run_query(conn, sql.SQL(q("task_ids_for_bulk_list")).format(task_filter=where), params)
    return [(r["id"], r["status"]) for r in rows]


@dataclass(frozen=True)
class TaskCount:
    """How many tasks a filter selects: exact, or (when exact would be slow) an estimate said to be one."""

    n: int
    exact: bool = True


def task_count(conn: psycopg.Connection, flt: TaskFilter) -> TaskCount:
    """Exact from the rollups, which hold every dashboard filter. An estimate (the planner's) only
    while a backlog is folded in the background (a bulk load): the exact figure would read every
    marked task."""
    if (parts := flt.held_apart()) is not None:
        rest, held = (task_count(conn, part) for part in parts)
        return TaskCount(rest.n + held.n, exact=rest.exact)
    if flt.exact_only:  # held tasks: the rollups do not key them; tasks_held_idx holds them
        return TaskCount(_run(conn, "task_count_exact", flt.params())[0]["n"])
    if rollups.rollup_backlog(conn).catching_up:
        plan = _run(conn, "task_count_estimate", flt.params())[0]
        return TaskCount(int(plan["QUERY PLAN"][0]["Plan"]["Plan Rows"]), exact=False)
    return TaskCount(rollups.count(conn, flt.params()))


def task_list_after(conn: psycopg.Connection, flt: TaskFilter, *, before: tuple[datetime | None, int] | None,
                    limit: int) -> list[TaskRow]:
    """Up to `limit` tasks submitted before `before` (the created_at and id of the last task shown; a
    created_at of None is the task's own), newest first: the table's first order, by its keyset."""
    after: tuple[Any, int] | None = None
    if before is not None:
        created, task_id = before
        if created is None:
            row = fetch_one(conn, "task_created_at", {"id": task_id})
            if row is None:
                return []
            created = row["created_at"]
        after = (created, task_id)
    rows, _ = task_list_keyset(conn, flt, sort=NEWEST_FIRST, descending=True, after=after, limit=limit)
    return rows


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
    """Per agent and status over every task: counts, attempts, tokens and spend, from the rollups
    (what is folded only, while a backlog is folded in the background)."""
    pending = not rollups.rollup_backlog(conn).catching_up
    return rollups.totals(conn, {**TaskFilter().params(), "with_pending": pending})


def task_list_by_ids(conn: psycopg.Connection, ids: list[int]) -> list[dict[str, Any]]:
    """Status, error and confidence of the given tasks."""
    return fetch_all(conn, "task_list_by_ids", {"ids": ids})


def task_find_by_sha256(conn: psycopg.Connection, sha256s: list[str], *,
                        customer: str | None) -> dict[str, dict[str, Any]]:
    """For each sha256 this customer submitted already, the task to offer (completed first, else newest);
    None is the tasks submitted without a customer."""
    if not sha256s:
        return {}
    return {r["document_sha256"]: r for r in fetch_all(conn, "task_find_by_sha256",
                                                        {"sha256s": sha256s, "customer": customer})}


def task_sha256_in_use(conn: psycopg.Connection, sha256s: list[str]) -> set[str]:
    """The documents among these that some task refers to."""
    return {r["document_sha256"] for r in fetch_all(conn, "task_sha256_in_use_list", {"sha256s": sha256s})}


def stats_charts_direct(conn: psycopg.Connection, flt: TaskFilter, *, start: datetime | None,
                        end: datetime | None, bins: int = 20) -> Charts:
    """Charts aggregated straight from tasks and attempts (the baseline the rollups replace)."""
    bucket = bucket_for_span(start, end)
    params = flt.params()
    throughput = _run(conn, "stats_throughput_series", {**params, "bucket": bucket, "origin": CHART_ORIGIN})
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


def stats_charts_exact(conn: psycopg.Connection, flt: TaskFilter, *, now: datetime | None = None) -> Charts:
    """Charts read from the tasks themselves over the filter's span: for a filter the rollups do not
    key (held)."""
    first = _run(conn, "task_first_created_exact", flt.params())[0]["first"]
    return stats_charts_direct(conn, flt, start=flt.date_from or first,
                               end=flt.date_to or (now or datetime.now(UTC) if first else None))


def with_held(summary: Summary, held: Summary) -> Summary:
    """The summary of other outcomes with held tasks added (TaskFilter.held_apart): held tasks are
    queued and never ran, so they add to the queued count, the total and the span only."""
    counts = {**summary.counts, TaskStatus.ENQUEUED.value: summary.counts.get(TaskStatus.ENQUEUED.value, 0)
              + held.total}
    firsts = [t for t in (summary.first_created_at, held.first_created_at) if t is not None]
    lasts = [t for t in (summary.last_activity_at, held.last_activity_at) if t is not None]
    return dataclasses.replace(summary, counts=counts, total=summary.total + held.total,
                               first_created_at=min(firsts, default=None), last_activity_at=max(lasts, default=None))


def charts_with_held(charts: Charts, held_submitted: list[dict[str, Any]]) -> Charts:
    """The charts of other outcomes with held tasks' submissions added to the throughput (rows of
    held_throughput, in the charts' own buckets); held tasks add nothing else: they never ran."""
    submitted: dict[datetime, int] = {r["bucket"]: r["n"] for r in charts.throughput if r["series"] == "submitted"}
    for r in held_submitted:
        submitted[r["bucket"]] = submitted.get(r["bucket"], 0) + r["n"]
    throughput = [r for r in charts.throughput if r["series"] != "submitted"]
    throughput += [{"series": "submitted", "bucket": b, "n": n} for b, n in submitted.items()]
    throughput.sort(key=lambda r: (r["bucket"], r["series"]))  # as figures.charts_of orders them
    return dataclasses.replace(charts, throughput=throughput)


def held_throughput(conn: psycopg.Connection, held: TaskFilter, bucket_seconds: int) -> list[dict[str, Any]]:
    """Held tasks' submissions per chart bucket (read through tasks_held_idx)."""
    return [r for r in _run(conn, "stats_throughput_series", {**held.params(), "origin": CHART_ORIGIN,
                                                                "bucket": timedelta(seconds=bucket_seconds)})
            if r["series"] == "submitted"]


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
    return fetch_row(conn, "task_events_last_id")["last_id"]


def stats_queue_health(conn: psycopg.Connection, *, now: datetime | None = None) -> list[dict[str, Any]]:
    """Per agent: oldest enqueued age in seconds and tasks waiting for token budget."""
    return fetch_all(conn, "stats_queue_health", {"now": now})


def health_ping(conn: psycopg.Connection) -> bool:
    return fetch_row(conn, "health_ping")["ok"] == 1
