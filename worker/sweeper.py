"""The sweeper: takes back tasks whose lease expired (their worker died or lost the database)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from schema import queue
from worker import logs
from worker.counters import WorkerCounters

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


@dataclass(frozen=True)
class SweeperConfig:
    """How often to sweep, and how many expired tasks one statement takes back."""

    interval_seconds: float = 5.0
    batch: int = 500

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0 or self.batch < 1:
            raise ValueError("interval_seconds must be positive and batch at least 1")


class Sweeper:
    """Runs `schema.queue.sweep`; any number of workers may sweep at once (SKIP LOCKED)."""

    def __init__(self, pool: ConnectionPool, worker_id: str, config: SweeperConfig | None = None,
                 db_timeout_seconds: float = 10.0, counters: WorkerCounters | None = None):
        self.pool = pool
        self.worker_id = worker_id
        self.config = config or SweeperConfig()
        self.db_timeout_seconds = db_timeout_seconds
        self.counters = counters or WorkerCounters()

    def run_once(self) -> int:
        """One sweep; returns how many tasks it took back (re-enqueued or failed for good)."""
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            swept = queue.sweep(conn, batch=self.config.batch)
        if swept:
            self.counters.add("sweeps_recovered", swept)
            logs.change("task", "swept", count=swept, worker=self.worker_id)
        return swept
