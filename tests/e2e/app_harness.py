"""The running app for end-to-end tests: a `quire serve` subprocess, a database of its own, a
browser, and helpers to make PDFs."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg

from schema import db

TOKEN = "e2e-operator-token"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_pdf(title: str, *, pages: int = 1, lines: list[str] | None = None) -> bytes:
    """A small real PDF with readable text."""
    from fpdf import FPDF

    pdf = FPDF()
    for page in range(pages):
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 14)
        pdf.cell(0, 10, f"{title} - page {page + 1}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 10)
        for line in lines or ["Invoice number: INV-1", "Invoice date: 2024-03-01", "Total: EUR 1,220.00"]:
            pdf.cell(0, 6, line, new_x="LMARGIN", new_y="NEXT")
    buffer = io.BytesIO()
    pdf.output(buffer)
    return buffer.getvalue()


def clone_database(server_dsn: str, template: str) -> tuple[str, Callable[[], None]]:
    """A fresh database from the migrated template, and a function that drops it."""
    name = f"quire_e2e_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')

    def drop() -> None:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return db.with_database(server_dsn, name), drop


@dataclass
class AppServer:
    """One `quire serve` process on a free port."""

    dsn: str
    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 40.0) -> AppServer:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("QUIRE_", "PYTEST_", "DATABRICKS_", "NICEGUI_"))}
        env.update(QUIRE_DATABASE_URL=self.dsn, QUIRE_DATA_DIR=str(self.data_dir), QUIRE_PORT=str(self.port),
                   QUIRE_HOST="127.0.0.1", QUIRE_OPERATOR_TOKEN=TOKEN, QUIRE_WORKER="off",
                   QUIRE_OCR_CALIBRATION="false")  # a test that wants the measure asks for it
        env.update(self.env)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # The data dir is the working directory: no quire.toml there, so the default agent is used.
        with open(self.data_dir / "server.log", "wb") as log:  # the server writes to its own copy
            self.process = subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], cwd=self.data_dir,
                                            env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the app exited with {self.process.returncode}:\n{self.log()}")
            try:
                health = httpx.get(f"{self.url}/healthz", timeout=2).json()
                if health.get("listen") == "live":
                    return self
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the app did not become healthy within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        path = self.data_dir / "server.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def client(self, **headers: str) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=15, headers=headers)

    def operator(self) -> httpx.Client:
        return self.client(Authorization=f"Bearer {TOKEN}")


class SseReader(threading.Thread):
    """Reads an SSE stream into a list of (event, id, data) until told to stop."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.url, self.headers = url, headers
        self.messages: list[tuple[str, int | None, dict]] = []
        self.connected = threading.Event()
        self.stop = threading.Event()
        self._response: httpx.Response | None = None

    def close(self) -> None:
        """Stops reading and hangs up, as a browser tab closing would."""
        self.stop.set()
        if self._response is not None:
            self._response.close()
        self.join(0.5)

    def run(self) -> None:
        try:
            self._read()
        except (httpx.HTTPError, AttributeError, ValueError):
            if not self.stop.is_set():
                raise

    def _read(self) -> None:
        with (
            httpx.Client(timeout=httpx.Timeout(30, read=30)) as http,
            http.stream("GET", self.url, headers=self.headers) as response,
        ):
            self._response = response
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            event, event_id, data = "message", None, ""
            for line in response.iter_lines():
                if line.startswith("retry:"):
                    self.connected.set()
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("id:"):
                    event_id = int(line[3:].strip())
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif line == "" and data:
                    self.messages.append((event, event_id, json.loads(data)))
                    event, event_id, data = "message", None, ""
                if self.stop.is_set():
                    return

    def task_events(self) -> list[dict]:
        return [data for event, _, data in self.messages if event == "task"]


def start_app(pg_server_dsn: str, template_db: str, tmp_path_factory, **env: str):
    """Starts an app on a fresh database; returns (server, conn, teardown)."""
    dsn, drop = clone_database(pg_server_dsn, template_db)
    server = AppServer(dsn=dsn, data_dir=Path(tmp_path_factory.mktemp("quire-app")), env=env).start()
    conn = db.connect(dsn)

    def teardown() -> None:
        conn.close()
        server.stop()
        drop()
    return server, conn, teardown


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def complete(conn, attempt_id: int, *, confidence: float = 0.9, tokens: tuple[int, int] = (1200, 300),
             cost: float = 0.0042) -> None:
    """Reports a completed extraction for an attempt, as an agent would."""
    from schema import queue

    queue.apply_callback(conn, attempt_id, {
        "status": "completed", "confidence": confidence, "input_tokens": tokens[0], "output_tokens": tokens[1],
        "llm_cost_usd": cost, "trace_id": f"tr-{attempt_id}",
        "result": {"document_type": "invoice", "extractor": "offline", "model": None, "pages": 1,
                   "page_sizes": [[595.3, 841.9]],
                   "fields": {"invoice_number": {"value": f"INV-{attempt_id}", "confidence": confidence,
                                                 "stage": "rules",
                                                 "evidence": {"page": 1, "bbox": [90.0, 120.5, 160.2, 131.0],
                                                              "text": f"INV-{attempt_id}"}},
                              "total": {"value": 1220.0, "confidence": confidence}}}})


def raw_request(port: int, head: str, body: bytes = b"", *, chunks: list[bytes] | None = None) -> tuple[int, str]:
    """Sends a request over a bare socket (headers, then maybe some body) and returns the status
    line's code and the response; the server must answer without the rest of the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        try:
            for chunk in chunks or ():
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and hung up: what a refused body looks like
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _length(data):
            part = sock.recv(65536)
            if not part:
                break
            data += part
    status_line, _, rest = data.decode(errors="replace").partition("\r\n")
    return int(status_line.split(" ")[1]), rest


def _length(response: bytes) -> int:
    for line in response.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0
