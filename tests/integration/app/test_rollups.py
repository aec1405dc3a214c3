"""The rollups equal a full recount: after a random mix of queue operations, with folds at random."""

from __future__ import annotations

import random
import re
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from psycopg import sql
from psycopg.rows import dict_row

from schema import db, queue, rollups, stats, stats_types
from schema.errors import QuireError
from schema.migrate import available, migrate
from schema.sql import q
from schema.stats_types import CHART_ORIGIN, TaskFilter
from tests.factories import make_agent, make_task

# Direct aggregates over tasks and task_attempts, written independently of the rollups' view.
DIRECT_TOTALS = """
SELECT t.status::text AS status, count(*) AS tasks, coalesce(sum(s.attempts), 0) AS attempts,
       count(*) FILTER (WHERE s.usage > 0) AS with_usage, coalesce(sum(s.input_tokens), 0) AS input_tokens,
       coalesce(sum(s.output_tokens), 0) AS output_tokens, coalesce(sum(s.llm), 0) AS llm_cost_usd,
       coalesce(sum(s.compute), 0) AS compute_cost_usd, coalesce(sum(s.unpriced), 0) AS unpriced,
       coalesce(sum(s.pending), 0) AS compute_pending,
       avg(t.confidence::float8) FILTER (WHERE t.status = 'completed') AS avg_confidence
FROM tasks t
LEFT JOIN (
    SELECT task_id, count(*) AS attempts, count(*) FILTER (WHERE usage_recorded_at IS NOT NULL) AS usage,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           sum(llm_cost_usd) AS llm, sum(compute_cost_usd) AS compute,
           count(*) FILTER (WHERE coalesce(input_tokens, 0) + coalesce(output_tokens, 0) > 0
                              AND llm_cost_usd IS NULL) AS unpriced,
           count(*) FILTER (WHERE finished_at IS NOT NULL AND job_run_id IS NOT NULL
                              AND compute_cost_usd IS NULL AND compute_state IS DISTINCT FROM 'unbilled'
                              AND NOT compute_unpriced) AS pending
    FROM task_attempts GROUP BY task_id
) s ON s.task_id = t.id
WHERE {task_filter}
GROUP BY 1
"""
DIRECT_BINS = """
WITH per_task AS (
    SELECT t.status, t.confidence, extract(epoch FROM t.finished_at - t.created_at)::float8 AS latency,
           (SELECT sum(a.llm_cost_usd) FROM task_attempts a WHERE a.task_id = t.id) AS llm,
           (SELECT sum(a.compute_cost_usd) FROM task_attempts a WHERE a.task_id = t.id) AS compute
    FROM tasks t WHERE {task_filter}
)
SELECT m.metric, m.bin, count(*) AS n
FROM per_task p
CROSS JOIN LATERAL (VALUES
    ('l', CASE WHEN p.status = 'completed' THEN quire_log_bin(p.latency, 0.1) END),
    ('c', CASE WHEN p.status = 'completed' AND p.confidence IS NOT NULL
               THEN least(width_bucket(round(p.confidence::numeric, 4), 0, 1, 10), 10)::smallint END),
    ('a', quire_log_bin(p.llm::float8, 1e-6)),
    ('m', quire_log_bin(p.compute::float8, 1e-6)),
    ('s', CASE WHEN p.llm IS NOT NULL OR p.compute IS NOT NULL
               THEN quire_log_bin((coalesce(p.llm, 0) + coalesce(p.compute, 0))::float8, 1e-6) END)
) m (metric, bin)
WHERE m.bin IS NOT NULL
GROUP BY 1, 2
"""
DIRECT_THROUGHPUT = """
SELECT 'submitted' AS series, date_bin(%(bucket)s::interval, t.created_at, %(origin)s::timestamptz) AS bucket,
       count(*) AS n
FROM tasks t WHERE {task_filter} GROUP BY 1, 2
UNION ALL
SELECT t.status::text, date_bin(%(bucket)s::interval, t.finished_at, %(origin)s::timestamptz), count(*)
FROM tasks t WHERE {task_filter} AND t.finished_at IS NOT NULL GROUP BY 1, 2
"""


def _direct(conn, query: str, flt: TaskFilter, **extra) -> list[dict]:
    with conn.cursor(row_factory=dict_row) as cur:
        where, params = stats.task_filter({**flt.params(), **extra})
        cur.execute(sql.SQL(query).format(task_filter=where), params)
        return cur.fetchall()


