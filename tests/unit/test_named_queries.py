"""Every named query in schema/sql is run by some code, every name the code asks for exists, and
the queries reach the driver without the comments written for readers of the files."""

from __future__ import annotations

import re
from pathlib import Path

from schema.sql import QUERIES, without_comments

ROOT = Path(__file__).resolve().parents[2]
CODE_DIRS = ("schema", "app", "worker", "bench")


def _code() -> str:
    return "\n".join(p.read_text() for d in CODE_DIRS for p in sorted((ROOT / d).rglob("*.py")))


def test_every_named_query_is_used():
    code = _code()
    unused = sorted(name for name in QUERIES if not re.search(rf"[\"']{name}[\"']", code))
    assert not unused, f"named queries no code runs: {unused}"


def test_every_query_name_in_a_call_exists():
    # The query runners take the name as their second argument: q(name), fetch_all(conn, name), _row(...).
    calls = re.findall(r"\b(?:q|fetch_all|fetch_one|_row|_rows|_run|_one)\(\s*(?:[a-z_]+,\s*)?\"([a-z0-9_]+)\"",
                       _code())
    assert calls, "no query calls found: the pattern no longer matches the code"
    missing = sorted(set(calls) - set(QUERIES))
    assert not missing, f"queries asked for but not defined: {missing}"


def test_comments_and_indentation_go_but_quoted_text_stays():
    sql = ("-- a comment line\n"
           "SELECT 'a -- b', \"x--y\"  -- after a column\n"
           "\n"
           "    FROM t  -- the table\n"
           "    WHERE s = 'it''s -- kept\n"
           "  across lines' AND n > 0\n"
           "-- the end")
    assert without_comments(sql) == ("SELECT 'a -- b', \"x--y\"\n"
                                     "FROM t\n"
                                     "WHERE s = 'it''s -- kept\n"
                                     "  across lines' AND n > 0")


def test_escaped_and_dollar_quoted_strings_are_kept_whole():
    sql = ("SELECT E'it\\'s -- kept', $$ -- kept, and it's $$, $fn$ a -- b $fn$, %(p)s  -- gone\n"
           "  FROM t -- gone")
    assert without_comments(sql) == ("SELECT E'it\\'s -- kept', $$ -- kept, and it's $$, $fn$ a -- b $fn$, %(p)s\n"
                                     "FROM t")


def test_the_worker_hot_statements_fit_the_driver_statement_cache():
    # psycopg converts a statement's %(name)s placeholders once and caches the result for
    # statements of up to 4096 bytes; a longer one is converted again on every call.
    for name in ("task_claim_batch", "task_apply_reports_batch", "task_lock_for_attempts"):
        assert "--" not in QUERIES[name]
        assert len(QUERIES[name].encode()) <= 4096, name
