"""A customer's guaranteed share and burst ceiling beside the fair share, proven by racing claims."""

import random
import threading
from datetime import timedelta

import pytest

from schema import customers, queue
from schema.errors import InvalidArgument
from tests.factories import make_agent, make_task


def _clock(conn):
    return conn.execute("SELECT now() AS n").fetchone()["n"]


def test_a_guaranteed_customer_is_claimed_first_and_a_ceiling_is_never_passed(conn):
    make_agent(conn)
    old = _clock(conn) - timedelta(hours=1)
    for i in range(6):
        make_task(conn, customer="big", now=old + timedelta(seconds=i))
    small = make_task(conn, customer="small", now=old + timedelta(minutes=5))
    customers.customer_shares_apply_config(conn, {"small": (1, None), "big": (None, 2)})
    # The fair share alone would take big's older task first; the guarantee puts small's ahead.
    (first,) = queue.claim(conn, agent="docs", worker_id="w", limit=1)
    assert first.task.id == small.id
    # Big may run two at once, whatever the slots offered.
    got = queue.claim(conn, agent="docs", worker_id="w", limit=5)
    assert [c.task.customer for c in got] == ["big", "big"]
    assert queue.claim(conn, agent="docs", worker_id="w", limit=5) == []
    # One ends: one more may start.
    queue.apply_callback(conn, got[0].attempt_id, {"status": "completed", "result": {"ok": True}, "confidence": 0.9})
    assert [c.task.customer for c in queue.claim(conn, agent="docs", worker_id="w", limit=5)] == ["big"]


def test_shares_are_checked(conn):
    with pytest.raises(InvalidArgument):
        customers.customer_shares_apply_config(conn, {"acme": (3, 2)})
    with pytest.raises(InvalidArgument):
        customers.customer_shares_apply_config(conn, {"acme": (0, None)})
    assert customers.customer_shares_apply_config(conn, {"acme": (1, 3)}) == 1
    assert customers.customer_shares_apply_config(conn, {"acme": (1, 3)}) == 0  # unchanged: not rewritten


def _race(connect, *, claimers: int, rounds: int, measure, moment=lambda seed, r: None) -> None:
    """Every round, all claimers claim at once (the race; `moment(seed, round)` is each claim's
    clock), `measure` counts what runs, then each ends what it holds. Raises what any claimer met."""
    claimed = threading.Barrier(claimers, action=measure)
    start = threading.Barrier(claimers)
    errors = []

    def claimer(seed):
        rng = random.Random(seed)
        c = connect()
        try:
            for r in range(rounds):
                start.wait(timeout=60)
                got = queue.claim(c, agent="docs", worker_id=f"w{seed}", limit=rng.randint(1, 4),
                                  now=moment(seed, r))
                claimed.wait(timeout=60)
                for claim in got:
                    queue.apply_callback(c, claim.attempt_id,
                                         {"status": "completed", "result": {"ok": True}, "confidence": 0.9})
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
            start.abort()
            claimed.abort()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert errors == []


def test_the_ceiling_and_the_guarantee_hold_under_racing_claimers(conn, connect):
    ceiling, claimers = 3, 8
    make_agent(conn)
    old = _clock(conn) - timedelta(hours=1)
    for i in range(120):
        make_task(conn, customer="burst", now=old + timedelta(milliseconds=i))
    for i in range(24):
        make_task(conn, customer="steady", now=old + timedelta(minutes=1, milliseconds=i))
    customers.customer_shares_apply_config(conn, {"burst": (None, ceiling), "steady": (2, None)})
    watch = connect()
    running = []
    rounds = 40

    def measure():
        rows = watch.execute("SELECT customer, count(*) AS n FROM tasks WHERE status = 'processing' "
                             "GROUP BY customer").fetchall()
        running.append({r["customer"]: r["n"] for r in rows})

    _race(connect, claimers=claimers, rounds=rounds, measure=measure)
    assert len(running) == rounds
    # Eight claimers at once, up to four tasks each: burst never ran more than its ceiling.
    assert max(r.get("burst", 0) for r in running) == ceiling
    # The guarantee: while steady had work waiting, it had at least two running, though every one
    # of its tasks is newer than all of burst's.
    steady_left = 24
    for r in running:
        if steady_left:
            assert r.get("steady", 0) >= min(2, steady_left)
        steady_left -= r.get("steady", 0)


def test_the_ceiling_holds_when_a_backoff_ends_between_racing_claims(conn, connect):
    """Claims that race see different queues when a task's backoff ends between their moments:
    the earlier one takes the customer's oldest ready tasks, the later one the task just due (older
    than all of them). Each would start up to the ceiling on its own; only claims that take turns,
    each counting what the one before it started, keep the customer under it."""
    ceiling, claimers, rounds = 3, 8, 40
    make_agent(conn)
    base = _clock(conn) - timedelta(hours=1)
    for i in range(200):
        make_task(conn, customer="burst", now=base - timedelta(hours=1) + timedelta(milliseconds=i))
    due = [make_task(conn, customer="burst", now=base - timedelta(hours=2) + timedelta(milliseconds=r)).id
           for r in range(rounds)]
    # Each round's task was backing off until two seconds into the round (a retry's backoff).
    for r, task_id in enumerate(due):
        conn.execute("UPDATE tasks SET run_after = %s WHERE id = %s",
                     [base + timedelta(seconds=10 * r + 2), task_id])
    customers.customer_shares_apply_config(conn, {"burst": (None, ceiling)})
    watch = connect()
    running = []

    def measure():
        running.append(watch.execute("SELECT count(*) AS n FROM tasks WHERE status = 'processing' "
                                     "AND customer = 'burst'").fetchone()["n"])

    # Half the claimers claim at the round's start, half five seconds in: the round's task is due
    # for the second half only.
    _race(connect, claimers=claimers, rounds=rounds, measure=measure,
          moment=lambda seed, r: base + timedelta(seconds=10 * r + (5 if seed % 2 else 0)))
    assert len(running) == rounds
    assert max(running) == ceiling, running
    # The tasks that came due were claimed too: the race was between two different queues.
    done = conn.execute("SELECT count(*) AS n FROM tasks WHERE id = ANY(%s) AND status = 'completed'",
                        [due]).fetchone()["n"]
    assert done > 0
