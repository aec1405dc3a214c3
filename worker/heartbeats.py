"""Heartbeats: extends the leases of runs their executor reports alive, stops runs that lost theirs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from worker import logs
from worker.runs import RunTable


@dataclass(frozen=True)
class HeartbeatConfig:
    """How often the runs are looked at (each run's heartbeat is due every third of its lease)."""

    tick_seconds: float = 0.5

    def __post_init__(self):
        if self.tick_seconds <= 0:
            raise ValueError("tick_seconds must be positive")


class Heartbeats:
    """Looks at every run: settles the ended, heartbeats the live, stops the superseded."""

    def __init__(self, table: RunTable, config: HeartbeatConfig | None = None,
                 on_settled: Callable[[], None] | None = None):
        self.table = table
        self.config = config or HeartbeatConfig()
        self.on_settled = on_settled or (lambda: None)

    def run_once(self, *, beat_all: bool = False) -> int:
        """One look at every run (`beat_all`: heartbeat each now); returns how many ended."""
        ended = 0
        for run in self.table.snapshot():
            try:
                ended += self.table.check(run, beat_all=beat_all)
            except Exception as exc:  # one run's trouble (a database outage) must not stop the others
                logs.problem("heartbeat", exc, attempt=run.attempt_id)
        if ended:
            self.on_settled()
        return ended
