"""The pools every process uses: one connection serves a caller that takes and returns it in turn,
and a connection that sat idle is checked before it is handed out again."""

from __future__ import annotations

import time

from psycopg_pool import ConnectionPool

from schema import db


def _backend_pid(pool) -> int:
    with pool.connection() as conn:
        return conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]


def test_a_caller_that_takes_and_returns_in_turn_keeps_one_connection(db_dsn):
    pool = db.make_pool(db_dsn, min_size=1, max_size=4)
    try:
        pool.wait(timeout=10)
        pids = {_backend_pid(pool) for _ in range(50)}
        # Each connection is back in the pool when its `with` ends: the next request finds it,
        # and the pool never opens a second one.
        assert len(pids) == 1
        assert pool.get_stats()["pool_size"] == 1
    finally:
        pool.close()


def test_a_connection_idle_past_the_window_is_checked_and_replaced_when_it_died(db_dsn, monkeypatch):
    monkeypatch.setattr(db, "CHECK_AFTER_IDLE_SECONDS", 0.2)
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)
    try:
        pool.wait(timeout=10)
        pid = _backend_pid(pool)
        with db.connect(db_dsn) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s) AS ok", [pid]).fetchone()["ok"]
            deadline = time.monotonic() + 30
            while admin.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()["n"]:
                assert time.monotonic() < deadline, "the terminated backend did not exit"
                time.sleep(0.05)
        time.sleep(0.4)  # past the window
        # The dead connection is found by the check, not by the caller's statement.
        with pool.connection() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
            assert conn.info.backend_pid != pid
    finally:
        pool.close()


def test_a_connection_returned_within_the_window_is_handed_out_without_a_check(db_dsn, monkeypatch):
    monkeypatch.setattr(db, "CHECK_AFTER_IDLE_SECONDS", 3600.0)  # however slow the machine
    checks = []
    original = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection",
                        staticmethod(lambda conn: (checks.append(conn.info.backend_pid), original(conn))))
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)
    try:
        pool.wait(timeout=10)
        first = _backend_pid(pool)  # never returned before: checked
        for _ in range(10):
            assert _backend_pid(pool) == first
        assert checks == [first]
    finally:
        pool.close()
