"""Every named query in schema/sql is run by some code, and every name the code asks for exists."""

from __future__ import annotations

import re
from pathlib import Path

from schema.sql import QUERIES

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
