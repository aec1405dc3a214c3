"""Forecasts before dispatch, held batches, and queue positions in claim order."""

from datetime import timedelta

import pytest

from schema import customers, forecast, positions, queue
from schema.errors import InvalidArgument, UnknownAgent
from tests.factories import make_agent, make_task


def _clock(conn):
    return conn.execute("SELECT now() AS n").fetchone()["n"]


def _complete(conn, claim, *, tokens=(2000, 500), cost=0.01):
    queue.apply_callback(conn, claim.attempt_id, {
        "status": "completed", "result": {"ok": True}, "confidence": 0.9,
        "input_tokens": tokens[0], "output_tokens": tokens[1], "llm_cost_usd": cost})


def test_a_forecast_uses_static_rates_then_learns_from_completed_attempts(conn):
    make_agent(conn, max_concurrent_tasks=2, price_input_per_mtok=2.0, price_output_per_mtok=10.0)
    files = [forecast.FileFacts(pages=2), forecast.FileFacts(pages=10), forecast.FileFacts(document_bytes=120_000)]
    static = forecast.forecast_batch(conn, agent="docs", priority=5, files=files, workers=4,
                                     compute_rate_usd_per_hour=3.6)
    assert static.tokens == queue.estimate_tokens(pages=2) + queue.estimate_tokens(pages=10) + queue.estimate_tokens(pages=3)
    assert static.pages == 15 and static.concurrency == 2 and "static" in static.basis
    expected_llm = static.tokens * (0.85 * 2.0 + 0.15 * 10.0) / 1e6
    assert static.llm_cost_usd == pytest.approx(expected_llm, rel=1e-6)
    assert static.compute_cost_usd == pytest.approx(static.work_seconds * 3.6 / 3600, rel=1e-6)
    # Five completed attempts that used half the estimated tokens, a fifth of them output.
    start = _clock(conn) - timedelta(hours=1)
    for i in range(5):
        task = make_task(conn, pages=4, estimated_tokens=queue.estimate_tokens(pages=4), now=start)
        (claim,) = queue.claim(conn, agent="docs", worker_id="w", now=start + timedelta(minutes=i))
        assert claim.task.id == task.id
        half = queue.estimate_tokens(pages=4) // 2
        _complete(conn, claim, tokens=(half * 4 // 5, half // 5))
    learned = forecast.forecast_batch(conn, agent="docs", priority=5, files=files, workers=4,
                                      compute_rate_usd_per_hour=3.6)
    assert "learned from 5" in learned.basis
    # Tokens come from the agent's learned line (quire_learned_tokens), without its 10% margin.
    line = conn.execute("SELECT sum(quire_learned_tokens('docs', NULL, p, b)) AS t FROM "
                        "unnest(ARRAY[2, 10, NULL]::int[], ARRAY[NULL, NULL, 120000]::bigint[]) AS f(p, b)"
                        ).fetchone()["t"]
    assert learned.tokens == pytest.approx(line / 1.1, abs=3)
    assert learned.tokens < static.tokens * 0.7  # it learned the documents cost less than estimated


def test_the_eta_grows_with_work_queued_ahead_at_equal_or_higher_priority(conn):
    make_agent(conn, max_concurrent_tasks=1)
    files = [forecast.FileFacts(pages=1)]
    alone = forecast.forecast_batch(conn, agent="docs", priority=5, files=files, workers=4, compute_rate_usd_per_hour=0)
    for _ in range(10):
        make_task(conn, priority=5, pages=1)
    for _ in range(10):
        make_task(conn, priority=2, pages=1)  # behind it: not counted
    behind = forecast.forecast_batch(conn, agent="docs", priority=5, files=files, workers=4, compute_rate_usd_per_hour=0)
    assert behind.ahead_tasks == 10 and behind.ahead_exact
    assert behind.eta_seconds == pytest.approx(alone.eta_seconds * 11, rel=0.01)


def test_bad_forecast_requests_are_refused(conn):
    make_agent(conn)
    with pytest.raises(InvalidArgument):
        forecast.forecast_batch(conn, agent="docs", priority=5, files=[], workers=1, compute_rate_usd_per_hour=0)
    with pytest.raises(InvalidArgument):
        forecast.forecast_batch(conn, agent="docs", priority=12, files=[forecast.FileFacts(1)], workers=1,
                                compute_rate_usd_per_hour=0)
    with pytest.raises(UnknownAgent):
        forecast.forecast_batch(conn, agent="nope", priority=1, files=[forecast.FileFacts(1)], workers=1,
                                compute_rate_usd_per_hour=0)


def test_a_held_batch_is_stored_but_not_claimed_until_released(conn):
    make_agent(conn)
    plan = forecast.forecast_batch(conn, agent="docs", priority=5, files=[forecast.FileFacts(pages=1)] * 2,
                                   workers=1, compute_rate_usd_per_hour=0)
    batch_id = forecast.batch_create(conn, plan, customer="acme", held=True, submitted_by="op")
    held = [make_task(conn, priority=5, batch_id=batch_id, held=True) for _ in range(2)]
    free = make_task(conn, priority=0)
    assert [c.task.id for c in queue.claim(conn, agent="docs", worker_id="w", limit=10)] == [free.id]
    assert queue.agents_with_backlog(conn) == []
    where = positions.task_positions(conn, [t.id for t in held])
    assert {p.describe() for p in where.values()} == {"waiting: held"}
    assert forecast.batch_release(conn, batch_id, actor="op") == 2
    assert forecast.batch_release(conn, batch_id, actor="op") == 0  # releasing twice changes nothing
    assert {c.task.id for c in queue.claim(conn, agent="docs", worker_id="w", limit=10)} == {t.id for t in held}
    batch = forecast.batch_get(conn, batch_id)
    assert batch["tasks"] == 2 and batch["released_by"] == "op" and batch["forecast"]["documents"] == 2
    timeline = queue.get_task(conn, held[0].id).events
    assert [(e.status.value, e.actor) for e in timeline][:2] == [("enqueued", None), ("enqueued", "op")]


def test_positions_follow_priority_age_and_fair_share_and_move_as_the_queue_moves(conn):
    make_agent(conn)
    t0 = _clock(conn) - timedelta(hours=1)
    big = [make_task(conn, customer="acme", priority=3, now=t0 + timedelta(seconds=i)) for i in range(6)]
    small = [make_task(conn, customer="globex", priority=3, now=t0 + timedelta(minutes=5, seconds=i)) for i in range(2)]
    urgent = make_task(conn, customer="acme", priority=8, now=t0 + timedelta(minutes=9))
    ids = [t.id for t in big + small + [urgent]]
    where = positions.task_positions(conn, ids)
    assert where[urgent.id].ahead == 0 and where[urgent.id].describe() == "next in line"
    # Claim order: urgent, then acme#1 globex#1 acme#2 globex#2 acme#3..6.
    assert [where[t.id].ahead for t in big] == [1, 3, 5, 6, 7, 8]
    assert [where[t.id].ahead for t in small] == [2, 4]
    claimed = queue.claim(conn, agent="docs", worker_id="w", limit=9)
    order = sorted(ids, key=lambda i: where[i].ahead)
    assert {c.task.id for c in claimed} == set(order)
    for c in claimed:
        queue.apply_callback(conn, c.attempt_id, {"status": "completed", "result": {}, "confidence": 1})
    # Again, claimed one at a time: each claim takes the task shown next in line, and the rest move up.
    again = [make_task(conn, customer=c, priority=3, now=t0 + timedelta(minutes=20, seconds=i))
             for i, c in enumerate(["acme"] * 5 + ["globex"] * 3)]
    ids = [t.id for t in again]
    for _ in again:
        before = positions.task_positions(conn, ids)
        (next_in_line,) = [i for i, p in before.items() if p.ahead == 0]
        (claim,) = queue.claim(conn, agent="docs", worker_id="w")
        assert claim.task.id == next_in_line
        after = positions.task_positions(conn, ids)
        assert sorted(p.ahead for p in after.values()) == list(range(len(after)))
        queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {}, "confidence": 1})
    assert positions.task_positions(conn, ids) == {}


