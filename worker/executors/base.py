"""The executor interface: start an attempt, tell whether it is alive, stop it, say how it ended."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from schema.models import Agent, Task


class ExecutorError(Exception):
    """An attempt could not be started; `retryable` says whether another attempt may succeed."""

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Launch:
    """Everything an executor needs to start one attempt of a task."""

    attempt_id: int
    task: Task
    agent: Agent
    secret: str = field(repr=False)
    callback_url: str | None = None
    heartbeat_url: str | None = None


@dataclass
class Exit:
    """How a run ended, as its executor saw it.

    `report` is a callback payload the worker applies itself (it is trusted); `error` explains an
    end without any report, so the worker can fail the attempt with it.
    """

    exit_code: int | None = None
    error: str | None = None
    retryable: bool = True
    report: dict[str, Any] | None = None
    wall_seconds: float | None = None
    cpu_seconds: float | None = None
    dbus: float | None = None
    # The worker let go of a run that lives on by itself (it lost contact with it): nothing is
    # settled now; the run reconciler settles the attempt once the run has ended.
    detached: bool = False


@dataclass
class Handle:
    """An executor's grip on one running attempt."""

    attempt_id: int
    pid: int | None = None
    job_run_id: str | None = None


OnExit = Callable[[], None]


H = TypeVar("H", bound=Handle)


class Executor(ABC, Generic[H]):
    """Runs attempts somewhere; every method is blocking and safe to call from any thread."""

    name: ClassVar[str]
    # Whether a run occupies one of the worker's local slots (a remote job run does not).
    local: ClassVar[bool] = True
    # Whether compute is billed as wall time x QUIRE_COMPUTE_RATE_USD_PER_HOUR.
    billed_by_time: ClassVar[bool] = False
    # Whether compute is billed by the Databricks billing tables, reconciled later per job run.
    billed_by_tables: ClassVar[bool] = False
    # Whether a run lives on by itself when the worker stops (a job run keeps its own compute): a
    # stopping worker lets go of it instead of ending it, and whoever reconciles runs settles it.
    detaches: ClassVar[bool] = False

    @property
    def traces(self) -> bool:
        """Whether its runs trace to the worker's MLflow store (whose tables they must find made)."""
        return False

    def stop_tracing(self) -> None:
        """Runs from now on trace nowhere (the store could not be set up)."""

    @abstractmethod
    def start(self, launch: Launch, on_exit: OnExit) -> H:
        """Starts the attempt; calls `on_exit` (from any thread) when it ends, if it can tell."""

    @abstractmethod
    def is_alive(self, handle: H) -> bool:
        """True while the run may still report."""

    @abstractmethod
    def stop(self, handle: H) -> None:
        """Asks the run to end (cancel, supersede)."""

    @abstractmethod
    def kill(self, handle: H) -> None:
        """Ends the run now."""

    def written_report(self, handle: H) -> dict[str, Any] | None:
        """The report the run left where the worker can read it (its report file), or None yet."""
        return None

    def wait(self, handle: H, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the run to end where the executor can; True if it did."""
        return not self.is_alive(handle)

    @abstractmethod
    def exit(self, handle: H) -> Exit:
        """How the run ended; called once, after is_alive turned False."""

    def close(self) -> None:
        """Releases what the executor holds (clients, threads)."""
