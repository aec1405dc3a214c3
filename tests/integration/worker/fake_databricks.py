"""A local stand-in for the Databricks Jobs API (2.2) endpoints the executor uses, over real HTTP."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class FakeRun:
    """One job run: its parameters and the state the test gives it."""

    run_id: int
    job_id: int
    job_parameters: dict[str, str]
    life_cycle_state: str = "PENDING"
    result_state: str | None = None
    state_message: str = ""
    run_duration_ms: int = 0


@dataclass
class Request:
    """A request as the fake received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: str


@dataclass
class FakeJobs:
    """The Jobs API state: runs by id, idempotency tokens, and every request received."""

    runs: dict[int, FakeRun] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Any = field(default_factory=lambda: itertools.count(1001))

    def set_state(self, run_id: int, life_cycle_state: str, result_state: str | None = None,
                  message: str = "", duration_ms: int = 0) -> None:
        with self.lock:
            run = self.runs[run_id]
            run.life_cycle_state, run.result_state = life_cycle_state, result_state
            run.state_message, run.run_duration_ms = message, duration_ms

    def paths(self) -> list[str]:
        with self.lock:
            return [f"{r.method} {r.path}" for r in self.requests]

    def run_now(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        token = body.get("idempotency_token")
        if token in self.tokens:
            return 200, {"run_id": self.tokens[token]}
        run_id = next(self._ids)
        self.runs[run_id] = FakeRun(run_id=run_id, job_id=int(body["job_id"]),
                                    job_parameters=dict(body.get("job_parameters") or {}))
        if token:
            self.tokens[token] = run_id
        return 200, {"run_id": run_id, "number_in_job": run_id}

    def get_run(self, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        run = self.runs.get(int(query.get("run_id", ["0"])[0]))
        if run is None:
            return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "Run does not exist"}
        state = {"life_cycle_state": run.life_cycle_state, "state_message": run.state_message}
        if run.result_state:
            state["result_state"] = run.result_state
        return 200, {"run_id": run.run_id, "job_id": run.job_id, "state": state,
                     "status": {"state": run.life_cycle_state}, "run_duration": run.run_duration_ms,
                     "job_parameters": [{"name": k, "value": v} for k, v in run.job_parameters.items()]}

    def cancel_run(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        run = self.runs.get(int(body.get("run_id", 0)))
        if run is None:
            return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "Run does not exist"}
        run.life_cycle_state, run.result_state, run.state_message = "TERMINATED", "CANCELED", "cancelled"
        return 200, {}


def _handler(jobs: FakeJobs):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            with jobs.lock:
                jobs.requests.append(Request(self.command, parts.path, parse_qs(parts.query),
                                             dict(self.headers.items()), raw))
                body = json.loads(raw) if raw else {}
                if parts.path.startswith("/api/") and self.headers.get("Authorization") != "Bearer x":
                    status, answer = 401, {"error_code": "UNAUTHENTICATED", "message": "bad token"}
                elif (self.command, parts.path) == ("POST", "/api/2.2/jobs/run-now"):
                    status, answer = jobs.run_now(body)
                elif (self.command, parts.path) == ("GET", "/api/2.2/jobs/runs/get"):
                    status, answer = jobs.get_run(parse_qs(parts.query))
                elif (self.command, parts.path) == ("POST", "/api/2.2/jobs/runs/cancel"):
                    status, answer = jobs.cancel_run(body)
                else:
                    status, answer = 404, {"error_code": "NOT_FOUND", "message": f"no {parts.path}"}
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

    return Handler


class FakeDatabricks:
    """The fake served on 127.0.0.1 and a free port, in a thread, for the length of a `with`."""

    def __init__(self):
        self.jobs = FakeJobs()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.jobs))
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeDatabricks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
