"""What the pages and the HTTP API read, run off the event loop over the pool: figures, task pages,
agents, events, compute cost and health."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from psycopg import Connection
from psycopg_pool import ConnectionPool

from app import figure_cache
from app.figure_cache import in_thread
from schema import queue, rollups, stats, waiting
from schema.models import Agent, Task
from schema.settings import get_settings
from schema.stats import TaskCount
from schema.stats_types import Charts, StreamEvent, Summary, TaskFilter, TaskRow

# -- reading ------------------------------------------------------------------------------------

async def summary(pool: ConnectionPool, flt: TaskFilter) -> Summary:
    return await in_thread(pool, stats.stats_summary_filtered, flt)


async def charts(pool: ConnectionPool, flt: TaskFilter) -> Charts:
    """Chart data; the filter's time span picks the throughput bucket."""
    return await in_thread(pool, stats.stats_charts_filtered, flt)


async def task_page(pool: ConnectionPool, flt: TaskFilter, *, sort: str, descending: bool,
                    after: tuple[Any, int] | None, per_page: int) -> tuple[list[TaskRow], tuple[Any, int] | None]:
    """One keyset page of the task table and the cursor of the next (None on the last page)."""
    return await in_thread(pool, stats.task_list_keyset, flt, sort=sort, descending=descending,
                           after=after, limit=per_page)


async def task_count(pool: ConnectionPool, flt: TaskFilter) -> TaskCount:
    return await in_thread(pool, stats.task_count, flt)


def catching_up_note(summary: Summary) -> str | None:
    """The words shown while a backlog is folded in the background (None when the figures are exact)."""
    if not summary.catching_up:
        return None
    since = f" since {summary.as_of:%Y-%m-%d %H:%M:%S} UTC" if summary.as_of else ""
    # Past the bound the number is the table's estimate, which may lag a fresh bulk load.
    waiting = (f"about {summary.backlog:,}" if summary.backlog > rollups.PENDING_EXACT_MAX + 1
               else f"more than {rollups.PENDING_EXACT_MAX:,}")
    return (f"Catching up: {waiting} changes{since} are not counted yet; "
            "the figures count what is folded so far.")


# -- what open pages read: shared by every page of the process (app.figure_cache) ---------------
# Each returns (value, current): current means read after `since` (time.monotonic() of the events
# the page saw; by default the ask itself). A value not current was served to keep the database to
# one read a second: the page asks again a second later.

async def live_summary(pool: ConnectionPool, flt: TaskFilter, *, since: float | None = None,
                       exact: bool = False) -> tuple[Summary, bool]:
    """Pages: as of the last fold. API clients: exact (the marks not folded yet added), shared a second."""
    return await figure_cache.for_pool(pool).summary(flt, since=since, exact=exact)


async def live_charts(pool: ConnectionPool, flt: TaskFilter, *, since: float | None = None,
                      exact: bool = False) -> tuple[Charts, bool]:
    return await figure_cache.for_pool(pool).charts(flt, since=since, exact=exact)


async def live_task_page(pool: ConnectionPool, flt: TaskFilter, *, sort: str, descending: bool,
                         after: tuple[Any, int] | None, per_page: int, since: float | None = None,
                         ) -> tuple[tuple[list[TaskRow], tuple[Any, int] | None], bool]:
    """A page of the task table and its next cursor, shared by every page showing the same one."""
    return await figure_cache.for_pool(pool).shared(
        ("task_page", flt, sort, descending, after, per_page),
        lambda: task_page(pool, flt, sort=sort, descending=descending, after=after, per_page=per_page),
        since=since)


async def live_task_count(pool: ConnectionPool, flt: TaskFilter, *,
                          since: float | None = None) -> tuple[TaskCount, bool]:
    return await figure_cache.for_pool(pool).shared(("task_count", flt), lambda: task_count(pool, flt), since=since)


async def live(pool: ConnectionPool, name: str, read: Callable[[], Any], *,
               since: float | None = None) -> tuple[Any, bool]:
    """Any other read every open page repeats (agents, budgets, filter options)."""
    return await figure_cache.for_pool(pool).shared((name,), read, since=since)


def forget_live(pool: ConnectionPool) -> None:
    """After an operator's action: every page's next ask goes to the database."""
    figure_cache.for_pool(pool).forget()


async def tasks_before(pool: ConnectionPool, flt: TaskFilter, *, before: tuple[datetime | None, int] | None,
                       limit: int) -> list[TaskRow]:
    return await in_thread(pool, stats.task_list_after, flt, before=before, limit=limit)


def _task_with_wait_reason(conn: Connection, task_id: int) -> Task:
    return waiting.with_wait_reasons(conn, [queue.get_task(conn, task_id)])[0]


async def task_detail(pool: ConnectionPool, task_id: int) -> Task:
    """One task with its attempts and timeline, and why it waits if it is enqueued."""
    return await in_thread(pool, _task_with_wait_reason, task_id)


async def agents(pool: ConnectionPool) -> list[Agent]:
    """Every configured agent (its limits, pause and problems)."""
    return await in_thread(pool, queue.list_agents)


