"""The billing reconciler: writes each job run's DBUs and compute cost to its attempt, until final.

Billing lags hours behind the runs and corrects itself: records arrive late, and RETRACTION and
RESTATEMENT records amend earlier ones. So a run's figures are read again every round while they
are open: 'pending' (no record yet: NULL cost, never 0), then 'billed' (provisional, rewritten
whenever its records change), then 'final' once they have not changed for `final_seconds` after
the run ended. A run with no record `unbilled_seconds` after it ended is marked 'unbilled'. A
query the warehouse refuses (a missing grant, say) changes nothing and is tried again next round.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from schema import billing
from worker import logs

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


@dataclass(frozen=True)
class BillingConfig:
    """The warehouse and workspace to read billing for, how often, and when figures are settled.

    final_seconds: figures unchanged this long after the run ended (and after their last change)
    are final. Databricks writes a run's records within hours (usually 12) and corrects them
    within a day or so; 48 h leaves room for both.
    unbilled_seconds: a run with no record this long after it ended is marked never billed.
    """

    warehouse_id: str
    workspace_id: str | None = None
    interval_seconds: float = 600.0
    runs_per_statement: int = 500
    final_seconds: float = 48 * 3600.0
    unbilled_seconds: float = 72 * 3600.0

    def __post_init__(self) -> None:
        if not self.warehouse_id:
            raise ValueError("a warehouse id is needed to read the billing tables")
        if self.interval_seconds <= 0 or self.runs_per_statement < 1:
            raise ValueError("interval must be positive and runs_per_statement at least 1")
        if self.final_seconds < 0 or self.unbilled_seconds < 0:
            raise ValueError("final_seconds and unbilled_seconds must not be negative")


class BillingReconciler:
    """Reads system.billing.usage for the job runs this orchestrator submitted, per attempt."""

    def __init__(self, pool: ConnectionPool, worker_id: str, config: BillingConfig,
                 client_factory: Callable[[], Any] | None = None, db_timeout_seconds: float = 10.0):
        self.pool = pool
        self.worker_id = worker_id
        self.config = config
        self._client_factory = client_factory
        self._client: Any = None
        self._workspace_id = config.workspace_id
        self.db_timeout_seconds = db_timeout_seconds

    def client(self) -> Any:
        if self._client is None:
            if self._client_factory is None:
                from databricks.sdk import WorkspaceClient

                self._client_factory = WorkspaceClient
            self._client = self._client_factory()
        return self._client

    def workspace_id(self) -> str:
        """This workspace's id: configured, else the one Databricks Apps gives the app, else asked."""
        if not self._workspace_id:
            found = os.environ.get("DATABRICKS_WORKSPACE_ID") or self.client().get_workspace_id()
            self._workspace_id = str(found)
        return self._workspace_id

    def run_once(self) -> int:
        """One pass over every attempt whose figures are open; returns how many attempts changed.

        A failed query ends the round (logged): nothing is written, and the next round asks again."""
        after_id, changed = 0, 0
        while True:
            with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
                batch = billing.attempt_list_compute_open_batch(
                    conn, after_id=after_id, batch=self.config.runs_per_statement)
            if not batch:
                return changed
            after_id = batch[-1].id
            # A run's usage is dated from its start; a day earlier covers any time zone's edge.
            since = min(a.started_at for a in batch).date() - timedelta(days=1)
            try:
                usage = billing.usage_for_runs(self.client(), self.config.warehouse_id, self.workspace_id(),
                                               sorted({a.job_run_id for a in batch}), since=since)
            except Exception as exc:  # refused or unreachable: everything stays as it is until next round
                logs.problem("read the billing tables", exc, worker=self.worker_id)
                return changed
            with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
                written = billing.attempt_record_billing_batch(
                    conn, [a.id for a in batch], usage, final_seconds=self.config.final_seconds,
                    unbilled_seconds=self.config.unbilled_seconds)
            for w in written:
                logs.change("attempt", f"compute_{w.compute_state}", attempt=w.id, job_run_id=w.job_run_id,
                            dbus=None if w.dbus is None else float(w.dbus),
                            compute_cost_usd=None if w.compute_cost_usd is None else float(w.compute_cost_usd),
                            unpriced=w.compute_unpriced, worker=self.worker_id)
            changed += len(written)
            if len(batch) < self.config.runs_per_statement:
                return changed
