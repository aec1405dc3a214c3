"""The billing reconciler: writes each finished job run's DBUs and compute cost to its attempt.

Billing lags hours behind the runs: until the billing tables have a run, its attempt's compute is
'pending' (NULL cost), never 0. Every pending attempt is looked up, page after page, with no cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from schema import billing
from worker import logs


@dataclass(frozen=True)
class BillingConfig:
    """The SQL warehouse to query, how often, and how many job runs one statement asks about."""

    warehouse_id: str
    interval_seconds: float = 600.0
    runs_per_statement: int = 500

    def __post_init__(self):
        if not self.warehouse_id:
            raise ValueError("a warehouse id is needed to read the billing tables")
        if self.interval_seconds <= 0 or self.runs_per_statement < 1:
            raise ValueError("interval must be positive and runs_per_statement at least 1")


class BillingReconciler:
    """Reads system.billing.usage for the job runs this orchestrator submitted, per attempt."""

    def __init__(self, pool, worker_id: str, config: BillingConfig,
                 client_factory: Callable[[], Any] | None = None, db_timeout_seconds: float = 10.0):
        self.pool = pool
        self.worker_id = worker_id
        self.config = config
        self._client_factory = client_factory
        self._client = None
        self.db_timeout_seconds = db_timeout_seconds
        # Account prices where the workspace has them; list prices once it turns out it has not.
        self.account_prices = True

    def client(self):
        if self._client is None:
            if self._client_factory is None:
                from databricks.sdk import WorkspaceClient

                self._client_factory = WorkspaceClient
            self._client = self._client_factory()
        return self._client

    def _usage(self, run_ids: list[str]) -> dict[str, billing.BilledRun]:
        """Billed usage of these runs, at account prices if the workspace has them, else list prices."""
        if self.account_prices:
            try:
                return billing.usage_for_runs(self.client(), self.config.warehouse_id, run_ids)
            except billing.BillingQueryFailed as exc:
                logs.problem("read account prices", f"{exc}; using list prices", worker=self.worker_id)
                self.account_prices = False
        return billing.usage_for_runs(self.client(), self.config.warehouse_id, run_ids, account_prices=False)

    def run_once(self) -> int:
        """One pass over every pending attempt; returns how many got their DBUs and cost."""
        after_id, written = 0, 0
        while True:
            with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
                pending = billing.attempt_list_compute_pending_batch(
                    conn, after_id=after_id, batch=self.config.runs_per_statement)
            if not pending:
                return written
            after_id = pending[-1].id
            usage = self._usage(sorted({a.job_run_id for a in pending}))
            for attempt in pending:
                billed = usage.get(attempt.job_run_id)
                if billed is None:
                    continue  # not in the billing tables yet: still pending
                with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
                    done = billing.attempt_record_billing_if_pending(
                        conn, attempt.id, dbus=billed.dbus,
                        compute_cost_usd=None if billed.cost_usd is None else round(billed.cost_usd, 6))
                if done:
                    written += 1
                    logs.change("attempt", "compute_billed", attempt=attempt.id, job_run_id=attempt.job_run_id,
                                dbus=billed.dbus, compute_cost_usd=billed.cost_usd, worker=self.worker_id)
            if len(pending) < self.config.runs_per_statement:
                return written
