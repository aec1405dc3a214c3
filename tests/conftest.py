"""Real Postgres for every test: a migrated template database built once per session, and a
fresh database per test cloned from it. QUIRE_TEST_DATABASE_URL picks a server; otherwise an
embedded one is started under a temporary directory."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import psycopg
import pytest

from schema import db
from schema.migrate import migrate

# A worker started in a test does not time OCR at start-up (seconds of CPU each): the test of that
# measure asks for it.
os.environ.setdefault("QUIRE_OCR_CALIBRATION", "false")


@pytest.fixture(scope="session")
def pg_server_dsn() -> str:
    url = os.environ.get("QUIRE_TEST_DATABASE_URL")
    if url:
        yield url
        return
    # Not under pytest's basetemp: a concurrent pytest session prunes old basetemps, and would
    # delete a running server's data directory.
    data_dir = Path(tempfile.mkdtemp(prefix="quire-test-pg-"))
    os.chmod(data_dir, 0o755)
    dsn = db.start_embedded(data_dir)
    yield dsn
    db.stop_embedded(data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)


def _admin(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True)


@pytest.fixture(scope="session")
def template_db(pg_server_dsn) -> str:
    name = f"quire_tpl_{os.getpid()}"
    with _admin(pg_server_dsn) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    with db.connect(db.with_database(pg_server_dsn, name)) as conn:
        migrate(conn)
    yield name
    with _admin(pg_server_dsn) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_dsn(pg_server_dsn, template_db) -> str:
    """A fresh, migrated database of its own for one test."""
    name = f"quire_t_{uuid.uuid4().hex[:12]}"
    with _admin(pg_server_dsn) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield db.with_database(pg_server_dsn, name)
    with _admin(pg_server_dsn) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def conn(db_dsn) -> psycopg.Connection:
    with db.connect(db_dsn) as connection:
        yield connection


@pytest.fixture
def connect(db_dsn):
    """Opens further connections to the test's database; all are closed at the end."""
    opened: list[psycopg.Connection] = []

    def _open() -> psycopg.Connection:
        connection = db.connect(db_dsn)
        opened.append(connection)
        return connection

    yield _open
    for connection in opened:
        connection.close()
