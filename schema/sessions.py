"""Signed-out sessions: a revocation record per session id, refused until the cookie expires."""

from __future__ import annotations

from datetime import datetime

import psycopg

from schema.sql import fetch_all


def session_revoke(conn: psycopg.Connection, session_id: str, expires_at: datetime) -> None:
    """Records a sign-out; revocations of cookies that have expired on their own are purged on the way."""
    fetch_all(conn, "session_revoked_purge", {"now": None})
    fetch_all(conn, "session_revoke", {"session_id": session_id, "expires_at": expires_at})


def session_revoked_list(conn: psycopg.Connection, *, now: datetime | None = None) -> set[str]:
    """Revoked session ids whose cookies have not expired."""
    return {r["session_id"] for r in fetch_all(conn, "session_revoked_list", {"now": now})}
