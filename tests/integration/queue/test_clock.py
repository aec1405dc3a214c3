"""Every transition takes its time as a parameter: cancel, retry, hand back and agent updates."""

from datetime import UTC, datetime, timedelta

from schema import queue, stats
from tests.factories import make_agent, make_task

T0 = datetime(2031, 5, 1, 12, 0, tzinfo=UTC)


def test_operator_actions_and_hand_back_use_the_given_clock(conn):
    make_agent(conn)
    a, b = make_task(conn), make_task(conn)
    claims = queue.claim(conn, agent="docs", worker_id="w", limit=2)
    cancelled = queue.cancel(conn, a.id, actor="op", now=T0)
    assert cancelled.finished_at == T0 and cancelled.updated_at == T0
    assert [x.finished_at for x in cancelled.attempts] == [T0]
    reopened = queue.retry(conn, a.id, actor="op", now=T0 + timedelta(minutes=1))
    assert reopened.updated_at == T0 + timedelta(minutes=1) and reopened.finished_at is None
    other = next(c for c in claims if c.task.id == b.id)
    assert queue.hand_back(conn, other.attempt_id, now=T0 + timedelta(minutes=2))
    given = queue.get_task(conn, b.id)
    assert given.updated_at == T0 + timedelta(minutes=2)
    assert given.attempts[0].finished_at == T0 + timedelta(minutes=2)
    # Both tasks were re-enqueued at the given times: the queue's age is measured from the clock.
    health = stats.stats_queue_health(conn, now=a.created_at + timedelta(hours=1))
    assert any(abs(row["oldest_enqueued_age_s"] - 3600) < 1 for row in health)


def test_agent_updates_use_the_given_clock(conn):
    make_agent(conn)
    agent = queue.configure_agent(conn, "docs", max_tpm=1000, now=T0)
    assert agent.updated_at == T0
