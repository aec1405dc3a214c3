"""A worker's first start: runs that trace wait for MLflow's tables, and trace nowhere if they fail."""

from __future__ import annotations

import asyncio

import pytest

from worker.daemon import WorkerDaemon
from worker.executors import LocalConfig, build_executors


class Claims:
    """What the daemon asks of the claimer here: which executors it holds back."""

    def __init__(self) -> None:
        self.held: set[str] = set()

    def hold_back(self, executors) -> None:
        self.held = set(executors)

    def release(self) -> None:
        self.held = set()


class Wake:
    def __init__(self) -> None:
        self.woken = 0

    def set(self) -> None:
        self.woken += 1


@pytest.mark.parametrize("outcome", [True, False, RuntimeError("MLflow failed")])
def test_runs_that_trace_wait_for_the_first_set_up_then_trace_or_not(tmp_path, outcome):
    async def scenario():
        executors = build_executors(LocalConfig(runs_dir=tmp_path, tracking_uri="postgresql+psycopg://h/quire_mlflow"))
        claims, wake = Claims(), Wake()
        setup = asyncio.get_running_loop().create_future()
        tracing = WorkerDaemon._hold_tracing_runs(claims, executors)
        assert claims.held == {"local"}  # the noop and Databricks executors' work goes on
        WorkerDaemon._release_tracing_runs(claims, tracing, setup, wake)
        assert claims.held == {"local"} and wake.woken == 0  # until the set-up ends
        if isinstance(outcome, Exception):
            setup.set_exception(outcome)
        else:
            setup.set_result(outcome)
        await asyncio.sleep(0)
        assert claims.held == set() and wake.woken == 1
        return executors["local"].traces

    assert asyncio.run(scenario()) is (outcome is True)


def test_nothing_is_held_when_no_run_traces(tmp_path):
    async def scenario():
        executors = build_executors(LocalConfig(runs_dir=tmp_path, tracking_uri=None))
        claims = Claims()
        assert WorkerDaemon._hold_tracing_runs(claims, executors) == []
        return claims.held

    assert asyncio.run(scenario()) == set()
