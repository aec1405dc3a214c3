"""The run reconciler: settles job runs that ended while no worker watched them.

It needs no memory of having started anything. Every round it reads the attempts still processing
whose job run id is stored and whose task's lease expired (the worker that started the run stopped
or lost contact, and the run's own heartbeats stopped), and asks Databricks about each run:
- still running: the lease is extended for it, and it is asked again one lease later;
- ended: its signed report from the Volume is applied through the same fenced, idempotent path as
  a callback (`schema.queue.apply_callback`); without a valid report the attempt fails with the
  run's own state message. A report that cannot be read yet is asked for again next round. Its run time is recorded and its compute left for the billing tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from schema import queue, worker_queries
from schema.errors import InvalidPayload, QuireError
from worker import logs
from worker.counters import WorkerCounters
from worker.executors.databricks import DatabricksExecutor, DatabricksHandle, ended_without_report
from worker.settling import failure_report

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


@dataclass(frozen=True)
class ReconcilerConfig:
    """How often to look for unwatched runs, and how many attempts one read takes."""

    interval_seconds: float = 5.0
    batch: int = 100

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0 or self.batch < 1:
            raise ValueError("interval_seconds must be positive and batch at least 1")


class RunReconciler:
    """Runs on every worker; two reconcilers settling the same run change nothing twice."""

    def __init__(self, pool: ConnectionPool, worker_id: str, executor: DatabricksExecutor,
                 config: ReconcilerConfig | None = None, counters: WorkerCounters | None = None,
                 db_timeout_seconds: float = 10.0):
        self.pool = pool
        self.worker_id = worker_id
        self.executor = executor
        self.config = config or ReconcilerConfig()
        self.counters = counters or WorkerCounters()
        self.db_timeout_seconds = db_timeout_seconds

    def run_once(self) -> int:
        """One pass over the unwatched job runs; returns how many attempts it settled."""
        after_id, settled = 0, 0
        while True:
            with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
                batch = worker_queries.attempt_list_detached_expired_batch(
                    conn, after_id=after_id, batch=self.config.batch)
            for attempt in batch:
                if attempt.executor != self.executor.name:
                    continue
                try:
                    settled += self.reconcile(attempt)
                except Exception as exc:  # one run's trouble must not hold up the others
                    logs.problem("reconcile job run", exc, attempt=attempt.attempt_id,
                                 job_run_id=attempt.job_run_id, worker=self.worker_id)
            if len(batch) < self.config.batch:
                return settled
            after_id = batch[-1].attempt_id

    def reconcile(self, attempt: worker_queries.DetachedAttempt) -> int:
        """Asks one run how it ended and settles its attempt; 1 if it was settled now, else 0.

        A run whose state cannot be read (Databricks unreachable) is left as it is: asked again
        next round, never failed for want of an answer."""
        run_id = int(attempt.job_run_id)
        end = self.executor.run_end(run_id)
        if end is None:
            with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
                queue.heartbeat(conn, attempt.attempt_id)
            return 0
        handle = DatabricksHandle(attempt_id=attempt.attempt_id, job_run_id=attempt.job_run_id,
                                  run_id=run_id, document=attempt.document_uri)
        # A report that cannot be read now (a missing grant, say) is asked for again next round:
        # the run's result may be in it, so the attempt is not failed for want of reading it.
        report = self.executor.volume_report(handle, raise_unreadable=True)
        payload = report or failure_report(ended_without_report(end.account, run_id), retryable=True)
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            queue.record_compute(conn, attempt.attempt_id, compute_seconds=end.duration_seconds,
                                 compute_state="pending")
            try:
                outcome = queue.apply_callback(conn, attempt.attempt_id, payload)
            except InvalidPayload as exc:
                outcome = queue.apply_callback(conn, attempt.attempt_id, failure_report(
                    f"the agent's report is invalid: {exc}", retryable=False))
            except QuireError as exc:
                logs.problem("reconcile job run", exc, attempt=attempt.attempt_id, worker=self.worker_id)
                return 0
        self.counters.add("runs_reconciled")
        logs.change("attempt", "reconciled", attempt=attempt.attempt_id, task=attempt.task_id,
                    job_run_id=attempt.job_run_id, source="volume report" if report else "run state",
                    status=payload.get("status"), kind=outcome.kind.value,
                    task_status=outcome.task_status.value, worker=self.worker_id)
        return 1
