"""CSV and XLSX files of the filtered per-task cost table, built with pandas."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any, Literal

import pandas as pd
from psycopg_pool import ConnectionPool

from app.figure_cache import in_thread as _in_thread
from schema.export import task_cost_export_filtered
from schema.stats_types import TaskFilter

COLUMNS = ["task_id", "created_at_utc", "finished_at_utc", "status", "agent", "customer", "document_name",
           "pages", "attempts", "input_tokens", "output_tokens", "llm_cost_usd", "llm_unpriced",
           "compute_cost_usd", "dbus", "compute_pending"]
# Text columns: what a person or an agent wrote. Every other column is a number or a time.
TEXT_COLUMNS = ("status", "agent", "customer", "document_name")
# A spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8",
               "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"}


def _utc(value: datetime | None) -> datetime | None:
    # Spreadsheets hold no time zone: every time is written as UTC, and the column says so.
    return value.astimezone(UTC).replace(tzinfo=None) if value is not None else None


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


def inert(value: Any) -> Any:
    """A text cell a spreadsheet shows as text: one that would start a formula gets a leading quote."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def render(table: pd.DataFrame, kind: Literal["csv", "xlsx"]) -> bytes:
    """The table as file bytes; text cells never become formulas, numbers stay numbers."""
    if kind == "csv":
        safe = table.copy()
        for column in TEXT_COLUMNS:
            safe[column] = safe[column].map(inert)
        # RFC 4180 line ends: the writer then quotes a cell holding a CR as well as one holding a LF.
        return safe.to_csv(index=False, lineterminator="\r\n").encode("utf-8")
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        table.to_excel(writer, index=False, sheet_name="tasks")
        sheet = writer.sheets["tasks"]
        # openpyxl types a string starting with "=" as a formula: the text columns are set back to
        # plain strings, so the file holds the name as written and no spreadsheet evaluates it.
        for position, column in enumerate(table.columns, start=1):
            if column not in TEXT_COLUMNS:
                continue
            for (cell,) in sheet.iter_rows(min_row=2, min_col=position, max_col=position):
                if isinstance(cell.value, str):
                    cell.data_type = "s"
                    if cell.value.startswith(FORMULA_STARTS):
                        cell.quotePrefix = True
    return buffer.getvalue()


async def export(pool: ConnectionPool, flt: TaskFilter, kind: Literal["csv", "xlsx"]) -> bytes:
    """The filtered per-task cost table as CSV or XLSX bytes."""
    rows = await _in_thread(pool, task_cost_export_filtered, flt)
    return render(frame(rows), kind)
