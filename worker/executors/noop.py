"""Completes an attempt at once (or after a configured delay) through the callback path; for benchmarks."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agents.report import ReportStatus
from worker.executors.base import Executor, Exit, Handle, Launch, OnExit


@dataclass(frozen=True)
class NoopConfig:
    """How long a signed callback may take."""

    http_timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.http_timeout_seconds <= 0:
            raise ValueError("http_timeout_seconds must be positive")


@dataclass
class NoopHandle(Handle):
    """A pretend run: a timer that reports when it fires."""

    started: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)
    timer: threading.Timer | None = None
    report: dict[str, Any] | None = None
    error: str | None = None


def noop_report(launch: Launch) -> dict[str, Any]:
    """A completed callback with an empty extraction and no spend."""
    pages = launch.task.pages or 0
    return {"status": ReportStatus.COMPLETED.value, "confidence": 1.0, "pages": pages,
            "result": {"document_type": "other", "extractor": "noop", "model": None,
                       "pages": pages, "fields": {}},
            "input_tokens": 0, "output_tokens": 0, "llm_cost_usd": 0.0}


# The done flag of every run that ended within its start: set once, never cleared.
_ENDED = threading.Event()
_ENDED.set()


class NoopExecutor(Executor[NoopHandle]):
    """No work at all: a signed POST to the callback URL, or a report the worker applies itself.

    An agent's settings may hold `delay_seconds` so that benchmarks and tests keep work in flight.
    """

    name = "noop"
    local = True

    def __init__(self, config: NoopConfig | None = None):
        self.config = config or NoopConfig()

    def start(self, launch: Launch, on_exit: OnExit) -> NoopHandle:
        delay = float((launch.agent.settings or {}).get("delay_seconds", 0) or 0)
        if delay <= 0:  # it ends within its start
            handle = NoopHandle(attempt_id=launch.attempt_id, started=time.monotonic(), done=_ENDED)
            self._report(handle, launch)
            on_exit()
            return handle
        handle = NoopHandle(attempt_id=launch.attempt_id, started=time.monotonic())
        handle.timer = threading.Timer(delay, self._fire, args=(handle, launch, on_exit))
        handle.timer.daemon = True
        handle.timer.start()
        return handle

    def _fire(self, handle: NoopHandle, launch: Launch, on_exit: OnExit) -> None:
        """Reports the run: by signed POST, or as a report the worker applies."""
        if handle.done.is_set():
            return
        self._report(handle, launch)
        handle.done.set()
        on_exit()

    def _report(self, handle: NoopHandle, launch: Launch) -> None:
        """Makes the run's report and posts it when there is a callback URL."""
        # Kept like an agent's report file: the worker applies it if the callback did not arrive.
        handle.report = noop_report(launch)
        if launch.callback_url:
            handle.error = self._post(launch, handle.report)

    def _post(self, launch: Launch, report: dict[str, Any]) -> str | None:
        """Posts the signed report; returns why it failed, or None."""
        import httpx  # only runs with a callback URL post: a worker without one never loads it

        from agents.callback import sign

        assert launch.callback_url  # posted only when there is one
        body = json.dumps(report).encode()
        try:
            response = httpx.post(launch.callback_url, content=body,
                                  timeout=self.config.http_timeout_seconds,
                                  headers={"Content-Type": "application/json",
                                           "X-Quire-Signature": sign(body, launch.secret)})
        except httpx.HTTPError as exc:
            return f"callback failed: {type(exc).__name__}: {exc}"
        if response.status_code != 200:
            return f"callback refused with HTTP {response.status_code}: {response.text[:200]}"
        return None

    def written_report(self, handle: NoopHandle) -> dict[str, Any] | None:
        return handle.report

    def is_alive(self, handle: NoopHandle) -> bool:
        return not handle.done.is_set()

    def wait(self, handle: NoopHandle, timeout: float) -> bool:
        return handle.done.wait(timeout)

    def stop(self, handle: NoopHandle) -> None:
        if handle.timer is not None:
            handle.timer.cancel()
        if not handle.done.is_set():
            handle.error = "stopped before it reported"
            handle.done.set()

    def kill(self, handle: NoopHandle) -> None:
        self.stop(handle)

    def exit(self, handle: NoopHandle) -> Exit:
        return Exit(exit_code=0 if handle.report or not handle.error else 1,
                    error=handle.error or "ended without reporting", retryable=True,
                    report=handle.report, wall_seconds=time.monotonic() - handle.started)
