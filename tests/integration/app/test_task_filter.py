"""The dashboard filters over tasks (schema.stats.task_filter): each selects what a person asked
for, and the common ones are answered from an index, not by reading the row of every newer task."""

from __future__ import annotations

import asyncio
import itertools
import re
from datetime import UTC, datetime, timedelta

import pytest
from psycopg import sql

from app.figure_cache import FigureCache
from schema import db, rollups, stats
from schema.stats_types import REVIEW_CONFIDENCE, TaskFilter

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OLD = NOW - timedelta(days=30)
BIG = 3000  # the busy agent's newest tasks, which every walk from the newest would pass


@pytest.fixture
def tasks(conn):
    """A mix of agents, customers, outcomes, held and reviewable tasks; the busy agent's are newest."""
    conn.execute("INSERT INTO agents (name) VALUES ('busy'), ('small'), ('other')")
    conn.execute("""
        INSERT INTO tasks (agent, customer, document_uri, estimated_tokens, status, held, confidence,
                           created_at, finished_at)
        SELECT (ARRAY['small', 'other'])[1 + g %% 2], (ARRAY['acme', 'globex', NULL])[1 + g %% 3],
               '/mix/' || g, 1000,
               (ARRAY['enqueued', 'completed', 'failed', 'cancelled', 'processing', 'completed'])[1 + g %% 6]::task_status,
               g %% 6 = 0 AND g %% 4 = 0,
               CASE WHEN g %% 6 IN (1, 5) THEN (g %% 10) / 10.0 END,
               %(old)s + make_interval(mins => g),
               CASE WHEN g %% 6 IN (1, 2, 3, 5) THEN %(old)s + make_interval(mins => g + 1) END
        FROM generate_series(1, 120) g""", {"old": OLD})
    conn.execute("""
        INSERT INTO tasks (agent, customer, document_uri, estimated_tokens, status, confidence, created_at, finished_at)
        SELECT 'busy', 'acme', '/busy/' || g, 1000, 'completed', 0.95,
               %(now)s + make_interval(secs => g), %(now)s + make_interval(secs => g + 1)
        FROM generate_series(1, %(n)s) g""", {"now": NOW, "n": BIG})
    conn.execute("VACUUM ANALYZE tasks")  # as autovacuum leaves a table that has settled: its pages all visible
    rows = conn.execute("SELECT id, agent, customer, status::text AS status, held, confidence, created_at "
                        "FROM tasks").fetchall()
    return rows


def _selects(flt: TaskFilter, row) -> bool:
    """What the filter means, written out: held is queued and held; the review needs a low confidence."""
    wanted = set(flt.statuses)
    return ((not wanted or row["status"] in wanted or ("held" in wanted and row["held"] and row["status"] == "enqueued"))
            and (not flt.agents or row["agent"] in flt.agents)
            and (not flt.customers or row["customer"] in flt.customers)
            and (not flt.needs_review or (row["status"] == "completed" and row["confidence"] is not None
                                          and row["confidence"] < REVIEW_CONFIDENCE))
            and (flt.date_from is None or row["created_at"] >= flt.date_from)
            and (flt.date_to is None or row["created_at"] < flt.date_to))


def _ids(conn, flt: TaskFilter) -> set[int]:
    where, params = stats.task_filter(flt.params())
    return {r["id"] for r in conn.execute(sql.SQL("SELECT t.id FROM tasks t WHERE {}").format(where), params)}


STATUS_CHOICES = [(), ("held",), ("held", "enqueued"), ("held", "failed"), ("failed",), ("failed", "cancelled"),
                  ("processing",), ("no-such-status",), ("completed", "no-such-status")]
AGENT_CHOICES = [(), ("small",), ("small", "busy"), ("nobody",)]
CUSTOMER_CHOICES = [(), ("acme",), ("acme", "globex")]


def test_every_filter_selects_what_it_says(conn, tasks):
    dates = [(None, None), (OLD + timedelta(minutes=40), None), (None, OLD + timedelta(minutes=60)),
             (OLD + timedelta(minutes=10), NOW + timedelta(seconds=50))]
    checked = 0
    for statuses, agents, customers, review in itertools.product(STATUS_CHOICES, AGENT_CHOICES, CUSTOMER_CHOICES,
                                                                 (False, True)):
        for date_from, date_to in dates[:1] if (agents or customers) else dates:
            flt = TaskFilter(date_from=date_from, date_to=date_to, statuses=statuses, agents=agents,
                             customers=customers, needs_review=review)
            assert _ids(conn, flt) == {r["id"] for r in tasks if _selects(flt, r)}, flt
            checked += 1
    assert checked > 200
    # The oracle is not vacuous: each kind of filter keeps some tasks and drops others.
    for flt in (TaskFilter(statuses=("held",)), TaskFilter(agents=("small",)), TaskFilter(needs_review=True),
                TaskFilter(statuses=("held", "failed"), customers=("acme", "globex"))):
        assert 0 < len(_ids(conn, flt)) < len(tasks), flt


def test_held_with_queued_is_queued_and_read_from_the_rollups(conn, tasks):
    """Held tasks are queued ones: with queued chosen too the filter is queued, which the rollups hold;
    held alone, or with another outcome, is read from the tasks."""
    assert TaskFilter(statuses=("held",)).exact_only
    assert TaskFilter(statuses=("held", "failed")).exact_only
    assert not TaskFilter(statuses=("held", "enqueued")).exact_only
    rollups.rollup_fold(conn)
    both = stats.stats_summary_filtered(conn, TaskFilter(statuses=("held", "enqueued")))
    queued = stats.stats_summary_direct(conn, TaskFilter(statuses=("enqueued",)))
    assert both.total == queued.total == sum(r["status"] == "enqueued" for r in tasks) > 0
    assert stats.task_count(conn, TaskFilter(statuses=("held",))).n == sum(
        r["held"] and r["status"] == "enqueued" for r in tasks) > 0


