"""Claim: tasks leave the queue in priority order, within each agent's throttles."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg

from schema.admission import Candidate, Load, admit
from schema.errors import UnknownAgent
from schema.models import Agent, Claim, agent_from_row, claim_from_row
from schema.queue.common import reads_by_index, require_int, require_text, transaction
from schema.sql import fetch_all as _rows
from schema.sql import fetch_one as _row
from schema.sql import fetch_row
from schema.sql import require_idle as _require_idle

# How far past `limit` a throttled claim looks for tasks that fit the remaining budget.
ADMISSION_SCAN_FACTOR = 10
ADMISSION_SCAN_MIN = 100


def claim(conn: psycopg.Connection, *, agent: str, worker_id: str, limit: int = 1,
          lease_seconds: int | None = None, executor: str | None = None,
          now: datetime | None = None) -> list[Claim]:
    """Claims up to `limit` tasks of one agent, in priority order, within the agent's throttles."""
    require_text(worker_id, "worker_id")
    require_int(limit, "limit", low=1)
    if lease_seconds is not None:
        require_int(lease_seconds, "lease_seconds", low=1)
    params = dict(agent=agent, worker_id=worker_id, now=now, executor=executor, lease_seconds=lease_seconds,
                  executors=[None], pools=["all"], slots=[limit])
    # Unthrottled agents: one statement, its own transaction, claims with SKIP LOCKED alone.
    rows = _claim_rows(conn, params)
    if not rows:
        # Nothing claimed: the agent is throttled, unknown, or has nothing claimable now.
        with transaction(conn):
            row = _row(conn, "agent_get", {"agent": agent})
            if row is None:
                raise UnknownAgent(f"unknown agent {agent!r}")
            if not agent_from_row(row).throttled:
                return []
            rows = _claim_admitted(conn, params, limit=limit, now=now)
    return _claims(rows)


def claim_many(conn: psycopg.Connection, *, worker_id: str, slots: Mapping[str, tuple[str, int]],
               lease_seconds: int | None = None, now: datetime | None = None) -> list[Claim]:
    """Claims for every unthrottled agent at once: `slots` maps an executor to (pool, free slots).

    One statement: each pool's free slots go to the best claimable tasks of the agents whose
    executor is in it. Throttled agents are claimed one by one with claim_throttled.
    """
    require_text(worker_id, "worker_id")
    wanted = [(name, pool, free) for name, (pool, free) in slots.items() if free > 0]
    if not wanted:
        return []
    return _claims(_claim_rows(conn, {
        "agent": None, "worker_id": worker_id, "now": now, "executor": None, "lease_seconds": lease_seconds,
        "executors": [w[0] for w in wanted], "pools": [w[1] for w in wanted], "slots": [w[2] for w in wanted]}))


def claim_throttled(conn: psycopg.Connection, *, agent: str, worker_id: str, limit: int,
                    now: datetime | None = None) -> list[Claim]:
    """Claims up to `limit` tasks of an agent with limits, admission serialised on its row."""
    require_int(limit, "limit", low=1)
    params = dict(agent=agent, worker_id=worker_id, now=now, executor=None, lease_seconds=None,
                  executors=[None], pools=["all"], slots=[limit])
    with transaction(conn):
        return _claims(_claim_admitted(conn, params, limit=limit, now=now))


def halt_agent(conn: psycopg.Connection, agent: str, reason: str, *, now: datetime | None = None) -> bool:
    """Stops claiming for an agent that cannot run; True if it was running until now."""
    with transaction(conn):
        return bool(_rows(conn, "agent_halt_if_running", {"agent": agent, "reason": reason, "now": now}))


def clear_agent_halt(conn: psycopg.Connection, agent: str) -> bool:
    """Lets a halted agent's tasks be claimed again; True if it was halted."""
    require_text(agent, "agent")
    with transaction(conn):
        return bool(_rows(conn, "agent_clear_halt", {"agent": agent}))


def admission_reopens_in(conn: psycopg.Connection, agent: str, *, now: datetime | None = None) -> float | None:
    """Seconds until a throttled agent's admission may admit more with no run ending (Retry-After
    over, or tokens leaving the window); None when only a run's end can make room."""
    row = _row(conn, "agent_admission_reopens_one", {"agent": agent, "now": now})
    if row is None or row["seconds"] is None:
        return None
    return max(0.0, float(row["seconds"]))


def _claim_admitted(conn: psycopg.Connection, params: dict[str, Any], *, limit: int,
                    now: datetime | None) -> list[dict[str, Any]]:
    reads_by_index(conn)
    # Throttled agents take turns on their row, so admission sees every earlier claim.
    row = _row(conn, "agent_lock_for_admission", {"agent": params["agent"]})
    if row is None:
        raise UnknownAgent(f"unknown agent {params['agent']!r}")
    ids = _admit(conn, agent_from_row(row), limit=limit, now=now)
    if not ids:
        return []
    return _rows(conn, "task_claim_batch", {**params, "ids": ids, "unthrottled_only": False})


def _claims(rows: list[dict[str, Any]]) -> list[Claim]:
    rows.sort(key=lambda r: (-r["priority"], r["created_at"], r["id"]))
    return [claim_from_row(r) for r in rows]


def _admit(conn: psycopg.Connection, agent: Agent, *, limit: int, now: datetime | None) -> list[int]:
    load_row = fetch_row(conn, "agent_load_one", {"agent": agent.name, "now": now})
    load = Load(in_flight=load_row["in_flight"], reserved_tokens=int(load_row["reserved_tokens"]))
    clock = load_row["now"]
    if agent.throttled_until is not None and clock < agent.throttled_until:
        return []  # the model endpoint asked us to wait (Retry-After)
    max_concurrent, max_tpm = agent.concurrency_limit, agent.tpm_limit
    if max_concurrent is not None:
        limit = min(limit, max_concurrent - load.in_flight)
        if limit <= 0:
            return []
    scan = limit if max_tpm is None else max(limit * ADMISSION_SCAN_FACTOR, ADMISSION_SCAN_MIN)
    candidates = [Candidate(**r) for r in
                  _rows(conn, "task_candidates_for_admission", {"agent": agent.name, "now": now, "scan": scan})]
    decision = admit(candidates, limit=limit, load=load, max_concurrent_tasks=max_concurrent,
                     max_tpm=max_tpm, starvation_seconds=agent.starvation_seconds, now=clock)
    if decision.now_waiting:
        _rows(conn, "task_mark_waiting", {"ids": decision.now_waiting, "now": now})
    return decision.admitted


def _claim_rows(conn: psycopg.Connection, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The unthrottled claim statement, as its own transaction. (Not under reads_by_index: the
    transaction around it would cost a claim of 16 tasks about 0.4 ms more, while the plan it
    guards against, a small tasks table's, reads few rows, and analyzing the table replaces it.)"""
    _require_idle(conn)
    return _rows(conn, "task_claim_batch", {**params, "ids": None, "unthrottled_only": True})
