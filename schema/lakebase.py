"""Lakebase Postgres on Databricks: the DSN from the app's database resource, and an OAuth token
minted per connection (cached until shortly before it expires)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import datetime
from typing import Any

# Tokens live an hour; mint a new one when less than this is left.
REFRESH_MARGIN_SECONDS = 300
DEFAULT_LIFETIME_SECONDS = 3600


class LakebaseCredentials:
    """A credential provider for schema.db: {"user": ..., "password": <OAuth token>}."""

    def __init__(self, instance_name: str | None = None, *, host: str | None = None, workspace_client: Any = None,
                 user: str | None = None) -> None:
        if not instance_name and not host:
            raise ValueError("a Lakebase instance name or host is required")
        self._instance_name = instance_name or None
        self.host = host
        self._client = workspace_client
        self._user = user
        self._token: str | None = None
        self._expires_at = 0.0
        self._lock = threading.Lock()
        self.minted = 0

    @property
    def client(self) -> Any:
        if self._client is None:
            from databricks.sdk import WorkspaceClient

            self._client = WorkspaceClient()
        return self._client

    @property
    def instance_name(self) -> str:
        """The instance to mint tokens for: as given, or the one serving `host` (found once).

        On Databricks Apps the database resource gives the instance's host (PGHOST, or valueFrom
        the resource in app.yaml), so one app.yaml serves every bundle target.
        """
        if self._instance_name is None:
            host = (self.host or "").strip().lower()
            for instance in self.client.database.list_database_instances():
                if host in ((instance.read_write_dns or "").lower(), (instance.read_only_dns or "").lower()):
                    self._instance_name = instance.name
                    break
            else:
                raise RuntimeError(f"no Lakebase instance this principal can see serves {self.host!r}")
        return self._instance_name

    def _user_name(self) -> str:
        if self._user is None:
            self._user = os.environ.get("PGUSER") or self.client.current_user.me().user_name
        return self._user

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.time() > self._expires_at - REFRESH_MARGIN_SECONDS:
                cred = self.client.database.generate_database_credential(
                    request_id=str(uuid.uuid4()), instance_names=[self.instance_name])
                if not cred.token:
                    raise RuntimeError(f"Lakebase returned no token for instance {self.instance_name!r}")
                self._token = cred.token
                self._expires_at = _parse_expiry(cred.expiration_time)
                self.minted += 1
            return self._token

    def __call__(self) -> dict[str, str]:
        return {"user": self._user_name(), "password": self.token()}


def _parse_expiry(value: str | None) -> float:
    if not value:
        return time.time() + DEFAULT_LIFETIME_SECONDS
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def dsn_from_environment(env: dict[str, str] | None = None) -> str:
    """The DSN of the database resource Databricks Apps injects (PGHOST, PGDATABASE, ...)."""
    from psycopg.conninfo import make_conninfo

    env = dict(os.environ) if env is None else env
    missing = [k for k in ("PGHOST", "PGDATABASE") if not env.get(k)]
    if missing:
        raise ValueError(f"Lakebase needs {', '.join(missing)} in the environment (add the database resource to the app)")
    return make_conninfo(host=env["PGHOST"], port=env.get("PGPORT", "5432"), dbname=env["PGDATABASE"],
                         sslmode=env.get("PGSSLMODE", "require"))
