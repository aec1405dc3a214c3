"""`quire grants`: the principal's role when missing, grants on every queue table, view and sequence,
and default privileges for what later migrations create; nothing else is written."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
import pytest

from app.deploy import grants
from schema import db
from tests.worker_helpers import quire_env


def drop_role(conn, role: str) -> None:
    conn.rollback()
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
        conn.execute(f'DROP OWNED BY "{role}"')
        conn.execute(f'DROP ROLE "{role}"')
    conn.commit()


@pytest.fixture
def principal(conn):
    # Databricks service principals are roles named by their application id (a UUID).
    role = str(uuid.uuid4())
    conn.execute(f'CREATE ROLE "{role}" NOLOGIN')
    conn.commit()
    yield role
    drop_role(conn, role)


@pytest.fixture
def new_principal(conn):
    role = str(uuid.uuid4())
    yield role
    drop_role(conn, role)


def privileges(conn, role: str) -> dict[str, bool]:
    rows = conn.execute(
        "SELECT c.relname, c.relkind, "
        "  CASE WHEN c.relkind = 'S' THEN has_sequence_privilege(%(r)s, c.oid, 'USAGE') "
        "       WHEN c.relkind = 'v' THEN has_table_privilege(%(r)s, c.oid, 'SELECT') "
        "       ELSE has_table_privilege(%(r)s, c.oid, 'SELECT, INSERT, UPDATE, DELETE') END AS ok "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'S')", {"r": role}).fetchall()
    return {r["relname"]: r["ok"] for r in rows}


def test_grants_are_printed_then_applied(conn, db_dsn, principal):
    printed = grants(db_dsn, principal, apply=False)
    assert not any(privileges(conn, principal).values())  # printing changes nothing
    assert printed[0].startswith("GRANT USAGE ON SCHEMA")  # the role exists: nothing creates it
    joined = "\n".join(printed)
    for table in ("tasks", "task_attempts", "agents", "task_events"):
        assert f'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "public"."{table}" TO "{principal}";' in joined
    assert 'GRANT SELECT ON TABLE "public"."task_attempts_public"' in joined
    assert "ALTER DEFAULT PRIVILEGES FOR ROLE" in joined and "ON SEQUENCES" in joined
    grants(db_dsn, principal, apply=True)
    granted = privileges(conn, principal)
    assert granted and all(granted.values()), [k for k, v in granted.items() if not v]


def test_objects_a_later_migration_creates_are_granted_by_default(conn, db_dsn, principal):
    grants(db_dsn, principal, apply=True)
    # A later migration, run by the same role as the grants, adds a table with an identity column.
    conn.execute("CREATE TABLE later_table (id bigint GENERATED ALWAYS AS IDENTITY, note text)")
    conn.commit()
    granted = privileges(conn, principal)
    assert granted["later_table"] and granted["later_table_id_seq"]


def test_a_missing_role_is_created_first(conn, db_dsn, new_principal):
    printed = grants(db_dsn, new_principal, apply=False)
    assert printed[0] == f'CREATE ROLE "{new_principal}" LOGIN;'
    assert conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [new_principal]).fetchone() is None
    grants(db_dsn, new_principal, apply=True)
    granted = privileges(conn, new_principal)
    assert granted and all(granted.values())
    # Run again, the role is there: it is not created twice.
    assert not grants(db_dsn, new_principal, apply=True)[0].startswith("CREATE ROLE")


def test_on_lakebase_the_role_is_made_by_databricks_create_role(conn, new_principal, monkeypatch):
    from schema import grants as grants_module

    monkeypatch.setattr(grants_module, "is_lakebase", lambda conn: True)
    printed = [s.as_string(conn) for s in grants_module.grant_statements(conn, new_principal)]
    assert printed[:2] == ["CREATE EXTENSION IF NOT EXISTS databricks_auth",
                           f"SELECT databricks_create_role('{new_principal}', 'SERVICE_PRINCIPAL')"]
    assert not any(s.startswith("CREATE ROLE") for s in printed)


def test_an_unknown_owner_changes_nothing_and_says_why(db_dsn, tmp_path, principal, conn):
    proc = subprocess.run([sys.executable, "-m", "app.cli", "grants", "--principal", principal, "--apply",
                           "--owner", "no-such-owner"],
                          env=quire_env(db_dsn, tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "no-such-owner" in proc.stderr
    assert not any(privileges(conn, principal).values())  # one transaction: none applied


def test_grants_never_migrate_nor_configure_agents(pg_server_dsn, tmp_path, new_principal, conn):
    name = f"quire_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    empty = db.with_database(pg_server_dsn, name)
    try:
        # No quire.toml: the local default agent must not land in a production database.
        proc = subprocess.run([sys.executable, "-m", "app.cli", "grants", "--principal", new_principal,
                               "--apply"], env=quire_env(empty, tmp_path), capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "ALTER DEFAULT PRIVILEGES" in proc.stdout
        with db.connect(empty) as fresh:
            tables = fresh.execute("SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'").fetchone()
            assert tables["n"] == 0
            # The migrations, run later by the same role, create tables the principal may use at once.
            from schema.migrate import migrate

            migrate(fresh)
            ok = fresh.execute("SELECT has_table_privilege(%s, 'tasks', 'SELECT, INSERT, UPDATE, DELETE') AS ok",
                               [new_principal]).fetchone()["ok"]
            assert ok
            assert fresh.execute("SELECT count(*) AS n FROM agents").fetchone()["n"] == 0
    finally:
        with psycopg.connect(pg_server_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
