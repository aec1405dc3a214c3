"""Explicit grants on the queue's schema for a principal (a second app, a separate worker, a person).

Only grants: nothing is migrated or configured. The principal's role is created when it is missing
(on Lakebase with databricks_create_role, elsewhere with CREATE ROLE); objects that exist get
grants now, and objects created later by the connected role get them by default privileges.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from schema.sql import fetch_all, fetch_row, q

_BY_KIND = {"table": "grant_table_rw", "view": "grant_view_read", "sequence": "grant_sequence_use"}


def _statement(query: str, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(q(query)).format(**parts)


def is_lakebase(conn: psycopg.Connection) -> bool:
    """Whether the server is Lakebase (it offers the databricks_auth extension)."""
    return bool(fetch_row(conn, "grant_lakebase_one")["lakebase"])


def role_statements(conn: psycopg.Connection, principal: str) -> list[sql.Composed]:
    """What creates the principal's role: nothing when it exists."""
    if fetch_row(conn, "grant_role_exists_one", {"role": principal})["present"]:
        return []
    if is_lakebase(conn):
        return [_statement("grant_lakebase_extension"),
                _statement("grant_lakebase_role_create", application_id=sql.Literal(principal))]
    return [_statement("grant_role_create", principal=sql.Identifier(principal))]


def grant_statements(conn: psycopg.Connection, principal: str, *, owner: str | None = None) -> list[sql.Composed]:
    """The role if missing, then what the app and worker need on every queue object, now and later.

    Default privileges cover objects that `owner` (the connected role unless given: whoever runs
    the migrations) creates from now on.
    """
    if not principal or not principal.strip():
        raise ValueError("a principal (Postgres role) is needed")
    principal = principal.strip()
    role = sql.Identifier(principal)
    here = fetch_row(conn, "grant_current_schema_one")
    if here["schema"] is None:
        raise ValueError("the connection has no schema on its search path to grant on")
    schema = sql.Identifier(here["schema"])
    creator = sql.Identifier(owner.strip() if owner and owner.strip() else here["owner"])
    statements = role_statements(conn, principal)
    statements.append(_statement("grant_schema_usage", schema=schema, principal=role))
    for target in fetch_all(conn, "grant_targets_list"):
        statements.append(_statement(_BY_KIND[target["kind"]], table=sql.Identifier(here["schema"], target["name"]),
                                     principal=role))
    for name in ("grant_default_tables", "grant_default_sequences"):
        statements.append(_statement(name, owner=creator, schema=schema, principal=role))
    return statements


def apply_grants(conn: psycopg.Connection, statements: list[sql.Composed]) -> None:
    """Runs every statement in one transaction: all are applied, or none."""
    with conn.transaction():
        for statement in statements:
            conn.execute(statement)