def assert_rollups_exact(conn, flt: TaskFilter) -> None:
    """Every rollup figure for `flt` equals the same figure counted over tasks and attempts."""
    summary = stats.stats_summary_filtered(conn, flt)
    direct = {r["status"]: r for r in _direct(conn, DIRECT_TOTALS, flt)}
    assert summary.counts == {s: (direct[s]["tasks"] if s in direct else 0) for s in stats_types.STATUSES}, flt
    for field, key in [("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                       ("llm_cost_usd", "llm_cost_usd"), ("compute_cost_usd", "compute_cost_usd"),
                       ("attempts", "attempts"), ("tasks_with_usage", "with_usage"),
                       ("unpriced_attempts", "unpriced"), ("compute_pending_attempts", "compute_pending")]:
        expected = sum((r[key] for r in direct.values()), Decimal(0) if "cost" in key else 0)
        assert getattr(summary, field) == expected, (field, flt)
    done = direct.get("completed")
    if done is None or done["avg_confidence"] is None:
        assert summary.avg_confidence is None
    else:
        assert summary.avg_confidence == pytest.approx(done["avg_confidence"], abs=1e-6)
    bins = rollups.bins(conn, flt.params())
    expected_bins: dict[str, dict[int, int]] = {m: {} for m in bins}
    for r in _direct(conn, DIRECT_BINS, flt):
        expected_bins[r["metric"]][r["bin"]] = r["n"]
    assert bins == expected_bins, flt
    charts = stats.stats_charts_filtered(conn, flt)
    assert charts.cost_by_agent == _direct(conn, q("stats_cost_by_agent"), flt), flt
    assert charts.cost_by_customer == _direct(conn, q("stats_cost_by_customer"), flt), flt
    by_agent = {}
    for r in rollups.totals(conn, flt.params()):
        by_agent[r["agent"]] = by_agent.get(r["agent"], 0) + r["tasks"]
    assert sum(by_agent.values()) == summary.total
    # The chart's origin is a Monday: its 7-day buckets are the rollups' weeks; another origin's are not.
    for bucket, origin in ((timedelta(hours=1), CHART_ORIGIN), (timedelta(days=1), CHART_ORIGIN),
                           (timedelta(days=7), CHART_ORIGIN), (timedelta(minutes=15), CHART_ORIGIN),
                           (timedelta(days=7), datetime(2000, 1, 1, tzinfo=UTC))):
        got = {(r["series"], r["bucket"]): r["n"] for r in
               rollups.throughput(conn, flt.params(), bucket=bucket, origin=origin,
                                  start=rollups.first_created(conn, flt.params()))}
        want = {(r["series"], r["bucket"]): r["n"] for r in
                _direct(conn, DIRECT_THROUGHPUT, flt, bucket=bucket, origin=origin)}
        assert got == want, (bucket, flt)


def _filters(start: datetime) -> list[TaskFilter]:
    odd = start + timedelta(days=9, hours=5, minutes=17)
    return [
        TaskFilter(), TaskFilter(agents=("alpha",)), TaskFilter(customers=("acme",)),
        TaskFilter(customers=("acme", "globex"), statuses=("completed", "failed")),
        TaskFilter(statuses=("failed",)), TaskFilter(statuses=("enqueued", "processing")),
        TaskFilter(date_from=odd), TaskFilter(date_to=odd),
        TaskFilter(date_from=odd, date_to=odd + timedelta(days=33, hours=7, minutes=3)),
        TaskFilter(date_from=odd, date_to=odd + timedelta(minutes=50), agents=("beta",)),
        TaskFilter(date_from=start + timedelta(days=31), date_to=start + timedelta(days=62),
                   customers=("globex",)),
        # A customer's histograms have months and weeks: these cut both, at each end.
        TaskFilter(date_from=odd, date_to=odd + timedelta(days=75, hours=2), customers=("acme",)),
        TaskFilter(date_from=odd, customers=("acme", "initech"), statuses=("completed",)),
    ]


class Mix:
    """Random queue operations on a moving clock, the way workers and operators cause them."""

    def __init__(self, conn, rng: random.Random, start: datetime) -> None:
        self.conn, self.rng, self.clock = conn, rng, start
        self.open_attempts: list[int] = []

    def step(self) -> None:
        conn, rng = self.conn, self.rng
        self.clock += timedelta(minutes=rng.choice([1, 7, 45, 300, 1500]))
        action = rng.choices(["enqueue", "claim", "complete", "fail", "compute", "cancel", "retry", "sweep",
                              "hand_back", "late"], weights=[30, 20, 20, 10, 6, 4, 4, 2, 2, 2])[0]
        agent = rng.choice(["alpha", "beta"])
        try:
            if action == "enqueue":
                for _ in range(rng.randint(1, 4)):
                    make_task(conn, agent, customer=rng.choice(["acme", "globex", "initech", None]),
                              now=self.clock, max_attempts=rng.choice([1, 2, 3]))
            elif action == "claim":
                claims = queue.claim(conn, agent=agent, worker_id="w", limit=rng.randint(1, 5), now=self.clock)
                self.open_attempts += [c.attempt_id for c in claims]
                for c in claims:
                    if rng.random() < 0.3:
                        queue.record_executor_info(conn, c.attempt_id, job_run_id=str(rng.randint(1, 10**6)))
            elif action in ("complete", "fail", "late") and self.open_attempts:
                attempt = self.open_attempts.pop(rng.randrange(len(self.open_attempts)))
                if action == "late":
                    self.open_attempts.append(attempt)  # reported again later: a replay or a late report
                usage = {} if rng.random() < 0.2 else {
                    "input_tokens": rng.randint(0, 40_000), "output_tokens": rng.randint(0, 4_000)}
                if usage and rng.random() < 0.8:
                    usage["llm_cost_usd"] = round(rng.uniform(0, 0.5), 6)
                if action == "fail":
                    payload = {"status": "failed", "error": "boom", "retryable": rng.random() < 0.6, **usage}
                else:
                    payload = {"status": "completed", "result": {"fields": {}},
                               "confidence": round(rng.random(), 3), **usage}
                queue.apply_callback(conn, attempt, payload, now=self.clock)
            elif action == "compute" and self.open_attempts:
                queue.record_compute(conn, rng.choice(self.open_attempts), compute_seconds=3.0,
                                     compute_cost_usd=round(rng.uniform(0, 0.01), 6))
            elif action == "cancel":
                ids = [t.id for t in queue_tasks(conn, ("enqueued", "processing"))]
                if ids:
                    queue.cancel(conn, rng.choice(ids), actor="op")
            elif action == "retry":
                ids = [t.id for t in queue_tasks(conn, ("failed", "cancelled", "completed"))]
                if ids:
                    queue.retry(conn, rng.choice(ids), actor="op")
            elif action == "sweep":
                queue.sweep(conn, now=self.clock + timedelta(hours=2))
            elif action == "hand_back" and self.open_attempts:
                queue.hand_back(conn, self.open_attempts.pop())
        except QuireError:
            conn.rollback()  # a refused transition (e.g. a stale attempt) is part of the mix


def queue_tasks(conn, statuses: tuple[str, ...]):
    return stats.task_list_after(conn, TaskFilter(statuses=statuses), before=None, limit=50)


def test_rollups_equal_a_full_recount_after_a_random_mix(conn):
    make_agent(conn, "alpha")
    make_agent(conn, "beta")
    rng = random.Random(20261130)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=120)
    mix = Mix(conn, rng, start)
    checked_pending = checked_folded = 0
    for round_no in range(8):
        for _ in range(60):
            mix.step()
            if rng.random() < 0.05:
                rollups.rollup_fold(conn)
        # Half the checks read with marks still unfolded: the corrections must make them exact.
        if round_no % 2 == 0:
            rollups.rollup_fold(conn)
            assert rollups.rollup_pending_count(conn) == 0
            checked_folded += 1
        else:
            assert rollups.rollup_pending_count(conn) > 0
            checked_pending += 1
        for flt in _filters(start):
            assert_rollups_exact(conn, flt)
    assert checked_pending and checked_folded
    assert stats.stats_summary_filtered(conn, TaskFilter()).total > 100