def _plan(conn, flt: TaskFilter, query: str = "SELECT t.id FROM tasks t WHERE {} "
                                             "ORDER BY t.created_at DESC, t.id DESC LIMIT 25") -> str:
    where, params = stats.task_filter(flt.params())
    explain = sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) " + query).format(where)
    return "\n".join(r["QUERY PLAN"] for r in conn.execute(explain, params))


def _walked(plan: str) -> int:
    """How many rows the plan read and threw away, or every row when it read the table whole (an
    index that checks the condition itself throws nothing away: it never reads those rows)."""
    if "Seq Scan on tasks" in plan:
        return BIG
    return sum(int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", plan))


@pytest.mark.parametrize("flt", [TaskFilter(statuses=("held",)), TaskFilter(needs_review=True),
                                 TaskFilter(statuses=("held",), agents=("small",))],
                         ids=["held", "needs review", "held, one agent"])
def test_a_first_page_of_held_or_reviewable_tasks_reads_only_those(conn, tasks, flt):
    """The busy agent's BIG tasks are the newest, and none is held or to review."""
    plan = _plan(conn, flt)
    assert ("tasks_held_idx" in plan or "tasks_needs_review_idx" in plan) and _walked(plan) < BIG // 10, plan


@pytest.mark.parametrize("flt", [TaskFilter(agents=("small",)), TaskFilter(agents=("nobody",)),
                                 TaskFilter(statuses=("failed",)), TaskFilter(statuses=("processing",)),
                                 TaskFilter(agents=("small",), statuses=("completed",))],
                         ids=["one agent", "an agent without tasks", "failed", "processing", "one agent, completed"])
def test_one_agent_or_status_is_checked_in_the_index_of_the_order(conn, tasks, flt):
    """Walking newest first, the index of the order (tasks_created_id_idx) holds the agent and the
    status: a task of another agent or status is passed over there, its row never read (or a
    partial index of the status's tasks answers). On this small table the planner may rightly
    prefer to read it whole; the walk is what a big one gets."""
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_bitmapscan = off")
    plan = _plan(conn, flt)
    assert _walked(plan) < BIG // 10, plan


@pytest.mark.parametrize("flt", [TaskFilter(agents=("small",)), TaskFilter(agents=("nobody",)),
                                 TaskFilter(agents=("small",), statuses=("failed",))],
                         ids=["one agent", "an agent without tasks", "one agent, failed"])
def test_a_page_of_one_agent_starts_at_its_newest_task(conn, tasks, flt):
    """The busy agent's BIG tasks are the newest: a page of another agent's, or of one with none,
    is a range of the agent's own index and never passes over them."""
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_bitmapscan = off")
    plan = _plan(conn, flt)
    scanned = re.search(r"Index (?:Only )?Scan(?: Backward)? using tasks_agent_created_idx on tasks t "
                        r"\(actual time=[\d.]+\.\.[\d.]+ rows=(\d+)", plan)
    assert scanned and int(scanned.group(1)) <= 100 and _walked(plan) < 100, plan


def test_held_figures_read_only_the_held_tasks(conn, tasks):
    """Held tasks are read from the tasks for their count and figures: from their own index."""
    flt = TaskFilter(statuses=("held",))
    for query in ("SELECT count(*) FROM tasks t WHERE {}", "SELECT min(t.created_at) FROM tasks t WHERE {}"):
        plan = _plan(conn, flt, query)
        assert "tasks_held_idx" in plan and _walked(plan) < BIG // 10, plan


@pytest.mark.parametrize("statuses", [("held", "failed"), ("held", "completed", "cancelled")])
def test_held_with_other_outcomes_equals_a_read_of_the_tasks(db_dsn, conn, tasks, statuses):
    """Held + other outcomes is answered in two parts (the rollups for the outcomes, tasks_held_idx
    for the held): the summary, charts and total equal what a read of the tasks themselves gives."""
    flt = TaskFilter(statuses=statuses)
    others, held = flt.held_apart()
    assert others.statuses == statuses[1:] and held.statuses == ("held",)
    assert TaskFilter(statuses=("held",)).held_apart() is None and TaskFilter().held_apart() is None
    assert TaskFilter(statuses=("held", "held")).held_apart() is None  # never "held and everything"
    rollups.rollup_fold(conn)
    direct = stats.stats_summary_direct(conn, flt)
    direct_charts = stats.stats_charts_exact(conn, flt)
    pool = db.make_pool(db_dsn, min_size=1, max_size=2)
    try:
        cache = FigureCache(pool, interval=0.0)
        summary, _ = asyncio.run(cache.summary(flt))
        charts, _ = asyncio.run(cache.charts(flt))
    finally:
        pool.close()
    assert (summary.counts, summary.total) == (direct.counts, direct.total)
    assert direct.counts["enqueued"] > 0 and direct.total > direct.counts["enqueued"]
    assert (summary.input_tokens, summary.attempts, summary.first_created_at) == (
        direct.input_tokens, direct.attempts, direct.first_created_at)
    assert summary.avg_confidence == pytest.approx(direct.avg_confidence, abs=1e-6)
    assert stats.task_count(conn, flt).n == direct.total
    assert charts.bucket_seconds == direct_charts.bucket_seconds

    def by_series(rows, series):
        return {r["bucket"]: r["n"] for r in rows if r["series"] == series}

    for series in ("submitted", *statuses[1:]):
        assert by_series(charts.throughput, series) == by_series(direct_charts.throughput, series), series
