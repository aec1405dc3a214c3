"""A SQL warehouse that runs the statements it is sent, as the statement execution API does.

Databricks SQL is translated by sqlglot and run by DuckDB against fixture tables laid out like
`system.billing.usage` and `system.billing.list_prices` (struct columns included), so the billing
query that production sends is the one these tests execute. Like the real API: `wait_timeout` is
0 s or 5 to 50 s (else HTTP 400); SQL errors and missing grants answer HTTP 200 with state FAILED;
a statement may be PENDING and RUNNING before it SUCCEEDED; results come in chunks of JSON_ARRAY
rows whose values are strings.
"""

from __future__ import annotations

import itertools
import re
import threading
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

# DuckDB has a read-only catalog of its own named `system`: the fixture's lives under this name.
CATALOG = "fixture_system"

USAGE_DDL = f"""
CREATE TABLE {CATALOG}.billing.usage (
    record_id VARCHAR, account_id VARCHAR, workspace_id VARCHAR, sku_name VARCHAR, cloud VARCHAR,
    usage_start_time TIMESTAMP, usage_end_time TIMESTAMP, usage_date DATE, usage_unit VARCHAR,
    usage_quantity DECIMAL(38, 18), record_type VARCHAR, ingestion_date DATE,
    billing_origin_product VARCHAR,
    usage_metadata STRUCT(job_id VARCHAR, job_run_id VARCHAR, app_id VARCHAR))"""
PRICES_DDL = f"""
CREATE TABLE {CATALOG}.billing.list_prices (
    price_start_time TIMESTAMP, price_end_time TIMESTAMP, account_id VARCHAR, sku_name VARCHAR,
    cloud VARCHAR, currency_code VARCHAR, usage_unit VARCHAR,
    pricing STRUCT("default" DECIMAL(30, 18), promotional STRUCT("default" DECIMAL(30, 18)),
                   effective_list STRUCT("default" DECIMAL(30, 18))))"""

ACCOUNT = "acct-1"


