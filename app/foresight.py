"""Operations behind forecasts, held batches, queue positions and customer budgets, for pages and API."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from psycopg_pool import ConnectionPool

from app.figure_cache import in_thread as _in_thread
from schema import customers, forecast, positions
from schema.customers import CustomerBudget
from schema.forecast import FileFacts, Forecast
from schema.settings import Settings


def worker_slots(settings: Settings) -> int:
    """Runs the workers take at once, as the forecast assumes (QUIRE_WORKER_CONCURRENCY or CPUs)."""
    return settings.worker_concurrency or os.cpu_count() or 1


def worker_cores(settings: Settings) -> int | None:
    """The cores local runs share, as the forecast assumes: this machine's, when the app co-hosts the
    worker (QUIRE_WORKER=on); None (not known here) when the workers run elsewhere."""
    return (os.cpu_count() or None) if settings.worker == "on" else None


async def forecast_files(pool: ConnectionPool, settings: Settings, *, agent: str, priority: int,
                         files: list[FileFacts], customer: str | None = None) -> Forecast:
    """What a batch of these files will cost and when it will be done, before anything runs."""
    return await _in_thread(pool, forecast.forecast_batch, agent=agent, priority=priority, files=files,
                            customer=customer,
                            workers=worker_slots(settings), cores=worker_cores(settings),
                            compute_rate_usd_per_hour=settings.compute_rate_usd_per_hour)


async def open_batch(pool: ConnectionPool, settings: Settings, *, agent: str, priority: int, customer: str | None,
                     files: list[FileFacts], held: bool, submitted_by: str) -> tuple[int, Forecast]:
    """Records a batch with a first forecast; its tasks are enqueued with its id (held if asked)."""
    def work(conn):
        plan = forecast.forecast_batch(conn, agent=agent, priority=priority, files=files,
                                       workers=worker_slots(settings), customer=customer,
                                       cores=worker_cores(settings),
                                       compute_rate_usd_per_hour=settings.compute_rate_usd_per_hour)
        return forecast.batch_create(conn, plan, customer=customer, held=held, submitted_by=submitted_by), plan
    return await _in_thread(pool, work)


async def settle_forecast(pool: ConnectionPool, settings: Settings, batch_id: int, *, agent: str, priority: int,
                          files: list[FileFacts], customer: str | None = None) -> Forecast:
    """The forecast over all the batch's accepted files, stored with it."""
    def work(conn):
        plan = forecast.forecast_batch(conn, agent=agent, priority=priority, files=files,
                                       workers=worker_slots(settings), cores=worker_cores(settings),
                                       compute_rate_usd_per_hour=settings.compute_rate_usd_per_hour,
                                       batch_id=batch_id, customer=customer)
        forecast.batch_set_forecast(conn, batch_id, plan)
        return plan
    return await _in_thread(pool, work)


async def drop_batch_if_empty(pool: ConnectionPool, batch_id: int) -> bool:
    """Removes an upload none of whose files became a task."""
    return await _in_thread(pool, forecast.batch_delete_if_empty, batch_id)


async def release_batch(pool: ConnectionPool, batch_id: int, *, actor: str) -> int:
    return await _in_thread(pool, forecast.batch_release, batch_id, actor=actor)


async def discard_batch(pool: ConnectionPool, batch_id: int, *, actor: str) -> int:
    """Cancels a held batch's queued documents; returns how many."""
    return await _in_thread(pool, forecast.batch_discard, batch_id, actor=actor)


@dataclass(frozen=True)
class HeldBatch:
    """A batch held for review: what it holds and its forecast, as every list of batches shows it."""

    batch_id: int
    agent: str
    customer: str | None
    priority: int
    submitted_by: str | None
    created_at: datetime
    tasks: int
    held_tasks: int
    pages: int
    forecast: dict[str, Any]


async def held_batches(pool: ConnectionPool) -> list[HeldBatch]:
    """Every batch held for review, newest first."""
    rows = await _in_thread(pool, forecast.batch_held_list)
    return [HeldBatch(batch_id=r["id"], agent=r["agent"], customer=r["customer"], priority=r["priority"],
                      submitted_by=r["submitted_by"], created_at=r["created_at"], tasks=r["tasks"],
                      held_tasks=r["held_tasks"], pages=int(r["pages"]), forecast=r["forecast"]) for r in rows]


async def batch_files(pool: ConnectionPool, batch_id: int) -> list[dict[str, Any]]:
    """A batch's files and their tasks, in upload order."""
    return await _in_thread(pool, forecast.batch_task_list, batch_id)


