"""Applies the numbered, forward-only migrations under an advisory lock; re-running is a no-op."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.rows import tuple_row

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# Any fixed 64-bit number, shared by every process that migrates this database.
_LOCK_KEY = 0x5155495245_01


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path


def available() -> list[Migration]:
    """The migrations shipped with this code, in order; a gap or duplicate number is an error."""
    found = []
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        match = _FILE.match(path.name)
        if not match:
            raise RuntimeError(f"migration file name not understood: {path.name}")
        found.append(Migration(int(match.group(1)), match.group(2), path))
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise RuntimeError(f"migrations must be numbered 1, 2, 3...: found {migration.path.name}")
    return found


def pending(conn: psycopg.Connection) -> list[Migration]:
    """The shipped migrations this database has not applied; reads only."""
    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("SELECT to_regclass('schema_migrations') IS NOT NULL")
        if not cur.fetchone()[0]:
            return available()
        cur.execute("SELECT version FROM schema_migrations")
        done = {version for (version,) in cur.fetchall()}
    return [m for m in available() if m.version not in done]


def migrate(conn: psycopg.Connection) -> list[int]:
    """Applies what is missing, each migration in its own transaction; returns what it applied."""
    applied_now: list[int] = []
    # Each step commits on its own, on an autocommit connection or not; the lock is the session's.
    with conn.transaction():
        conn.execute("SELECT pg_advisory_lock(%s)", [_LOCK_KEY])
    try:
        with conn.transaction():
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
        done = {m.version for m in available()} - {m.version for m in pending(conn)}
        for migration in available():
            if migration.version in done:
                continue
            with conn.transaction():
                conn.execute(migration.path.read_text())
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                             [migration.version, migration.name])
            applied_now.append(migration.version)
    finally:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_unlock(%s)", [_LOCK_KEY])
    return applied_now
