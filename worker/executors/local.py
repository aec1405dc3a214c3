"""Runs an attempt as a local `python -m agents run` process in its own process group."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from worker import logs
from worker.executors.base import Executor, Exit, Handle, Launch, OnExit
from worker.executors.forkserver import Child, ForkServer, ForkServerGone

if TYPE_CHECKING:
    from schema.models import Agent

# Never handed to an agent process: it reports through its own per-attempt secret only.
WITHHELD_ENV = frozenset({"QUIRE_DATABASE_URL", "QUIRE_CALLBACK_KEY", "QUIRE_OPERATOR_TOKEN",
                          "QUIRE_CALLBACK_SECRET"})
# The agent's model and prices come from its configuration only, never from the worker's environment.
AGENT_ENV = ("QUIRE_LLM_MODEL", "QUIRE_LLM_PRICE_INPUT_PER_MTOK", "QUIRE_LLM_PRICE_OUTPUT_PER_MTOK")


def agent_run_settings(agent: Agent) -> dict[str, str]:
    """The agent's configured model and prices as run settings; an unset one is an empty string."""
    def text(value: object) -> str:
        return "" if value is None else str(value)
    return {"model": text(agent.model), "price_input_per_mtok": text(agent.price_input_per_mtok),
            "price_output_per_mtok": text(agent.price_output_per_mtok)}
# The agent's exit code for a document it can never read (docs/CONTRACTS.md).
EXIT_DOCUMENT_ERROR = 2
# After this many fork servers ended before they had loaded, runs start afresh only.
FORK_SERVER_FAILURES = 3


@dataclass(frozen=True)
class LocalConfig:
    """Where runs keep their scratch files, where they trace, and how much stderr to keep."""

    runs_dir: Path
    tracking_uri: str | None = None
    experiment: str = "quire"
    python: str = sys.executable
    stderr_tail_chars: int = 2000
    # Runs forked from a process that has loaded the agent and MLflow (agents/forkserver.py)
    # rather than started afresh; a run waits this long for that process to finish loading.
    preload: bool = False
    preload_wait_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.stderr_tail_chars < 0:
            raise ValueError("stderr_tail_chars must not be negative")
        if self.preload_wait_seconds < 0:
            raise ValueError("preload_wait_seconds must not be negative")
        # Agents run with their run directory as working directory: paths handed to them must
        # not depend on ours.
        object.__setattr__(self, "runs_dir", Path(self.runs_dir).resolve())


@dataclass(kw_only=True)
class LocalHandle(Handle):
    """A running agent process and what its reaper thread learned when it ended."""

    pid: int
    run_dir: Path
    out_path: Path
    process: subprocess.Popen | None = None
    child: Child | None = None
    started: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    exit_code: int | None = None
    wall_seconds: float | None = None
    cpu_seconds: float | None = None


def _project_root() -> str | None:
    """The directory the agents package is imported from."""
    spec = importlib.util.find_spec("agents")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).resolve().parent)


