"""One attempt that reports twice, with different statuses: what DESIGN.md's fencing rules make of it.

"A `completed` from any attempt of a task that is not yet terminal wins and supersedes the others;
a terminal task ignores everything." So a failure that ended the task (not retryable, or the last
attempt) is final, and a completion that follows it changes nothing; a retryable failure left the
task in the queue, and a completion from the same attempt still wins, as real work should. What the
endpoint taught (a rate limit, a Retry-After) counts once per attempt, whatever the later reports."""

from __future__ import annotations

from schema import queue
from schema.models import CallbackKind, TaskStatus
from tests.factories import make_agent, make_task

RESULT = {"document_type": "invoice", "fields": {}}


def claimed(conn, **task):
    make_agent(conn, "docs")
    made = make_task(conn, "docs", **task)
    (claim,) = queue.claim(conn, agent="docs", worker_id="w")
    return made, claim


def test_a_failure_that_ended_the_task_is_not_followed_by_the_same_attempts_completion(conn):
    task, claim = claimed(conn)
    failed = queue.apply_callback(conn, claim.attempt_id, {"status": "failed", "error": "unreadable",
                                                           "retryable": False})
    assert failed.kind is CallbackKind.APPLIED and failed.task_status is TaskStatus.FAILED
    late = queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": RESULT,
                                                         "input_tokens": 10, "output_tokens": 5})
    assert late.kind is CallbackKind.IGNORED
    after = queue.get_task(conn, task.id)
    assert after.status is TaskStatus.FAILED and after.result is None
    assert [a.status.value for a in after.attempts] == ["failed"]


def test_a_retryable_failure_then_a_completion_completes_once_and_pauses_the_agent_once(conn):
    task, claim = claimed(conn)
    limited = {"status": "failed", "error": "HTTP 429", "retryable": True, "rate_limited": 3,
               "retry_after_seconds": 120}
    first = queue.apply_callback(conn, claim.attempt_id, limited)
    assert first.task_status is TaskStatus.ENQUEUED
    paused = queue.get_agent(conn, "docs")
    done = queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": RESULT})
    assert done.kind is CallbackKind.APPLIED and done.task_status is TaskStatus.COMPLETED
    # The failure replayed after the completion: the task is terminal, and the endpoint's answer was
    # already counted, so neither the pause nor the rate-limit count moves.
    replay = queue.apply_callback(conn, claim.attempt_id, limited)
    assert replay.kind is CallbackKind.IGNORED
    agent = queue.get_agent(conn, "docs")
    assert agent.rate_limited_total == paused.rate_limited_total == 3
    assert agent.throttled_until == paused.throttled_until is not None
    assert queue.get_task(conn, task.id).status is TaskStatus.COMPLETED
