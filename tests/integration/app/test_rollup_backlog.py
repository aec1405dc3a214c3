"""No read waits for a fold: a backlog is folded in bounded steps while reads answer from what is
folded, say they are catching up, and equal a full recount once the steps are done."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

from app import services
from app.figure_cache import FigureCache
from schema import db, rollups, stats
from schema.stats_types import TaskFilter
from tests.factories import make_agent, make_task
from tests.integration.app.test_rollups import Mix, _filters, assert_rollups_exact
from worker.folder import FolderConfig, RollupFolder


def _steps_until_folded(pool, step_marks: int) -> int:
    """Folds with the worker's folder, one bounded step at a time, until nothing waits (a step's
    worth goes on at once; the rest at the next interval, here at once)."""
    folder = RollupFolder(pool, "w", FolderConfig(step_marks=step_marks, drain_seconds=0))  # tasks run here
    for steps in range(1, 10_000):
        rest = folder.run_once()
        with pool.connection() as conn:
            waiting = rollups.rollup_pending_count(conn)
        if rest is None and waiting == 0:  # nothing left: the folder rests its interval
            return steps
        assert rest is not None or waiting < step_marks, "a step's worth waits, and the folder rested"
    raise AssertionError("the folder never caught up")


def test_a_read_during_a_backlog_answers_from_what_is_folded_and_says_so(db_dsn, conn, monkeypatch):
    make_agent(conn, "alpha")
    for _ in range(4):
        make_task(conn, "alpha", customer="acme")
    rollups.rollup_fold(conn)
    monkeypatch.setattr(rollups, "PENDING_EXACT_MAX", 10)
    for _ in range(30):  # a bulk load: more marks than a read adds by itself
        make_task(conn, "alpha", customer="acme")
    waiting = rollups.rollup_pending_count(conn)
    summary = stats.stats_summary_filtered(conn, TaskFilter())
    # The read answered from the folded rows and said so; it folded nothing.
    assert summary.catching_up and summary.backlog >= 11 and summary.as_of is not None
    assert summary.counts["enqueued"] == 4
    assert rollups.rollup_pending_count(conn) == waiting
    count = stats.task_count(conn, TaskFilter(customers=("acme",)))
    assert not count.exact
    note = services.catching_up_note(summary)
    assert note is not None and "Catching up" in note
    charts = stats.stats_charts_filtered(conn, TaskFilter())
    assert charts.catching_up

    pool = db.make_pool(db_dsn, min_size=1, max_size=2)
    try:
        assert _steps_until_folded(pool, step_marks=7) > 3  # bounded steps, not one fold of everything
    finally:
        pool.close()
    assert rollups.rollup_pending_count(conn) == 0
    summary = stats.stats_summary_filtered(conn, TaskFilter())
    assert not summary.catching_up and summary.counts["enqueued"] == 34
    assert services.catching_up_note(summary) is None
    assert stats.task_count(conn, TaskFilter(customers=("acme",))) == stats.TaskCount(34, exact=True)


def test_a_small_backlog_is_still_counted_exactly_by_the_read(conn):
    make_agent(conn, "alpha")
    for _ in range(3):
        make_task(conn, "alpha")
    summary = stats.stats_summary_filtered(conn, TaskFilter())
    assert not summary.catching_up and summary.counts["enqueued"] == 3
    assert rollups.rollup_pending_count(conn) == 3  # counted from the marks, not folded by the read


def test_figures_folded_in_bounded_steps_equal_a_full_recount_under_every_filter(db_dsn, conn):
    make_agent(conn, "alpha")
    make_agent(conn, "beta")
    rng = random.Random(20261202)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=100)
    mix = Mix(conn, rng, start)
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)
    try:
        for _ in range(4):
            for _ in range(70):
                mix.step()
                if rng.random() < 0.1:
                    rollups.rollup_fold(conn, max_marks=rng.randint(1, 9))  # a step now and then
            _steps_until_folded(pool, step_marks=rng.randint(2, 15))
            assert rollups.rollup_pending_count(conn) == 0
            for flt in _filters(start):
                assert_rollups_exact(conn, flt)
    finally:
        pool.close()


def test_open_pages_see_catching_up_then_the_exact_figures(db_dsn, conn, monkeypatch):
    make_agent(conn, "alpha")
    make_task(conn, "alpha")
    rollups.rollup_fold(conn)
    monkeypatch.setattr(rollups, "PENDING_EXACT_MAX", 5)
    for _ in range(12):
        make_task(conn, "alpha")
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)

    async def scenario() -> None:
        cache = FigureCache(pool, interval=0.0)
        summary, _ = await cache.summary(TaskFilter())
        assert summary.catching_up and summary.counts["enqueued"] == 1
        await asyncio.to_thread(_steps_until_folded, pool, 4)
        summary, _ = await cache.summary(TaskFilter())
        assert not summary.catching_up and summary.counts["enqueued"] == 13

    try:
        asyncio.run(scenario())
    finally:
        pool.close()
