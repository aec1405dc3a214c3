"""Loads the named SQL blocks under schema/sql/ once, into a name -> text mapping."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from typing import Any

    import psycopg
    from psycopg.abc import Params
    from psycopg.sql import SQL, Composed

SQL_DIR = Path(__file__).with_name("sql")
_NAME = re.compile(r"^-- name: ([a-z0-9_]+)\s*$", re.MULTILINE)


def _load(directory: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in sorted(directory.glob("*.sql")):
        text = path.read_text()
        marks = list(_NAME.finditer(text))
        for mark, following in zip(marks, [*marks[1:], None]):
            body = text[mark.end(): following.start() if following else len(text)].strip()
            name = mark.group(1)
            if name in queries:
                raise RuntimeError(f"query {name!r} is defined twice (again in {path.name})")
            queries[name] = body.rstrip(";")
    return queries


_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")


def _in_word(sql: str, i: int) -> bool:
    """Whether position i holds a letter, digit or underscore (an identifier's or a keyword's)."""
    return i >= 0 and (sql[i].isalnum() or sql[i] == "_")


def without_comments(sql: str) -> str:
    """The statement without its `--` comments, its indentation and the lines left empty.

    The comments are for readers of the files: left in, with the indentation, they were two fifths
    of the longest hot statements, which the driver then converted afresh on every call (it caches
    statements of up to 4 KB) and the server read on every call. Quoted strings (with E'' escapes
    and $$ quoting) and quoted identifiers are kept as they are, whatever they contain.
    """
    out: list[str] = []
    line: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            # To the closing quote (a doubled one closes and reopens: the same text either way);
            # in an E'' string a backslash escapes the next character.
            escapes = c == "'" and i > 0 and sql[i - 1] in "Ee" and not _in_word(sql, i - 2)
            j = i + 1
            while j < n and sql[j] != c:
                j += 2 if escapes and sql[j] == "\\" else 1
            line.append(sql[i:j + 1])
            i = j + 1
        elif c == "$" and not _in_word(sql, i - 1) and (tag := _DOLLAR_TAG.match(sql, i)):
            close = sql.find(tag.group(), tag.end())
            j = n if close < 0 else close + len(tag.group())
            line.append(sql[i:j])
            i = j
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
        elif c == "\n":
            text = "".join(line).strip(" \t")
            if text:
                out.append(text)
            line = []
            i += 1
        else:
            line.append(c)
            i += 1
    text = "".join(line).strip(" \t")
    if text:
        out.append(text)
    return "\n".join(out)


class _Queries(Mapping[str, str]):
    """Each named query's text, its comments taken out the first time it is read: a process uses a
    few of the files' queries, and stripping all of them took about 15 ms of every start."""

    def __init__(self, raw: dict[str, str]) -> None:
        self._raw = raw
        self._stripped: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        text = self._stripped.get(name)
        if text is None:
            text = self._stripped[name] = without_comments(self._raw[name])
        return text

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


QUERIES: Mapping[str, str] = _Queries(_load(SQL_DIR))


def q(name: str) -> str:
    """The text of the named query, without its comments."""
    return QUERIES[name]


def require_idle(conn: psycopg.Connection) -> None:
    """Refuses a connection inside a transaction: engine calls run and commit their own."""
    from psycopg.pq import TransactionStatus

    from schema.errors import TransactionInProgress

    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise TransactionInProgress("engine calls run their own transaction: commit or roll back first")


def statement(conn: psycopg.Connection) -> AbstractContextManager[Any]:
    """Where one statement runs: the caller's transaction, or one of its own that commits at once.

    Engine calls accept any psycopg connection: on one that is not autocommit, a statement run
    outside a transaction would open one and leave it open, uncommitted.
    """
    import contextlib

    from psycopg.pq import TransactionStatus

    if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
        return contextlib.nullcontext()
    return conn.transaction()


def run_query(conn: psycopg.Connection, query: str | bytes | SQL | Composed,
              params: Params | None = None, *, prepare: bool | None = None) -> list[dict]:
    """Runs a query in `statement(conn)` and returns its rows as dicts, whatever the connection's
    own row factory ([] for a statement without rows). `prepare`: as psycopg's (None: after a few runs)."""
    from psycopg.rows import dict_row

    with statement(conn), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params or {}, prepare=prepare)
        # Whether it returned rows, from rownumber (None without a result set), not description,
        # which builds an object per column on each call: about 40 µs for a claim's 37 columns.
        return cur.fetchall() if cur.rownumber is not None else []


def fetch_all(conn: psycopg.Connection, name: str, params: Params | None = None) -> list[dict]:
    """Runs the named query and returns its rows as dicts ([] for a statement without rows)."""
    return run_query(conn, q(name), params)


def fetch_one(conn: psycopg.Connection, name: str, params: Params | None = None) -> dict | None:
    """The first row of the named query, or None."""
    rows = fetch_all(conn, name, params)
    return rows[0] if rows else None


def fetch_row(conn: psycopg.Connection, name: str, params: Params | None = None) -> dict:
    """The first row of a named query that always returns one (an aggregate, a RETURNING of a row
    known to exist); its absence is a defect, reported by name."""
    row = fetch_one(conn, name, params)
    if row is None:
        raise LookupError(f"query {name} returned no row")
    return row
