"""Executor bookkeeping: what an executor knows of an attempt (its handle, the compute it used)."""

from __future__ import annotations

import psycopg

from schema.queue.common import transaction
from schema.sql import fetch_all as _rows


def record_executor_info(conn: psycopg.Connection, attempt_id: int, *, pid: int | None = None,
                         job_run_id: str | None = None, executor: str | None = None) -> None:
    """Stores the executor's handle on an attempt (process id, job run id)."""
    with transaction(conn):
        _rows(conn, "attempt_set_executor_info", {"attempt_id": attempt_id, "pid": pid,
                                                  "job_run_id": job_run_id, "executor": executor})


def record_compute(conn: psycopg.Connection, attempt_id: int, *, compute_seconds: float | None = None,
                   cpu_seconds: float | None = None, compute_cost_usd: float | None = None,
                   dbus: float | None = None, compute_state: str | None = None) -> None:
    """Stores compute measured by the executor, apart from the LLM spend the agent reports.

    compute_state: 'measured' (cost known now) or 'pending' (the billing reconciler fills it in)."""
    with transaction(conn):
        _rows(conn, "attempt_record_compute", {
            "attempt_id": attempt_id, "compute_seconds": compute_seconds, "cpu_seconds": cpu_seconds,
            "compute_cost_usd": compute_cost_usd, "dbus": dbus, "compute_state": compute_state})
