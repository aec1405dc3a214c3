"""Learned tokens per page feed new reservations; rate limits back an agent off (AIMD) and it recovers."""

from datetime import UTC, datetime, timedelta

import psycopg

from schema import queue
from tests.factories import make_agent

T0 = datetime(2031, 6, 1, 9, 0, tzinfo=UTC)


def report(tokens: int, pages: int, **more) -> dict:
    return {"status": "completed", "result": {"document_type": "invoice"}, "confidence": 0.9,
            "pages": pages, "input_tokens": tokens - 50, "output_tokens": 50, **more}


def run_one(conn, *, pages: int, tokens: int, now: datetime, **more):
    task = queue.enqueue(conn, agent="docs", document_uri=f"/d/{pages}-{tokens}.pdf", pages=pages, now=now)
    [claim] = queue.claim(conn, agent="docs", worker_id="w", now=now)
    queue.apply_callback(conn, claim.attempt_id, report(tokens, pages, **more), now=now)
    return task, claim


def ceiling(conn) -> int:
    """The quota the agent's last cut remembered."""
    return conn.execute("SELECT throttle_ceiling_tpm FROM agents WHERE name = 'docs'").fetchone()["throttle_ceiling_tpm"]


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



def test_every_claim_path_reserves_the_same_learned_line(conn):
    """The batch claim (agents without limits), the throttled admission and quire_learned_tokens
    give a task the same reservation: by its characters where the text line was learned and the
    task has a count, else by its pages."""
    make_agent(conn, max_tpm=10_000_000)
    for pages, chars, tokens in ((1, 3000, 1600), (2, 6000, 2600), (4, 12000, 4600)):
        task = queue.enqueue(conn, agent="docs", document_uri=f"/d/{pages}.pdf", pages=pages, document_chars=chars,
                             now=T0)
        [claim] = queue.claim(conn, agent="docs", worker_id="w", now=T0)
        assert claim.task.id == task.id
        queue.apply_callback(conn, claim.attempt_id, report(tokens, pages), now=T0)
    expected = {}
    for name, chars in (("text", 30000), ("scan", None)):
        expected[name] = conn.execute("SELECT quire_learned_tokens('docs', NULL, 3, NULL, %s) AS t", [chars]).fetchone()["t"]
    # The documents cost 600 + a third of a token a character, and 600 + 1,000 a page: a 3-page
    # document of 30,000 characters by its text, a scan of 3 pages by its pages, 10% over the line.
    assert abs(expected["text"] - 1.1 * (600 + 30000 / 3)) <= 1 and abs(expected["scan"] - 1.1 * 3600) <= 1, expected
    throttled = {}
    for name, chars in (("text", 30000), ("scan", None)):
        queue.enqueue(conn, agent="docs", document_uri=f"/d/{name}.pdf", pages=3, document_chars=chars, now=T0)
        [claim] = queue.claim(conn, agent="docs", worker_id="w", now=T0)
        throttled[name] = reserved(conn, claim)
    assert throttled == expected
    queue.configure_agent(conn, "docs", max_tpm=None)  # no limits: the batch claim
    batch = {}
    for name, chars in (("text", 30000), ("scan", None)):
        queue.enqueue(conn, agent="docs", document_uri=f"/d/{name}-2.pdf", pages=3, document_chars=chars, now=T0)
        [claim] = queue.claim_many(conn, worker_id="w", slots={"local": ("local", 1)}, now=T0)
        batch[name] = reserved(conn, claim)
    assert batch == expected