def test_a_database_folded_before_customer_weeks_and_scope_partitions_reads_exact_figures(pg_server_dsn):
    # Migration 36 adds a customer's week bins, built from what was folded; the marks still waiting
    # fold into them afterwards like any other. Migration 37 moves the bins into a partition per scope.
    name = "quire_rollup_customer_weeks"
    with db.connect(pg_server_dsn) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with db.connect(db.with_database(pg_server_dsn, name)) as conn:
            migrate(conn, through=35)
            make_agent(conn, "alpha")
            make_agent(conn, "beta")
            rng = random.Random(20261206)
            start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=120)
            mix = Mix(conn, rng, start)
            for _ in range(300):
                mix.step()
                if rng.random() < 0.05:
                    rollups.rollup_fold(conn)
            rollups.rollup_fold(conn)
            for _ in range(40):
                mix.step()
            assert rollups.rollup_pending_count(conn) > 0
            assert migrate(conn) == [m.version for m in available() if m.version > 35]
            weeks = conn.execute("SELECT count(*) AS n FROM task_rollup_bins WHERE grain = 'w'").fetchone()["n"]
            assert weeks > 0
            partitions = {r["part"]: r["n"] for r in conn.execute(
                "SELECT tableoid::regclass::text AS part, count(*) AS n FROM task_rollup_bins GROUP BY 1")}
            assert set(partitions) == {"task_rollup_bins_all", "task_rollup_bins_per_customer"}, partitions
            params = rollups.filter_params({**TaskFilter().params(), "with_pending": False}, rollups.BINS_GRAINS)
            query = rollups.composed("rollup_bins_by_metric", params).as_string(conn)
            plan = " ".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + query, params))
            assert "task_rollup_bins_all" in plan and "task_rollup_bins_per_customer" not in plan, plan
            for flt in _filters(start):
                assert_rollups_exact(conn, flt)
            rollups.rollup_fold(conn)
            for flt in _filters(start):
                assert_rollups_exact(conn, flt)
    finally:
        with db.connect(pg_server_dsn) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_folds_racing_writers_stay_exact(db_dsn, connect):
    """Writers on their own connections while folds run on another: nothing counted twice or lost."""
    with connect() as setup:
        make_agent(setup, "alpha")
        make_agent(setup, "beta")
    start = datetime.now(UTC) - timedelta(days=40)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(seed: int) -> None:
        try:
            with connect() as conn:
                mix = Mix(conn, random.Random(seed), start)
                for _ in range(250):
                    mix.step()
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    def folder() -> None:
        with connect() as conn:
            while not stop.is_set():
                rollups.rollup_fold(conn)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in (1, 2, 3)]
    fold_thread = threading.Thread(target=folder)
    fold_thread.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    stop.set()
    fold_thread.join(timeout=60)
    assert not errors, errors
    with connect() as conn:
        for flt in _filters(start):
            assert_rollups_exact(conn, flt)
        rollups.rollup_fold(conn)
        assert rollups.rollup_pending_count(conn) == 0
        for flt in _filters(start):
            assert_rollups_exact(conn, flt)


