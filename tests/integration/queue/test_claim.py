"""Claim order, run_after, and the concurrency cap under racing claimers."""

import random
import re
import threading
import time
from datetime import timedelta

from schema import queue
from schema.models import TaskStatus
from tests.factories import make_agent, make_task

DONE = {"status": "completed", "result": {"ok": True}, "confidence": 0.9}


def test_claims_follow_priority_then_fifo(conn):
    make_agent(conn)
    low1 = make_task(conn, priority=0)
    high = make_task(conn, priority=9)
    low2 = make_task(conn, priority=0)
    mid = make_task(conn, priority=5)
    claimed = [c.task.id for c in queue.claim(conn, agent="docs", worker_id="w", limit=10)]
    assert claimed == [high.id, mid.id, low1.id, low2.id]


def test_claims_one_at_a_time_in_the_same_order(conn):
    make_agent(conn)
    tasks = [make_task(conn, priority=p) for p in (1, 3, 3, 2)]
    order = [queue.claim(conn, agent="docs", worker_id="w")[0].task.id for _ in tasks]
    assert order == [tasks[1].id, tasks[2].id, tasks[3].id, tasks[0].id]
    assert queue.claim(conn, agent="docs", worker_id="w") == []


def test_task_waiting_for_run_after_is_not_claimed(conn):
    make_agent(conn)
    now = conn.execute("SELECT now() AS n").fetchone()["n"]
    later = make_task(conn, now=now + timedelta(minutes=5))
    assert queue.claim(conn, agent="docs", worker_id="w", now=now) == []
    claimed = queue.claim(conn, agent="docs", worker_id="w", now=now + timedelta(minutes=6))
    assert [c.task.id for c in claimed] == [later.id]


def test_claim_opens_an_attempt_with_lease_and_secret(conn):
    make_agent(conn, lease_seconds=45)
    make_task(conn)
    (c,) = queue.claim(conn, agent="docs", worker_id="w1")
    assert c.attempt_no == 1 and c.task.status is TaskStatus.PROCESSING
    assert len(c.callback_secret) == 64
    assert 44 <= (c.lease_expires_at - c.task.started_at).total_seconds() <= 46
    task = queue.get_task(conn, c.task.id)
    assert [a.id for a in task.attempts] == [c.attempt_id]
    assert task.locked_by == "w1"


def test_every_attempt_gets_a_secret_of_its_own(conn):
    make_agent(conn)
    for _ in range(20):
        make_task(conn)
    claims = queue.claim(conn, agent="docs", worker_id="w", limit=20)
    secrets = [c.callback_secret for c in claims]
    assert len(claims) == 20 and len(set(secrets)) == 20
    assert all(re.fullmatch(r"[0-9a-f]{64}", s) for s in secrets)
    # The same task claimed again, by a later statement, opens an attempt with a new secret.
    assert queue.hand_back(conn, claims[0].attempt_id)
    (again,) = queue.claim(conn, agent="docs", worker_id="w")
    assert again.task.id == claims[0].task.id and again.attempt_id != claims[0].attempt_id
    assert again.callback_secret not in secrets


def test_freed_slots_are_refilled_by_the_next_claim(conn):
    make_agent(conn, max_concurrent_tasks=3)
    for _ in range(10):
        make_task(conn)
    first = queue.claim(conn, agent="docs", worker_id="w", limit=10)
    assert len(first) == 3
    assert queue.claim(conn, agent="docs", worker_id="w", limit=10) == []
    for c in first[:2]:
        queue.apply_callback(conn, c.attempt_id, DONE)
    assert len(queue.claim(conn, agent="docs", worker_id="w", limit=10)) == 2


def _max_overlap(intervals):
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals],
                   key=lambda x: (x[0], x[1]))
    depth = peak = 0
    for _, step in edges:
        depth += step
        peak = max(peak, depth)
    return peak


def test_concurrency_cap_holds_under_racing_claimers(conn, connect):
    cap, claimers, total = 4, 8, 240
    make_agent(conn, max_concurrent_tasks=cap)
    for _ in range(total):
        make_task(conn)
    stop = threading.Event()
    samples, errors, claimed_counts = [], [], []

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
                claimed_counts.append(len(got))
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
    assert len(samples) > 50 and max(samples) <= cap
    assert max(samples) == cap  # the cap was actually reached, not merely respected
    rows = conn.execute("SELECT started_at, finished_at FROM task_attempts").fetchall()
    assert len(rows) == total
    assert _max_overlap([(r["started_at"], r["finished_at"]) for r in rows]) <= cap
    counts = conn.execute("SELECT status::text, count(*) AS n FROM tasks GROUP BY 1").fetchall()
    assert {r["status"]: r["n"] for r in counts} == {"completed": total}
