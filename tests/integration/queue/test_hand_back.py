"""Hand back, the shutdown transition: the task is enqueued again at once and the attempt is not counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schema import queue
from tests.factories import make_agent, make_task


def test_hand_back_requeues_at_the_given_time_without_spending_an_attempt(conn):
    make_agent(conn)
    task = make_task(conn)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    [claim] = queue.claim(conn, agent="docs", worker_id="w", now=t0)
    assert queue.hand_back(conn, claim.attempt_id, now=t0 + timedelta(seconds=5)) is True
    back = queue.get_task(conn, task.id)
    assert back.status.value == "enqueued" and back.run_after == t0 + timedelta(seconds=5)
    assert back.attempts_left == back.max_attempts
    [attempt] = back.attempts
    assert attempt.status.value == "handed_back" and attempt.finished_at == t0 + timedelta(seconds=5)
    # Guarded on state and attempt: a second hand back, or one from an old attempt, changes nothing.
    assert queue.hand_back(conn, claim.attempt_id) is False
    [again] = queue.claim(conn, agent="docs", worker_id="w2", now=t0 + timedelta(seconds=6))
    assert queue.hand_back(conn, claim.attempt_id) is False
    assert queue.get_task(conn, task.id).status.value == "processing"
    assert queue.get_attempt(conn, again.attempt_id).status.value == "processing"
