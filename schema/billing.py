"""Databricks compute per job run from the billing system tables, and the attempts waiting for it.

The billing query runs on a SQL warehouse through the statement execution API; every result chunk
is read, so no run is silently left out however many there are.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import psycopg

from schema.sql import fetch_all, q

STATEMENT_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class BilledRun:
    """What the billing tables say one job run used and cost."""

    job_run_id: str
    dbus: float
    cost_usd: float | None


@dataclass(frozen=True)
class PendingAttempt:
    """An attempt whose job run's compute is not priced yet."""

    id: int
    job_run_id: str


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


def usage_for_runs(client: Any, warehouse_id: str, run_ids: list[str], *,
                   account_prices: bool = True) -> dict[str, BilledRun]:
    """DBUs and cost by job run id, for the runs the billing tables already have."""
    if not run_ids:
        return {}
    name = "billing_usage_for_runs_account_prices" if account_prices else "billing_usage_for_runs_list_prices"
    rows = statement_rows(client, warehouse_id, q(name), {"run_ids": ",".join(run_ids)})
    return {str(r[0]): BilledRun(str(r[0]), float(r[1] or 0), None if r[2] is None else float(r[2]))
            for r in rows}


def attempt_list_compute_pending_batch(conn: psycopg.Connection, *, after_id: int,
                                       batch: int) -> list[PendingAttempt]:
    """Attempts after `after_id` whose compute waits for the billing tables, oldest first."""
    return [PendingAttempt(**r) for r in fetch_all(conn, "attempt_list_compute_pending_batch",
                                                   {"after_id": after_id, "batch": batch})]


def attempt_record_billing_if_pending(conn: psycopg.Connection, attempt_id: int, *, dbus: float,
                                      compute_cost_usd: float | None) -> bool:
    """Writes a run's billed DBUs and cost to its attempt; False if it was not pending any more."""
    with conn.transaction():
        return bool(fetch_all(conn, "attempt_record_billing_if_pending", {
            "attempt_id": attempt_id, "dbus": dbus, "compute_cost_usd": compute_cost_usd}))
