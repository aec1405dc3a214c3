"""Request-scoped access to what run_app put on the application: the pool and the settings."""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.responses import JSONResponse
from psycopg_pool import ConnectionPool

from schema import db
from schema.settings import Settings

log = logging.getLogger("quire.app")


def get_pool(request: Request) -> ConnectionPool:
    return request.app.state.pool


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """A database outage is the caller's cue to retry later, not an internal error. An error the
    request's own statement caused is no outage: a retry would get the same answer, so it is a 500
    without Retry-After."""
    if not db.is_outage(exc):
        log.error("database refused %s %s: %s", request.method, request.url.path, exc, exc_info=exc)
        return JSONResponse({"detail": "internal error: the database refused this request"}, status_code=500)
    log.warning("database unavailable for %s %s: %s", request.method, request.url.path, exc)
    return JSONResponse({"detail": "the database is unavailable; try again shortly"}, status_code=503,
                        headers={"Retry-After": "5"})
