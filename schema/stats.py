"""Read-only figures over the queue: counts, costs and latencies for the CLI, API and dashboard."""

from __future__ import annotations

from typing import Any

import psycopg

from schema.sql import fetch_all


def status_counts(conn: psycopg.Connection) -> dict[str, Any]:
    """{"agents": {agent: {status: n}}, "total": {status: n}}."""
    agents: dict[str, dict[str, int]] = {}
    total: dict[str, int] = {}
    for row in fetch_all(conn, "stats_status_counts"):
        agents.setdefault(row["agent"], {})[row["status"]] = row["n"]
        total[row["status"]] = total.get(row["status"], 0) + row["n"]
    return {"agents": agents, "total": total}