def test_rate_limits_back_off_once_per_round_and_recover_additively(conn, db_dsn):
    make_agent(conn, max_tpm=40_000, max_concurrent_tasks=8)
    for _ in range(10):  # 30,000 tokens reached the endpoint in the minute before the first 429
        run_one(conn, pages=1, tokens=3000, now=T0 - timedelta(seconds=30))
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN quire_agents")
        run_one(conn, pages=1, tokens=1000, now=T0, rate_limited=2, retry_after_seconds=7)
        assert [n.channel for n in listener.notifies(timeout=2.0, stop_after=1)] == ["quire_agents"]
    agent = queue.get_agent(conn, "docs")
    # Seven tenths of the rate it sent at (31,000 tokens in the minute, under its 40,000 limit), and
    # of its slots: a cut that stays near the quota the endpoint showed.
    assert (agent.effective_tpm, agent.effective_concurrency) == (21_700, 5)
    assert agent.rate_limited_total == 2 and agent.throttled_until == T0 + timedelta(seconds=7)
    assert agent.tpm_limit == 21_700 and agent.concurrency_limit == 5
    # Admission waits out the Retry-After (and the minute's budget).
    queue.enqueue(conn, agent="docs", document_uri="/d/wait.pdf", pages=1, now=T0)
    assert queue.claim(conn, agent="docs", worker_id="w", now=T0 + timedelta(seconds=3)) == []
    [late] = queue.claim(conn, agent="docs", worker_id="w", now=T0 + timedelta(seconds=40))
    for _ in range(4):  # 12,000 more tokens in the minute
        run_one(conn, pages=1, tokens=3000, now=T0 + timedelta(seconds=40))
    # A 429 of an attempt admitted after the cut cuts again (the first cut's round is over), from
    # the 14,000 tokens sent in the last minute.
    queue.apply_callback(conn, late.attempt_id, report(1000, 1, rate_limited=1), now=T0 + timedelta(seconds=41))
    agent = queue.get_agent(conn, "docs")
    # (The four that ran without a 429 gave the slots back: seven tenths of the configured 8 again.)
    assert (agent.effective_tpm, agent.effective_concurrency) == (9_800, 5)
    assert agent.rate_limited_total == 3
    # Attempts without 429s raise the limits additively (5% of 40,000 and one slot each), up to
    # nineteen twentieths of the rate that met the last limit.
    clock = T0 + timedelta(minutes=2)
    run_one(conn, pages=1, tokens=1000, now=clock)
    agent = queue.get_agent(conn, "docs")
    assert agent.effective_tpm == 9_800 + 2_000 and agent.effective_concurrency == 6
    for n in range(20):  # ten seconds apart, so the token budget of the minute always has room
        run_one(conn, pages=1, tokens=1000, now=clock + timedelta(seconds=10 * (n + 1)))
    agent = queue.get_agent(conn, "docs")
    assert agent.effective_tpm == round(0.95 * 14_000)
    assert agent.effective_concurrency is None  # back to the configured 8
    # Within ten quiet minutes of the last limit (at T0 + 41 s) it stays there, however much runs.
    for n in range(6):
        run_one(conn, pages=1, tokens=1000, now=T0 + timedelta(minutes=9, seconds=10 * n))
    assert queue.get_agent(conn, "docs").effective_tpm == 13_300
    # Then the cap rises by one step (5% of 40,000) a minute, probing for more: never a jump back
    # to the configured 40,000, which had met the limit at once.
    for n in range(3):
        run_one(conn, pages=1, tokens=1000, now=T0 + timedelta(minutes=11, seconds=10 * n))
    assert queue.get_agent(conn, "docs").effective_tpm == 13_300 + 2_000
    for n in range(3):
        run_one(conn, pages=1, tokens=1000, now=T0 + timedelta(minutes=14, seconds=10 * n))
    assert queue.get_agent(conn, "docs").effective_tpm == 13_300 + 4 * 2_000
    # Long quiet, it is back at the configured limit, and the adaptive one ends.
    for n in range(12):
        run_one(conn, pages=1, tokens=1000, now=T0 + timedelta(minutes=26, seconds=10 * n))
    agent = queue.get_agent(conn, "docs")
    assert agent.effective_tpm is None and agent.tpm_limit == 40_000


def test_a_cut_reads_what_the_endpoint_served_in_the_minute_before_the_first_429(conn):
    """The attempt that met the 429 reports long after it (it waited out the Retry-After within
    itself): the minute before its report shows little of what the endpoint let through."""
    make_agent(conn, max_tpm=40_000)
    limited_at = T0 + timedelta(seconds=20)
    for n in range(7):  # 21,000 tokens served in the twenty seconds before the 429
        run_one(conn, pages=1, tokens=3000, now=T0 + timedelta(seconds=2 * n))
    # The refused attempt, started before the 429, reports 70 s after it: nothing else reported in
    # the minute before its report.
    queue.enqueue(conn, agent="docs", document_uri="/d/refused.pdf", pages=1, now=T0)
    [refused] = queue.claim(conn, agent="docs", worker_id="w", now=T0 + timedelta(seconds=15))
    queue.apply_callback(conn, refused.attempt_id,
                         report(1000, 1, rate_limited=1, retry_after_seconds=40,
                                rate_limited_at=limited_at.timestamp()),
                         now=limited_at + timedelta(seconds=70))
    assert ceiling(conn) == 21_000 and queue.get_agent(conn, "docs").effective_tpm == 14_700


def test_a_cut_takes_the_limit_the_endpoint_stated(conn):
    make_agent(conn, max_tpm=40_000)
    run_one(conn, pages=1, tokens=3000, now=T0)
    run_one(conn, pages=1, tokens=1000, now=T0 + timedelta(seconds=5), rate_limited=1,
            rate_limited_at=(T0 + timedelta(seconds=4)).timestamp(), rate_limit_tpm=25_000)
    assert ceiling(conn) == 25_000 and queue.get_agent(conn, "docs").effective_tpm == 17_500


def test_reservations_follow_the_text_of_documents_whose_characters_are_known(conn):
    make_agent(conn, max_tpm=10_000_000)

    def run_text(chars: int, tokens: int):
        queue.enqueue(conn, agent="docs", document_uri=f"/d/{chars}.pdf", pages=2, document_chars=chars, now=T0)
        [claim] = queue.claim(conn, agent="docs", worker_id="w", now=T0)
        queue.apply_callback(conn, claim.attempt_id, report(tokens, 2), now=T0)
        return claim

    # Before anything was learned: a token for every three characters, plus the instructions.
    first = run_text(3000, 1050)
    assert reserved(conn, first) == queue.estimate_tokens(document_chars=3000) == 1500 + 1000
    # Same page count, text of very different length: the tokens follow the text (300 + chars / 4).
    run_text(2000, 800)
    run_text(4000, 1300)
    run_text(8000, 2300)
    queue.enqueue(conn, agent="docs", document_uri="/d/dense.pdf", pages=2, document_chars=20_000, now=T0)
    [dense] = queue.claim(conn, agent="docs", worker_id="w", now=T0)
    assert abs(reserved(conn, dense) - 1.1 * (300 + 20_000 / 4)) <= 1
    # A document without a text layer (a scan) is reserved by the line learned over pages.
    queue.enqueue(conn, agent="docs", document_uri="/d/scan.pdf", pages=2, now=T0)
    [scan] = queue.claim(conn, agent="docs", worker_id="w", now=T0)
    # (a decayed mean of what 2-page documents cost, the later ones weighing more)
    assert 1.1 * 800 <= reserved(conn, scan) <= 1.1 * 2300
