"""Settles runs a worker saw end, many at once: their compute, and their completed reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from agents.report import ReportStatus
from schema import payloads
from schema.errors import InvalidPayload
from schema.queue.callbacks import apply_reports
from schema.queue.common import reads_by_index
from schema.sql import q, require_idle

# Attempt states in which nobody else has settled the attempt: the worker may report for it. A
# superseded attempt (another one completed its task first) is one: its report changes nothing of
# the task, but what it spent is recorded on it, as the callback path records it.
REPORTABLE = frozenset({"processing", "lost", "superseded"})


@dataclass(frozen=True)
class Ended:
    """A run that ended: the report it left for the worker to apply, and the compute it used."""

    attempt_id: int
    report: Mapping[str, Any] | None = None
    compute_seconds: float | None = None
    cpu_seconds: float | None = None
    compute_cost_usd: float | None = None
    dbus: float | None = None
    compute_state: str | None = None     # measured, or pending: the billing tables will price it


@dataclass(frozen=True)
class Settled:
    """What settling did for one attempt, and what is left for the caller."""

    attempt_id: int
    task_id: int | None
    reported_status: str | None          # what the attempt had reported before (None: never)
    completed: bool = False              # its report completed its task here
    report_due: bool = False             # it never reported: the caller applies `report` one by one
    superseded_ids: tuple[int, ...] = field(default=())


def _plain(value: Any) -> Any:
    return float(value) if value is not None else None


def _plain_completion(report: Mapping[str, Any] | None) -> payloads.Report | None:
    """The report parsed, if it is a completion settlement may apply (a rate-limited one goes the
    one-by-one way, which backs the agent off); None for anything else."""
    if report is None:
        return None
    try:
        parsed = payloads.parse_callback(report)
    except InvalidPayload:
        return None
    return parsed if parsed.status is ReportStatus.COMPLETED and not parsed.rate_limited else None


def settle_ended(conn: psycopg.Connection, ended: list[Ended], *,
                 now: datetime | None = None) -> dict[int, Settled]:
    """Records the compute of every run and applies the plain completions, in one transaction.

    A completed report of an attempt that never reported, for a task that is not terminal, is
    applied here; any other report (failures, invalid bodies, tasks already ended) is returned
    as `report_due` for apply_callback, the one-by-one path. One attempt per task is settled per
    call: others of the same task come back as not settled and are retried by the caller.
    The statements go to the server together, in one round trip (pipeline mode).
    """
    require_idle(conn)
    if not ended:
        return {}
    reports = [(e.attempt_id, _plain_completion(e.report)) for e in ended]
    compute = {e.attempt_id: {"compute_seconds": e.compute_seconds, "cpu_seconds": e.cpu_seconds,
                              "compute_cost_usd": _plain(e.compute_cost_usd), "dbus": _plain(e.dbus),
                              "compute_state": e.compute_state} for e in ended}
    ids = list(compute)
    with conn.pipeline(), conn.transaction():
        # A plan made while task_attempts looked small scanned whole tables on every batch; and
        # no plan here is worth compiling: JIT would take longer than the statement.
        reads_by_index(conn)
        locking = conn.cursor(row_factory=dict_row)
        locking.execute(q("task_lock_for_attempts"), {"attempt_ids": ids})
        # The batch joins its own rows by hash: with statistics that lag behind a fast-changing
        # queue, the planner would otherwise loop over one side once per row of the other.
        # (The triggers it fires turn them on again for themselves: see migration 10.)
        conn.execute("SELECT set_config('enable_nestloop', 'off', true)")
        # The callback's own statement, for the batch: only plain completions of attempts that
        # never reported, for tasks not ended, are applied here.
        applied = apply_reports(conn, reports, compute=compute, fresh_only=True, now=now)
        locked = locking.fetchall()
    out: dict[int, Settled] = {}
    seen_tasks: set[int] = set()
    for row in locked:
        if row["task_id"] in seen_tasks:
            continue  # a second run of the same task: settled by the next call
        seen_tasks.add(row["task_id"])
        due = row["reported_status"] is None and row["attempt_status"] in REPORTABLE
        out[row["attempt_id"]] = Settled(row["attempt_id"], row["task_id"], row["reported_status"], report_due=due)
    for done in applied.values():
        if done.completed:
            previous = out[done.attempt_id]
            out[done.attempt_id] = Settled(previous.attempt_id, previous.task_id, previous.reported_status,
                                           completed=True, superseded_ids=done.superseded_ids)
    return out
