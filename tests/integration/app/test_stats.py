"""The dashboard's read queries: every figure honours the filters; paging, sorting, duplicates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schema import queue, stats, stats_types
from schema.stats_types import TaskFilter
from tests.factories import make_agent, make_task


def _finish(conn, agent: str, *, confidence: float, tokens: int, cost: float) -> None:
    for claim in queue.claim(conn, agent=agent, worker_id="w", limit=100):
        queue.apply_callback(conn, claim.attempt_id, {
            "status": "completed", "result": {"document_type": "invoice", "fields": {}}, "confidence": confidence,
            "input_tokens": tokens, "output_tokens": tokens // 10, "llm_cost_usd": cost})
        queue.record_compute(conn, claim.attempt_id, compute_seconds=2.0, compute_cost_usd=0.001, dbus=0.1)


def _seed(conn) -> None:
    make_agent(conn, "alpha")
    make_agent(conn, "beta")
    for _ in range(3):
        make_task(conn, "alpha", customer="acme")
    _finish(conn, "alpha", confidence=0.9, tokens=1000, cost=0.01)
    for _ in range(2):
        make_task(conn, "beta", customer="globex")
    make_task(conn, "beta", customer=None)


def test_summary_counts_spend_and_quality_per_filter(conn):
    _seed(conn)
    everything = stats.stats_summary_filtered(conn, TaskFilter())
    assert everything.total == 6 and everything.counts["completed"] == 3 and everything.counts["enqueued"] == 3
    assert (everything.input_tokens, everything.output_tokens) == (3000, 300)
    assert float(everything.llm_cost_usd) == 0.03 and float(everything.compute_cost_usd) == 0.003
    assert everything.median_latency_s is not None and abs(everything.avg_confidence - 0.9) < 1e-6
    beta = stats.stats_summary_filtered(conn, TaskFilter(agents=("beta",)))
    assert beta.total == 3 and beta.input_tokens == 0 and beta.median_latency_s is None
    assert stats.stats_summary_filtered(conn, TaskFilter(customers=("acme",), statuses=("enqueued",))).total == 0
    future = datetime.now(UTC) + timedelta(days=1)
    assert stats.stats_summary_filtered(conn, TaskFilter(date_from=future)).total == 0
    assert stats.stats_summary_filtered(conn, TaskFilter(date_to=future)).total == 6


def test_charts_follow_the_filter(conn):
    _seed(conn)
    every = stats.stats_charts_filtered(conn, TaskFilter())
    assert {r["series"] for r in every.throughput} == {"submitted", "completed"}
    assert [r["key"] for r in every.cost_by_agent] == ["alpha"]
    assert sum(b["n"] for b in every.latency_bins) == 3 and sum(b["n"] for b in every.confidence_bins) == 3
    assert every.confidence_bins[0]["lo"] == 0.9
    beta = stats.stats_charts_filtered(conn, TaskFilter(agents=("beta",)))
    assert beta.cost_by_agent == [] and beta.latency_bins == [] and beta.confidence_bins == []
    assert sum(r["n"] for r in beta.throughput) == 3


def test_table_pages_by_keyset_and_sorts_on_the_server(conn):
    _seed(conn)
    rows, after = stats.task_list_keyset(conn, TaskFilter(), sort="tokens", descending=True, limit=2)
    assert stats.task_count(conn, TaskFilter()) == stats.TaskCount(6) and len(rows) == 2 and all(r.input_tokens == 1000 for r in rows)
    rest, end = stats.task_list_keyset(conn, TaskFilter(), sort="tokens", descending=True, after=after, limit=10)
    assert len(rest) == 4 and not {r.id for r in rest} & {r.id for r in rows} and end is None
    by_customer, _ = stats.task_list_keyset(conn, TaskFilter(), sort="customer", descending=False, limit=10)
    assert [r.customer for r in by_customer] == ["acme"] * 3 + ["globex"] * 2 + [None]
    # Page by page through a sort with ties and NULLs: every task once, in the order of one query.
    for sort in ("customer", "confidence", "latency_s", "id", "created_at", "status", "agent", "priority"):
        for descending in (True, False):
            whole, _ = stats.task_list_keyset(conn, TaskFilter(), sort=sort, descending=descending, limit=100)
            paged, after = [], None
            while True:
                page, after = stats.task_list_keyset(conn, TaskFilter(), sort=sort, descending=descending,
                                                     after=after, limit=2)
                paged += page
                if after is None:
                    break
            assert [r.id for r in paged] == [r.id for r in whole], (sort, descending)
    # An unknown sort key is never composed into SQL: it falls back to newest first.
    fallback, _ = stats.task_list_keyset(conn, TaskFilter(), sort="id; DROP TABLE tasks", limit=10)
    assert [r.id for r in fallback] == [r.id for r in sorted(fallback, key=lambda r: (r.created_at, r.id), reverse=True)]
    assert len(fallback) == 6


def test_cursor_listing_is_newest_first_without_overlap(conn):
    make_agent(conn)
    ids = [make_task(conn).id for _ in range(5)]
    first = stats.task_list_after(conn, TaskFilter(), before=None, limit=3)
    second = stats.task_list_after(conn, TaskFilter(), before=(first[-1].created_at, first[-1].id), limit=3)
    assert [r.id for r in first + second] == sorted(ids, reverse=True)
    # A cursor of the id alone (the form before the order was by submission) reads the same page.
    assert [r.id for r in stats.task_list_after(conn, TaskFilter(), before=(None, first[-1].id), limit=3)] \
        == [r.id for r in second]


def test_newest_first_is_the_order_of_submission_and_a_past_range_starts_at_its_end(conn):
    make_agent(conn)
    now = datetime.now(UTC)
    # Submitted out of id order (an import with its own times), and in a past range and after it.
    late = make_task(conn)
    conn.execute("UPDATE tasks SET created_at = %s WHERE id = %s", [now - timedelta(days=40), late.id])
    early = make_task(conn)
    conn.execute("UPDATE tasks SET created_at = %s WHERE id = %s", [now - timedelta(days=50), early.id])
    recent = make_task(conn)
    past = TaskFilter(date_from=now - timedelta(days=60), date_to=now - timedelta(days=30))
    rows = stats.task_list_after(conn, past, before=None, limit=10)
    assert [r.id for r in rows] == [late.id, early.id]
    rows, _ = stats.task_list_keyset(conn, past, limit=10)
    assert [r.id for r in rows] == [late.id, early.id]
    everything = stats.task_list_after(conn, TaskFilter(), before=None, limit=10)
    assert [r.id for r in everything] == [recent.id, late.id, early.id]
    # One index serves the order from the range's end (a three-row table would be read whole: no seq scan).
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_bitmapscan = off")
        plan = "\n".join(r["QUERY PLAN"] for r in conn.execute(
            "EXPLAIN SELECT t.id FROM tasks t WHERE t.created_at < %s ORDER BY t.created_at DESC, t.id DESC LIMIT 25",
            [now - timedelta(days=30)]).fetchall())
    assert "Scan Backward using tasks_created_id_idx" in plan and "Sort" not in plan, plan


def test_duplicate_lookup_prefers_a_completed_task(conn):
    make_agent(conn)
    digest = "ab" * 32
    done = make_task(conn, document_sha256=digest)
    _finish(conn, "docs", confidence=0.8, tokens=10, cost=0.0)
    make_task(conn, document_sha256=digest)
    assert stats.task_find_by_sha256(conn, [digest, "cd" * 32], customer=None)[digest]["id"] == done.id


def test_event_log_reads_for_replay_and_metrics(conn):
    make_agent(conn)
    task = make_task(conn)
    queue.cancel(conn, task.id, actor="me")
    events = stats.task_events_after(conn, 0)
    assert [(e.status, e.prev_status, e.actor) for e in events] == [("enqueued", None, None),
                                                                     ("cancelled", "enqueued", "me")]
    assert stats.task_events_last_id(conn) == events[-1].id
    assert stats.task_events_after(conn, events[-1].id) == []
    make_task(conn)
    assert stats.stats_queue_health(conn)[0]["agent"] == "docs"
    assert stats.stats_filter_options(conn)["agent"] == ["docs"]


def test_buckets_grow_with_the_span():
    start = datetime(2024, 1, 1, tzinfo=UTC)
    assert stats_types.bucket_for_span(start, start + timedelta(minutes=5)) == timedelta(seconds=10)
    assert stats_types.bucket_for_span(start, start + timedelta(minutes=45)) == timedelta(minutes=1)
    assert stats_types.bucket_for_span(start, start + timedelta(hours=10)) == timedelta(minutes=15)
    assert stats_types.bucket_for_span(start, start + timedelta(days=20)) == timedelta(days=1)
    assert stats_types.bucket_for_span(None, None) == timedelta(seconds=10)


def test_needs_review_selects_completed_tasks_with_low_confidence(conn):
    _seed(conn)  # three completed at 0.9, three enqueued
    make_task(conn, "beta", customer="globex")
    _finish(conn, "beta", confidence=0.42, tokens=10, cost=0.0)  # the three beta tasks
    flagged = stats.stats_summary_filtered(conn, TaskFilter(needs_review=True))
    assert flagged.total == 4 and flagged.counts.get("completed") == 4
    assert abs(flagged.avg_confidence - 0.42) < 1e-6
    rows, _ = stats.task_list_keyset(conn, TaskFilter(needs_review=True), sort="id", descending=False, limit=10)
    total = stats.task_count(conn, TaskFilter(needs_review=True))
    assert total == stats.TaskCount(4, exact=True) and len(rows) == 4 and all(r.confidence < stats_types.REVIEW_CONFIDENCE for r in rows)
    charts = stats.stats_charts_filtered(conn, TaskFilter(needs_review=True))
    assert sum(b["n"] for b in charts.confidence_bins) == 4 and charts.confidence_bins[0]["lo"] == 0.4
    assert stats_types.needs_review("completed", 0.42) and not stats_types.needs_review("completed", 0.9)
    assert not stats_types.needs_review("failed", None)
