"""Counts of what one worker did, for /metrics: bumped from the service threads, read from anywhere."""

from __future__ import annotations

import threading

# Each is exported as `quire_worker_<name>_total`.
NAMES = (
    "claims",             # tasks claimed
    "throttled_claims",   # claims of a throttled agent that its limits cut short while work was left
    "runs_started",       # attempts started on an executor
    "runs_handed_back",   # tasks given back to the queue at shutdown (runs in flight, claims while stopping)
    "sweeps_recovered",   # tasks with an expired lease that a sweep took back
)


class WorkerCounters:
    """Monotonic counters of one worker, by name; safe to bump from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(NAMES, 0)

    def add(self, name: str, amount: int = 1) -> None:
        """Adds `amount` to the counter `name` (one of NAMES)."""
        if name not in self._values:
            raise KeyError(f"unknown worker counter {name!r}")
        with self._lock:
            self._values[name] += amount

    def snapshot(self) -> dict[str, int]:
        """Every counter's value now."""
        with self._lock:
            return dict(self._values)
