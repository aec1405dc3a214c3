"""The app through a Postgres outage: how long an API call takes to fail, and how soon health and
figures return once the server is back.

    python bench/outage.py [--outage-seconds 30]

Starts an embedded Postgres of its own (in a temporary directory) and `quire serve` on it, stops
the server, calls /api/summary once a second for the outage, starts the server again and times
the first 200 from /healthz and from /api/summary.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.app_harness import TOKEN, AppServer
from tests.worker_helpers import quire, quire_env

BEARER = {"Authorization": f"Bearer {TOKEN}"}


def timed_get(url: str, **headers: str) -> tuple[int | str, float]:
    """(status or error name, seconds taken)."""
    start = time.monotonic()
    try:
        status: int | str = httpx.get(url, headers=headers, timeout=120).status_code
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    return status, time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-seconds", type=float, default=30.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="quire-outage-bench-"))
    server_dir = Path(tempfile.mkdtemp(prefix="quire-outage-db-"))
    os.chmod(server_dir, 0o755)  # the embedded server may run as an unprivileged user
    server_env = {k: v for k, v in quire_env("", server_dir).items() if k != "QUIRE_DATABASE_URL"}
    dsn = quire("db-url", env=server_env, cwd=work).stdout.strip()
    app = None
    try:
        quire("migrate", env=quire_env(dsn, work), cwd=work)
        app = AppServer(dsn=dsn, data_dir=work / "app").start()
        quire("db-stop", env=server_env, cwd=work)
        answers = []
        end = time.monotonic() + args.outage_seconds
        while time.monotonic() < end:
            answers.append(timed_get(f"{app.url}/api/summary", **BEARER))
            time.sleep(1)
        statuses = sorted({str(s) for s, _ in answers})
        print(f"during a {args.outage_seconds:g} s outage: /api/summary answered {', '.join(statuses)}; "
              f"slowest answer {max(t for _, t in answers):.1f} s, median "
              f"{sorted(t for _, t in answers)[len(answers) // 2]:.1f} s")
        quire("db-url", env=server_env, cwd=work)
        back = time.monotonic()
        recovered: dict[str, float] = {}
        while len(recovered) < 2 and time.monotonic() - back < 180:
            for path, headers in (("/healthz", {}), ("/api/summary", BEARER)):
                if path not in recovered and timed_get(f"{app.url}{path}", **headers)[0] == 200:
                    recovered[path] = time.monotonic() - back
            time.sleep(0.25)
        print("after the server returned: " + ", ".join(f"{p} 200 after {t:.1f} s" for p, t in recovered.items()))
    finally:
        if app is not None:
            app.stop()
        quire("db-stop", env=server_env, cwd=work)
        shutil.rmtree(server_dir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
