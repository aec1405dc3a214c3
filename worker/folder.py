"""The rollup folder: moves tasks changed since the last fold into the dashboard's rollups, in steps."""

from __future__ import annotations

import time
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
    """How often to fold, how long a fold may wait while a drain is under way, and how many marks
    one fold takes at most."""

    interval_seconds: float = 2.0
    drain_seconds: float = 10.0
    step_marks: int = rollups.FOLD_STEP_MARKS

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")
        if self.drain_seconds < 0:
            raise ValueError("drain_seconds must not be negative")
        if self.step_marks <= 0:
            raise ValueError("step_marks must be positive")


class RollupFolder:
    """Runs `schema.rollups.rollup_fold` a bounded step at a time; folds of several workers (and of
    apps without a worker) take turns (one advisory lock).

    While a drain is under way (tasks run while others wait), a fold waits up to `drain_seconds`
    after the last one: a fold in the middle of a drain folds the waiting tasks as enqueued, and
    again once settled (docs/BENCHMARKS.md). A fold once begun goes on step by step while more
    marks wait than a read adds by itself, so a long drain's marks never pile up. Reads meanwhile
    add the marks not folded yet, up to rollups.PENDING_EXACT_MAX of them; beyond that they answer
    from the folds and say they are catching up.
    """

    def __init__(self, pool: ConnectionPool, worker_id: str, config: FolderConfig | None = None,
                 db_timeout_seconds: float = 10.0):
        self.pool = pool
        self.worker_id = worker_id
        self.config = config or FolderConfig()
        self.db_timeout_seconds = db_timeout_seconds
        self.folded = 0  # tasks folded by this folder, for tests and logs
        self.deferred = 0  # folds put off while a drain was under way
        self._folded_at = time.monotonic()
        self._more = False  # the last step left many marks waiting: the next one goes on at once

    def run_once(self) -> float | None:
        """One step; a short pause when many marks wait still (_many_waiting), else None (the interval)."""
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            if (not self._more and time.monotonic() - self._folded_at < self.config.drain_seconds
                    and rollups.drain_under_way(conn)):
                self.deferred += 1
                return None
            try:
                folded = rollups.rollup_fold(conn, max_marks=self.config.step_marks)
            except psycopg.errors.ReadOnlySqlTransaction:
                return READ_ONLY_RETRY_SECONDS
        self._folded_at = time.monotonic()
        self.folded += max(folded, 0)
        # A step takes step_marks marks; the tasks they name are fewer (a task marks once per change).
        self._more = folded > 0 and self._many_waiting()
        return STEP_PAUSE_SECONDS if self._more else None

    def _many_waiting(self) -> bool:
        """Whether more marks wait than a read adds by itself (a bulk load, a backfill, a long
        drain's marks), or a whole step's worth: the next step goes on at once. Fewer wait for the
        next interval: during a drain a few always wait, and folding them at once, step after step,
        folded each task two or three times on its way through the queue."""
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            backlog = rollups.rollup_backlog(conn)
        return backlog.catching_up or backlog.marks >= self.config.step_marks
