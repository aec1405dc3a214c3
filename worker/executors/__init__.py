"""Where attempts run: `local` processes (default), `databricks` job runs, `noop` for benchmarks."""

from __future__ import annotations

from worker.executors.base import Executor, ExecutorError, Exit, Handle, Launch
from worker.executors.databricks import DatabricksConfig, DatabricksExecutor
from worker.executors.local import LocalConfig, LocalExecutor
from worker.executors.noop import NoopConfig, NoopExecutor

__all__ = [
    "DatabricksConfig",
    "DatabricksExecutor",
    "Executor",
    "ExecutorError",
    "Exit",
    "Handle",
    "Launch",
    "LocalConfig",
    "LocalExecutor",
    "NoopConfig",
    "NoopExecutor",
    "build_executors",
]


def build_executors(local: LocalConfig, *, noop: NoopConfig | None = None,
                    databricks: DatabricksConfig | None = None) -> dict[str, Executor]:
    """Every executor by the name agents use for it in their `executor` setting."""
    executors: list[Executor] = [LocalExecutor(local), NoopExecutor(noop), DatabricksExecutor(databricks)]
    return {e.name: e for e in executors}