def test_a_date_range_splits_into_whole_buckets_and_raw_ends():
    utc = UTC
    pieces = rollups.plan(datetime(2024, 3, 5, 10, 30, tzinfo=utc), datetime(2024, 7, 2, 3, 15, tzinfo=utc),
                          ("m", "d", "h"))
    assert pieces["m"] == [(datetime(2024, 4, 1, tzinfo=utc), datetime(2024, 7, 1, tzinfo=utc))]
    assert pieces["d"] == [(datetime(2024, 3, 6, tzinfo=utc), datetime(2024, 4, 1, tzinfo=utc)),
                           (datetime(2024, 7, 1, tzinfo=utc), datetime(2024, 7, 2, tzinfo=utc))]
    assert pieces["r"] == [(datetime(2024, 3, 5, 10, 30, tzinfo=utc), datetime(2024, 3, 5, 11, tzinfo=utc)),
                           (datetime(2024, 7, 2, 3, tzinfo=utc), datetime(2024, 7, 2, 3, 15, tzinfo=utc))]
    everything = rollups.plan(None, None, ("m", "d"))
    assert everything["m"] == [(rollups.NEVER_BEFORE, rollups.NEVER_AFTER)] and everything["r"] == []


def test_a_read_plans_only_the_ranges_and_branches_it_has_and_is_never_prepared(conn):
    make_agent(conn, "alpha")
    make_task(conn, "alpha", customer="acme")
    rollups.rollup_fold(conn)

    def ranges_in(flt: TaskFilter, *, pending: bool) -> tuple[set[str], set[str], str]:
        params = rollups.filter_params({**flt.params(), "with_pending": pending}, rollups.TOTALS_GRAINS)
        text = rollups.composed("rollup_totals_by_status_and_agent", params).as_string(conn)
        planned = rollups.plan(flt.date_from, flt.date_to, rollups.TOTALS_GRAINS[True])
        want = {f"{kind}{i}" for kind, spans in planned.items() for i in range(1, len(spans) + 1)}
        return set(re.findall(r"%\((\w\d)_lo\)s", text)), want, text

    got, want, text = ranges_in(TaskFilter(), pending=False)
    assert got == want == {"a1"}  # every task: the all-time bucket alone, nothing raw
    # No raw end and no mark: neither the tasks nor the folded states are named, so not planned.
    assert "task_rollup_contrib" not in text and "rollup_task_state" not in text
    odd = datetime(2026, 3, 5, 10, 30, tzinfo=UTC)
    got, want, text = ranges_in(TaskFilter(date_from=odd, date_to=odd + timedelta(days=40, minutes=20)),
                                pending=True)
    # Hours to midnight, days to Monday, five weeks, a day, hours, and a raw part at each end.
    assert got == want == {"h1", "d1", "w1", "d2", "h2", "r1", "r2"}, got
    assert text.count("task_rollup_contrib") == 2 and text.count("rollup_task_state") == 1
    for _ in range(8):  # psycopg prepares a statement on its fifth run
        assert stats.stats_summary_filtered(conn, TaskFilter(customers=("acme",))).total == 1
    prepared = [r["statement"] for r in conn.execute("SELECT statement FROM pg_prepared_statements")]
    assert prepared and not [s for s in prepared if "task_rollups" in s]


