"""Counts of what one worker did, for /metrics: bumped from the service threads, read from anywhere."""

from __future__ import annotations

from worker.metrics import Metrics

# Each is exported as `quire_worker_<name>_total`.
NAMES = (
    "claims",             # tasks claimed
    "throttled_claims",   # claims of a throttled agent that its limits cut short while work was left
    "runs_started",       # attempts started on an executor
    "runs_handed_back",   # tasks given back to the queue at shutdown (runs in flight, claims while stopping)
    "sweeps_recovered",   # tasks with an expired lease that a sweep took back
    "runs_detached",      # job runs let go of (the worker stopped, or lost contact): they live on
    "runs_reconciled",    # ended job runs no worker was watching, settled by the run reconciler
)


class WorkerCounters(Metrics):
    """Monotonic counters of one worker (prometheus-client); safe to bump from any thread."""

    def __init__(self) -> None:
        super().__init__({f"quire_worker_{name}": (f"Worker {name.replace('_', ' ')} (this process).", ())
                          for name in NAMES})

    def add(self, name: str, amount: int = 1) -> None:
        """Adds `amount` to the counter `name` (one of NAMES)."""
        if name not in NAMES:
            raise KeyError(f"unknown worker counter {name!r}")
        self.inc(f"quire_worker_{name}", amount)

    def snapshot(self) -> dict[str, int]:
        """Every counter's value now."""
        values = {name.removeprefix("quire_worker_").removesuffix("_total"): int(value)
                  for name, _, value in self.items()}
        return {name: values.get(name, 0) for name in NAMES}
