"""Request-scoped access to what run_app put on the application: the pool and the settings."""

from __future__ import annotations

from fastapi import Request
from psycopg_pool import ConnectionPool

from schema.settings import Settings


def get_pool(request: Request) -> ConnectionPool:
    return request.app.state.pool


def get_settings(request: Request) -> Settings:
    return request.app.state.settings
