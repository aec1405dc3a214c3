"""Runs an attempt as a run of a Lakeflow job, through databricks-sdk; the job reports by callback.

No secret is ever sent: the job derives the attempt's callback key from a shared key it reads from
a secret scope, as the callback route does (docs/CONTRACTS.md). The job also leaves its signed
report beside the document in the Volume; a run that ends without an applied report is settled
from that file, and only without one is the attempt failed, with the run's own state message.
A run lives on without the worker: a stopping worker lets go of it (`detaches`) and never cancels
it, and worker/reconciler.py settles it once it ends, whichever worker is up then.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from agents.callback import derive_attempt_secret, sign
from agents.durable import is_volume_path, parse_report_file, report_path
from worker import logs
from worker.executors.base import Executor, ExecutorError, Exit, Handle, Launch, OnExit
from worker.executors.local import agent_run_settings

# Life-cycle states after which a run will not report any more.
ENDED_STATES = frozenset({"TERMINATED", "SKIPPED", "INTERNAL_ERROR"})


# Where the job id comes from when an agent's settings name none (an app resource, in app.yaml).
JOB_ID_ENV = "QUIRE_AGENT_JOB_ID"


@dataclass(frozen=True)
class DatabricksConfig:
    """Failed polls that lose a run, the shared key that checks Volume reports, callback reach.

    allow_loopback_callbacks is only for a workspace fake on this machine: a real job can never
    reach 127.0.0.1 or localhost.
    """

    max_poll_failures: int = 5
    callback_key: str | None = field(default=None, repr=False)
    allow_loopback_callbacks: bool = False

    def __post_init__(self) -> None:
        if self.max_poll_failures < 1:
            raise ValueError("max_poll_failures must be at least 1")


def is_loopback_url(url: str | None) -> bool:
    """Whether a URL points at this machine only (127.0.0.0/8, ::1, localhost, 0.0.0.0)."""
    host = (urlsplit(url or "").hostname or "").lower()
    if host in ("", "localhost", "0.0.0.0", "::") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def unreachable_reason(callback_base_url: str | None, config: DatabricksConfig) -> str | None:
    """Why remote jobs could not report to this URL; None when they can."""
    if not callback_base_url:
        return ("the Databricks Jobs executor has no public URL to give jobs: set QUIRE_PUBLIC_URL, "
                "or run as a Databricks App (DATABRICKS_APP_NAME) so the app's URL is looked up")
    if is_loopback_url(callback_base_url) and not config.allow_loopback_callbacks:
        return (f"the Databricks Jobs executor refuses to give jobs {callback_base_url}: a remote job "
                "cannot reach this machine's loopback address; set QUIRE_PUBLIC_URL to the app's URL")
    return None


@dataclass
class DatabricksHandle(Handle):
    """A job run and what the last poll said about it."""

    run_id: int = 0
    document: str = ""
    started: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    poll_failures: int = 0
    ended_as: str | None = None
    duration_seconds: float | None = None
    detached: bool = False


@dataclass(frozen=True)
class RunEnd:
    """How a job run ended: its own account of it (state, result, message) and how long it ran."""

    account: str
    duration_seconds: float | None


def configured_job_id(settings: Mapping[str, Any] | None,
                      env: Mapping[str, str] = os.environ) -> tuple[int | None, Any]:
    """The job an agent's runs start: its settings.job_id, else QUIRE_AGENT_JOB_ID (the bundle's job,
    given to the app as a resource); (None, what was found) when neither is a positive integer."""
    raw: Any = (settings or {}).get("job_id") or env.get(JOB_ID_ENV) or None
    try:
        job_id = int(raw)
    except (TypeError, ValueError):
        return None, raw
    return (job_id, raw) if job_id > 0 else (None, raw)


def missing_job_reason(raw: Any) -> str:
    """Why an agent on Databricks has no job to run."""
    return f"runs on Databricks but names no job: set settings.job_id or {JOB_ID_ENV} (got {raw!r})"


def _job_id(launch: Launch) -> int:
    """The agent's job id; a non-retryable error if it has none."""
    job_id, raw = configured_job_id(launch.agent.settings)
    if job_id is None:
        raise ExecutorError(f"agent {launch.agent.name!r} {missing_job_reason(raw)}", retryable=False)
    return job_id


def job_parameters(launch: Launch) -> dict[str, str]:
    """What the job is told: the document, where to report, the agent's model and prices; no secret.

    Every key is always present, so the job's task can reference each as {{job.parameters.NAME}};
    an unset model or price is an empty string.
    """
    return {"document": launch.task.document_uri, "attempt_id": str(launch.attempt_id),
            "callback_url": launch.callback_url or "", "heartbeat_url": launch.heartbeat_url or "",
            "extractor": str((launch.agent.settings or {}).get("extractor") or "offline"),
            # The Apps proxy in front of the callback routes wants the job's own OAuth bearer.
            "callback_auth": "databricks", **agent_run_settings(launch.agent)}


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


