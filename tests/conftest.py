"""Real Postgres for every test: a migrated template database built once per session, and a
fresh database per test cloned from it. QUIRE_TEST_DATABASE_URL picks a server; otherwise an
embedded one is started under a temporary directory."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
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
    _without_fsync(dsn)
    yield dsn
    db.stop_embedded(data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)


def _without_fsync(dsn: str) -> None:
    """The session's own throwaway server flushes nothing to disk: every commit, and the CREATE
    and DROP DATABASE around each test, stop waiting on fsync. A crash of Postgres itself still
    loses no commit (the WAL is written before a commit returns; only a crash of the machine
    would), so what tests prove of restarts and outages holds."""
    with _admin(dsn) as admin:
        admin.execute("ALTER SYSTEM SET fsync = off")
        admin.execute("ALTER SYSTEM SET full_page_writes = off")
        admin.execute("SELECT pg_reload_conf()")


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


class _Databases:
    """Fresh databases cloned from the template, made one ahead and dropped afterwards on a thread
    of their own, so a test waits neither for its CREATE DATABASE nor for the last test's DROP."""

    def __init__(self, server_dsn: str, template: str):
        self._server_dsn, self._template = server_dsn, template
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="test-databases")
        self._next: Future[str] = self._thread.submit(self._create)

    def _create(self) -> str:
        name = f"quire_t_{uuid.uuid4().hex[:12]}"
        with _admin(self._server_dsn) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self._template}"')
        return name

    def _drop(self, name: str) -> None:
        with _admin(self._server_dsn) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def take(self) -> str:
        """A new database no test has used (a failure to make it fails the test asking)."""
        ready, self._next = self._next, self._thread.submit(self._create)
        return ready.result()

    def give_back(self, name: str) -> None:
        self._thread.submit(self._drop, name)

    def close(self) -> None:
        """Drops the database made ahead and waits for every drop."""
        with contextlib.suppress(Exception):
            self._thread.submit(self._drop, self._next.result())
        self._thread.shutdown(wait=True)


@pytest.fixture(scope="session")
def _databases(pg_server_dsn, template_db):
    databases = _Databases(pg_server_dsn, template_db)
    yield databases
    databases.close()


@pytest.fixture
def db_dsn(pg_server_dsn, _databases) -> str:
    """A fresh, migrated database of its own for one test."""
    name = _databases.take()
    yield db.with_database(pg_server_dsn, name)
    _databases.give_back(name)


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
