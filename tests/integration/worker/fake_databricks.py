"""A local stand-in for the Databricks workspace APIs Quire uses, over real HTTP, for the real SDK.

OAuth (workspace OIDC discovery and client-credentials tokens that expire), Jobs 2.2 (run-now,
runs/submit, runs/get, runs/cancel), the Files API, secrets, Lakebase database credentials, apps,
MLflow experiments and traces, serving endpoints, and SQL statement execution on a warehouse
that runs the statements (fake_warehouse.py). With `agent_env` set, a triggered run starts the
real agent as a subprocess with the command line of the bundle's job task (databricks.yml), as a
serverless job would.

As strict as the platform documents it: a job run's native token is accepted by the workspace APIs
but it is not an OAuth token; Volumes need USE CATALOG, USE SCHEMA and READ VOLUME (WRITE VOLUME to
write); secrets need READ on their scope; serving endpoints need CAN QUERY; MLflow refuses relative
experiment names.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from tests.integration.worker.fake_warehouse import FakeWarehouse

PAT = "x"  # the personal access token the worker's client uses in these tests
WORKER = "pat"  # the principal of that token
ROOT = Path(__file__).parents[3]
FAKE_RUNTIME = Path(__file__).with_name("fake_runtime")  # the runtime's credentials, for the SDK


@dataclass
class FakeRun:
    """One job run: its parameters and the state the test (or its agent process) gives it."""

    run_id: int
    job_id: int
    job_parameters: dict[str, str]
    life_cycle_state: str = "PENDING"
    result_state: str | None = None
    state_message: str = ""
    run_duration_ms: int = 0
    process: subprocess.Popen | None = None
    stderr: str = ""


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
    lock: threading.RLock = field(default_factory=threading.RLock)
    _ids: Any = field(default_factory=lambda: itertools.count(1001))
    broken: bool = False                      # every Jobs request answers 500 while set

    def set_state(self, run_id: int, life_cycle_state: str, result_state: str | None = None,
                  message: str = "", duration_ms: int = 0) -> None:
        with self.lock:
            run = self.runs[run_id]
            run.life_cycle_state, run.result_state = life_cycle_state, result_state
            run.state_message, run.run_duration_ms = message, duration_ms

    def paths(self) -> list[str]:
        with self.lock:
            return [f"{r.method} {r.path}" for r in self.requests]

    def run_now(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], FakeRun | None]:
        token = body.get("idempotency_token")
        if token in self.tokens:
            return 200, {"run_id": self.tokens[token]}, None
        run_id = next(self._ids)
        run = self.runs[run_id] = FakeRun(run_id=run_id, job_id=int(body.get("job_id") or 0),
                                          job_parameters=dict(body.get("job_parameters") or {}))
        if token:
            self.tokens[token] = run_id
        return 200, {"run_id": run_id, "number_in_job": run_id}, run

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
        if run.process is not None and run.process.poll() is None:
            run.process.kill()
        run.life_cycle_state, run.result_state, run.state_message = "TERMINATED", "CANCELED", "cancelled"
        return 200, {}


@dataclass
class IssuedToken:
    """An OAuth access token the fake issued: whose it is and when it stops being accepted."""

    client_id: str
    expires_at: float


class FakeWorkspace:
    """The workspace's state; every handler reads and writes it under one lock."""

    def __init__(self):
        self.jobs = FakeJobs()
        self.lock = self.jobs.lock
        self.files: dict[str, bytes] = {}
        self.secrets: dict[tuple[str, str], bytes] = {}
        self.clients: dict[str, str] = {}            # OAuth client id -> secret
        self.emails: dict[str, str] = {}             # OAuth client id -> identity the Apps proxy forwards
        self.tokens: dict[str, IssuedToken] = {}
        self.token_lifetime_seconds = 3600           # the expires_in the token endpoint announces
        # How long a token is really accepted; shorter than announced, it shows whether a client
        # refreshes in time (the SDK refreshes 40 s before the announced expiry).
        self.token_valid_seconds: float | None = None
        self.file_delay_seconds = 0.0                # a slow Volume: downloads wait this long
        self.apps: dict[str, str] = {}               # app name -> URL
        self.warehouse = FakeWarehouse()              # runs the billing SQL on fixture tables
        self.agent_env: dict[str, str] | None = None
        self.run_ended: list[Any] = []               # called with each FakeRun its agent ended
        self.agent_cwd: str | None = None
        self._credential_ids = itertools.count(1)
        # Who may do what, as granted on the platform.
        self.runtime_tokens: dict[str, str] = {}               # a job run's native token -> its principal
        self.app_users: set[str] = set()                       # CAN_USE on the app (the Apps proxy checks)
        self.uc_grants: set[tuple[str, str, str]] = set()      # (principal, privilege, "volume c.s.v" ...)
        self.scope_readers: dict[str, set[str]] = {}           # secret scope -> principals with READ
        self.endpoint_users: dict[str, set[str]] = {}          # serving endpoint -> principals with CAN_QUERY
        self.experiments: dict[str, str] = {}                  # MLflow experiment name -> id
        self.traces: dict[str, dict[str, Any]] = {}            # trace id -> its trace_info as logged
        self.completions: list[tuple[str, str]] = []           # (principal, endpoint) of each chat completion
        self.bundle_values: dict[str, str] = {}                # ${...} in the bundle's task parameters

    # -- grants -----------------------------------------------------------------------------------

    def grant_volume(self, principal: str, volume: str, *privileges: str) -> None:
        """USE CATALOG, USE SCHEMA and the given volume privileges on `catalog.schema.volume`."""
        catalog, schema, _ = volume.split(".")
        with self.lock:
            self.uc_grants |= {(principal, "USE_CATALOG", f"catalog {catalog}"),
                               (principal, "USE_SCHEMA", f"schema {catalog}.{schema}")}
            self.uc_grants |= {(principal, p, f"volume {volume}") for p in privileges}

    def volume_refusal(self, principal: str, path: str, write: bool) -> str | None:
        """Why `principal` may not read (or write) a /Volumes/ path; None when it may."""
        parts = path.split("/")
        if len(parts) < 5 or parts[1] != "Volumes":
            return None  # not a Volume: workspace-internal storage (MLflow's trace data)
        catalog, schema, volume = parts[2:5]
        needed = [("USE_CATALOG", f"catalog {catalog}"), ("USE_SCHEMA", f"schema {catalog}.{schema}"),
                  ("READ_VOLUME", f"volume {catalog}.{schema}.{volume}")]
        if write:
            needed.append(("WRITE_VOLUME", f"volume {catalog}.{schema}.{volume}"))
        lacking = [f"{p} on {on}" for p, on in needed if (principal, p, on) not in self.uc_grants]
        return f"User does not have {', '.join(lacking)}" if lacking else None

    # -- OAuth ------------------------------------------------------------------------------------

    def add_client(self, client_id: str, secret: str, email: str) -> None:
        with self.lock:
            self.clients[client_id], self.emails[client_id] = secret, email

    def issue_token(self, authorization: str | None) -> tuple[int, dict[str, Any]]:
        scheme, _, encoded = (authorization or "").partition(" ")
        try:
            client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
        except ValueError:
            client_id, secret = "", ""
        if scheme.lower() != "basic" or self.clients.get(client_id) != secret:
            return 401, {"error": "invalid_client", "error_description": "unknown client"}
        token = "oauth-" + secrets.token_hex(8)
        valid = self.token_valid_seconds if self.token_valid_seconds is not None else self.token_lifetime_seconds
        self.tokens[token] = IssuedToken(client_id, time.time() + valid)
        return 200, {"access_token": token, "token_type": "Bearer", "expires_in": self.token_lifetime_seconds,
                     "scope": "all-apis"}

    def principal(self, authorization: str | None) -> str | None:
        """Whose valid bearer this is ("pat" for the worker's token); None if missing or expired."""
        scheme, _, credential = (authorization or "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        if credential == PAT:
            return WORKER
        with self.lock:
            if credential in self.runtime_tokens:
                return self.runtime_tokens[credential]
            issued = self.tokens.get(credential)
            if issued is None or issued.expires_at <= time.time():
                return None
            return issued.client_id

    def oauth_principal(self, authorization: str | None) -> str | None:
        """Whose OAuth access token this is; None for a PAT, a job's runtime token, or no valid token."""
        scheme, _, credential = (authorization or "").partition(" ")
        with self.lock:
            issued = self.tokens.get(credential) if scheme.lower() == "bearer" else None
            return issued.client_id if issued is not None and issued.expires_at > time.time() else None

    def tokens_of(self, client_id: str) -> list[str]:
        with self.lock:
            return [t for t, issued in self.tokens.items() if issued.client_id == client_id]

    # -- jobs that run the real agent ---------------------------------------------------------------

    def launch_agent(self, run: FakeRun) -> None:
        """Runs the bundle's wheel task (`quire-agent` with its parameters) as a serverless job would."""
        argv = [sys.executable, "-m", "agents", *bundle_task_parameters(run.job_parameters, self.bundle_values)]
        run.process = subprocess.Popen(argv, env=self.agent_env, cwd=self.agent_cwd, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        run.life_cycle_state = "RUNNING"
        started = time.monotonic()

        def reap() -> None:
            _, stderr = run.process.communicate()
            with self.lock:
                run.stderr = stderr
                if run.life_cycle_state == "TERMINATED":
                    return  # cancelled
                code = run.process.returncode
                run.life_cycle_state = "TERMINATED"
                run.result_state = "SUCCESS" if code == 0 else "FAILED"
                run.state_message = "" if code == 0 else f"Task agent failed: the process exited with code {code}"
                run.run_duration_ms = int((time.monotonic() - started) * 1000)
            for hook in list(self.run_ended):
                hook(run)

        threading.Thread(target=reap, daemon=True).start()

    # -- routing ------------------------------------------------------------------------------------

    def route(self, method: str, path: str, query: dict[str, list[str]], headers: Any,
              raw: bytes) -> tuple[int, Any, dict[str, str]]:
        """(status, JSON answer or raw bytes, extra headers) for one request."""
        if (method, path) == ("GET", "/.well-known/databricks-config"):
            return 200, {"oidc_endpoint": f"http://{headers.get('Host')}/oidc", "workspace_id": "424242"}, {}
        if (method, path) == ("GET", "/oidc/.well-known/oauth-authorization-server"):
            host = f"http://{headers.get('Host')}"
            return 200, {"authorization_endpoint": f"{host}/oidc/v1/authorize",
                         "token_endpoint": f"{host}/oidc/v1/token"}, {}
        if (method, path) == ("POST", "/oidc/v1/token"):
            status, answer = self.issue_token(headers.get("Authorization"))
            return status, answer, {}
        if not path.startswith(("/api/", "/serving-endpoints/")):
            return 404, {"error_code": "NOT_FOUND", "message": f"no {path}"}, {}
        who = self.principal(headers.get("Authorization"))
        if who is None:
            return 401, {"error_code": "UNAUTHENTICATED", "message": "invalid or expired token"}, {}
        body = json.loads(raw) if raw and headers.get("Content-Type", "").startswith("application/json") else {}
        if path.startswith("/api/2.0/fs/files/"):
            target = unquote(path[len("/api/2.0/fs/files"):])
            refusal = self.volume_refusal(who, target, write=method == "PUT")
            if refusal:
                return 403, {"error_code": "PERMISSION_DENIED", "message": refusal}, {}
            return self.files_route(method, target, query, raw)
        if path == "/serving-endpoints/chat/completions":
            return (*self.chat_completion(who, body), {})
        if path.startswith(("/api/2.0/mlflow/", "/api/3.0/mlflow/")):
            return (*self.mlflow(method, path, query, body), {})
        if path.startswith("/api/2.2/jobs/") and self.jobs.broken:
            return 500, {"error_code": "INTERNAL_ERROR", "message": "the Jobs service failed"}, {}
        if (method, path) in (("POST", "/api/2.2/jobs/run-now"), ("POST", "/api/2.2/jobs/runs/submit")):
            status, answer, run = self.jobs.run_now(body)
            if run is not None and self.agent_env is not None:
                self.launch_agent(run)
            return status, answer, {}
        if (method, path) == ("GET", "/api/2.2/jobs/runs/get"):
            return (*self.jobs.get_run(query), {})
        if (method, path) == ("POST", "/api/2.2/jobs/runs/cancel"):
            return (*self.jobs.cancel_run(body), {})
        if (method, path) == ("GET", "/api/2.0/secrets/get"):
            if who != WORKER and who not in self.scope_readers.get(query["scope"][0], set()):
                return 403, {"error_code": "PERMISSION_DENIED",
                             "message": f"User does not have READ permission on scope {query['scope'][0]}"}, {}
            value = self.secrets.get((query["scope"][0], query["key"][0]))
            if value is None:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such secret"}, {}
            return 200, {"key": query["key"][0], "value": base64.b64encode(value).decode()}, {}
        if (method, path) == ("POST", "/api/2.0/database/credentials"):
            return 200, {"token": f"db-token-{next(self._credential_ids)}",
                         "expiration_time": "2099-01-01T00:00:00Z"}, {}
        if method == "GET" and path.startswith("/api/2.0/apps/"):
            name = path.rsplit("/", 1)[1]
            if name not in self.apps:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"no app {name}"}, {}
            return 200, {"name": name, "url": self.apps[name]}, {}
        if (method, path) == ("POST", "/api/2.0/sql/statements"):
            return (*self.warehouse.execute(body, who), {})
        if method == "GET" and path.startswith("/api/2.0/sql/statements/"):
            parts = path.split("/")
            statement_id = parts[5]
            if statement_id not in self.warehouse.statements:
                return 404, {"error_code": "NOT_FOUND", "message": "no such statement"}, {}
            if len(parts) == 6:
                return 200, self.warehouse.answer(statement_id), {}
            return 200, self.warehouse.chunk(statement_id, int(parts[8])), {}
        return 404, {"error_code": "NOT_FOUND", "message": f"no {path}"}, {}

    # -- MLflow and serving endpoints ---------------------------------------------------------------

    def mlflow(self, method: str, path: str, query: dict[str, list[str]],
               body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Experiments by absolute name only, and traces logged to them (the trace's info is kept)."""
        def experiment(name: str) -> dict[str, Any]:
            eid = self.experiments[name]
            return {"experiment": {"experiment_id": eid, "name": name, "lifecycle_stage": "active",
                                   "artifact_location": f"dbfs:/databricks/mlflow-tracking/{eid}"}}

        if path in ("/api/2.0/mlflow/experiments/get-by-name", "/api/2.0/mlflow/experiments/create"):
            name = query.get("experiment_name", [""])[0] if method == "GET" else body.get("name", "")
            if not name.startswith("/"):
                return 400, {"error_code": "INVALID_PARAMETER_VALUE", "message":
                             f"Got an invalid experiment name '{name}'. An experiment name must be an absolute "
                             "path within the Databricks workspace, e.g. '/Users/<some-username>/my-experiment'."}
            if method == "POST":
                self.experiments.setdefault(name, str(4000 + len(self.experiments)))
                return 200, {"experiment_id": self.experiments[name]}
            if name not in self.experiments:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"No experiment {name}"}
            return 200, experiment(name)
        if path == "/api/2.0/mlflow/experiments/get":
            names = [n for n, eid in self.experiments.items() if eid == query.get("experiment_id", [""])[0]]
            if not names:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "No such experiment"}
            return 200, experiment(names[0])
        if (method, path) == ("POST", "/api/3.0/mlflow/traces"):
            info = dict(body["trace"]["trace_info"])
            eid = info["trace_location"]["mlflow_experiment"]["experiment_id"]
            if eid not in self.experiments.values():
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"No experiment {eid}"}
            info.setdefault("tags", {})["mlflow.artifactLocation"] = (
                f"dbfs:/databricks/mlflow-tracking/{eid}/traces/{info['trace_id']}/artifacts")
            self.traces[info["trace_id"]] = info
            return 200, {"trace": {"trace_info": info}}
        return 404, {"error_code": "ENDPOINT_NOT_FOUND", "message": f"the fake has no {method} {path}"}

    def chat_completion(self, who: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """An OpenAI-style completion from a serving endpoint, for callers with CAN QUERY on it."""
        endpoint = body.get("model", "")
        if who not in self.endpoint_users.get(endpoint, set()):
            return 403, {"error_code": "PERMISSION_DENIED",
                         "message": f"User does not have permission 'CAN_QUERY' on endpoint {endpoint}"}
        self.completions.append((who, endpoint))
        content = json.dumps({"document_type": "invoice", "fields": {}})
        return 200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": endpoint,
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": content}}],
                     "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240}}

    def files_route(self, method: str, path: str, query: dict[str, list[str]],
                    raw: bytes) -> tuple[int, Any, dict[str, str]]:
        if method == "PUT":
            if query.get("overwrite", ["true"])[0] == "false" and path in self.files:
                return 409, {"error_code": "ALREADY_EXISTS", "message": "file exists"}, {}
            self.files[path] = raw
            return 204, b"", {}
        data = self.files.get(path)
        if data is None:
            return 404, {"error_code": "NOT_FOUND", "message": f"no file {path}"}, {}
        meta = {"Content-Type": "application/octet-stream", "Last-Modified": "Mon, 30 Nov 2026 00:00:00 GMT"}
        return 200, (data if method == "GET" else b""), {**meta, "Content-Length": str(len(data))}


def _handler(workspace: FakeWorkspace):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with workspace.lock:
                workspace.jobs.requests.append(Request(self.command, parts.path, parse_qs(parts.query),
                                                       dict(self.headers.items()),
                                                       raw.decode("utf-8", "replace")))
                status, answer, extra = workspace.route(self.command, parts.path, parse_qs(parts.query),
                                                        self.headers, raw)
            data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
            if self.command == "GET" and parts.path.startswith("/api/2.0/fs/files/"):
                time.sleep(workspace.file_delay_seconds)  # a slow transfer, after the token was checked
            self.send_response(status)
            headers = {"Content-Type": "application/json", "Content-Length": str(len(data)), **extra}
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD" and status != 204:
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _serve

    return Handler


class FakeDatabricks:
    """The fake served on 127.0.0.1 and a free port, in a thread, for the length of a `with`."""

    def __init__(self):
        self.workspace = FakeWorkspace()
        self.jobs = self.workspace.jobs
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.workspace))
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeDatabricks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.workspace.lock:
            running = [r.process for r in self.jobs.runs.values() if r.process and r.process.poll() is None]
        for process in running:
            process.kill()
            process.wait(timeout=10)
        self.server.shutdown()
        self.server.server_close()


