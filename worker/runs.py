"""The attempts one worker runs: starting them, keeping their leases, stopping and handing them back;
settling how they ended is worker.settling's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg
from psycopg_pool import ConnectionPool

from schema import db, queue, settlement
from schema.models import Agent, AttemptStatus, Claim, TaskStatus
from schema.stats_types import StreamEvent
from worker import logs
from worker.counters import WorkerCounters
from worker.executors.base import Executor, ExecutorError, Launch
from worker.inflight import Run, run_agent
from worker.settling import Settler, failure_report


@dataclass(frozen=True)
class RunTableConfig:
    """Where agents report, what compute costs, and how long a stopped run may take to end."""

    worker_id: str
    callback_base_url: str | None = None
    compute_rate_usd_per_hour: float = 0.0
    stop_grace_seconds: float = 5.0
    # A cancelled run is asked to end, then killed after this long: an operator's cancel bites
    # within about a second, where a superseded run may take the longer grace to report.
    cancel_grace_seconds: float = 1.0
    reported_exit_grace_seconds: float = 30.0
    # How long a run that wrote its report file may go on delivering it before the worker applies
    # the file itself (its callback's host may be down), and how long while the worker stops.
    report_file_grace_seconds: float = 5.0
    stopping_report_grace_seconds: float = 1.0
    db_timeout_seconds: float = 10.0

    def __post_init__(self) -> None:
        if not self.worker_id:
            raise ValueError("worker_id must not be empty")
        if self.compute_rate_usd_per_hour < 0 or min(self.stop_grace_seconds, self.cancel_grace_seconds) < 0:
            raise ValueError("rates and grace periods must not be negative")


class RunTable:
    """Attempts in flight on this worker; safe to use from the service threads at once."""

    def __init__(self, pool: ConnectionPool, executors: dict[str, Executor], config: RunTableConfig,
                 on_exit: Callable[[], None] | None = None, counters: WorkerCounters | None = None) -> None:
        self.pool = pool
        self.executors = executors
        self.config = config
        self.counters = counters or WorkerCounters()
        self._on_exit = on_exit or (lambda: None)
        self._runs: dict[int, Run] = {}
        self._lock = threading.Lock()
        self._held = db.HeldConnection(pool, timeout=config.db_timeout_seconds)
        self.stopping = False  # the worker is draining: written reports are applied at once
        self.settler = Settler(self.connection, worker_id=config.worker_id,
                               compute_rate_usd_per_hour=config.compute_rate_usd_per_hour,
                               forget=self._forget, detach=self.detach)

    def connection(self) -> AbstractContextManager[psycopg.Connection]:
        """The table's connection (its statements, mostly settlements, stay planned on one server
        backend), or a pooled one while another thread uses it; waits at most the configured time."""
        return self._held.connection()

    # -- counting -------------------------------------------------------------------------------

    def snapshot(self) -> list[Run]:
        """The runs in flight now, as a list the caller may iterate freely."""
        with self._lock:
            return list(self._runs.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

    @staticmethod
    def _seen_ended(run: Run) -> bool:
        """Whether the run is known to have ended: its exit was taken, or a local run says so when
        asked (cheap); a remote one only once its end was seen."""
        return run.exit is not None or (run.executor.local and not run.executor.is_alive(run.handle))

    def any_running(self) -> bool:
        """Whether some run may still end soon: a local one still running, a remote one whose end
        was not seen yet."""
        with self._lock:
            runs = list(self._runs.values())
        return not all(self._seen_ended(r) for r in runs)

    def any_ended(self) -> bool:
        """Whether some run ended and waits to be settled (a remote one: its end was seen)."""
        with self._lock:
            runs = list(self._runs.values())
        return any(not r.handing_back and self._seen_ended(r) for r in runs)

    def slots_taken(self, *, local: bool, unsettled: int) -> int:
        """How many slots are in use: runs still running, plus ended runs not yet settled beyond
        `unsettled` of them (so settling never falls further behind than that).

        A run that ended frees its slot at once: the next claim need not wait for its settlement,
        which the heartbeats do meanwhile, many runs in one statement. A local run is asked whether
        it still runs (cheap); a remote one counts as running until its end was seen.
        """
        return self.pools_taken({local: unsettled})[local]

    def pools_taken(self, unsettled: dict[bool, int]) -> dict[bool, int]:
        """slots_taken for each pool in `unsettled` (local: True, remote: False) and its number of
        ended runs that may wait, from one look at the runs."""
        with self._lock:
            runs = list(self._runs.values())
        taken = {}
        for local, may_wait in unsettled.items():
            pool = [r for r in runs if r.executor.local == local]
            ended = sum(1 for r in pool if self._seen_ended(r))
            taken[local] = len(pool) - ended + max(0, ended - may_wait)
        return taken

    # -- starting -------------------------------------------------------------------------------

    def _urls(self, attempt_id: int) -> tuple[str | None, str | None]:
        """The attempt's callback and heartbeat URLs, or None when agents report to the worker."""
        base = self.config.callback_base_url
        if not base:
            return None, None
        base = base.rstrip("/")
        return f"{base}/api/callbacks/{attempt_id}", f"{base}/api/attempts/{attempt_id}/heartbeat"

    def launch(self, claim: Claim, agent: Agent, executor: Executor) -> Run | None:
        """Starts a claimed attempt; a start that fails is reported as the attempt's failure."""
        if not self._lease_still_held(claim, agent):
            return None
        callback_url, heartbeat_url = self._urls(claim.attempt_id)
        launch = Launch(attempt_id=claim.attempt_id, task=claim.task, agent=run_agent(agent, claim.task),
                        secret=claim.callback_secret, callback_url=callback_url,
                        heartbeat_url=heartbeat_url)
        try:
            handle = executor.start(launch, self._on_exit)
        except Exception as exc:  # any start failure ends this attempt, never the worker
            retryable = exc.retryable if isinstance(exc, ExecutorError) else True
            logs.change("attempt", "start_failed", attempt=claim.attempt_id, task=claim.task.id,
                        agent=agent.name, executor=executor.name, error=str(exc), retryable=retryable)
            failed = failure_report(f"could not start: {exc}", retryable=retryable)
            self.settler.report(claim.attempt_id, failed)
            return None
        run = Run(claim=claim, agent=agent, executor=executor, handle=handle,
                  next_beat=time.monotonic() + self._beat_interval(agent))
        with self._lock:
            self._runs[claim.attempt_id] = run
        self.counters.add("runs_started")
        logs.change("attempt", "started", attempt=claim.attempt_id, task=claim.task.id, agent=agent.name,
                    executor=executor.name, pid=handle.pid, job_run_id=handle.job_run_id,
                    worker=self.config.worker_id)
        # The claim recorded the executor; only a process id or job run id is left to store.
        if handle.pid is not None or handle.job_run_id is not None:
            try:
                with self.connection() as conn:
                    queue.record_executor_info(conn, claim.attempt_id, pid=handle.pid,
                                               job_run_id=handle.job_run_id, executor=executor.name)
            except Exception as exc:  # bookkeeping only: the run goes on without it
                logs.problem("record executor info", exc, attempt=claim.attempt_id)
        if not executor.is_alive(handle):
            self._on_exit()
        return run

    def _lease_still_held(self, claim: Claim, agent: Agent) -> bool:
        """Whether a claim may start: one that waits longer than a heartbeat's interval to start (the
        starts before it were slow, or it waited for a slot) renews its lease first, and one the
        sweeper already took back never starts. Its task is queued again, and a run started for it
        would only be stopped at its first heartbeat: a job run cancelled, a process killed."""
        left = (claim.lease_expires_at - datetime.now(UTC)).total_seconds()
        if left > agent.lease_seconds - self._beat_interval(agent):
            return True
        try:
            with self.connection() as conn:
                if queue.heartbeat(conn, claim.attempt_id):
                    return True
                status = queue.get_attempt(conn, claim.attempt_id).status
        except Exception as exc:  # the run's own heartbeats tell, as for any run
            logs.problem("heartbeat", exc, attempt=claim.attempt_id)
            return True
        logs.change("attempt", "not_started", attempt=claim.attempt_id, task=claim.task.id, agent=agent.name,
                    reason=f"the attempt is {status.value}: its lease expired before it could start",
                    worker=self.config.worker_id)
        return False

    @staticmethod
    def _beat_interval(agent: Agent) -> float:
        """Seconds between heartbeats of a run of this agent."""
        # Three heartbeats per lease: one lost or slow heartbeat does not lose the lease.
        return max(0.2, agent.lease_seconds / 3)

    # -- watching -------------------------------------------------------------------------------

    def check(self, run: Run, *, beat_all: bool = False, settle: bool = True) -> bool:
        """One look at a run: settle it if it ended, heartbeat it when due, enforce a stop.

        Returns True when the run ended (and was settled, unless `settle` is False: check_all
        settles the ended runs together)."""
        if run.handing_back:  # shutdown owns it now: its end is not a failure to report
            return False
        now = time.monotonic()
        due = beat_all or now >= run.next_beat
        # Local runs are cheap to ask; remote ones are asked only when a heartbeat is due.
        if (run.executor.local or due or run.exit is not None) and not self._alive(run):
            if settle:
                self.settle(run)
            return True
        if run.cancel_seen and run.stop_requested_at is None:
            self.lease_lost(run, AttemptStatus.CANCELLED)
            return False
        if run.stop_requested_at is None and self._report_written(run, now):
            self.apply_written_report(run)
            return False
        if run.kill_after is not None and now >= run.kill_after:
            run.executor.kill(run.handle)
            run.kill_after = None
            logs.change("attempt", "killed", attempt=run.attempt_id, task=run.claim.task.id,
                        worker=self.config.worker_id)
        elif due and run.stop_requested_at is None:
            run.next_beat = now + self._beat_interval(run.agent)
            self.beat(run)
        return False

    def _report_written(self, run: Run, now: float) -> bool:
        """Whether the live run wrote its report and has had long enough to deliver it itself."""
        if run.executor.written_report(run.handle) is None:
            return False
        if run.report_seen_at is None:
            run.report_seen_at = now
        grace = (self.config.stopping_report_grace_seconds if self.stopping
                 else self.config.report_file_grace_seconds)
        return now - run.report_seen_at >= grace

    def apply_written_report(self, run: Run) -> None:
        """Applies the report a live run wrote, unless it was delivered, and ends the run: it is done."""
        report = run.executor.written_report(run.handle)
        with self.connection() as conn:
            attempt = queue.get_attempt(conn, run.attempt_id)
        if report is not None and attempt.reported_status is None and attempt.status in settlement.REPORTABLE:
            self.settler.report(run.attempt_id, report, raise_db_errors=True)
            logs.change("attempt", "report_file_applied", attempt=run.attempt_id, task=run.claim.task.id,
                        worker=self.config.worker_id)
        # Whatever it still does is delivering a report already applied: stop it.
        now = time.monotonic()
        run.stop_requested_at = now
        run.executor.stop(run.handle)
        run.kill_after = now + self.config.stop_grace_seconds

    def _alive(self, run: Run) -> bool:
        """Whether the run may still report (False once it ended, even if not settled)."""
        return run.exit is None and run.executor.is_alive(run.handle)

    def beat(self, run: Run) -> None:
        """Extends the run's lease; if the attempt is no longer live, stops the run."""
        with self.connection() as conn:
            if queue.heartbeat(conn, run.attempt_id):
                return
            attempt = queue.get_attempt(conn, run.attempt_id)
        self.lease_lost(run, attempt.status)

    def lease_lost(self, run: Run, status: AttemptStatus) -> None:
        """Reacts to an attempt that lost its task: it reported, or was superseded, cancelled, swept."""
        now = time.monotonic()
        run.stop_requested_at = now
        if status in (AttemptStatus.COMPLETED, AttemptStatus.FAILED):
            # It reported by itself and is on its way out; kill it only if it lingers.
            run.kill_after = now + self.config.reported_exit_grace_seconds
            return
        run.cancel_seen = run.cancel_seen or status is AttemptStatus.CANCELLED
        run.executor.stop(run.handle)
        grace = (self.config.cancel_grace_seconds if status is AttemptStatus.CANCELLED
                 else self.config.stop_grace_seconds)
        run.kill_after = now + grace
        logs.change("attempt", "stopping", attempt=run.attempt_id, task=run.claim.task.id,
                    reason=status.value, worker=self.config.worker_id)

    def note_cancelled(self, events: list[StreamEvent]) -> bool:
        """Marks the runs of tasks these events cancelled, to be stopped at the next look (the
        heartbeats' thread: stopping a remote run is a network call); True if any runs here.

        The events come through LISTEN the moment a cancel commits, so a cancelled run gets its
        signal at once instead of at its next heartbeat (a third of its lease later)."""
        cancelled = {e.task_id for e in events if e.status is TaskStatus.CANCELLED}
        if not cancelled:
            return False
        with self._lock:
            runs = [r for r in self._runs.values()
                    if r.claim.task.id in cancelled and r.stop_requested_at is None]
            for run in runs:
                run.cancel_seen = True
        return bool(runs)

    # -- ending ---------------------------------------------------------------------------------

    def check_all(self, runs: list[Run], *, beat_all: bool = False) -> int:
        """One look at each run; the runs that ended are settled together. Returns how many ended."""
        ended = []
        for run in runs:
            try:
                if self.check(run, beat_all=beat_all, settle=False):
                    ended.append(run)
            except Exception as exc:  # one run's trouble (a database outage) must not stop the others
                logs.problem("heartbeat", exc, attempt=run.attempt_id)
        if ended:
            self.settle_many(ended)
        return len(ended)

    def settle(self, run: Run) -> None:
        """Records an ended run's compute and, if the attempt never reported, its outcome."""
        self.settle_many([run])

    def settle_many(self, runs: list[Run]) -> None:
        """Settles ended runs: compute and plain completions in one transaction, the rest one by one."""
        self.settler.settle_many(runs)

    def _forget(self, run: Run) -> None:
        """Drops a settled run from the table."""
        with self._lock:
            self._runs.pop(run.attempt_id, None)

    # -- shutting down --------------------------------------------------------------------------

    def detach(self, run: Run, reason: str) -> None:
        """Lets go of a run that lives on by itself, settling nothing: its lease runs out, and the
        run reconciler (any worker's) settles the attempt from how the run ended."""
        with self._lock:
            self._runs.pop(run.attempt_id, None)
        self.counters.add("runs_detached")
        logs.change("attempt", "detached", attempt=run.attempt_id, task=run.claim.task.id,
                    job_run_id=run.handle.job_run_id, reason=reason, worker=self.config.worker_id)

    def attached(self) -> int:
        """Runs in flight that a stopping worker waits for: those that do not live on without it."""
        with self._lock:
            return sum(1 for r in self._runs.values() if not r.executor.detaches)

    def hand_back_all(self, *, wait_seconds: float = 5.0) -> int:
        """Ends every run still in flight: applies the report of those that wrote one, and gives the
        task of the others back to the queue at once, without spending its attempt budget.

        Runs that live on by themselves (job runs) are let go of instead, never cancelled: they
        report to whichever app is up, or through their Volume report to the run reconciler."""
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            if run.executor.detaches and run.exit is None:
                run.handing_back = True
                self.detach(run, "the worker stopped")
        with self._lock:
            runs = list(self._runs.values())
            for run in runs:
                run.handing_back = True
        for run in runs:
            run.executor.kill(run.handle)
        deadline = time.monotonic() + wait_seconds
        for run in runs:
            # A killed local process is gone in milliseconds; waiting keeps a late report out.
            if run.executor.local:
                run.executor.wait(run.handle, max(0.0, deadline - time.monotonic()))
        handed = 0
        for run in runs:
            if run.executor.written_report(run.handle) is not None:
                # It finished, and only its delivery was cut short: settling applies its report.
                try:
                    self.settle(run)
                    continue
                except Exception as exc:
                    logs.problem("settle", exc, attempt=run.attempt_id)
            try:
                with self.connection() as conn:
                    given = queue.hand_back(conn, run.attempt_id)
            except Exception as exc:
                logs.problem("hand back", exc, attempt=run.attempt_id)
                continue
            if given:
                handed += 1
                self.counters.add("runs_handed_back")
                logs.change("task", "handed_back", task=run.claim.task.id, attempt=run.attempt_id,
                            worker=self.config.worker_id)
            try:
                if not self._alive(run):
                    self.settle(run)
            except Exception as exc:
                logs.problem("settle", exc, attempt=run.attempt_id)
        return handed