@dataclass
class Statement:
    """A statement's outcome and its rows, served in chunks after `polls_left` unfinished answers."""

    state: str
    rows: list[list[str | None]] = field(default_factory=list)
    columns: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None
    chunk_rows: int = 2
    polls_left: int = 0
    answered: int = 0

    def chunk(self, index: int, statement_id: str) -> dict[str, Any]:
        start = index * self.chunk_rows
        rows = self.rows[start:start + self.chunk_rows]
        data = {"chunk_index": index, "row_offset": start, "row_count": len(rows), "data_array": rows}
        if start + self.chunk_rows < len(self.rows):
            data["next_chunk_index"] = index + 1
            data["next_chunk_internal_link"] = f"/api/2.0/sql/statements/{statement_id}/result/chunks/{index + 1}"
        return data

    @property
    def chunk_count(self) -> int:
        return max(1, -(-len(self.rows) // self.chunk_rows))


def _text(value: Any) -> str | None:
    """A value as the JSON_ARRAY format gives it: a string, or null."""
    if value is None:
        return None
    if isinstance(value, float):
        return repr(value)
    return str(value)


class FakeWarehouse:
    """The warehouse and its billing fixture; safe to use from the fake's request threads."""

    def __init__(self):
        self.db = duckdb.connect(":memory:")
        self.db.execute(f"ATTACH ':memory:' AS {CATALOG}")
        self.db.execute(f"CREATE SCHEMA {CATALOG}.billing")
        self.db.execute(USAGE_DDL)
        self.db.execute(PRICES_DDL)
        self.lock = threading.RLock()
        self.statements: dict[str, Statement] = {}
        self.texts: list[tuple[str, dict[str, str]]] = []
        self.chunk_rows = 2
        self.pending_polls = 0                 # answers PENDING/RUNNING this many times first
        self.denied: str | None = None         # a table the warehouse's caller may not SELECT
        # Who was granted SELECT on system.billing (with USE CATALOG and USE SCHEMA); None: anyone.
        self.billing_readers: set[str] | None = None
        self._ids = itertools.count(1)
        self._records = itertools.count(1)

    # -- fixture ----------------------------------------------------------------------------------

    def add_price(self, sku: str, price: float | None, *, start: datetime, end: datetime | None = None,
                  promotional: float | None = None, cloud: str = "AWS", unit: str = "DBU") -> None:
        """A list price in force from `start` to `end`; the effective list price is the
        promotional one where there is one."""
        effective = promotional if promotional is not None else price
        with self.lock:
            self.db.execute(
                f"INSERT INTO {CATALOG}.billing.list_prices VALUES (?, ?, ?, ?, ?, 'USD', ?, "
                "{'default': ?, 'promotional': {'default': ?}, 'effective_list': {'default': ?}})",
                [start, end, ACCOUNT, sku, cloud, unit, price, promotional, effective])

    def add_usage(self, job_run_id: str | None, quantity: float, *, workspace_id: str,
                  start: datetime, sku: str = "JOBS_SERVERLESS_COMPUTE", unit: str = "DBU",
                  record_type: str = "ORIGINAL", cloud: str = "AWS", hours: float = 1.0,
                  ingested: date | None = None, job_id: str = "42") -> str:
        """One usage record (an original, or a RETRACTION or RESTATEMENT correcting one); returns its id."""
        record_id = f"rec-{next(self._records)}"
        with self.lock:
            self.db.execute(
                f"INSERT INTO {CATALOG}.billing.usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'JOBS', "
                "{'job_id': ?, 'job_run_id': ?, 'app_id': NULL})",
                [record_id, ACCOUNT, workspace_id, sku, cloud, start, start + timedelta(hours=hours),
                 start.date(), unit, quantity, record_type, ingested or start.date(), job_id, job_run_id])
        return record_id

    def usage_count(self) -> int:
        with self.lock:
            return self.db.execute(f"SELECT count(*) FROM {CATALOG}.billing.usage").fetchone()[0]

    # -- statement execution ----------------------------------------------------------------------

    def translate(self, text: str, params: dict[str, str]) -> str:
        """The Databricks SQL as DuckDB runs it: parameters bound as literals, the fixture catalog."""
        tree = sqlglot.parse_one(text, read="databricks")

        def bind(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Placeholder) and node.name:
                if node.name not in params:
                    raise ValueError(f"[UNBOUND_SQL_PARAMETER] Found the unbound parameter: {node.name}")
                return exp.Literal.string(params[node.name])
            if isinstance(node, exp.Table) and node.catalog == "system":
                node.set("catalog", exp.to_identifier(CATALOG))
            return node

        return tree.transform(bind).sql(dialect="duckdb")

    def execute(self, body: dict[str, Any], principal: str | None = None) -> tuple[int, dict[str, Any]]:
        """POST /api/2.0/sql/statements, on behalf of `principal`."""
        wait = str(body.get("wait_timeout") or "10s")
        match = re.fullmatch(r"(\d+)s", wait)
        if match is None or not (int(match[1]) == 0 or 5 <= int(match[1]) <= 50):
            return 400, {"error_code": "INVALID_PARAMETER_VALUE",
                         "message": f"wait_timeout must be 0s or between 5s and 50s, got {wait}"}
        if not body.get("warehouse_id"):
            return 400, {"error_code": "INVALID_PARAMETER_VALUE", "message": "warehouse_id is required"}
        params = {p["name"]: p.get("value") for p in body.get("parameters") or []}
        text = body.get("statement") or ""
        statement_id = f"st-{next(self._ids)}"
        with self.lock:
            self.texts.append((text, params))
            statement = self._run(text, params, principal)
            statement.chunk_rows, statement.polls_left = self.chunk_rows, self.pending_polls
            if int(match[1]) == 0 and statement.polls_left == 0:
                statement.polls_left = 1  # asked not to wait: the first answer is always PENDING
            self.statements[statement_id] = statement
            return 200, self.answer(statement_id)

    def _run(self, text: str, params: dict[str, str], principal: str | None) -> Statement:
        denied = self.denied
        if self.billing_readers is not None and principal not in self.billing_readers and "system.billing." in text:
            denied = "system.billing.usage"
        if denied and denied in text:
            return Statement("FAILED", error=f"[INSUFFICIENT_PERMISSIONS] Insufficient privileges: User does "
                                             f"not have SELECT on Table '{denied}'.")
        try:
            cursor = self.db.execute(self.translate(text, params))
            rows = cursor.fetchall()
            columns = [(d[0], str(d[1])) for d in cursor.description]
        except (duckdb.Error, sqlglot.errors.SqlglotError, ValueError) as exc:
            return Statement("FAILED", error=str(exc))
        return Statement("SUCCEEDED", rows=[[_text(v) for v in row] for row in rows], columns=columns)

    def answer(self, statement_id: str) -> dict[str, Any]:
        """GET /api/2.0/sql/statements/{id}: the statement as it stands now."""
        with self.lock:
            statement = self.statements[statement_id]
            statement.answered += 1
            if statement.polls_left > 0:
                statement.polls_left -= 1
                return {"statement_id": statement_id,
                        "status": {"state": "PENDING" if statement.answered == 1 else "RUNNING"}}
            if statement.state == "FAILED":
                return {"statement_id": statement_id, "status": {"state": "FAILED", "error": {
                    "error_code": "BAD_REQUEST", "message": statement.error}}}
            columns = [{"name": n, "position": i, "type_name": t} for i, (n, t) in enumerate(statement.columns)]
            return {"statement_id": statement_id, "status": {"state": "SUCCEEDED"},
                    "manifest": {"format": "JSON_ARRAY",
                                 "schema": {"column_count": len(columns), "columns": columns},
                                 "total_chunk_count": statement.chunk_count,
                                 "total_row_count": len(statement.rows), "truncated": False},
                    "result": statement.chunk(0, statement_id)}

    def chunk(self, statement_id: str, index: int) -> dict[str, Any]:
        with self.lock:
            return self.statements[statement_id].chunk(index, statement_id)
