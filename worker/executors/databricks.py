"""Runs an attempt as a run of a Lakeflow job, through databricks-sdk; the job reports by callback.

No secret is ever sent: the job derives the attempt's callback key from a shared key it reads from
a secret scope, as the callback route does (docs/CONTRACTS.md).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from worker import logs
from worker.executors.base import Executor, ExecutorError, Exit, Handle, Launch, OnExit

# Life-cycle states after which a run will not report any more.
ENDED_STATES = frozenset({"TERMINATED", "SKIPPED", "INTERNAL_ERROR"})


@dataclass(frozen=True)
class DatabricksConfig:
    """How many failed polls in a row make the worker give a run up for lost."""

    max_poll_failures: int = 5

    def __post_init__(self):
        if self.max_poll_failures < 1:
            raise ValueError("max_poll_failures must be at least 1")


@dataclass
class DatabricksHandle(Handle):
    """A job run and what the last poll said about it."""

    run_id: int = 0
    started: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    poll_failures: int = 0
    ended_as: str | None = None
    duration_seconds: float | None = None


def _job_id(launch: Launch) -> int:
    """The agent's job id from its settings; a non-retryable error if absent."""
    raw = (launch.agent.settings or {}).get("job_id")
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise ExecutorError(f"agent {launch.agent.name!r} runs on Databricks but its settings name no "
                            f"job_id (got {raw!r})", retryable=False) from None


def job_parameters(launch: Launch) -> dict[str, str]:
    """What the job is told: the document and where to report; never a secret.

    Every key is always present, so the job's task can reference each as {{job.parameters.NAME}}.
    """
    return {"document": launch.task.document_uri, "attempt_id": str(launch.attempt_id),
            "callback_url": launch.callback_url or "", "heartbeat_url": launch.heartbeat_url or "",
            "extractor": str((launch.agent.settings or {}).get("extractor") or "offline")}


def _state_of(run: Any) -> tuple[str | None, str]:
    """The run's life-cycle state and a readable account of how it ended."""
    status = getattr(run, "status", None)
    state = getattr(run, "state", None)
    life = None
    if status is not None and getattr(status, "state", None) is not None:
        life = status.state.value
    elif state is not None and state.life_cycle_state is not None:
        life = state.life_cycle_state.value
    result = state.result_state.value if state is not None and state.result_state else None
    message = state.state_message if state is not None and state.state_message else ""
    account = "/".join(x for x in (life, result) if x) + (f": {message}" if message else "")
    return life, account


class DatabricksExecutor(Executor):
    """Lakeflow job runs: `run_now` with an idempotency token per attempt, polled for heartbeats."""

    name = "databricks"
    local = False

    def __init__(self, config: DatabricksConfig | None = None,
                 client_factory: Callable[[], Any] | None = None):
        self.config = config or DatabricksConfig()
        self._client_factory = client_factory
        self._client = None
        self._lock = threading.Lock()

    def client(self):
        """The workspace client, made on first use from the environment (DATABRICKS_HOST, ...)."""
        with self._lock:
            if self._client is None:
                if self._client_factory is not None:
                    self._client = self._client_factory()
                else:
                    from databricks.sdk import WorkspaceClient

                    self._client = WorkspaceClient()
            return self._client

    def start(self, launch: Launch, on_exit: OnExit) -> DatabricksHandle:
        from databricks.sdk.errors import DatabricksError, NotFound, PermissionDenied

        job_id = _job_id(launch)
        if not launch.callback_url:
            raise ExecutorError("a Databricks job can only report back to a public callback URL: "
                                "set QUIRE_PUBLIC_URL", retryable=False)
        try:
            waiter = self.client().jobs.run_now(
                job_id=job_id, job_parameters=job_parameters(launch),
                # A retried start of the same attempt joins the run already triggered.
                idempotency_token=f"quire-attempt-{launch.attempt_id}")
        except (NotFound, PermissionDenied) as exc:
            raise ExecutorError(f"cannot run job {job_id}: {exc}", retryable=False) from exc
        except (DatabricksError, OSError) as exc:
            raise ExecutorError(f"could not start job {job_id}: {exc}") from exc
        run_id = int(waiter.run_id)
        return DatabricksHandle(attempt_id=launch.attempt_id, job_run_id=str(run_id), run_id=run_id,
                                started=time.monotonic())

    def is_alive(self, handle: DatabricksHandle) -> bool:
        if handle.done.is_set():
            return False
        try:
            run = self.client().jobs.get_run(handle.run_id)
        except Exception as exc:  # any failure to learn the state counts against the run
            handle.poll_failures += 1
            if handle.poll_failures >= self.config.max_poll_failures:
                handle.ended_as = f"lost contact with the run after {handle.poll_failures} polls: {exc}"
                handle.done.set()
                return False
            return True
        handle.poll_failures = 0
        life, account = _state_of(run)
        if life not in ENDED_STATES:
            return True
        handle.ended_as = account
        duration = getattr(run, "run_duration", None) or getattr(run, "execution_duration", None)
        handle.duration_seconds = duration / 1000 if duration else None
        handle.done.set()
        return False

    def stop(self, handle: DatabricksHandle) -> None:
        if handle.done.is_set():
            return
        try:
            self.client().jobs.cancel_run(handle.run_id)
        except Exception as exc:  # the next poll tells whether the run ended anyway
            logs.problem("cancel job run", exc, attempt=handle.attempt_id, job_run_id=handle.job_run_id)

    def kill(self, handle: DatabricksHandle) -> None:
        self.stop(handle)

    def exit(self, handle: DatabricksHandle) -> Exit:
        return Exit(error=f"job run {handle.run_id} ended without reporting ({handle.ended_as})",
                    retryable=True,
                    wall_seconds=handle.duration_seconds or time.monotonic() - handle.started)
