"""Where agents reach this deployment: QUIRE_PUBLIC_URL, else the Databricks App's own URL."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from schema.settings import Settings
from worker import logs


def databricks_app_url(client_factory: Callable[[], Any] | None = None) -> str | None:
    """The running Databricks App's URL: DATABRICKS_APP_URL, else the apps API for DATABRICKS_APP_NAME."""
    url = os.environ.get("DATABRICKS_APP_URL", "").strip()
    if url:
        return url.rstrip("/")
    name = os.environ.get("DATABRICKS_APP_NAME", "").strip()
    if not name:
        return None
    try:
        if client_factory is None:
            from databricks.sdk import WorkspaceClient

            client_factory = WorkspaceClient
        app_url = client_factory().apps.get(name).url
    except Exception as exc:  # no URL: the Jobs executor then refuses to start, saying why
        logs.problem("look up the app's URL", exc, app=name)
        return None
    return app_url.rstrip("/") if app_url else None


def public_url(settings: Settings, client_factory: Callable[[], Any] | None = None) -> str | None:
    """The URL remote agents report to, or None when this process has no public URL."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    return databricks_app_url(client_factory)


def local_url(settings: Settings) -> str:
    """Where this process listens, as seen from this machine (local agents and people)."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{host}:{settings.port}"
