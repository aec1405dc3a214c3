"""Leases: heartbeats extend them, the sweeper takes back what expired, budgets end in failure."""

from datetime import timedelta

from schema import queue
from schema.models import AttemptStatus, TaskStatus
from tests.factories import make_agent, make_task


def claim_one(conn, now, **kw):
    (c,) = queue.claim(conn, agent="docs", worker_id="w", now=now, **kw)
    return c


def test_heartbeat_extends_the_lease_and_the_sweeper_spares_it(conn):
    make_agent(conn)
    t0 = conn.execute("SELECT now() AS n").fetchone()["n"]
    task = make_task(conn, now=t0)
    c = claim_one(conn, t0, lease_seconds=30)
    assert queue.heartbeat(conn, c.attempt_id, lease_seconds=30, now=t0 + timedelta(seconds=20))
    assert queue.sweep(conn, now=t0 + timedelta(seconds=40)) == 0
    assert queue.get_task(conn, task.id).lease_expires_at == t0 + timedelta(seconds=50)
    assert queue.get_task(conn, task.id).attempts[0].heartbeat_at == t0 + timedelta(seconds=20)


def test_expired_lease_is_swept_back_to_the_queue_with_backoff(conn):
    make_agent(conn)
    t0 = conn.execute("SELECT now() AS n").fetchone()["n"]
    task = make_task(conn, now=t0)
    c = claim_one(conn, t0, lease_seconds=30)
    # Past the lease but not yet swept, the attempt is still the live one.
    assert queue.heartbeat(conn, c.attempt_id, lease_seconds=30, now=t0 + timedelta(seconds=31))
    assert queue.sweep(conn, now=t0 + timedelta(seconds=62)) == 1
    swept = queue.get_task(conn, task.id)
    assert swept.status is TaskStatus.ENQUEUED and swept.locked_by is None
    assert swept.attempts[0].status is AttemptStatus.LOST
    backoff = (swept.run_after - (t0 + timedelta(seconds=62))).total_seconds()
    assert 2.5 <= backoff <= 5.0  # base 5 s, first attempt, jitter between half and all
    assert not queue.heartbeat(conn, c.attempt_id, now=t0 + timedelta(seconds=63))
    assert queue.sweep(conn, now=t0 + timedelta(seconds=64)) == 0


def test_sweeper_fails_the_task_when_the_budget_is_spent(conn):
    make_agent(conn)
    t0 = conn.execute("SELECT now() AS n").fetchone()["n"]
    task = make_task(conn, max_attempts=2, now=t0)
    now = t0
    for _ in range(2):
        claim_one(conn, now, lease_seconds=10)
        now += timedelta(seconds=11)
        assert queue.sweep(conn, now=now) == 1
        now += timedelta(seconds=600)
    final = queue.get_task(conn, task.id)
    assert final.status is TaskStatus.FAILED
    assert "budget spent" in final.error
    assert [a.status for a in final.attempts] == [AttemptStatus.LOST, AttemptStatus.LOST]


def test_heartbeat_of_a_superseded_or_cancelled_attempt_is_refused(conn):
    make_agent(conn)
    t0 = conn.execute("SELECT now() AS n").fetchone()["n"]
    make_task(conn, now=t0)
    c = claim_one(conn, t0)
    queue.cancel(conn, c.task.id, actor="ops@example.com")
    assert not queue.heartbeat(conn, c.attempt_id)


def test_sweep_races_safely_with_itself(conn, connect):
    import threading

    make_agent(conn)
    t0 = conn.execute("SELECT now() AS n").fetchone()["n"]
    for _ in range(60):
        make_task(conn, now=t0)
    queue.claim(conn, agent="docs", worker_id="w", limit=60, now=t0, lease_seconds=5)
    counts = []
    threads = [threading.Thread(target=lambda: counts.append(
        queue.sweep(connect(), now=t0 + timedelta(seconds=6), batch=7))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(counts) == 60
    lost = conn.execute("SELECT count(*) AS n FROM task_attempts WHERE status = 'lost'").fetchone()["n"]
    assert lost == 60
