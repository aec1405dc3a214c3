"""Settling the runs that ended on a worker: their measured compute and, for an attempt that never
reported, its outcome; and applying a report the worker files itself."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from agents.report import ReportStatus
from schema import queue, settlement
from schema.errors import InvalidPayload, QuireError
from schema.models import CallbackOutcome
from worker import logs
from worker.executors.base import Exit
from worker.inflight import Run
from worker.metrics import PROCESS, observe_report


def failure_report(error: str | None, *, retryable: bool) -> dict[str, Any]:
    """A failed callback body the worker files on behalf of an attempt that could not report."""
    return {"status": ReportStatus.FAILED.value, "error": (error or "attempt ended without reporting")[:4000],
            "retryable": retryable, "result": None}


def _exit_of(run: Run) -> Exit:
    """How the run ended, asked of its executor once."""
    if run.exit is None:
        run.exit = run.executor.exit(run.handle)
    return run.exit


class Settler:
    """Settles one worker's ended runs, many in one statement, and files reports on their behalf."""

    def __init__(self, connection: Callable[[], AbstractContextManager[psycopg.Connection]], *, worker_id: str,
                 compute_rate_usd_per_hour: float, forget: Callable[[Run], None],
                 detach: Callable[[Run, str], None]) -> None:
        """`forget` drops a settled run from the worker's table; `detach` lets go of a run that lives
        on by itself."""
        self.connection = connection
        self.worker_id = worker_id
        self.compute_rate_usd_per_hour = compute_rate_usd_per_hour
        self._forget = forget
        self._detach = detach

    def settle_many(self, runs: list[Run]) -> None:
        """Settles ended runs: compute and plain completions in one transaction, the rest one by one."""
        with logs.batched():
            self._settle_many(runs)

    def _settle_many(self, runs: list[Run]) -> None:
        exits = {run.attempt_id: _exit_of(run) for run in runs}
        for run in [r for r in runs if exits[r.attempt_id].detached]:
            self._detach(run, exits[run.attempt_id].error or "detached")
        pending = [r for r in runs if not exits[r.attempt_id].detached]
        while pending:
            ended = [self._ended(run) for run in pending]
            with self.connection() as conn:
                settled = settlement.settle_ended(conn, ended)
            # A second run of the same task is settled in the next pass, after the first.
            settled_tasks = {done.task_id for done in settled.values()}
            later = [run for run in pending
                     if run.attempt_id not in settled and run.claim.task.id in settled_tasks]
            for run in pending:
                if run in later:
                    continue
                done = settled.get(run.attempt_id)
                outcome = None
                exit = exits[run.attempt_id]
                if done is not None and done.report_due:
                    payload = exit.report or failure_report(exit.error, retryable=exit.retryable)
                    outcome = self.report(run.attempt_id, payload, raise_db_errors=True)
                elif (done is not None and run.cancel_seen and done.reported_status is None
                      and exit.report is not None):
                    # Stopped by a cancel, the agent wrote what it spent until then: the report
                    # changes nothing of the cancelled task, but its spend is kept on the attempt.
                    outcome = self.report(run.attempt_id, exit.report, raise_db_errors=True)
                self._forget(run)
                self._log_end(run, done, outcome)
            pending = later

    def _ended(self, run: Run) -> settlement.Ended:
        """What settlement needs to know of an ended run: its report and its measured compute."""
        exit = _exit_of(run)
        cost, state = None, None
        if run.executor.billed_by_time and exit.wall_seconds is not None:
            cost = round(exit.wall_seconds * self.compute_rate_usd_per_hour / 3600, 6)
            state = "measured"
        elif run.executor.billed_by_tables:
            state = "pending"  # the billing reconciler writes DBUs and cost once billing has the run
        report = exit.report or failure_report(exit.error, retryable=exit.retryable)
        return settlement.Ended(run.attempt_id, report=report, compute_seconds=exit.wall_seconds,
                                cpu_seconds=exit.cpu_seconds, compute_cost_usd=cost, dbus=exit.dbus,
                                compute_state=state)

    def _log_end(self, run: Run, done: settlement.Settled | None, outcome: CallbackOutcome | None) -> None:
        exit = _exit_of(run)
        if exit.wall_seconds is not None:
            PROCESS.observe("quire_extraction_seconds", exit.wall_seconds)
        reported = done.reported_status if done is not None else None
        if done is not None and done.completed:
            reported = "by worker"
        logs.change("attempt", "ended", attempt=run.attempt_id, task=run.claim.task.id,
                    agent=run.agent.name, exit_code=exit.exit_code,
                    wall_seconds=round(exit.wall_seconds, 3) if exit.wall_seconds is not None else None,
                    cpu_seconds=round(exit.cpu_seconds, 3) if exit.cpu_seconds is not None else None,
                    reported=reported or (outcome and "by worker"), worker=self.worker_id)

    def report(self, attempt_id: int, payload: dict[str, Any], *,
               raise_db_errors: bool = False) -> CallbackOutcome | None:
        """Applies a report directly (the worker is trusted); an invalid one becomes a failure."""
        try:
            with self.connection() as conn:
                try:
                    started = time.perf_counter()
                    outcome = queue.apply_callback(conn, attempt_id, payload)
                    observe_report(time.perf_counter() - started, payload, outcome.usage_recorded)
                except InvalidPayload as exc:
                    outcome = queue.apply_callback(conn, attempt_id, failure_report(
                        f"the agent's report is invalid: {exc}", retryable=False))
        except QuireError as exc:
            logs.problem("report attempt", exc, attempt=attempt_id)
            return None
        except Exception as exc:
            if raise_db_errors:
                raise
            logs.problem("report attempt", exc, attempt=attempt_id)
            return None
        logs.change("attempt", "reported_by_worker", attempt=attempt_id, task=outcome.task_id,
                    status=payload.get("status"), kind=outcome.kind.value,
                    task_status=outcome.task_status.value, worker=self.worker_id)
        if outcome.applied:
            logs.change("task", outcome.task_status.value, task=outcome.task_id, attempt=attempt_id,
                        worker=self.worker_id)
        return outcome
