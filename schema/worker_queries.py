"""Queries the worker's side services need beyond the state machine: cost reconciliation, timing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import psycopg

from schema.sql import fetch_all as _rows
from schema.sql import fetch_one as _row


@dataclass(frozen=True)
class TraceToReconcile:
    """An ended attempt that named a trace but recorded no spend, with its agent's prices."""

    id: int
    trace_id: str
    agent: str
    price_input_per_mtok: Decimal | None
    price_output_per_mtok: Decimal | None


@dataclass(frozen=True)
class RecordedUsage:
    """Spend an attempt reported, to compare with its trace."""

    id: int
    trace_id: str
    input_tokens: int | None
    output_tokens: int | None
    llm_cost_usd: Decimal | None


def attempt_list_unreconciled_batch(conn: psycopg.Connection, *, window_seconds: float,
                                    skip: list[int] | None = None, batch: int = 50,
                                    now: datetime | None = None) -> list[TraceToReconcile]:
    """Ended attempts of the last `window_seconds` with a trace id and no spend recorded."""
    rows = _rows(conn, "attempt_list_unreconciled_batch",
                 {"window_seconds": window_seconds, "skip": list(skip or []), "batch": batch, "now": now})
    return [TraceToReconcile(**r) for r in rows]


def attempt_list_recorded_batch(conn: psycopg.Connection, *, after_id: int,
                                batch: int = 50) -> list[RecordedUsage]:
    """Attempts after `after_id` whose reported spend came with a trace id, oldest first."""
    return [RecordedUsage(**r) for r in _rows(conn, "attempt_list_recorded_batch",
                                              {"after_id": after_id, "batch": batch})]


def attempt_record_trace_usage_once(conn: psycopg.Connection, attempt_id: int, *, input_tokens: int,
                                    output_tokens: int, llm_cost_usd: float | None,
                                    now: datetime | None = None) -> bool:
    """Records spend read from a trace; False if the attempt already had spend recorded."""
    with conn.transaction():
        return bool(_rows(conn, "attempt_record_trace_usage_once", {
            "attempt_id": attempt_id, "input_tokens": input_tokens, "output_tokens": output_tokens,
            "llm_cost_usd": llm_cost_usd, "now": now}))


def task_next_due_one(conn: psycopg.Connection, *, now: datetime | None = None) -> float | None:
    """Seconds until the next backing-off task becomes claimable; None when none is waiting."""
    row = _row(conn, "task_next_due_one", {"now": now})
    return None if row is None or row["wait_seconds"] is None else max(0.0, row["wait_seconds"])


def attempt_list_running_ids(conn: psycopg.Connection, *, ids: list[int] | None = None) -> list[int]:
    """Local runs launched and still running (among `ids` when given); job runs are not among them."""
    return [r["id"] for r in _rows(conn, "attempt_list_running_ids", {"ids": ids})]


@dataclass(frozen=True)
class DetachedAttempt:
    """A processing attempt whose job run nobody watches (its task's lease expired)."""

    attempt_id: int
    task_id: int
    job_run_id: str
    executor: str
    document_uri: str


def attempt_list_detached_expired_batch(conn: psycopg.Connection, *, after_id: int = 0, batch: int = 100,
                                        now: datetime | None = None) -> list[DetachedAttempt]:
    """Processing attempts of job runs whose task's lease expired, after `after_id`, oldest first."""
    return [DetachedAttempt(**r) for r in _rows(conn, "attempt_list_detached_expired_batch",
                                                {"after_id": after_id, "batch": batch, "now": now})]


def agent_set_config_error(conn: psycopg.Connection, agent: str, error: str | None) -> bool:
    """Stores why an agent cannot run (None: it can); True if that changed what was stored."""
    with conn.transaction():
        return bool(_rows(conn, "agent_set_config_error", {"agent": agent, "error": error}))


def work_waiting_for(conn: psycopg.Connection, executors: list[str]) -> bool:
    """Whether an agent of these executors has a task in the queue (held or not, due or not)."""
    row = _row(conn, "task_waiting_for_executors_one", {"executors": executors})
    return bool(row and row["waiting"])
