"""The per-task cost rows behind the dashboard's CSV and XLSX export."""

from __future__ import annotations

from typing import Any

import psycopg

from schema import stats, stats_types


def task_cost_export_filtered(conn: psycopg.Connection, flt: stats_types.TaskFilter) -> list[dict[str, Any]]:
    """Every task the filters select, oldest first, with its LLM and compute spend apart."""
    return stats._run(conn, "task_cost_export_filtered", flt.params())
