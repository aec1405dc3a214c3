"""The rollup folder: moves tasks changed since the last fold into the dashboard's rollups."""

from __future__ import annotations

from dataclasses import dataclass

from schema import rollups


@dataclass(frozen=True)
class FolderConfig:
    """How often to fold."""

    interval_seconds: float = 2.0

    def __post_init__(self):
        if self.interval_seconds <= 0:
            raise ValueError("interval_seconds must be positive")


class RollupFolder:
    """Runs `schema.rollups.rollup_fold`; folds of several workers take turns (one advisory lock)."""

    def __init__(self, pool, worker_id: str, config: FolderConfig | None = None, db_timeout_seconds: float = 10.0):
        self.pool = pool
        self.worker_id = worker_id
        self.config = config or FolderConfig()
        self.db_timeout_seconds = db_timeout_seconds

    def run_once(self) -> int:
        """One fold; the number of tasks folded (-1 when another worker was folding)."""
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            return rollups.rollup_fold(conn)
