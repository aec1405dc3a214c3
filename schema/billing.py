"""Databricks compute per job run from the billing system tables, and the attempts waiting for it.

The billing query runs on a SQL warehouse through the statement execution API; every result chunk
is read, so no run is silently left out however many there are. What it covers: the DBUs of the
job run at the effective list price; not the cloud provider's VM and storage bill of classic
compute, nor discounts negotiated for the account.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import psycopg

from schema.sql import fetch_all, q

STATEMENT_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class BilledRun:
    """What the billing tables say one job run used so far: DBUs, their priced cost, DBUs with no
    list price, and how many records (originals and corrections) that was made of."""

    job_run_id: str
    dbus: float
    cost_usd: float | None
    unpriced_dbus: float = 0.0
    records: int = 0


@dataclass(frozen=True)
class OpenAttempt:
    """An attempt whose job run's compute figures are not final yet."""

    id: int
    job_run_id: str
    started_at: datetime


@dataclass(frozen=True)
class BillingChange:
    """What one reconciling round wrote to one attempt."""

    id: int
    job_run_id: str
    compute_state: str
    dbus: Decimal | None
    compute_cost_usd: Decimal | None
    compute_unpriced: bool


class BillingQueryFailed(RuntimeError):
    """The warehouse could not run the billing query (its message says why)."""


def statement_rows(client: Any, warehouse_id: str, statement: str, parameters: dict[str, str],
                   *, timeout_seconds: float = 600.0) -> list[list[Any]]:
    """Every row of a statement's result, chunk after chunk; waits while it is pending or running."""
    from databricks.sdk.service.sql import StatementParameterListItem, StatementState

    api = client.statement_execution
    response = api.execute_statement(
        warehouse_id=warehouse_id, statement=statement, wait_timeout="30s",
        parameters=[StatementParameterListItem(name=k, value=v) for k, v in parameters.items()])
    deadline = time.monotonic() + timeout_seconds
    while response.status and response.status.state in (StatementState.PENDING, StatementState.RUNNING):
        if time.monotonic() > deadline:
            api.cancel_execution(response.statement_id)
            raise BillingQueryFailed(f"the billing query took longer than {timeout_seconds:.0f}s")
        time.sleep(STATEMENT_POLL_SECONDS)
        response = api.get_statement(response.statement_id)
    if response.status is None or response.status.state != StatementState.SUCCEEDED:
        error = response.status.error.message if response.status and response.status.error else "unknown error"
        raise BillingQueryFailed(f"billing query failed: {error}")
    rows: list[list[Any]] = []
    chunk = response.result
    while chunk is not None:
        rows.extend(chunk.data_array or [])
        if chunk.next_chunk_index is None:
            break
        chunk = api.get_statement_result_chunk_n(response.statement_id, chunk.next_chunk_index)
    return rows


def usage_for_runs(client: Any, warehouse_id: str, workspace_id: str, run_ids: list[str], *,
                   since: date) -> dict[str, BilledRun]:
    """DBUs and cost by job run id so far, for the runs of this workspace the billing tables have,
    reading usage from `since` on; raises BillingQueryFailed if the warehouse refused the query."""
    if not run_ids:
        return {}
    rows = statement_rows(client, warehouse_id, q("billing_usage_for_runs"), {
        "run_ids": ",".join(run_ids), "workspace_id": str(workspace_id), "since": since.isoformat()})
    return {str(r[0]): BilledRun(str(r[0]), float(r[1] or 0), None if r[2] is None else float(r[2]),
                                 float(r[3] or 0), int(r[4] or 0)) for r in rows}


def attempt_list_compute_open_batch(conn: psycopg.Connection, *, after_id: int,
                                    batch: int) -> list[OpenAttempt]:
    """Attempts after `after_id` whose compute figures are not final yet, oldest first."""
    return [OpenAttempt(**r) for r in fetch_all(conn, "attempt_list_compute_open_batch",
                                                {"after_id": after_id, "batch": batch})]


def attempt_record_billing_batch(conn: psycopg.Connection, attempt_ids: list[int],
                                 usage: dict[str, BilledRun], *, final_seconds: float,
                                 unbilled_seconds: float, now: datetime | None = None) -> list[BillingChange]:
    """Writes what billing says of these attempts' runs: changed figures (provisional), figures
    quiet long enough (final), runs never billed long after they ended (unbilled)."""
    rows = [{"job_run_id": b.job_run_id, "dbus": b.dbus, "cost_usd": b.cost_usd,
             "unpriced_dbus": b.unpriced_dbus, "records": b.records} for b in usage.values()]
    with conn.transaction():
        return [BillingChange(**r) for r in fetch_all(conn, "attempt_record_billing_batch", {
            "attempt_ids": attempt_ids, "usage": json.dumps(rows), "final_seconds": final_seconds,
            "unbilled_seconds": unbilled_seconds, "now": now})]
