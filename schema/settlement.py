"""Settles runs a worker saw end, many at once: their compute, and their completed reports."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

import psycopg

from schema import payloads, queue
from schema.errors import InvalidPayload, TransactionInProgress
from schema.sql import fetch_all as _rows

# Attempt states in which nobody else has settled the attempt: the worker may report for it.
REPORTABLE = frozenset({"processing", "lost"})
TERMINAL = frozenset({"completed", "failed", "cancelled"})


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


def settle_ended(conn: psycopg.Connection, ended: list[Ended], *,
                 now: datetime | None = None) -> dict[int, Settled]:
    """Records the compute of every run and applies the plain completions, in one transaction.

    A completed report of an attempt that never reported, for a task that is not terminal, is
    applied here; any other report (failures, invalid bodies, tasks already ended) is returned
    as `report_due` for apply_callback, the one-by-one path. One attempt per task is settled per
    call: others of the same task come back as not settled and are retried by the caller.
    """
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise TransactionInProgress("engine calls run their own transaction: commit or roll back first")
    if not ended:
        return {}
    by_attempt = {e.attempt_id: e for e in ended}
    out: dict[int, Settled] = {}
    with conn.transaction():
        locked = _rows(conn, "task_lock_for_attempts", {"attempt_ids": list(by_attempt)})
        items, seen_tasks = [], set()
        model_calls: dict[str, int] = {}  # per agent, completions that called a model without a 429
        for row in locked:
            attempt_id, task_id = row["attempt_id"], row["task_id"]
            if task_id in seen_tasks:
                continue  # a second run of the same task: settled by the next call
            seen_tasks.add(task_id)
            e = by_attempt[attempt_id]
            due = row["reported_status"] is None and row["attempt_status"] in REPORTABLE
            report = None
            if due and e.report is not None and row["task_status"] not in TERMINAL:
                try:
                    parsed = payloads.parse_callback(e.report)
                except InvalidPayload:
                    parsed = None
                # A rate-limited report goes the one-by-one way, which backs the agent off.
                report = (parsed if parsed is not None and parsed.status == "completed"
                          and not parsed.rate_limited else None)
            if report is not None and (report.input_tokens or report.output_tokens):
                model_calls[row["agent"]] = model_calls.get(row["agent"], 0) + 1
            item = {"attempt_id": attempt_id, "task_id": task_id, "complete": report is not None,
                    "compute_seconds": e.compute_seconds, "cpu_seconds": e.cpu_seconds,
                    "compute_cost_usd": _plain(e.compute_cost_usd), "dbus": _plain(e.dbus),
                    "compute_state": e.compute_state}
            if report is not None:
                item.update(result=report.result, confidence=report.confidence, pages=report.pages,
                            has_usage=report.has_usage, input_tokens=report.input_tokens,
                            output_tokens=report.output_tokens, llm_cost_usd=report.llm_cost_usd,
                            llm_unpriced=report.unpriced,
                            report_compute_cost_usd=report.compute_cost_usd, run_id=report.run_id,
                            trace_id=report.trace_id)
            items.append(item)
            out[attempt_id] = Settled(attempt_id, task_id, row["reported_status"], report_due=due)
        if items:
            # The batch joins its own rows by hash: with statistics that lag behind a fast-changing
            # queue, the planner would otherwise loop over one side once per row of the other.
            # (The triggers it fires turn them on again for themselves: see migration 10.) Plans
            # of such cost must not be compiled either: JIT would take longer than the statement.
            conn.execute("SET LOCAL enable_nestloop = off")
            conn.execute("SET LOCAL jit = off")
        done = _rows(conn, "task_complete_batch_from_attempts",
                     {"reports": json.dumps(items), "now": now,
                      "task_ids": [i["task_id"] for i in items],
                      "attempt_ids": [i["attempt_id"] for i in items]}) if items else []
        if model_calls:
            queue.throttle_recover(conn, model_calls, now=now)
    for row in done:
        previous = out[row["attempt_id"]]
        out[row["attempt_id"]] = Settled(previous.attempt_id, previous.task_id, previous.reported_status,
                                         completed=True, superseded_ids=tuple(row["superseded_ids"]))
    return out
