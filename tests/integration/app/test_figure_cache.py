"""The pages' shared figures: advanced by the folds' log, they equal a fresh read after a random mix;
pages asking for the same thing within a second cost one read."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from datetime import UTC, datetime, timedelta

from app.figure_cache import FigureCache
from schema import db, figures, rollups, stats, stats_types
from schema.stats_types import TaskFilter
from tests.factories import make_agent, make_task
from tests.integration.app.test_rollups import Mix, assert_rollups_exact


def _filters(start: datetime) -> list[TaskFilter]:
    on_day = start.replace(hour=0, minute=0, second=0) + timedelta(days=9)
    on_month = (start.replace(day=1, hour=0, minute=0, second=0) + timedelta(days=40)).replace(day=1)
    on_hour = on_day + timedelta(hours=7)
    return [
        TaskFilter(), TaskFilter(agents=("alpha",)), TaskFilter(customers=("acme",)),
        TaskFilter(statuses=("failed",)), TaskFilter(needs_review=True),
        # Whole days (whole months with a customer): advanced by the log.
        TaskFilter(date_from=on_day), TaskFilter(date_from=on_day, date_to=on_day + timedelta(days=20),
                                                 statuses=("completed",)),
        TaskFilter(date_from=on_month, customers=("globex", "acme")),
        # Partial buckets read from the tasks (as of now, not of a fold): read again instead.
        TaskFilter(date_from=on_hour, date_to=on_hour + timedelta(days=20), customers=("globex", "acme")),
        TaskFilter(date_from=on_hour + timedelta(minutes=17)),
    ]


def _same_summary(a: stats_types.Summary, b: stats_types.Summary) -> bool:
    return dataclasses.replace(a, last_activity_at=None) == dataclasses.replace(b, last_activity_at=None)


def test_advanced_figures_equal_a_fresh_read_after_a_random_mix(db_dsn, conn):
    make_agent(conn, "alpha")
    make_agent(conn, "beta")
    rng = random.Random(20261201)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=90)
    mix = Mix(conn, rng, start)
    for _ in range(80):
        mix.step()
    rollups.rollup_fold(conn)
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)

    async def scenario() -> None:
        cache = FigureCache(pool, interval=0.0)  # every ask syncs: each check sees the newest figures
        flts = _filters(start)
        for flt in flts:
            await cache.summary(flt)
        advanced = 0
        for round_no in range(6):
            for _ in range(50):
                mix.step()
                if rng.random() < 0.1:
                    rollups.rollup_fold(conn)
            if round_no % 2:
                rollups.rollup_fold(conn)  # half the checks with marks still pending
            for flt in flts:
                (summary, fresh), (charts, _) = await cache.summary(flt), await cache.charts(flt)
                assert fresh
                assert _same_summary(summary, stats.stats_summary_filtered(conn, flt)), (round_no, flt)
                assert charts == stats.stats_charts_filtered(conn, flt), (round_no, flt)
            advanced += sum(1 for f in flts if f in cache._held and cache._held[f].fig.live)
        assert advanced, "no filter was advanced by the log"
        assert [f for f in flts if f.date_from and f in cache._held and cache._held[f].fig.live], \
            "no filter with dates was advanced by the log"
        # Filters were advanced rather than read at each check (the mix also moves their first tasks,
        # which makes them read again).
        assert cache.reads["figures"] < len(flts) + 6 * len(flts), cache.reads

    try:
        asyncio.run(scenario())
    finally:
        pool.close()
    for flt in _filters(start):
        assert_rollups_exact(conn, flt)


def test_pages_asking_within_a_second_share_one_read(db_dsn, conn):
    make_agent(conn, "alpha")
    for _ in range(5):
        make_task(conn, "alpha", customer="acme")
    pool = db.make_pool(db_dsn, min_size=1, max_size=4)

    async def scenario() -> None:
        cache = FigureCache(pool, interval=60.0)
        flt = TaskFilter(agents=("alpha",))
        got = await asyncio.gather(*(cache.summary(flt, since=0.0) for _ in range(10)))
        assert {s.total for s, _ in got} == {5} and all(current for _, current in got)
        assert cache.reads["figures"] == 1 and cache.reads["changes"] <= 1
        calls = []

        async def read():
            calls.append(1)
            return len(calls)
        asked = time.monotonic()
        assert await asyncio.gather(*(cache.shared(("x",), read, since=asked) for _ in range(10))) == [(1, True)] * 10
        # Asked about events after that read, within the interval: the same value, said not to be current.
        assert await cache.shared(("x",), read) == (1, False)
        cache.forget()
        assert await cache.shared(("x",), read) == (2, True)

    try:
        asyncio.run(scenario())
    finally:
        pool.close()


def test_a_pruned_log_makes_held_figures_read_again(db_dsn, conn):
    make_agent(conn, "alpha")
    make_task(conn, "alpha")
    rollups.rollup_fold(conn)
    fig = figures.figures_read(conn, TaskFilter())
    make_task(conn, "alpha")
    rollups.rollup_fold(conn)
    changes = figures.changes_read(conn, fig.fold_id)
    assert changes.last_fold > fig.fold_id
    # As the fold does past 15 minutes: the log up to the last fold is gone.
    conn.execute("UPDATE rollup_log_horizon SET pruned_through = %s", [changes.last_fold])
    assert not figures.advance(fig, figures.changes_read(conn, fig.fold_id))


def test_the_review_threshold_is_the_same_in_sql_and_python(conn):
    for status, confidence in [("completed", 0.42), ("completed", 0.6), ("completed", 0.59), ("completed", None),
                               ("failed", 0.1), ("completed", 0.95)]:
        row = conn.execute("SELECT quire_needs_review(%s::task_status, %s::real) AS r", [status, confidence]).fetchone()
        assert row["r"] == stats_types.needs_review(status, confidence), (status, confidence)


def test_the_total_is_an_estimate_said_to_be_one_only_where_exact_would_be_slow(conn, connect, monkeypatch):
    make_agent(conn, "alpha")
    for _ in range(3):
        make_task(conn, "alpha", customer="acme")
    assert stats.task_count(conn, TaskFilter(customers=("acme",))) == stats.TaskCount(3, exact=True)
    for _ in range(2):
        make_task(conn, "alpha", customer="acme")
    reader = connect()
    reader.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    # More marks wait than a read adds by itself (a bulk load being folded): an estimate, labelled.
    monkeypatch.setattr(rollups, "PENDING_EXACT_MAX", 2)
    count = stats.task_count(reader, TaskFilter(customers=("acme",)))
    assert not count.exact and count.n >= 0
    # Once the marks are folded, the total is exact again.
    rollups.rollup_fold(conn)
    assert stats.task_count(reader, TaskFilter(customers=("acme",))) == stats.TaskCount(5, exact=True)


def test_an_action_shows_in_the_next_ask_without_reading_the_figures_again(db_dsn, conn):
    make_agent(conn, "alpha")
    start = datetime.now(UTC) - timedelta(days=30)
    for day in range(3):
        make_task(conn, "alpha", now=start + timedelta(days=day))
    rollups.rollup_fold(conn)
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)

    async def scenario() -> None:
        cache = FigureCache(pool, interval=60.0)  # nothing is due by time in this test
        summary, current = await cache.summary(TaskFilter())
        assert summary.counts["enqueued"] == 3 and current
        make_task(conn, "alpha")
        summary, current = await cache.summary(TaskFilter())
        assert summary.counts["enqueued"] == 3 and not current  # within the interval: shared, and said so
        cache.forget()
        summary, current = await cache.summary(TaskFilter())
        assert summary.counts["enqueued"] == 4 and current  # from the pending marks
        assert cache.reads["figures"] == 1

    try:
        asyncio.run(scenario())
    finally:
        pool.close()


def test_pages_read_as_of_the_last_fold_and_api_clients_share_one_exact_read(db_dsn, conn):
    make_agent(conn, "alpha")
    start = datetime.now(UTC) - timedelta(days=30)  # a chart of days: figures advanced by the log
    make_task(conn, "alpha", now=start)
    rollups.rollup_fold(conn)
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)

    async def scenario() -> None:
        cache = FigureCache(pool, interval=60.0)  # nothing is due by time in this test
        make_task(conn, "alpha", now=start + timedelta(days=1))  # a mark not folded yet
        page, current = await cache.summary(TaskFilter(), exact=False)
        # A page: as of the last fold, and said not to be current while a mark waits.
        assert page.counts["enqueued"] == 1 and not current
        api, current = await cache.summary(TaskFilter(), exact=True)
        assert api.counts["enqueued"] == 2 and current  # the unfolded mark added, in one more read
        for _ in range(3):  # every other API client within the second shares that read
            again, _ = await cache.summary(TaskFilter(), exact=True)
            assert again.counts["enqueued"] == 2
        assert cache.reads["figures"] == 1 and cache.reads["changes"] == 2
        rollups.rollup_fold(conn)
        cache.forget()
        page, current = await cache.summary(TaskFilter(), exact=False)
        assert page.counts["enqueued"] == 2 and current  # folded: nothing waits, the page is current

    try:
        asyncio.run(scenario())
    finally:
        pool.close()
