"""The rollup folder: moves tasks changed since the last fold into the dashboard's rollups, in steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg

from schema import rollups

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

# Between two steps of a backlog (a bulk load, a backfill): the claims and reads on the same server
# get their turn, and the backlog still folds at most of a core's speed.
STEP_PAUSE_SECONDS = 0.05
# A session that may not write (a read replica): look again now and then, never fold.
READ_ONLY_RETRY_SECONDS = 60.0


@dataclass(frozen=True)
class FolderConfig:
    """How often to fold, and how many marks one fold takes at most."""

    interval_seconds: float = 2.0
    step_marks: int = rollups.FOLD_STEP_MARKS

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        if self.step_marks <= 0:
            raise ValueError("step_marks must be positive")


class RollupFolder:
    """Runs `schema.rollups.rollup_fold` a bounded step at a time; folds of several workers (and of
    apps without a worker) take turns (one advisory lock)."""

    def __init__(self, pool: ConnectionPool, worker_id: str, config: FolderConfig | None = None,
                 db_timeout_seconds: float = 10.0):
        self.pool = pool
        self.worker_id = worker_id
        self.config = config or FolderConfig()
        self.db_timeout_seconds = db_timeout_seconds
        self.folded = 0  # tasks folded by this folder, for tests and logs

    def run_once(self) -> float | None:
        """One step; a short pause when the step was full (more marks wait), else None (the interval)."""
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            try:
                folded = rollups.rollup_fold(conn, max_marks=self.config.step_marks)
            except psycopg.errors.ReadOnlySqlTransaction:
                return READ_ONLY_RETRY_SECONDS
        self.folded += max(folded, 0)
        # A step takes step_marks marks; the tasks they name are fewer (a task marks once per change).
        return STEP_PAUSE_SECONDS if folded > 0 and self._more_waiting() else None

    def _more_waiting(self) -> bool:
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            return rollups.rollup_backlog(conn).marks > 0
