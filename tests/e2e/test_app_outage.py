"""The app through a Postgres outage: quick 503s while the server is away, no error text for
anonymous callers, and health and figures back once it returns."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.e2e.app_harness import TOKEN, AppServer
from tests.worker_helpers import quire, quire_env, wait_until

# Far longer than the app's few seconds of waiting for a connection, far shorter than a hang.
CLIENT_TIMEOUT = 20.0


def status_of(url: str, **headers: str) -> int | None:
    try:
        return httpx.get(url, headers=headers, timeout=CLIENT_TIMEOUT).status_code
    except httpx.HTTPError:
        return None


@pytest.mark.slow
def test_api_answers_503_during_a_database_outage_and_recovers_after(tmp_path):
    # The server's directory lives outside pytest's temporary root (see test_e2e_worker_restart).
    server_dir = Path(tempfile.mkdtemp(prefix="quire-outage-"))
    os.chmod(server_dir, 0o755)
    server_env = {k: v for k, v in quire_env("", server_dir).items() if k != "QUIRE_DATABASE_URL"}
    started = quire("db-url", env=server_env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    dsn = started.stdout.strip()
    app = None
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    try:
        assert quire("migrate", env=quire_env(dsn, tmp_path), cwd=tmp_path).returncode == 0
        app = AppServer(dsn=dsn, data_dir=tmp_path / "app").start()
        assert status_of(f"{app.url}/api/summary", **bearer) == 200

        assert quire("db-stop", env=server_env, cwd=tmp_path).returncode == 0
        wait_until(lambda: status_of(f"{app.url}/api/summary", **bearer) == 503, timeout=60,
                   message="/api/summary to answer 503 while the database is away")
        assert status_of(f"{app.url}/api/tasks", **bearer) == 503
        health = httpx.get(f"{app.url}/healthz", timeout=CLIENT_TIMEOUT)
        # Anonymous callers learn the state, not the error (which names the socket path).
        assert health.status_code == 503
        assert health.json() == {"status": "down", "database": "unavailable", "listen": health.json()["listen"]}
        detail = httpx.get(f"{app.url}/healthz", headers=bearer, timeout=CLIENT_TIMEOUT).json()
        assert detail["database"] != "unavailable" and detail["status"] == "down"

        assert quire("db-url", env=server_env, cwd=tmp_path).returncode == 0
        wait_until(lambda: status_of(f"{app.url}/healthz") == 200, timeout=90, interval=0.5,
                   message="/healthz to recover after the database returned")
        wait_until(lambda: status_of(f"{app.url}/api/summary", **bearer) == 200, timeout=60, interval=0.5,
                   message="/api/summary to recover after the database returned")
    finally:
        if app is not None:
            app.stop()
        quire("db-stop", env=server_env, cwd=tmp_path)
        shutil.rmtree(server_dir, ignore_errors=True)