class DatabricksExecutor(Executor[DatabricksHandle]):
    """Lakeflow job runs: `run_now` with an idempotency token per attempt, polled for heartbeats."""

    name = "databricks"
    local = False
    billed_by_tables = True
    detaches = True

    def __init__(self, config: DatabricksConfig | None = None,
                 client_factory: Callable[[], Any] | None = None):
        self.config = config or DatabricksConfig()
        self._client_factory = client_factory
        self._client: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
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
        reason = unreachable_reason(launch.callback_url, self.config)
        if reason:
            raise ExecutorError(reason, retryable=False)
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
                                document=launch.task.document_uri, started=time.monotonic())

    def run_end(self, run_id: int) -> RunEnd | None:
        """How a job run ended, or None while it may still report; errors other than a run that
        does not exist are raised (the caller asks again later)."""
        from databricks.sdk.errors import InvalidParameterValue, NotFound

        try:
            run = self.client().jobs.get_run(run_id)
        except (NotFound, InvalidParameterValue) as exc:
            return RunEnd(f"job run {run_id} cannot be found: {exc}", None)
        life, account = _state_of(run)
        if life not in ENDED_STATES:
            return None
        duration = getattr(run, "run_duration", None) or getattr(run, "execution_duration", None)
        return RunEnd(account, duration / 1000 if duration else None)

    def is_alive(self, handle: DatabricksHandle) -> bool:
        if handle.done.is_set():
            return False
        try:
            end = self.run_end(handle.run_id)
        except Exception as exc:  # any failure to learn the state counts against the run
            handle.poll_failures += 1
            if handle.poll_failures >= self.config.max_poll_failures:
                # The run may well go on: the worker lets go of it, and once its lease has expired
                # the run reconciler asks how it ended (it never fails a run it cannot see).
                handle.ended_as = f"lost contact with the run after {handle.poll_failures} polls: {exc}"
                handle.detached = True
                handle.done.set()
                return False
            return True
        handle.poll_failures = 0
        if end is None:
            return True
        handle.ended_as, handle.duration_seconds = end.account, end.duration_seconds
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
        """Cancels the run (its task was cancelled or completed by another attempt); a stopping
        worker never calls this: it lets go of job runs instead (`detaches`)."""
        self.stop(handle)

    def exit(self, handle: DatabricksHandle) -> Exit:
        """How the run ended: its signed report from the Volume if it left one, else its state."""
        wall = handle.duration_seconds or time.monotonic() - handle.started
        if handle.detached:  # the run table lets go of it, and logs so
            return Exit(error=handle.ended_as, detached=True)
        report = self.volume_report(handle)
        return Exit(error=ended_without_report(handle.ended_as, handle.run_id), retryable=True,
                    report=report, wall_seconds=wall)

    def volume_report(self, handle: DatabricksHandle, *, raise_unreadable: bool = False) -> dict[str, Any] | None:
        """The report the job left beside its document, if it is there and signed with its key.

        A file that cannot be read (no grant, the workspace unreachable) counts as none, or with
        `raise_unreadable` raises, so the caller can ask again later instead of failing the run."""
        attempt_id, document = handle.attempt_id, handle.document
        if not is_volume_path(document):
            return None
        path = report_path(document, attempt_id)
        from databricks.sdk.errors import NotFound

        try:
            response = self.client().files.download(path)
            with response.contents as stream:
                data = stream.read()
        except NotFound:
            return None
        except Exception as exc:  # the run is settled by its state: logged, not fatal
            if raise_unreadable:
                raise
            logs.problem("read report from the Volume", exc, attempt=attempt_id, path=path)
            return None
        try:
            found_id, body, signature = parse_report_file(data)
            payload = json.loads(body)
        except ValueError as exc:
            logs.problem("read report from the Volume", exc, attempt=attempt_id, path=path)
            return None
        key = self.config.callback_key
        expected = sign(body, derive_attempt_secret(key, attempt_id)) if key else ""
        if found_id != attempt_id or not key or not hmac.compare_digest(signature, expected):
            logs.problem("read report from the Volume", "the report's signature does not match its attempt",
                         attempt=attempt_id, path=path)
            return None
        logs.change("attempt", "report_from_volume", attempt=attempt_id, path=path)
        return payload if isinstance(payload, dict) else None


def ended_without_report(account: str | None, run_id: int | str) -> str:
    """The error of an attempt whose job run ended with no report: the run's own account of it."""
    return f"{account or 'ended'} (job run {run_id}, no report)"
