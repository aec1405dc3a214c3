"""The pools every process uses: one connection serves a caller that takes and returns it in turn,
and a connection that sat idle is checked before it is handed out again. A loop's held connection
stays on one backend, with its statements prepared."""

from __future__ import annotations

import contextlib
import threading
import time

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from schema import db


@contextlib.contextmanager
def _pool(db_dsn: str, *, min_size: int, max_size: int):
    pool = db.make_pool(db_dsn, min_size=min_size, max_size=max_size)
    try:
        pool.wait(timeout=10)
        yield pool
    finally:
        pool.close()


def _backend_pid(pool) -> int:
    with pool.connection() as conn:
        return conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]


def _wait_gone(db_dsn: str, pid: int, message: str) -> None:
    """Waits (up to 30 s) until the server backend `pid` has exited."""
    with db.connect(db_dsn) as admin:
        deadline = time.monotonic() + 30
        while admin.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()["n"]:
            assert time.monotonic() < deadline, message
            time.sleep(0.05)


def _terminate(db_dsn: str, pid: int) -> None:
    with db.connect(db_dsn) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s) AS ok", [pid]).fetchone()["ok"]
    _wait_gone(db_dsn, pid, "the terminated backend did not exit")


def test_a_caller_that_takes_and_returns_in_turn_keeps_one_connection(db_dsn):
    with _pool(db_dsn, min_size=1, max_size=4) as pool:
        pids = {_backend_pid(pool) for _ in range(50)}
        # Each connection is back in the pool when its `with` ends: the next request finds it,
        # and the pool never opens a second one.
        assert len(pids) == 1
        assert pool.get_stats()["pool_size"] == 1


def test_a_connection_idle_past_the_window_is_checked_and_replaced_when_it_died(db_dsn, monkeypatch):
    monkeypatch.setattr(db, "CHECK_AFTER_IDLE_SECONDS", 0.2)
    with _pool(db_dsn, min_size=1, max_size=2) as pool:
        pid = _backend_pid(pool)
        _terminate(db_dsn, pid)
        time.sleep(0.4)  # past the window
        # The dead connection is found by the check, not by the caller's statement.
        with pool.connection() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
            assert conn.info.backend_pid != pid


def test_a_connection_returned_within_the_window_is_handed_out_without_a_check(db_dsn, monkeypatch):
    monkeypatch.setattr(db, "CHECK_AFTER_IDLE_SECONDS", 3600.0)  # however slow the machine
    checks = []
    original = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection",
                        staticmethod(lambda conn: (checks.append(conn.info.backend_pid), original(conn))))
    with _pool(db_dsn, min_size=1, max_size=2) as pool:
        first = _backend_pid(pool)  # never returned before: checked
        for _ in range(10):
            assert _backend_pid(pool) == first
        assert checks == [first]


def test_a_held_connection_stays_on_one_backend_with_its_statements_prepared(db_dsn):
    with _pool(db_dsn, min_size=2, max_size=4) as pool:
        held = db.HeldConnection(pool, timeout=10)
        pids = set()
        for n in range(20):
            with held.connection() as conn:
                pids.add(conn.execute("SELECT pg_backend_pid() AS pid WHERE %s::int >= 0", [n]).fetchone()["pid"])
                # Prepared on first use, not after the driver's usual five executions.
                assert conn.execute("SELECT count(*) AS n FROM pg_prepared_statements").fetchone()["n"] >= 1
            # Between uses the pool serves others with its other connections.
            assert _backend_pid(pool) not in pids
        assert len(pids) == 1
        held.release()
        with pool.connection() as conn, db.connect(db_dsn) as fresh:  # given back as it was taken
            assert conn.prepare_threshold == fresh.prepare_threshold


def test_a_use_that_overlaps_another_gets_a_connection_of_the_pool(db_dsn):
    with _pool(db_dsn, min_size=2, max_size=4) as pool:
        held = db.HeldConnection(pool, timeout=10)
        inside, leave, seen = threading.Event(), threading.Event(), {}

        def first():
            with held.connection() as conn:
                seen["first"] = conn.info.backend_pid
                inside.set()
                assert leave.wait(30)

        thread = threading.Thread(target=first)
        thread.start()
        try:
            assert inside.wait(30)
            with held.connection() as conn:  # does not wait for the first use, nor share its connection
                seen["second"] = conn.info.backend_pid
        finally:
            leave.set()
            thread.join(30)
        assert seen["first"] != seen["second"]
        with held.connection() as conn:
            assert conn.info.backend_pid == seen["first"]


def test_a_held_connection_left_broken_or_in_a_transaction_is_given_back(db_dsn):
    with _pool(db_dsn, min_size=1, max_size=4) as pool:
        held = db.HeldConnection(pool, timeout=10)
        with pytest.raises(psycopg.errors.DivisionByZero), held.connection() as conn:
            conn.execute("SELECT 1 / 0")
        with held.connection() as conn:
            conn.execute("BEGIN")
            open_pid = conn.info.backend_pid
        with held.connection() as conn:  # not the one left in a transaction, and nothing pending
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
        with db.connect(db_dsn) as admin:  # the pool rolled the open transaction back
            state = admin.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", [open_pid]).fetchone()
            assert state is None or state["state"] == "idle"


def test_a_held_connection_idle_past_the_window_is_checked_and_replaced_when_it_died(db_dsn, monkeypatch):
    monkeypatch.setattr(db, "CHECK_AFTER_IDLE_SECONDS", 0.2)
    with _pool(db_dsn, min_size=1, max_size=2) as pool:
        held = db.HeldConnection(pool, timeout=10)
        with held.connection() as conn:
            pid = conn.info.backend_pid
        _terminate(db_dsn, pid)
        time.sleep(0.4)  # past the window
        with held.connection() as conn:  # found dead by the check, not by the caller's statement
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
            assert conn.info.backend_pid != pid


def test_closing_the_pool_takes_back_the_held_connections(db_dsn):
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)
    held = db.HeldConnection(pool, timeout=10)
    with held.connection() as conn:
        pid = conn.info.backend_pid
    pool.close()
    assert conn.closed
    _wait_gone(db_dsn, pid, "the held connection's backend is still there")
