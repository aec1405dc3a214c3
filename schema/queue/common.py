"""What every part of the task state machine shares: its transactions, the planner setting of its
hot statements, the actor the event log records, argument checks, and the retry backoff."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import psycopg

from schema.errors import InvalidArgument
from schema.sql import require_idle as _require_idle


class Backoff:
    """The process-wide backoff of retryable failures and swept tasks (set_backoff changes it)."""

    base_seconds = 5.0
    cap_seconds = 600.0


def set_backoff(base_seconds: float, cap_seconds: float) -> None:
    """Process-wide backoff for retryable failures and swept tasks."""
    if base_seconds <= 0 or cap_seconds <= 0:
        raise InvalidArgument("backoff seconds must be positive")
    Backoff.base_seconds, Backoff.cap_seconds = base_seconds, cap_seconds


def transaction(conn: psycopg.Connection) -> AbstractContextManager[psycopg.Transaction]:
    """One transaction on a connection that is not inside one already."""
    _require_idle(conn)
    return conn.transaction()


def reads_by_index(conn: psycopg.Connection) -> None:
    """For the rest of this transaction, the planner reads tables through their indexes wherever it
    can, and compiles nothing. The queue's hot statements find their rows by id or by a claim index;
    a connection keeps the plan it made while a table looked small (a new queue, or statistics not
    gathered yet), and a whole-table scan in that plan would then read every task or attempt on
    every call. Before PostgreSQL 18 a scan that stays (a table with no index for it) adds a huge
    cost to the plan, which JIT would take for a reason to spend a second compiling it."""
    conn.execute("SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)")


def set_actor(conn: psycopg.Connection, actor: str | None) -> None:
    # Read by the task trigger, so the event log records who caused a change.
    conn.execute("SELECT set_config('quire.actor', %s, true)", [actor or ""])


def require_text(value: Any, what: str) -> str:
    """The value, if it is a string with something besides blanks; else InvalidArgument."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{what} must be a non-empty string")
    return value


def require_int(value: Any, what: str, *, low: int | None = None, high: int | None = None) -> int:
    """The value, if it is an integer (not a bool) within the bounds given; else InvalidArgument."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer, not {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise InvalidArgument(f"{what} must be {bounds}, not {value}")
    return value
