"""Callback and heartbeat routes: agents report here, each body signed with its attempt's key.

`X-Quire-Signature: sha256=<hex HMAC-SHA256 of the raw body>`, keyed with the attempt's stored
secret, or for attempts run on Databricks with the key derived from QUIRE_CALLBACK_KEY. A missing
or wrong signature changes nothing (401); a body that is not a valid report is refused (422); an
unknown attempt is 404; a replay is answered 200 with the outcome, and changes nothing.
"""

from __future__ import annotations

import hmac
import json
import time
from typing import Any

import psycopg
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from psycopg_pool import ConnectionPool, PoolTimeout

from agents.callback import SIGNATURE_HEADER, derive_attempt_secret, sign
from app.api.common import get_pool, get_settings
from app.api.health import record_callback
from schema import db, payloads, queue
from schema.errors import InvalidArgument, InvalidPayload, UnknownAttempt
from schema.settings import Settings
from worker import logs
from worker.executors.databricks import DatabricksExecutor
from worker.metrics import observe_report

router = APIRouter(tags=["callbacks"])

DB_TIMEOUT_SECONDS = 10.0


def signature_matches(header: str | None, body: bytes, key: str) -> bool:
    """Constant-time check of an X-Quire-Signature header against the body and key."""
    if not header:
        return False
    return hmac.compare_digest(header.strip().encode(), sign(body, key).encode())


def attempt_key(conn: psycopg.Connection, attempt_id: int, settings: Settings) -> str | None:
    """The key this attempt's reports are signed with; None when it cannot be known here."""
    secret, executor = queue.attempt_secret(conn, attempt_id)
    if executor == DatabricksExecutor.name:
        # Job runs never receive a secret: they derive it from the shared key, and so do we.
        if not settings.callback_key:
            logs.problem("verify callback", "a Databricks attempt reported but QUIRE_CALLBACK_KEY is unset",
                         attempt=attempt_id)
            return None
        return derive_attempt_secret(settings.callback_key, attempt_id)
    return secret


def _authenticate(conn: psycopg.Connection, attempt_id: int, settings: Settings, body: bytes,
                  signature: str | None) -> None:
    """Raises 404 for an unknown attempt and 401 for a body not signed with its key."""
    if not 0 < attempt_id < 2**63:
        raise HTTPException(404, "unknown attempt")
    try:
        key = attempt_key(conn, attempt_id, settings)
    except (UnknownAttempt, InvalidArgument):
        raise HTTPException(404, "unknown attempt") from None
    if key is None or not signature_matches(signature, body, key):
        raise HTTPException(401, "missing or invalid signature")


def _json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or 422."""
    # Parsing a deeply nested body would exhaust the parser's recursion: measure before parsing.
    if payloads.nesting_depth(body) > payloads.MAX_DEPTH:
        raise HTTPException(422, f"the body nests deeper than {payloads.MAX_DEPTH} levels")
    try:
        payload = json.loads(body)
    except ValueError:
        raise HTTPException(422, "the body is not JSON") from None
    if not isinstance(payload, dict):
        raise HTTPException(422, "the body must be a JSON object")
    return payload


def _apply(pool: ConnectionPool, settings: Settings, attempt_id: int, body: bytes,
           signature: str | None) -> dict[str, Any]:
    """Authenticates and applies one callback; returns the outcome as JSON."""
    with pool.connection(timeout=DB_TIMEOUT_SECONDS) as conn:
        _authenticate(conn, attempt_id, settings, body, signature)
        payload = _json_object(body)
        try:
            started = time.perf_counter()
            outcome = queue.apply_callback(conn, attempt_id, payload)
            observe_report(time.perf_counter() - started, payload, outcome.usage_recorded)
        except InvalidPayload as exc:
            raise HTTPException(422, str(exc)) from None
    logs.change("attempt", "callback", attempt=attempt_id, task=outcome.task_id,
                status=payload.get("status"), kind=outcome.kind.value,
                task_status=outcome.task_status.value, superseded=list(outcome.superseded_attempt_ids) or None)
    return {"kind": outcome.kind.value, "applied": outcome.applied,
            "task_status": outcome.task_status.value, "task_id": outcome.task_id,
            "attempt_id": attempt_id, "usage_recorded": outcome.usage_recorded}


def _beat(pool: ConnectionPool, settings: Settings, attempt_id: int, body: bytes,
          signature: str | None) -> dict[str, Any]:
    """Authenticates one heartbeat and extends the lease."""
    with pool.connection(timeout=DB_TIMEOUT_SECONDS) as conn:
        _authenticate(conn, attempt_id, settings, body, signature)
        _json_object(body)
        alive = queue.heartbeat(conn, attempt_id)
    return {"attempt_id": attempt_id, "alive": alive}


async def _run(fn, *args) -> dict[str, Any]:
    """Runs a blocking route body in the threadpool; a database outage is a 503."""
    try:
        return await run_in_threadpool(fn, *args)
    except (psycopg.OperationalError, PoolTimeout) as exc:
        if not db.is_outage(exc):
            raise  # the report's own statement failed: an internal error, not an outage
        # The agent retries on 5xx: the report is kept until the database is back.
        logs.problem("callback", exc)
        raise HTTPException(503, "the database is unavailable; try again") from None


@router.post("/api/callbacks/{attempt_id}")
async def post_callback(attempt_id: int, request: Request, pool: ConnectionPool = Depends(get_pool),
                        settings: Settings = Depends(get_settings)) -> dict[str, Any]:
    """An agent's report for one attempt: applied once, replays answered with the same outcome."""
    body = await request.body()
    try:
        answer = await _run(_apply, pool, settings, attempt_id, body, request.headers.get(SIGNATURE_HEADER))
    except HTTPException as exc:
        if exc.status_code < 500:
            record_callback("rejected")
        raise
    record_callback(answer["kind"])
    return answer


@router.post("/api/attempts/{attempt_id}/heartbeat")
async def post_heartbeat(attempt_id: int, request: Request, pool: ConnectionPool = Depends(get_pool),
                         settings: Settings = Depends(get_settings)) -> dict[str, Any]:
    """Extends the attempt's lease; `alive` is false once the attempt no longer holds its task."""
    body = await request.body()
    return await _run(_beat, pool, settings, attempt_id, body, request.headers.get(SIGNATURE_HEADER))
