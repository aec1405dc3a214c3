"""Fair share across customers: within a priority customers take turns, FIFO inside each, caps exact."""

import random
import threading
import time
from datetime import timedelta

from schema import queue
from tests.factories import make_agent, make_task

DONE = {"status": "completed", "result": {"ok": True}, "confidence": 0.9}


def _clock(conn):
    return conn.execute("SELECT now() AS n").fetchone()["n"]


def _enqueue(conn, customer, n, start, *, priority=0):
    return [make_task(conn, customer=customer, priority=priority, now=start + timedelta(milliseconds=i)).id
            for i in range(n)]


def test_a_small_customer_starts_within_one_claim_round_behind_a_big_one(conn):
    make_agent(conn, max_concurrent_tasks=4)
    t0 = _clock(conn) - timedelta(hours=1)
    big = _enqueue(conn, "acme", 2000, t0)
    running = queue.claim(conn, agent="docs", worker_id="w", limit=10)
    assert [c.task.id for c in running] == big[:4]
    small = _enqueue(conn, "globex", 10, t0 + timedelta(minutes=30))
    order: list[tuple[str, int]] = []
    rounds_until_first_small = None
    for round_no in range(1, 41):
        queue.apply_callback(conn, running.pop(0).attempt_id, DONE)
        got = queue.claim(conn, agent="docs", worker_id="w", limit=10)
        assert len(got) == 1  # one slot freed, one task admitted: the cap stays exact
        order += [(c.task.customer, c.task.id) for c in got]
        if rounds_until_first_small is None and got[0].task.customer == "globex":
            rounds_until_first_small = round_no
        running += got
    assert rounds_until_first_small == 1
    small_claimed = [i for c, i in order if c == "globex"]
    big_claimed = [i for c, i in order if c == "acme"]
    assert small_claimed == small  # all ten, in the order they were queued
    assert big_claimed == big[4:4 + len(big_claimed)]  # FIFO inside the big customer too
    # Slots are shared while both have work: the small customer's ten went in the first twenty rounds.
    assert max(n for n, (c, _) in enumerate(order) if c == "globex") < 20


def test_a_batch_claim_interleaves_customers_round_robin(conn):
    make_agent(conn)
    t0 = _clock(conn) - timedelta(hours=1)
    a = _enqueue(conn, "acme", 50, t0)
    b = _enqueue(conn, "globex", 3, t0 + timedelta(minutes=1))
    c = _enqueue(conn, None, 2, t0 + timedelta(minutes=2))
    got = [t.task.id for t in queue.claim(conn, agent="docs", worker_id="w", limit=9)]
    # Ranks 1, 2, 3 of each customer, then acme alone: four of acme's, not nine.
    assert set(got) == set(a[:4] + b[:3] + c[:2])
    assert [i for i in got if i in a] == a[:4] and [i for i in got if i in b] == b


def test_priority_still_comes_before_fair_share(conn):
    make_agent(conn)
    t0 = _clock(conn) - timedelta(hours=1)
    low = _enqueue(conn, "globex", 3, t0, priority=0)
    high = _enqueue(conn, "acme", 5, t0 + timedelta(minutes=1), priority=7)
    got = [t.task.id for t in queue.claim(conn, agent="docs", worker_id="w", limit=6)]
    assert got[:5] == high and got[5] == low[0]


def test_fair_share_keeps_the_cap_exact_and_fifo_under_racing_claimers(conn, connect):
    cap, claimers = 3, 6
    make_agent(conn, max_concurrent_tasks=cap)
    t0 = _clock(conn) - timedelta(hours=1)
    ids = {"acme": _enqueue(conn, "acme", 120, t0), "globex": _enqueue(conn, "globex", 30, t0 + timedelta(minutes=1))}
    stop = threading.Event()
    samples, errors = [], []

    def sampler():
        c = connect()
        while not stop.is_set():
            samples.append(c.execute(
                "SELECT count(*) AS n FROM tasks WHERE agent = 'docs' AND status = 'processing'").fetchone()["n"])

    def claimer(seed):
        rng = random.Random(seed)
        c = connect()
        try:
            while not stop.is_set():
                got = queue.claim(c, agent="docs", worker_id=f"w{seed}", limit=rng.randint(1, 3))
                if not got and not queue.agents_with_backlog(c):
                    return
                time.sleep(rng.random() * 0.004)
                for claim in got:
                    queue.apply_callback(c, claim.attempt_id, DONE)
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(claimers)]
    watcher = threading.Thread(target=sampler)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    watcher.join(10)
    assert errors == []
    assert samples and max(samples) <= cap
    rows = conn.execute("SELECT t.customer, t.id FROM task_attempts a JOIN tasks t ON t.id = a.task_id "
                        "ORDER BY a.id").fetchall()
    assert len(rows) == 150
    for customer, queued in ids.items():
        assert [r["id"] for r in rows if r["customer"] == customer] == queued  # FIFO per customer
    # The small customer was not left for last: it finished within the first half of all claims.
    last_small = max(n for n, r in enumerate(rows) if r["customer"] == "globex")
    assert last_small < 100
