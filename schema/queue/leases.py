"""Leases: heartbeats extend a running attempt's lease, the sweeper takes back expired ones, and a
worker may hand a task back."""

from __future__ import annotations

from datetime import datetime

import psycopg

from schema.errors import UnknownAttempt
from schema.queue.common import Backoff, require_int, transaction
from schema.sql import fetch_all as _rows
from schema.sql import fetch_one as _row
from schema.sql import fetch_row


def heartbeat(conn: psycopg.Connection, attempt_id: int, *, lease_seconds: int | None = None,
              now: datetime | None = None) -> bool:
    """Extends the attempt's lease; False once the attempt is no longer its task's live attempt."""
    require_int(attempt_id, "attempt_id", low=1)
    with transaction(conn):
        task_id = _attempt_task_id(conn, attempt_id)
        if lease_seconds is None:
            task = fetch_row(conn, "task_get", {"task_id": task_id})
            lease_seconds = fetch_row(conn, "agent_get", {"agent": task["agent"]})["lease_seconds"]
        extended = _row(conn, "task_extend_lease_if_current",
                        {"task_id": task_id, "attempt_id": attempt_id, "now": now,
                         "lease_seconds": lease_seconds})
        if extended is None:
            return False
        _rows(conn, "attempt_touch_heartbeat", {"attempt_id": attempt_id, "now": now})
    return True


def sweep(conn: psycopg.Connection, *, now: datetime | None = None, batch: int = 500) -> int:
    """Takes back every task whose lease expired; returns how many."""
    total = 0
    while True:
        with transaction(conn):
            rows = _rows(conn, "task_requeue_expired",
                         {"now": now, "batch": batch, "backoff_base": Backoff.base_seconds,
                          "backoff_cap": Backoff.cap_seconds})
        total += len(rows)
        if len(rows) < batch:
            return total


def hand_back(conn: psycopg.Connection, attempt_id: int, *, reason: str | None = None,
              now: datetime | None = None) -> bool:
    """Gives a running attempt's task back to the queue at once, its attempt not counted (worker
    shutdown, or a task claimed ahead that found no slot); `reason` becomes the attempt's error."""
    with transaction(conn):
        return bool(_rows(conn, "task_hand_back_from_attempt",
                          {"attempt_id": attempt_id, "reason": reason, "now": now}))


def _attempt_task_id(conn: psycopg.Connection, attempt_id: int) -> int:
    row = _row(conn, "attempt_task_id", {"attempt_id": attempt_id})
    if row is None:
        raise UnknownAttempt(f"unknown attempt {attempt_id}")
    return row["task_id"]
