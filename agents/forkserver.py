"""A process that loads the agent and MLflow once, then forks every local run from itself.

An agent run started afresh spends most of its CPU before its first page: importing MLflow and
opening its tracking store take about 2 s of CPU on a fast core and 5 s on a slow one, against
about 0.1 s for the extraction and its trace. The worker's local executor therefore starts one fork server
(`python -m agents.forkserver`) and asks it for each run; the run is a fork of a process that has
already paid that cost, and behaves as `python -m agents run ...` would: its own session and
process group, its working directory, environment, stdin, stdout and stderr as asked, and an exit
status and CPU time the worker learns from the server.

The protocol is one JSON object a line. On stdin, a request per run, which runs as
`python -m MODULE ARGS...` would:
    {"module": "agents", "argv": [ARGS...], "env": {...}, "cwd": "...", "stdout": "path", "stderr": "path"}
On stdout, in this order: {"ready": true} once loaded; {"started": pid} or {"refused": reason} for
each request in turn; and, whenever a run ends, {"exited": pid, "status": wait status, "cpu": s}.
When stdin closes (the worker ended or let go of it), the server exits; runs still going on finish
on their own, as runs the worker starts directly do.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import pkgutil
import runpy
import select
import signal
import sys
import threading
import traceback
from typing import Any

READ_CHUNK = 65536
# What a run's first trace imports, beyond `import mlflow`: the tracer and exporter, and the git
# and model modules MLflow reads a trace's context with (about half of a forked run's CPU).
TRACING_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.sdk.metrics", "mlflow.tracing.fluent",
                   "mlflow.tracing.provider", "mlflow.tracing.export.mlflow_v3",
                   "mlflow.tracing.processor.mlflow_v3", "mlflow.tracing.utils.environment", "mlflow.pyfunc",
                   "git")


def preload() -> None:
    """Imports every agent module and, when tracing is configured, MLflow and its tracking store."""
    import agents

    for module in pkgutil.iter_modules(agents.__path__):
        if module.name not in ("__main__", "forkserver"):
            importlib.import_module(f"agents.{module.name}")
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        return
    from agents.tracing import DEFAULT_EXPERIMENT, database_reachable

    if not database_reachable(uri):
        return  # each run finds that out again, and traces nothing
    # What a run does first, done once here: MLflow imported and its store opened (read only:
    # the experiment is the worker's to make). The store's connections are closed again, so that
    # no run shares a socket with another. (How traces are exported is the run's Tracer's to set.)
    try:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=uri).get_experiment_by_name(
            os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT)
    except Exception as exc:  # a run that cannot trace still runs
        print(f"MLflow not preloaded: {exc}", file=sys.stderr)
    finally:
        _close_tracking_connections()
    for name in TRACING_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # MLflow's own layout may change: a run imports what it needs
            print(f"not preloaded: {name}: {exc}", file=sys.stderr)


def _close_tracking_connections() -> None:
    """Closes the pooled connections of MLflow's database stores (each run opens its own)."""
    try:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    except ImportError:
        return
    for engine in list(getattr(SqlAlchemyStore, "_engine_map", {}).values()):
        engine.dispose()


class Server:
    """The fork server's loop: requests in, runs forked, their ends reported."""

    def __init__(self, requests_fd: int, replies_fd: int):
        self.requests_fd = requests_fd
        self.replies_fd = replies_fd
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.buffer = b""
        self.running: set[int] = set()

    def reply(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.replies_fd, data):]

    def serve(self) -> dict[str, Any] | None:
        """Serves until stdin closes (returns None); in a forked run, returns that run's request."""
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.reply({"ready": True})
        while True:
            readable, _, _ = select.select([self.requests_fd, self.wake_r], [], [])
            if self.wake_r in readable:
                os.read(self.wake_r, READ_CHUNK)
                self.reap()
            if self.requests_fd not in readable:
                continue
            chunk = os.read(self.requests_fd, READ_CHUNK)
            if not chunk:
                return None
            self.buffer += chunk
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                request = self.fork(line)
                if request is not None:
                    return request

    def fork(self, line: bytes) -> dict[str, Any] | None:
        """Forks one run; returns its request in the child, None in the server."""
        try:
            request = json.loads(line)
            check_request(request)
        except (ValueError, TypeError) as exc:
            self.reply({"refused": f"bad request: {exc}"})
            return None
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            self.reply({"refused": f"could not fork: {exc}"})
            return None
        if pid == 0:
            self.leave()
            return request
        self.running.add(pid)
        self.reply({"started": pid})
        return None

    def reap(self) -> None:
        """Reports every run that ended, with its wait status and CPU time."""
        while self.running:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                self.running.clear()
                return
            if pid == 0:
                return
            self.running.discard(pid)
            self.reply({"exited": pid, "status": status, "cpu": usage.ru_utime + usage.ru_stime})

    def leave(self) -> None:
        """In a forked run: drops the server's descriptors and signal handling."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (self.requests_fd, self.replies_fd, self.wake_r, self.wake_w):
            os.close(fd)


def check_request(request: Any) -> None:
    """Raises TypeError unless the request has the fields a run needs, of the right types."""
    if not isinstance(request, dict):
        raise TypeError("a request is a JSON object")
    if not (isinstance(request.get("module"), str) and request["module"]):
        raise TypeError("module must name a module")
    if not (isinstance(request.get("argv"), list) and all(isinstance(a, str) for a in request["argv"])):
        raise TypeError("argv must be a list of strings")
    if not (isinstance(request.get("env"), dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in request["env"].items())):
        raise TypeError("env must map strings to strings")
    for key in ("cwd", "stdout", "stderr"):
        if not isinstance(request.get(key), str):
            raise TypeError(f"{key} must be a path")


def become_run(request: dict[str, Any]) -> None:
    """In a forked child: takes on the run's session, files and environment, then runs the module."""
    os.setsid()  # its own process group: the worker's kill takes the run's children too
    os.chdir(request["cwd"])
    stdin = os.open(os.devnull, os.O_RDONLY)
    stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [request["module"], *request["argv"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


def main() -> int:
    # The protocol gets descriptors of its own; stdin and stdout become /dev/null, so that nothing
    # printed while loading, and nothing a run inherits, can reach the worker's end.
    requests_fd, replies_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides when this process ends
    preload()
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        # A fork copies only the forking thread: a lock another thread held would stay held.
        print(f"agent fork server not started: loading started threads {others}", file=sys.stderr)
        return 1
    # What is loaded now stays: no run's garbage collection walks it, nor copies its pages.
    gc.freeze()
    request = Server(requests_fd, replies_fd).serve()
    if request is None:
        return 0
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 1
    try:
        become_run(request)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        # A run ends as a fresh process would (its other threads waited for, exit handlers run,
        # output flushed), without taking apart, object by object, all that the server loaded.
        threading._shutdown()  # type: ignore[attr-defined]  # CPython's own, not in the stubs
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
