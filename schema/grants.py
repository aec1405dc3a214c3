"""Explicit grants on the queue's tables for a principal (the app's or the job's service principal)."""

from __future__ import annotations

import psycopg
from psycopg import sql

from schema.sql import fetch_all, fetch_one, q

_BY_KIND = {"table": "grant_table_rw", "view": "grant_view_read", "sequence": "grant_sequence_use"}


def grant_statements(conn: psycopg.Connection, principal: str) -> list[sql.Composed]:
    """GRANT statements giving `principal` what the app and worker need on every queue object."""
    if not principal or not principal.strip():
        raise ValueError("a principal (Postgres role) is needed")
    role = sql.Identifier(principal.strip())
    schema = fetch_one(conn, "grant_current_schema_one")["schema"]
    statements = [sql.SQL(q("grant_schema_usage")).format(schema=sql.Identifier(schema), principal=role)]
    for target in fetch_all(conn, "grant_targets_list"):
        statements.append(sql.SQL(q(_BY_KIND[target["kind"]])).format(
            table=sql.Identifier(schema, target["name"]), principal=role))
    return statements


def apply_grants(conn: psycopg.Connection, statements: list[sql.Composed]) -> None:
    """Runs every grant in one transaction: all are applied, or none."""
    with conn.transaction():
        for statement in statements:
            conn.execute(statement)