def test_positions_past_the_bound_are_estimates_and_budgets_show(conn):
    make_agent(conn)
    tasks = [make_task(conn, customer="acme") for _ in range(30)]
    conn.execute("ANALYZE tasks")
    where = positions.task_positions(conn, [tasks[-1].id], bound=10)
    assert not where[tasks[-1].id].exact and where[tasks[-1].id].ahead >= 10
    assert where[tasks[-1].id].describe().startswith("about ")
    exact = positions.task_positions(conn, [tasks[5].id], bound=10)[tasks[5].id]
    assert exact.exact and exact.ahead == 5
    customers.customer_budget_set(conn, "acme", 0, actor="op")
    (claim,) = queue.claim(conn, agent="docs", worker_id="w")
    _complete(conn, claim, cost=0.5)
    assert positions.task_positions(conn, [tasks[5].id])[tasks[5].id].describe() == "waiting: budget"


def test_a_forecast_knows_e_invoices_cost_no_tokens_and_the_cascade_sends_a_share(conn):
    make_agent(conn, "rules-first", settings={"extractor": "cascade"},
               price_input_per_mtok=2.0, price_output_per_mtok=10.0)
    make_agent(conn, "all-model", settings={"extractor": "llm"})
    pdf, xml = forecast.FileFacts(pages=2), forecast.FileFacts(pages=0, einvoice=True)

    def tokens(agent, files):
        return forecast.forecast_batch(conn, agent=agent, priority=0, files=files, workers=1,
                                       compute_rate_usd_per_hour=0).tokens

    assert tokens("all-model", [xml]) == tokens("rules-first", [xml]) == 0
    assert tokens("all-model", [pdf, xml]) == queue.estimate_tokens(pages=2)
    assert tokens("rules-first", [pdf]) == round(queue.estimate_tokens(pages=2) * forecast.STATIC_CASCADE_LLM_SHARE)
