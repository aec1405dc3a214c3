"""`quire grants`: explicit grants on every queue table, view and sequence for a principal."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from app.deploy import grants
from tests.worker_helpers import quire_env


@pytest.fixture
def principal(conn):
    # Databricks service principals are roles named by their application id (a UUID).
    role = str(uuid.uuid4())
    conn.execute(f'CREATE ROLE "{role}" NOLOGIN')
    conn.commit()
    yield role
    conn.execute(f'DROP OWNED BY "{role}"')
    conn.execute(f'DROP ROLE "{role}"')
    conn.commit()


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
    assert printed[0].startswith("GRANT USAGE ON SCHEMA")
    joined = "\n".join(printed)
    for table in ("tasks", "task_attempts", "agents", "task_events"):
        assert f'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "public"."{table}" TO "{principal}";' in joined
    assert 'GRANT SELECT ON TABLE "public"."task_attempts_public"' in joined
    grants(db_dsn, principal, apply=True)
    granted = privileges(conn, principal)
    assert granted and all(granted.values()), [k for k, v in granted.items() if not v]


def test_an_unknown_principal_changes_nothing_and_says_why(db_dsn, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "app.cli", "grants", "--principal", "no-such-role", "--apply"],
                          env=quire_env(db_dsn, tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "no-such-role" in proc.stderr
