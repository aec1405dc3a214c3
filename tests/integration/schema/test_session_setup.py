"""Every connection Quire opens runs without JIT: a plan estimated past jit_above_cost while the
statistics lag behind a bulk load would otherwise spend seconds compiling (schema/db.py)."""

import psycopg
import psycopg.sql

from schema import db


def _jit(conn) -> str:
    return conn.execute("SHOW jit").fetchone()["jit"]


def test_a_database_with_jit_on_gives_quires_connections_none(db_dsn):
    with psycopg.connect(db_dsn, autocommit=True, row_factory=psycopg.rows.dict_row) as plain:
        plain.execute(psycopg.sql.SQL("ALTER DATABASE {} SET jit = on").format(
            psycopg.sql.Identifier(plain.info.dbname)))
    # The database's own setting stays as it is: a plain connection has JIT on.
    with psycopg.connect(db_dsn, row_factory=psycopg.rows.dict_row) as plain:
        assert _jit(plain) == "on"
    with db.connect(db_dsn) as conn:
        assert _jit(conn) == "off"
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    pool = db.make_pool(db_dsn, min_size=1, max_size=2, name="test-session-setup")
    try:
        with pool.connection() as first, pool.connection() as second:  # the second is made on demand
            assert (_jit(first), _jit(second)) == ("off", "off")
    finally:
        pool.close()


def test_a_connection_opened_inside_a_transaction_is_left_idle(db_dsn):
    with db.connect(db_dsn, autocommit=False) as conn:
        assert _jit(conn) == "off"
        conn.rollback()  # SET was committed by the set-up: a rollback does not undo it
        assert _jit(conn) == "off"
