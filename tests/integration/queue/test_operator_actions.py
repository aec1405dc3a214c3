"""Cancel and retry: allowed transitions, history kept, the actor recorded."""

import pytest

from schema import queue
from schema.errors import InvalidTransition
from schema.models import AttemptStatus, CallbackKind, TaskStatus
from tests.factories import make_agent, make_task


def test_cancel_an_enqueued_task(conn):
    make_agent(conn)
    task = make_task(conn)
    cancelled = queue.cancel(conn, task.id, actor="ana@example.com")
    assert cancelled.status is TaskStatus.CANCELLED and cancelled.cancelled_by == "ana@example.com"
    assert cancelled.events[-1].actor == "ana@example.com"
    assert queue.claim(conn, agent="docs", worker_id="w") == []


def test_cancel_a_processing_task_ignores_its_later_callback(conn):
    make_agent(conn)
    task = make_task(conn)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    cancelled = queue.cancel(conn, task.id, actor="ops")
    assert cancelled.attempts[0].status is AttemptStatus.CANCELLED
    late = queue.apply_callback(conn, c.attempt_id, {"status": "completed", "result": {}})
    assert late.kind is CallbackKind.IGNORED
    assert queue.get_task(conn, task.id).status is TaskStatus.CANCELLED


def test_cancel_a_completed_task_is_refused(conn):
    make_agent(conn)
    task = make_task(conn)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    queue.apply_callback(conn, c.attempt_id, {"status": "completed", "result": {}})
    with pytest.raises(InvalidTransition, match="completed"):
        queue.cancel(conn, task.id, actor="ops")


def test_retry_a_failed_task_with_a_fresh_budget_keeping_history(conn):
    make_agent(conn)
    task = make_task(conn, max_attempts=1)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    queue.apply_callback(conn, c.attempt_id, {"status": "failed", "error": "bad", "retryable": True})
    assert queue.get_task(conn, task.id).status is TaskStatus.FAILED
    retried = queue.retry(conn, task.id, actor="ana", priority=8)
    assert retried.status is TaskStatus.ENQUEUED and retried.priority == 8
    assert retried.retried_by == "ana" and retried.attempts_left == 1 and retried.error is None
    (again,) = queue.claim(conn, agent="docs", worker_id="w")
    assert again.task.id == task.id and again.attempt_no == 2
    history = queue.get_task(conn, task.id)
    assert [a.status for a in history.attempts] == [AttemptStatus.FAILED, AttemptStatus.PROCESSING]
    assert [e.status.value for e in history.events] == ["enqueued", "processing", "failed", "enqueued", "processing"]
    assert history.events[3].actor == "ana"


def test_retry_a_cancelled_task(conn):
    make_agent(conn)
    task = make_task(conn)
    queue.cancel(conn, task.id, actor="ops")
    assert queue.retry(conn, task.id, actor="ops").status is TaskStatus.ENQUEUED


def test_retry_a_completed_task_creates_a_re_extraction(conn):
    make_agent(conn)
    task = make_task(conn, customer="acme", priority=3)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    queue.apply_callback(conn, c.attempt_id, {"status": "completed", "result": {"v": 1}})
    child = queue.retry(conn, task.id, actor="ana")
    assert child.id != task.id and child.parent_id == task.id
    assert child.status is TaskStatus.ENQUEUED and child.customer == "acme" and child.priority == 3
    assert child.document_uri == task.document_uri and child.submitted_by == "ana"
    assert queue.get_task(conn, task.id).status is TaskStatus.COMPLETED


def test_retry_a_live_task_is_refused(conn):
    make_agent(conn)
    task = make_task(conn)
    with pytest.raises(InvalidTransition, match="enqueued"):
        queue.retry(conn, task.id, actor="ops")


def test_a_re_extraction_keeps_every_column_that_sizes_its_reservation(conn):
    make_agent(conn)
    task = make_task(conn, customer="acme", estimated_tokens=None, document_chars=9000, pages=3,
                     document_bytes=120_000, document_sha256="a" * 64)
    assert task.estimate_is_static and task.document_chars == 9000
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    queue.apply_callback(conn, c.attempt_id, {"status": "completed", "result": {"v": 1}})
    child = queue.retry(conn, task.id, actor="ana")
    # Every column a new task takes from its submitter is copied, but its link and its batch.
    for name in ("agent", "customer", "priority", "document_uri", "document_name", "document_sha256",
                 "document_bytes", "document_chars", "pages", "estimated_tokens", "estimate_is_static",
                 "max_attempts"):
        assert getattr(child, name) == getattr(task, name), name
    assert child.retried_by == "ana" and child.batch_id is None and not child.held
