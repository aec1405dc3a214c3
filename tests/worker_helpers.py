"""Helpers for worker tests: invoice PDFs, servers in threads, worker processes, waiting on conditions."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from schema import db
from tests.waiting import wait_until
from worker.tracking import DEFAULT_DATABASE

QUIRE_BIN = Path(sys.executable).with_name("quire")
REPO = Path(__file__).resolve().parents[1]


def make_invoice_pdf(path: Path, *, number: str = "INV-2024-0042", issuer: str = "Acme Supplies Ltd",
                     quantity: int = 2, unit_price: float = 500.0, tax_rate: float = 0.2) -> Path:
    """A one-page invoice with the usual fields, written with fpdf2."""
    from fpdf import FPDF

    subtotal = quantity * unit_price
    tax = round(subtotal * tax_rate, 2)
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=16)
    pdf.cell(0, 10, issuer, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    lines = ["123 Market Street, London", "", "INVOICE", f"Invoice number: {number}",
             "Invoice date: 2024-03-01", "Due date: 2024-03-31", "Bill to: Example Corp", "",
             "Description                 Qty    Unit price     Amount",
             f"Consulting services          {quantity}       {unit_price:.2f}      {subtotal:.2f}", "",
             f"Subtotal: GBP {subtotal:.2f}", f"VAT {tax_rate:.0%}: GBP {tax:.2f}",
             f"Total: GBP {subtotal + tax:.2f}"]
    for line in lines:
        pdf.cell(0, 7, line, new_x="LMARGIN", new_y="NEXT")
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_in_thread(app) -> Iterator[str]:
    """Runs an ASGI app under uvicorn on 127.0.0.1 and a free port; yields its base URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=20, message="uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def quire_env(dsn: str, data_dir: Path, **extra: Any) -> dict[str, str]:
    """The environment of a `quire` process on the test's database; no QUIRE_* leaks in from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUIRE_", "MLFLOW_"))}
    env.update(QUIRE_DATABASE_URL=dsn, QUIRE_DATA_DIR=str(data_dir), QUIRE_CONFIG=str(data_dir / "quire.toml"),
               PYTHONUNBUFFERED="1", QUIRE_OCR_CALIBRATION="false")  # seconds of CPU a start: asked for
    env.update({f"QUIRE_{k.upper()}": str(v) for k, v in extra.items() if v is not None})
    return env


def quire(*args: str, env: dict[str, str], cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs one `quire` command to completion."""
    return subprocess.run([str(QUIRE_BIN), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


class Proc:
    """A long-running child process (worker or callback server) with its stderr in a file."""

    def __init__(self, argv: list[str], *, env: dict[str, str], cwd: Path, name: str):
        self.log_path = cwd / f"{name}.log"
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=subprocess.STDOUT)

    @classmethod
    def worker(cls, env: dict[str, str], cwd: Path, name: str = "worker", *args: str) -> Proc:
        return cls([str(QUIRE_BIN), "worker", *args], env=env, cwd=cwd, name=name)

    @classmethod
    def callback_server(cls, env: dict[str, str], cwd: Path, port: int) -> Proc:
        return cls([sys.executable, "-m", "app.callback_server", "--host", "127.0.0.1", "--port", str(port)],
                   env=env, cwd=cwd, name=f"callbacks-{port}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def signal(self, sig: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        """Kills the process if it still runs, and closes its log."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._log.close()

    def events(self) -> list[dict[str, Any]]:
        """The structured log lines the process wrote so far."""
        found = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    found.append(json.loads(line))
        return found

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_for_http(url: str, *, timeout: float = 30) -> None:
    """Waits until an HTTP server answers at `url`."""
    import httpx

    def up() -> bool:
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout=timeout, interval=0.1, message=f"{url} to answer")


def kill_orphan_agents(dsn: str) -> None:
    """Kills agent processes that outlived a SIGKILLed worker (their process group has their pid)."""
    with db.connect(dsn) as conn:
        pids = [r["pid"] for r in conn.execute("SELECT DISTINCT pid FROM task_attempts WHERE pid IS NOT NULL")]
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"agents" in cmdline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def counts_by_status(dsn: str) -> dict[str, int]:
    with db.connect(dsn) as conn:
        return {r["status"]: r["n"] for r in
                conn.execute("SELECT status::text AS status, count(*) AS n FROM tasks GROUP BY status")}


def group_exists(pgid: int) -> bool:
    """Whether a process group of this id is still there."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def group_running(pgid: int) -> bool:
    """Whether a process of this group still runs: dead members waiting to be reaped (zombies,
    which an orphan stays until the machine's init reaps it) do not count."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its closing paren.
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            return True
    return False


def settle_all(table, heartbeats, timeout: float = 30) -> None:
    """Rounds of the worker's heartbeats until its run table is empty (every run ended and settled)."""
    def done() -> bool:
        heartbeats.run_once()
        return len(table) == 0

    wait_until(done, timeout=timeout, interval=0.05, message="every run to end")


def drop_tracking_store(dsn: str) -> None:
    """Drops MLflow's database beside the queue's: the next worker to start there starts for the first time."""
    with db.connect(db.with_database(dsn, "postgres")) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DEFAULT_DATABASE}" WITH (FORCE)')