async def batch_status(pool: ConnectionPool, ids: list[int]) -> dict[int, dict[str, Any]]:
    rows = await in_thread(pool, stats.task_list_by_ids, ids)
    return {r["id"]: r for r in rows}


async def filter_options(pool: ConnectionPool) -> dict[str, list[str]]:
    return await in_thread(pool, stats.stats_filter_options)


async def adaptive_limits(pool: ConnectionPool) -> list[str]:
    """One line per agent running at adaptive limits after rate limits: effective vs configured."""
    lines = []
    for a in await in_thread(pool, queue.list_agents):
        if a.effective_tpm is None and a.effective_concurrency is None:
            continue
        parts = []
        if a.effective_tpm is not None:
            parts.append(f"{a.effective_tpm:,} of {a.max_tpm:,} TPM" if a.max_tpm else f"{a.effective_tpm:,} TPM")
        if a.effective_concurrency is not None:
            parts.append(f"{a.effective_concurrency} of {a.max_concurrent_tasks} at once" if a.max_concurrent_tasks
                         else f"{a.effective_concurrency} at once")
        lines.append(f"{a.name}: {', '.join(parts)} after {a.rate_limited_total:,} rate limits")
    return lines


async def agent_names(pool: ConnectionPool) -> list[str]:
    agents = await in_thread(pool, queue.list_agents)
    return [a.name for a in agents]


async def agent_config_errors(pool: ConnectionPool) -> dict[str, str]:
    """Agents that cannot run (misconfigured, or halted), with the reason; their tasks wait."""
    agents = await in_thread(pool, queue.list_agents)
    return {a.name: a.cannot_run for a in agents if a.cannot_run}


async def halted_agents(pool: ConnectionPool) -> dict[str, str]:
    """Agents halted on what their runs showed, with the reason; an operator may clear each."""
    agents = await in_thread(pool, queue.list_agents)
    return {a.name: a.halt_reason for a in agents if a.halt_reason}



async def events_after(pool: ConnectionPool, after_id: int, *, limit: int = 1000) -> list[StreamEvent]:
    return await in_thread(pool, stats.task_events_after, after_id, limit=limit)


async def snapshot(pool: ConnectionPool) -> dict[str, Any]:
    """What an SSE client starts from: the newest event id and the counts per agent and status."""
    def read(conn: Connection) -> dict[str, Any]:
        return {"last_event_id": stats.task_events_last_id(conn), "counts": stats.status_counts(conn)}
    return await in_thread(pool, read)


@dataclass(frozen=True)
class ComputeCost:
    """Compute spend for a filter, and where the figure came from."""

    cost_usd: Decimal | None
    source: Literal["billing", "measured"]
    detail: str


def warehouse_id() -> str | None:
    """The SQL warehouse for billing queries (QUIRE_WAREHOUSE_ID); unset means no billing tables."""
    return get_settings().warehouse_id


async def compute_cost(pool: ConnectionPool, flt: TaskFilter) -> ComputeCost:
    """Compute spend recorded per attempt: measured locally, or billed per Databricks job run."""
    measured = await in_thread(pool, stats.stats_compute_measured_filtered, flt)
    seconds = measured["compute_seconds"] or 0.0
    pending = measured["attempts_pending"] or 0
    if warehouse_id():
        # The worker's billing reconciler writes each job run's DBUs and cost as billing has them.
        notes = [f"{pending} job runs pending billing"]
        for key, what in (("attempts_provisional", "not final yet"), ("attempts_unbilled", "never billed"),
                          ("attempts_unpriced", "with DBUs that have no list price")):
            if measured[key]:
                notes.append(f"{measured[key]} {what}")
        return ComputeCost(cost_usd=measured["compute_cost_usd"] or Decimal(0), source="billing",
                           detail=f"{measured['attempts_measured']} of {measured['attempts']} attempts billed, "
                                  f"{float(measured['dbus'] or 0):,.2f} DBU at list price; " + "; ".join(notes)
                                  + "; cloud VM cost of classic clusters is not included")
    return ComputeCost(cost_usd=measured["compute_cost_usd"] or Decimal(0), source="measured",
                       detail=f"{measured['attempts_measured']} of {measured['attempts']} attempts measured, "
                              f"{seconds / 60:,.1f} min of run time"
                              + (f"; {pending} job runs pending billing" if pending else ""))


# -- health and metrics -------------------------------------------------------------------------

async def database_ok(pool: ConnectionPool, *, timeout: float = 3.0) -> tuple[bool, str]:
    try:
        await asyncio.wait_for(in_thread(pool, stats.health_ping), timeout)
        return True, "ok"
    except Exception as exc:  # any failure means unhealthy; the message says which
        return False, f"{type(exc).__name__}: {exc}".strip()


async def metrics_data(pool: ConnectionPool) -> dict[str, Any]:
    """What /metrics reads from the database: the rollups' totals and the queue's head per agent."""
    def read(conn: Connection) -> dict[str, Any]:
        return {"totals": stats.stats_totals_all(conn), "queue": stats.stats_queue_health(conn)}
    return await in_thread(pool, read)