class LocalExecutor(Executor[LocalHandle]):
    """Agent processes on this machine: pid, wall and CPU time recorded; cancel kills the group."""

    name = "local"
    local = True
    billed_by_time = True

    def __init__(self, config: LocalConfig):
        self.config = config
        self._server: ForkServer | None = None
        self._server_lock = threading.Lock()
        self._server_failures = 0
        self._closed = False

    def _argv(self, launch: Launch, out_path: Path | None) -> list[str]:
        """The agent command line; never a secret in it."""
        argv = [self.config.python, "-m", "agents", "run", "--document", launch.task.document_uri,
                "--attempt-id", str(launch.attempt_id)]
        if launch.callback_url:
            argv += ["--callback-url", launch.callback_url]
        if launch.heartbeat_url:
            argv += ["--heartbeat-url", launch.heartbeat_url]
        if out_path is not None:
            argv += ["--out", str(out_path)]
        settings = launch.agent.settings or {}
        if settings.get("extractor"):
            argv += ["--extractor", str(settings["extractor"])]
        if settings.get("review_threshold") is not None:
            argv += ["--review-threshold", f"{float(settings['review_threshold']):g}"]
        return argv

    def _env(self, launch: Launch) -> dict[str, str]:
        """The agent's environment: its secret and tracking URI in, the worker's keys out."""
        env = self._base_env()
        for name, value in zip(AGENT_ENV, agent_run_settings(launch.agent).values()):
            if value:
                env[name] = value
        env["QUIRE_CALLBACK_SECRET"] = launch.secret
        if launch.agent.model:  # the model configured for the agent travels with its run
            env["QUIRE_LLM_MODEL"] = launch.agent.model
        # The agent's own heartbeats keep its lease if this worker dies before it does.
        env["QUIRE_HEARTBEAT_SECONDS"] = f"{max(1.0, launch.agent.lease_seconds / 3):g}"
        return env

    def _base_env(self) -> dict[str, str]:
        """What every run's environment holds: the worker's, less its keys, with where to trace."""
        env = {k: v for k, v in os.environ.items() if k not in WITHHELD_ENV and k not in AGENT_ENV}
        if self.config.tracking_uri:
            env["MLFLOW_TRACKING_URI"] = self.config.tracking_uri
            env.setdefault("MLFLOW_EXPERIMENT_NAME", self.config.experiment)
        root = _project_root()
        if root:
            # The agent must import from the same tree as this worker, whatever its working dir.
            env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        return env

    def start(self, launch: Launch, on_exit: OnExit) -> LocalHandle:
        run_dir = self.config.runs_dir / f"attempt-{launch.attempt_id}"
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        # The agent also writes its report to a file: the worker applies it itself when the agent
        # has no callback URL, or could not deliver its callback before it exited.
        out_path = run_dir / "report.json"
        argv, env = self._argv(launch, out_path), self._env(launch)
        started = time.monotonic()
        # A run waits for a loading fork server no longer than a third of its lease.
        child = self._fork(argv, env, run_dir, min(self.config.preload_wait_seconds,
                                                   launch.agent.lease_seconds / 3))
        process = None
        if child is None:
            with open(run_dir / "stdout.log", "wb") as stdout, open(run_dir / "stderr.log", "wb") as stderr:
                process = subprocess.Popen(
                    argv, cwd=run_dir, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                    start_new_session=True)  # its own process group: a kill takes its children too
            pid = process.pid
        else:
            pid = child.pid
        handle = LocalHandle(attempt_id=launch.attempt_id, pid=pid,
                             process=process, child=child, run_dir=run_dir, out_path=out_path, started=started)
        threading.Thread(target=self._reap, args=(handle, on_exit), daemon=True,
                         name=f"quire-attempt-{launch.attempt_id}").start()
        return handle

    def _reap(self, handle: LocalHandle, on_exit: OnExit) -> None:
        """Waits for the process in a thread and records its exit and resource usage."""
        if handle.child is not None:
            handle.child.done.wait()
            status, handle.cpu_seconds = handle.child.status, handle.child.cpu_seconds
        else:
            # wait4 gives the child's own resource usage, which Popen.wait does not.
            _, status, usage = os.wait4(handle.pid, 0)
            handle.cpu_seconds = usage.ru_utime + usage.ru_stime
        handle.wall_seconds = time.monotonic() - handle.started
        handle.exit_code = None if status is None else os.waitstatus_to_exitcode(status)
        if handle.process is not None:
            handle.process.returncode = handle.exit_code
        handle.done.set()
        on_exit()

    @property
    def traces(self) -> bool:
        return self.config.tracking_uri is not None

    def stop_tracing(self) -> None:
        """Runs from now on trace nowhere (the store they would trace to could not be set up)."""
        self.config = replace(self.config, tracking_uri=None)

    # -- the fork server -------------------------------------------------------------------------

    def _fork_server(self) -> ForkServer | None:
        """The fork server runs start from, started if need be; None once runs start afresh."""
        with self._server_lock:
            if self._server is not None and not self._server.gone:
                return self._server
            if self._server is not None and not self._server.ready:
                self._server_failures += 1
                self._server = None
            if self._closed or self._server_failures >= FORK_SERVER_FAILURES:
                return None
            try:
                self.config.runs_dir.mkdir(parents=True, exist_ok=True)
                self._server = ForkServer(self.config.python, self._base_env(), self.config.runs_dir)
            except OSError as exc:
                self._server_failures = FORK_SERVER_FAILURES
                logs.problem("start the agent fork server", exc)
                return None
            return self._server

    def _fork(self, argv: list[str], env: dict[str, str], run_dir: Path, wait: float) -> Child | None:
        """The run forked from the fork server; None when it is to start afresh instead."""
        if not self.config.preload:
            return None
        server = self._fork_server()
        if server is None or not server.wait_ready(wait):
            return None
        try:
            # argv[:3] is `python -m agents`.
            child = server.spawn(argv[2], argv[3:], env, run_dir, run_dir / "stdout.log",
                                 run_dir / "stderr.log")
        except ForkServerGone as exc:
            logs.problem("fork an agent run", exc)
            return None
        return child

    def close(self) -> None:
        with self._server_lock:
            self._closed = True
            if self._server is not None:
                self._server.close()

    def is_alive(self, handle: LocalHandle) -> bool:
        return not handle.done.is_set()

    def _signal(self, handle: LocalHandle, sig: int) -> None:
        """Signals the run's process group, unless it already ended."""
        if handle.done.is_set():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(handle.pid, sig)

    def stop(self, handle: LocalHandle) -> None:
        self._signal(handle, signal.SIGTERM)

    def kill(self, handle: LocalHandle) -> None:
        self._signal(handle, signal.SIGKILL)

    def wait(self, handle: LocalHandle, timeout: float) -> bool:
        """Waits for the process to end; True if it did."""
        return handle.done.wait(timeout)

    def written_report(self, handle: LocalHandle) -> dict | None:
        """The agent's report file, once it wrote one (the agent writes it whole, then renames it)."""
        if handle.out_path is None:
            return None
        try:
            report = json.loads(handle.out_path.read_text())
        except (OSError, ValueError):
            return None
        return report if isinstance(report, dict) else None

    def exit(self, handle: LocalHandle) -> Exit:
        report = self.written_report(handle)
        tail = self._stderr_tail(handle)
        code = handle.exit_code
        if code is not None and code < 0:
            error = f"agent process killed by signal {-code}"
        elif code is None:
            error = "agent process ended without reporting (its exit status was lost with the fork server)"
        else:
            error = f"agent process exited with code {code} without reporting"
        if tail:
            error += f"; stderr: {tail}"
        shutil.rmtree(handle.run_dir, ignore_errors=True)
        return Exit(exit_code=code, error=error, retryable=code != EXIT_DOCUMENT_ERROR,
                    report=report,
                    wall_seconds=handle.wall_seconds, cpu_seconds=handle.cpu_seconds)

    def _stderr_tail(self, handle: LocalHandle) -> str:
        """The end of the run's stderr, for the failure it may explain."""
        limit = self.config.stderr_tail_chars
        try:
            with open(handle.run_dir / "stderr.log", "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - limit))
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