def bundle_task_parameters(job_parameters: dict[str, str], values: dict[str, str]) -> list[str]:
    """The agent task's command line from databricks.yml: {{job.parameters.NAME}} from the run, and
    ${...} (the bundle's own references) from `values`; a reference the fake was not given fails."""
    bundle = yaml.safe_load((ROOT / "databricks.yml").read_text())
    [task] = bundle["resources"]["jobs"]["agent"]["tasks"]
    declared = {p["name"]: p.get("default", "") for p in bundle["resources"]["jobs"]["agent"]["parameters"]}
    run_values = {**declared, **job_parameters}

    def fill(text: str) -> str:
        text = re.sub(r"\{\{job\.parameters\.(\w+)\}\}", lambda m: run_values[m.group(1)], text)
        return re.sub(r"\$\{([\w.]+)\}", lambda m: values[m.group(1)], text)

    return [fill(p) for p in task["python_wheel_task"]["parameters"]]


def serverless_job_env(host: str, runtime_token: str, **extra: str) -> dict[str, str]:
    """The environment of a serverless job's process: the runtime's version and its own credentials
    (a native token, no OAuth client, no DATABRICKS_HOST), and nothing of Quire's but `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("QUIRE_", "MLFLOW_", "DATABRICKS_", "PYTHONPATH"))}
    env.update(DATABRICKS_RUNTIME_VERSION="client.4.9", DATABRICKS_CONFIG_FILE="/nonexistent/.databrickscfg",
               FAKE_DBRUNTIME_HOST=host, FAKE_DBRUNTIME_TOKEN=runtime_token,
               PYTHONPATH=os.pathsep.join([str(FAKE_RUNTIME), str(ROOT)]), PYTHONUNBUFFERED="1", **extra)
    return env