def test_percentiles_come_from_the_bins():
    # 10 tasks at 1 s, 10 at 100 s: the median lies in the first group's bin, p90 in the second's.
    one, hundred = 11, 31  # quire_log_bin(1, 0.1) and quire_log_bin(100, 0.1)
    bins = {one: 10, hundred: 10}
    lo, hi = rollups.bin_range("l", one)
    assert lo <= 1.0 < hi and lo <= rollups.percentile("l", bins, 0.5) <= hi
    lo, hi = rollups.bin_range("l", hundred)
    assert lo <= 100.0 < hi and lo <= rollups.percentile("l", bins, 0.9) <= hi
    assert rollups.percentile("l", {}, 0.5) is None


def test_a_read_only_session_reads_exact_figures_without_folding(conn, connect):
    make_agent(conn, "alpha")
    for _ in range(3):
        make_task(conn, "alpha", customer="acme")
    reader = connect()
    reader.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    assert rollups.rollup_pending_count(conn) == 3
    assert stats.stats_summary_filtered(reader, TaskFilter()).counts["enqueued"] == 3


def test_the_worker_folder_folds_what_was_marked(db_dsn, conn):
    from schema import db
    from worker.folder import RollupFolder

    make_agent(conn, "alpha")
    make_task(conn, "alpha")
    pool = db.make_pool(db_dsn, min_size=1, max_size=1)
    try:
        folder = RollupFolder(pool, "w")
        assert folder.run_once() is None and folder.folded == 1  # nothing left: it rests its interval
    finally:
        pool.close()
    assert rollups.rollup_pending_count(conn) == 0
    assert stats.stats_summary_filtered(conn, TaskFilter()).counts["enqueued"] == 1


def test_the_folder_waits_while_a_drain_is_under_way_and_reads_stay_exact(db_dsn, conn):
    # A fold in the middle of a drain folds the waiting tasks as enqueued and again once settled:
    # while tasks run and others wait, it waits up to drain_seconds after the last fold.
    from schema import db
    from worker.folder import FolderConfig, RollupFolder

    make_agent(conn, "alpha")
    for _ in range(3):
        make_task(conn, "alpha")
    pool = db.make_pool(db_dsn, min_size=1, max_size=1)
    try:
        folder = RollupFolder(pool, "w", FolderConfig(drain_seconds=3600))
        folder.run_once()  # nothing runs: it folds at once
        assert folder.folded == 3 and folder.deferred == 0
        queue.claim(conn, agent="alpha", worker_id="w", limit=1)  # one runs, two wait: a drain
        assert folder.run_once() is None and folder.deferred == 1
        assert rollups.rollup_pending_count(conn) > 0
        counts = stats.stats_summary_filtered(conn, TaskFilter()).counts  # exact meanwhile
        assert (counts["processing"], counts["enqueued"]) == (1, 2)
        # Past the wait it folds even during a drain.
        RollupFolder(pool, "w", FolderConfig(drain_seconds=0)).run_once()
        assert rollups.rollup_pending_count(conn) == 0
        # A backlog nobody runs (the tasks held, say) is no drain: folded at once.
        conn.execute("UPDATE tasks SET held = true WHERE status = 'enqueued'")
        make_task(conn, "alpha")
        conn.execute("UPDATE tasks SET held = true WHERE status = 'enqueued'")
        deferred = folder.deferred
        folder.run_once()
        assert folder.deferred == deferred and rollups.rollup_pending_count(conn) == 0
    finally:
        pool.close()