@dataclass(frozen=True)
class BatchOutcome:
    """A batch's forecast against what it actually took (actuals so far until it ends)."""

    batch_id: int
    held: bool
    tasks: int
    finished: int
    forecast: dict[str, Any]
    actual_tokens: int
    actual_llm_cost_usd: float
    actual_compute_cost_usd: float
    actual_seconds: float | None      # dispatch (release, or submission) to the last task's end
    discarded: bool = False           # an operator discarded it while held: its documents were cancelled

    @property
    def done(self) -> bool:
        return self.tasks > 0 and self.finished == self.tasks

    def comparison(self) -> str:
        """One line: forecast against actual cost and duration, with the differences."""
        def diff(actual: float, planned: float) -> str:
            return f" ({(actual - planned) / planned:+.0%})" if planned else ""
        f = self.forecast
        cost_f = (f["llm_cost_usd"] or 0.0) + f["compute_cost_usd"]
        cost_a = self.actual_llm_cost_usd + self.actual_compute_cost_usd
        parts = [f"cost ${cost_a:,.4f} against ${cost_f:,.4f} forecast{diff(cost_a, cost_f)}",
                 f"tokens {self.actual_tokens:,} against {f['tokens']:,}{diff(self.actual_tokens, f['tokens'])}"]
        if self.actual_seconds is not None:
            parts.append(f"duration {self.actual_seconds:,.0f} s against {f['eta_seconds']:,.0f} s"
                         f"{diff(self.actual_seconds, f['eta_seconds'])}")
        return " · ".join(parts)


def _outcome(row: dict[str, Any]) -> BatchOutcome:
    start = row["released_at"] or row["created_at"]
    end = row["last_finished_at"]
    # A held batch whose documents were all cancelled holds nothing to submit.
    return BatchOutcome(batch_id=row["id"], held=row["held"] and row["held_tasks"] > 0, tasks=row["tasks"], finished=row["finished"],
                        forecast=row["forecast"], actual_tokens=int(row["actual_tokens"]),
                        actual_llm_cost_usd=float(row["actual_llm_cost_usd"]),
                        actual_compute_cost_usd=float(row["actual_compute_cost_usd"]),
                        actual_seconds=(end - start).total_seconds() if end and row["finished"] == row["tasks"] else None,
                        discarded=row.get("discarded_at") is not None)


async def batch_outcome(pool: ConnectionPool, batch_id: int) -> BatchOutcome:
    return _outcome(await _in_thread(pool, forecast.batch_get, batch_id))


@dataclass(frozen=True)
class QueueSpot:
    """A queued task's place in line and when it should be done."""

    task_id: int
    text: str                   # "12 ahead", "about 12,400 ahead", "waiting: budget"
    ahead: int | None
    exact: bool
    waiting: str | None
    eta_seconds: float | None
    eta_low_seconds: float | None = None    # the likely range (what recent runs strayed from theirs)
    eta_high_seconds: float | None = None


async def queue_spots(pool: ConnectionPool, settings: Settings, ids: list[int]) -> dict[int, QueueSpot]:
    """Position and ETA of each enqueued task among `ids` (others are left out)."""
    def work(conn):
        where = positions.task_positions(conn, ids)
        paces = {a: forecast.agent_pace(conn, a, workers=worker_slots(settings)) for a in {p.agent for p in where.values()}}
        spots = {}
        for i, p in where.items():
            eta = _eta(p, paces[p.agent])
            low, high = paces[p.agent].rates.spread
            spots[i] = QueueSpot(i, p.describe(), p.ahead, p.exact, p.waiting, eta,
                                 None if eta is None else eta * low, None if eta is None else eta * high)
        return spots
    return await _in_thread(pool, work)


def _eta(spot: positions.Position, pace: forecast.Pace) -> float | None:
    """When a queued task should be done: none while its agent cannot run (nothing would claim
    it), and after the pause while a Retry-After holds its agent."""
    if spot.ahead is None or spot.agent_cannot_run:
        return None
    return (spot.agent_paused_seconds or 0.0) + pace.eta_seconds(spot.ahead, spot.pages, spot.scanned, spot.ocr_work)


async def budgets(pool: ConnectionPool) -> list[CustomerBudget]:
    return await _in_thread(pool, customers.customer_budget_list)


async def set_budget(pool: ConnectionPool, customer: str, budget_usd: float | Decimal | None, *,
                     actor: str) -> CustomerBudget:
    return await _in_thread(pool, customers.customer_budget_set, customer, budget_usd, actor=actor)


def eta_text(seconds: float | None, low: float | None = None, high: float | None = None) -> str:
    """An ETA as a person reads it: in how long (the likely range, where it is one), and the clock
    time (UTC)."""
    if seconds is None:
        return ""
    from app.components import format as fmt

    at = datetime.now(UTC).timestamp() + seconds
    clock = f"{datetime.fromtimestamp(at, UTC):%H:%M} UTC"
    if low is not None and high is not None and fmt.duration(low) != fmt.duration(high):
        return f"ETA {fmt.duration(low)} to {fmt.duration(high)} (about {clock})"
    return f"ETA {fmt.duration(seconds)} ({clock})"
