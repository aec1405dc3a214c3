"""Learned tokens per page feed new reservations; rate limits back an agent off (AIMD) and it recovers."""

import json
from datetime import datetime, timedelta, timezone

import psycopg

from schema import queue
from tests.factories import make_agent

T0 = datetime(2031, 6, 1, 9, 0, tzinfo=timezone.utc)


def report(tokens: int, pages: int, **more) -> dict:
    return {"status": "completed", "result": {"document_type": "invoice"}, "confidence": 0.9,
            "pages": pages, "input_tokens": tokens - 50, "output_tokens": 50, **more}


def run_one(conn, *, pages: int, tokens: int, now: datetime, **more):
    task = queue.enqueue(conn, agent="docs", document_uri=f"/d/{pages}-{tokens}.pdf", pages=pages, now=now)
    [claim] = queue.claim(conn, agent="docs", worker_id="w", now=now)
    queue.apply_callback(conn, claim.attempt_id, report(tokens, pages, **more), now=now)
    return task, claim


def reserved(conn, claim) -> int:
    return queue.get_attempt(conn, claim.attempt_id).estimated_tokens


def test_reservations_use_tokens_per_page_learned_from_settled_attempts(conn):
    make_agent(conn, max_tpm=10_000_000)
    # Until three attempts were learned from, the static estimate (900 + 650 a page) is reserved.
    _, first = run_one(conn, pages=1, tokens=400, now=T0)
    assert reserved(conn, first) == queue.estimate_tokens(pages=1)
    run_one(conn, pages=2, tokens=600, now=T0)
    run_one(conn, pages=4, tokens=1000, now=T0)
    # The documents cost 200 + 200 a page: a 10-page one is reserved at that, with a 10% margin.
    queue.enqueue(conn, agent="docs", document_uri="/d/ten.pdf", pages=10, now=T0)
    [claim] = queue.claim(conn, agent="docs", worker_id="w", now=T0)
    assert reserved(conn, claim) == round(1.1 * (200 + 200 * 10))
    # A caller's own estimate is kept as given.
    queue.enqueue(conn, agent="docs", document_uri="/d/own.pdf", pages=10, estimated_tokens=5000, now=T0)
    [own] = queue.claim(conn, agent="docs", worker_id="w", now=T0)
    assert reserved(conn, own) == 5000
    rows = {r["document_type"]: r["samples"] for r in conn.execute("SELECT * FROM agent_token_rates")}
    assert rows == {"*": 3, "invoice": 3}


def test_rate_limits_back_off_once_per_round_and_recover_additively(conn, db_dsn):
    make_agent(conn, max_tpm=40_000, max_concurrent_tasks=8)
    for n in range(10):  # 30,000 tokens reached the endpoint in the minute before the first 429
        run_one(conn, pages=1, tokens=3000, now=T0 - timedelta(seconds=30))
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN quire_agents")
        run_one(conn, pages=1, tokens=1000, now=T0, rate_limited=2, retry_after_seconds=7)
        assert [n.channel for n in listener.notifies(timeout=2.0, stop_after=1)] == ["quire_agents"]
    agent = queue.get_agent(conn, "docs")
    # Half the rate it sent at (31,000 tokens in the minute, under its 40,000 limit), half its slots.
    assert (agent.effective_tpm, agent.effective_concurrency) == (15_500, 4)
    assert agent.rate_limited_total == 2 and agent.throttled_until == T0 + timedelta(seconds=7)
    assert agent.tpm_limit == 15_500 and agent.concurrency_limit == 4
    # Admission waits out the Retry-After (and the minute's budget).
    queue.enqueue(conn, agent="docs", document_uri="/d/wait.pdf", pages=1, now=T0)
    assert queue.claim(conn, agent="docs", worker_id="w", now=T0 + timedelta(seconds=3)) == []
    [late] = queue.claim(conn, agent="docs", worker_id="w", now=T0 + timedelta(seconds=40))
    for n in range(4):  # 12,000 more tokens in the minute
        run_one(conn, pages=1, tokens=3000, now=T0 + timedelta(seconds=40))
    # A 429 of an attempt admitted after the cut cuts again (the first cut's round is over), from
    # the 14,000 tokens sent in the last minute.
    queue.apply_callback(conn, late.attempt_id, report(1000, 1, rate_limited=1), now=T0 + timedelta(seconds=41))
    agent = queue.get_agent(conn, "docs")
    # (The four that ran without a 429 gave the slots back: half of the configured 8 again.)
    assert (agent.effective_tpm, agent.effective_concurrency) == (7_000, 4)
    assert agent.rate_limited_total == 3
    # Attempts without 429s raise the limits additively (2% of 40,000 and one slot each), up to
    # nine tenths of the rate that met the last limit.
    clock = T0 + timedelta(minutes=2)
    for n in range(3):
        run_one(conn, pages=1, tokens=1000, now=clock + timedelta(seconds=10 * n))
    agent = queue.get_agent(conn, "docs")
    assert agent.effective_tpm == 7_000 + 3 * 800 and agent.effective_concurrency == 7
    for n in range(20):  # ten seconds apart, so the token budget of the minute always has room
        run_one(conn, pages=1, tokens=1000, now=clock + timedelta(seconds=10 * (n + 3)))
    agent = queue.get_agent(conn, "docs")
    assert agent.effective_tpm == round(0.9 * 14_000)
    assert agent.effective_concurrency is None  # back to the configured 8
    # After five quiet minutes it climbs back to the configured limit, and the adaptive one ends.
    for n in range(40):
        run_one(conn, pages=1, tokens=1000, now=clock + timedelta(minutes=6, seconds=10 * n))
    agent = queue.get_agent(conn, "docs")
    assert agent.effective_tpm is None and agent.tpm_limit == 40_000
