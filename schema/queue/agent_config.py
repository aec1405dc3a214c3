"""Agents: their throttle and run configuration, pauses, and which of them have work waiting."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from schema.errors import InvalidArgument, UnknownAgent
from schema.models import Agent, agent_from_row
from schema.queue.common import require_int, require_text, transaction
from schema.sql import fetch_all as _rows
from schema.sql import fetch_one as _row
from schema.sql import fetch_row

_AGENT_DEFAULTS: dict[str, Any] = {
    "lease_seconds": 60, "starvation_seconds": 120, "executor": "local", "model": None,
    "price_input_per_mtok": None, "price_output_per_mtok": None, "settings": {},
}


def configure_agent(conn: psycopg.Connection, name: str, *, max_concurrent_tasks: int | None = None,
                    max_tpm: int | None = None, now: datetime | None = None, **more: Any) -> Agent:
    """Creates or updates an agent; None limits mean unlimited; unnamed settings keep their value."""
    unknown = set(more) - set(_AGENT_DEFAULTS)
    if unknown:
        raise InvalidArgument(f"unknown agent settings: {', '.join(sorted(unknown))}")
    require_text(name, "agent name")
    if max_concurrent_tasks is not None:
        require_int(max_concurrent_tasks, "max_concurrent_tasks", low=1)
    if max_tpm is not None:
        require_int(max_tpm, "max_tpm", low=1)
    for key in ("lease_seconds", "starvation_seconds"):
        if key in more:
            require_int(more[key], key, low=1 if key == "lease_seconds" else 0)
    with transaction(conn):
        existing = _row(conn, "agent_lock_for_admission", {"agent": name})
        config = {k: existing[k] for k in _AGENT_DEFAULTS} if existing else dict(_AGENT_DEFAULTS)
        config.update(more)
        config.update(name=name, max_concurrent_tasks=max_concurrent_tasks, max_tpm=max_tpm,
                      settings=Jsonb(config["settings"] or {}), now=now)
        try:
            row = fetch_row(conn, "agent_upsert", config)
        except pg_errors.CheckViolation as exc:
            raise InvalidArgument(f"invalid agent configuration for {name!r}: {exc.diag.message_primary}") from exc
    return agent_from_row(row)


def get_agent(conn: psycopg.Connection, name: str) -> Agent:
    row = _row(conn, "agent_get", {"agent": name})
    if row is None:
        raise UnknownAgent(f"unknown agent {name!r}")
    return agent_from_row(row)


def list_agents(conn: psycopg.Connection) -> list[Agent]:
    return [agent_from_row(r) for r in _rows(conn, "agent_list", {})]


def pause_agent(conn: psycopg.Connection, name: str, *, actor: str, until: datetime | None = None,
                reason: str | None = None, now: datetime | None = None) -> Agent:
    """Pauses an agent (until a time, or until resumed): its running tasks finish, nothing new starts."""
    require_text(name, "agent name")
    require_text(actor, "actor")
    if reason is not None:
        reason = reason.strip() or None
        if reason is not None and len(reason) > 500:
            raise InvalidArgument("the reason must be at most 500 characters")
    if until is not None and (until.tzinfo is None):
        raise InvalidArgument("the pause's end needs a time zone")
    with transaction(conn):
        row = _row(conn, "agent_pause", {"agent": name, "until": until, "reason": reason, "actor": actor,
                                         "now": now})
    if row is None:
        raise UnknownAgent(f"unknown agent {name!r}")
    return agent_from_row(row)


def resume_agent(conn: psycopg.Connection, name: str, *, now: datetime | None = None) -> Agent:
    """Ends an agent's pause at once."""
    require_text(name, "agent name")
    with transaction(conn):
        row = _row(conn, "agent_resume", {"agent": name, "now": now})
    if row is None:
        raise UnknownAgent(f"unknown agent {name!r}")
    return agent_from_row(row)


def agents_with_backlog(conn: psycopg.Connection, *, now: datetime | None = None) -> list[str]:
    """Agents with at least one task claimable now."""
    return [r["name"] for r in _rows(conn, "agent_backlog_list", {"now": now})]
