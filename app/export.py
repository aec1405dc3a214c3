"""CSV and XLSX files of the filtered per-task cost table, built with pandas."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from typing import Any, Literal

import pandas as pd
from psycopg_pool import ConnectionPool

from app.services import _in_thread
from schema.export import task_cost_export_filtered
from schema.stats import TaskFilter

COLUMNS = ["task_id", "created_at_utc", "finished_at_utc", "status", "agent", "customer", "document_name",
           "pages", "attempts", "input_tokens", "output_tokens", "llm_cost_usd", "llm_unpriced",
           "compute_cost_usd", "dbus", "compute_pending"]
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8",
               "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"}


def _utc(value: datetime | None) -> datetime | None:
    # Spreadsheets hold no time zone: every time is written as UTC, and the column says so.
    return value.astimezone(timezone.utc).replace(tzinfo=None) if value is not None else None


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The table: one row per task; money as numbers, empty where unknown (unpriced, pending)."""
    records = [{**r, "created_at_utc": _utc(r["created_at"]), "finished_at_utc": _utc(r["finished_at"]),
                "llm_cost_usd": None if r["llm_cost_usd"] is None else float(r["llm_cost_usd"]),
                "compute_cost_usd": None if r["compute_cost_usd"] is None else float(r["compute_cost_usd"]),
                "dbus": None if r["dbus"] is None else float(r["dbus"])} for r in rows]
    table = pd.DataFrame.from_records(records, columns=COLUMNS)
    for column in ("pages", "attempts", "input_tokens", "output_tokens"):
        table[column] = table[column].astype("Int64")
    return table


def render(table: pd.DataFrame, kind: Literal["csv", "xlsx"]) -> bytes:
    """The table as file bytes."""
    if kind == "csv":
        return table.to_csv(index=False).encode("utf-8")
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        table.to_excel(writer, index=False, sheet_name="tasks")
    return buffer.getvalue()


async def export(pool: ConnectionPool, flt: TaskFilter, kind: Literal["csv", "xlsx"]) -> bytes:
    """The filtered per-task cost table as CSV or XLSX bytes."""
    rows = await _in_thread(pool, task_cost_export_filtered, flt)
    return render(frame(rows), kind)
