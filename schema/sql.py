"""Loads the named SQL blocks under schema/sql/ once, into a name -> text mapping."""

from __future__ import annotations

import re
from pathlib import Path

SQL_DIR = Path(__file__).with_name("sql")
_NAME = re.compile(r"^-- name: ([a-z0-9_]+)\s*$", re.MULTILINE)


def _load(directory: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in sorted(directory.glob("*.sql")):
        text = path.read_text()
        marks = list(_NAME.finditer(text))
        for mark, following in zip(marks, marks[1:] + [None]):
            body = text[mark.end(): following.start() if following else len(text)].strip()
            name = mark.group(1)
            if name in queries:
                raise RuntimeError(f"query {name!r} is defined twice (again in {path.name})")
            queries[name] = without_comments(body.rstrip(";"))
    return queries


def without_comments(sql: str) -> str:
    """The statement without its `--` comments, its indentation and the lines left empty.

    The comments are for readers of the files: left in, with the indentation, they were two fifths
    of the longest hot statements, which the driver then converted afresh on every call (it caches
    statements of up to 4 KB) and the server read on every call. Quoted strings and identifiers
    are kept as they are, whatever they contain.
    """
    out: list[str] = []
    line: list[str] = []
    i, n, quote = 0, len(sql), None
    while i < n:
        c = sql[i]
        if quote:
            line.append(c)
            if c == quote:
                quote = None  # a doubled quote ('') closes and reopens: the same text either way
        elif c in "'\"":
            quote = c
            line.append(c)
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c == "\n":
            text = "".join(line).strip(" \t")
            if text:
                out.append(text)
            line = []
        else:
            line.append(c)
        i += 1
    text = "".join(line).strip(" \t")
    if text:
        out.append(text)
    return "\n".join(out)


QUERIES: dict[str, str] = _load(SQL_DIR)


def q(name: str) -> str:
    """The text of the named query."""
    return QUERIES[name]


def statement(conn):
    """Where one statement runs: the caller's transaction, or one of its own that commits at once.

    Engine calls accept any psycopg connection: on one that is not autocommit, a statement run
    outside a transaction would open one and leave it open, uncommitted.
    """
    import contextlib

    from psycopg.pq import TransactionStatus

    if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        return contextlib.nullcontext()
    return conn.transaction()


def run_query(conn, query, params=None) -> list[dict]:
    """Runs a query in `statement(conn)` and returns its rows as dicts, whatever the connection's
    own row factory ([] for a statement without rows)."""
    from psycopg.rows import dict_row

    with statement(conn), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params or {})
        return cur.fetchall() if cur.description else []


def fetch_all(conn, name: str, params=None) -> list[dict]:
    """Runs the named query and returns its rows as dicts ([] for a statement without rows)."""
    return run_query(conn, q(name), params)


def fetch_one(conn, name: str, params=None) -> dict | None:
    """The first row of the named query, or None."""
    rows = fetch_all(conn, name, params)
    return rows[0] if rows else None
