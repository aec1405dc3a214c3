"""Applies the numbered, forward-only migrations under an advisory lock; re-running is a no-op.

Each applied migration is recorded with the SHA-256 of its file: a file changed after it was
applied stops the migration (and so start-up) with the file's name, since a database migrated
before the change would silently differ from a new one. A change to the schema is a new file."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.rows import tuple_row

from schema.errors import QuireError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# Any fixed 64-bit number, shared by every process that migrates this database.
_LOCK_KEY = 0x5155495245_01
# The oldest server the schema runs on: its rollup keys are unique indexes with NULLS NOT DISTINCT,
# which PostgreSQL 15 introduced (migration 7). The suite passes on 15, 16, 17 and 18 (docs/BENCHMARKS.md).
MIN_SERVER_VERSION = 150000


class MigrationChanged(QuireError):
    """An applied migration's file no longer matches what this database applied."""


class UnsupportedServer(QuireError):
    """The server is older than the schema needs."""


def version_text(server_version: int) -> str:
    """PostgreSQL's version number as it names it: 150020 -> 15.20, 90624 -> 9.6.24."""
    if server_version >= 100000:
        return f"{server_version // 10000}.{server_version % 10000}"
    return f"{server_version // 10000}.{server_version // 100 % 100}.{server_version % 100}"


def require_supported(server_version: int) -> None:
    """Refuses a server older than MIN_SERVER_VERSION, before anything is written to it."""
    if server_version < MIN_SERVER_VERSION:
        raise UnsupportedServer(
            f"Quire needs PostgreSQL {MIN_SERVER_VERSION // 10000} or later; this server "
            f"runs {version_text(server_version)}: point QUIRE_DATABASE_URL at a newer server, or unset it "
            "for the embedded one")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


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
        present = cur.fetchone()
        if present is None or not present[0]:
            return available()
        cur.execute("SELECT version FROM schema_migrations")
        done = {version for (version,) in cur.fetchall()}
    return [m for m in available() if m.version not in done]


def migrate(conn: psycopg.Connection, *, through: int | None = None) -> list[int]:
    """Applies what is missing (up to version `through`, when given), each migration in its own
    transaction; returns what it applied."""
    require_supported(conn.info.server_version)
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
            # Databases migrated before checksums were kept take the files as they are now.
            conn.execute("ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text")
        _check_applied(conn)
        done = {m.version for m in available()} - {m.version for m in pending(conn)}
        for migration in available():
            if migration.version in done or (through is not None and migration.version > through):
                continue
            with conn.transaction():
                conn.execute(migration.path.read_text())
                conn.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                             [migration.version, migration.name, migration.checksum])
            applied_now.append(migration.version)
    finally:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_unlock(%s)", [_LOCK_KEY])
    return applied_now


def _check_applied(conn: psycopg.Connection) -> None:
    """Stops at the first applied migration whose file changed; records the missing checksums."""
    shipped = {m.version: m for m in available()}
    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("SELECT version, checksum FROM schema_migrations ORDER BY version")
        for version, recorded in cur.fetchall():
            migration = shipped.get(version)
            if migration is None:  # applied by newer code: nothing here to compare it with
                continue
            if recorded is None:
                cur.execute("UPDATE schema_migrations SET checksum = %s WHERE version = %s",
                            [migration.checksum, version])
            elif recorded != migration.checksum:
                raise MigrationChanged(
                    f"migration {migration.path.name} was changed after this database applied it: "
                    "restore the file as it was and put the change in a new migration")
