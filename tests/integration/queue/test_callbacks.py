"""Callbacks: idempotent under concurrent replays, fenced across attempts, spend once."""

import threading
from datetime import timedelta

from schema import queue
from schema.models import AttemptStatus, CallbackKind, TaskStatus
from tests.factories import make_agent, make_task

RESULT = {"document_type": "invoice", "fields": {"total": {"value": 10.0, "confidence": 0.9}}}


def completed(**kw):
    return {"status": "completed", "result": RESULT, "confidence": 0.9, "input_tokens": 1200,
            "output_tokens": 300, "llm_cost_usd": 0.0123, **kw}


def failed(retryable=False, **kw):
    return {"status": "failed", "error": "model endpoint returned 500", "retryable": retryable, **kw}


def spend(conn):
    return conn.execute("SELECT coalesce(sum(input_tokens), 0) AS i, coalesce(sum(output_tokens), 0) AS o, "
                        "coalesce(sum(llm_cost_usd), 0) AS c FROM task_attempts").fetchone()


def test_the_same_callback_five_times_concurrently_applies_once(conn, connect):
    make_agent(conn)
    task = make_task(conn)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    barrier = threading.Barrier(5)
    outcomes, errors = [], []

    def send():
        own = connect()
        barrier.wait()
        try:
            outcomes.append(queue.apply_callback(own, c.attempt_id, completed()))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=send) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    kinds = sorted(o.kind.value for o in outcomes)
    assert kinds == ["applied", "duplicate", "duplicate", "duplicate", "duplicate"]
    assert sum(o.applied for o in outcomes) == 1
    row = spend(conn)
    assert (row["i"], row["o"], float(row["c"])) == (1200, 300, 0.0123)
    final = queue.get_task(conn, task.id)
    assert final.status is TaskStatus.COMPLETED and final.result == RESULT
    assert final.attempts[0].callbacks_received == 5
    completions = conn.execute("SELECT count(*) AS n FROM task_events WHERE status = 'completed'").fetchone()["n"]
    assert completions == 1


def _lost_then_reclaimed(conn):
    t0 = conn.execute("SELECT now() AS n").fetchone()["n"]
    task = make_task(conn, now=t0)
    (old,) = queue.claim(conn, agent="docs", worker_id="w1", now=t0, lease_seconds=10)
    queue.sweep(conn, now=t0 + timedelta(seconds=11))
    (new,) = queue.claim(conn, agent="docs", worker_id="w2", now=t0 + timedelta(seconds=60))
    assert new.task.id == task.id and new.attempt_no == 2
    return task, old, new


def test_stale_failure_changes_only_its_own_attempt(conn):
    make_agent(conn)
    task, old, new = _lost_then_reclaimed(conn)
    outcome = queue.apply_callback(conn, old.attempt_id, failed(input_tokens=50))
    assert outcome.kind is CallbackKind.RECORDED and not outcome.applied
    now = queue.get_task(conn, task.id)
    assert now.status is TaskStatus.PROCESSING and now.current_attempt_id == new.attempt_id
    assert now.attempts[0].status is AttemptStatus.FAILED and now.attempts[0].input_tokens == 50
    assert now.attempts[1].status is AttemptStatus.PROCESSING


def test_completion_from_an_old_attempt_wins_and_supersedes_the_current_one(conn):
    make_agent(conn)
    task, old, new = _lost_then_reclaimed(conn)
    outcome = queue.apply_callback(conn, old.attempt_id, completed())
    assert outcome.applied and outcome.superseded_attempt_ids == (new.attempt_id,)
    final = queue.get_task(conn, task.id)
    assert final.status is TaskStatus.COMPLETED and final.current_attempt_id == old.attempt_id
    assert [a.status for a in final.attempts] == [AttemptStatus.COMPLETED, AttemptStatus.SUPERSEDED]
    # The superseded attempt reports later: ignored, but its own spend is recorded, once.
    late = queue.apply_callback(conn, new.attempt_id, completed(input_tokens=700, output_tokens=70))
    assert late.kind is CallbackKind.IGNORED and late.usage_recorded
    again = queue.apply_callback(conn, new.attempt_id, completed(input_tokens=9999, output_tokens=1))
    assert again.kind is CallbackKind.DUPLICATE and not again.usage_recorded
    attempts = queue.get_task(conn, task.id).attempts
    assert (attempts[1].input_tokens, attempts[1].output_tokens) == (700, 70)
    assert queue.get_task(conn, task.id).result == RESULT


def test_terminal_task_ignores_callbacks(conn):
    make_agent(conn)
    task = make_task(conn)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    queue.cancel(conn, task.id, actor="ops")
    outcome = queue.apply_callback(conn, c.attempt_id, completed())
    assert outcome.kind is CallbackKind.IGNORED and outcome.usage_recorded
    final = queue.get_task(conn, task.id)
    assert final.status is TaskStatus.CANCELLED and final.result is None
    assert final.attempts[0].input_tokens == 1200


def test_retryable_failure_backs_off_exponentially_until_the_budget_is_spent(conn):
    make_agent(conn)
    t0 = conn.execute("SELECT now() AS n").fetchone()["n"]
    task = make_task(conn, max_attempts=3, now=t0)
    now, delays = t0, []
    for attempt in range(1, 4):
        (c,) = queue.claim(conn, agent="docs", worker_id="w", now=now)
        outcome = queue.apply_callback(conn, c.attempt_id, failed(retryable=True), now=now)
        assert outcome.applied
        current = queue.get_task(conn, task.id)
        if attempt < 3:
            assert current.status is TaskStatus.ENQUEUED
            delays.append((current.run_after - now).total_seconds())
            assert queue.claim(conn, agent="docs", worker_id="w", now=now) == []  # backing off
            now = current.run_after
        else:
            assert current.status is TaskStatus.FAILED
    assert 2.5 <= delays[0] <= 5.0 and 5.0 <= delays[1] <= 10.0


def test_non_retryable_failure_fails_at_once(conn):
    make_agent(conn)
    task = make_task(conn, max_attempts=5)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    outcome = queue.apply_callback(conn, c.attempt_id, failed(retryable=False))
    assert outcome.applied and outcome.task_status is TaskStatus.FAILED
    final = queue.get_task(conn, task.id)
    assert final.status is TaskStatus.FAILED and final.error == "model endpoint returned 500"


def test_completion_from_an_attempt_that_reported_failure_before_makes_it_the_completed_one(conn):
    make_agent(conn)
    task, old, _new = _lost_then_reclaimed(conn)
    assert queue.apply_callback(conn, old.attempt_id, failed()).kind is CallbackKind.RECORDED
    outcome = queue.apply_callback(conn, old.attempt_id, completed())
    assert outcome.applied
    final = queue.get_task(conn, task.id)
    assert final.status is TaskStatus.COMPLETED
    assert [a.status for a in final.attempts] == [AttemptStatus.COMPLETED, AttemptStatus.SUPERSEDED]
    assert final.attempts[0].error is None


def test_completion_after_a_hand_back_makes_that_attempt_the_completed_one(conn):
    make_agent(conn)
    task = make_task(conn)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    assert queue.hand_back(conn, c.attempt_id)
    handed = queue.get_task(conn, task.id)
    assert handed.status is TaskStatus.ENQUEUED and handed.attempts_left == handed.max_attempts
    assert queue.apply_callback(conn, c.attempt_id, completed()).applied
    final = queue.get_task(conn, task.id)
    assert final.status is TaskStatus.COMPLETED
    assert [a.status for a in final.attempts] == [AttemptStatus.COMPLETED]


def test_a_result_is_stored_as_sent_whichever_encoder_writes_the_report(conn):
    """Reports reach Postgres as JSON written by orjson, or by json for what orjson refuses (an
    integer past 64 bits): either way the task keeps the result exactly, non-ASCII text included."""
    make_agent(conn)
    results = [{"document_type": "invoice", "fields": {"issuer": {"value": "Société Générale ✓", "confidence": 0.9},
                                                       "total": {"value": 1e-7, "confidence": 1.0}}},
               {"document_type": "invoice", "fields": {"iban_digits": {"value": 2**70 + 1, "confidence": 0.8}}}]
    for result in results:
        task = make_task(conn)
        (c,) = queue.claim(conn, agent="docs", worker_id="w")
        assert queue.apply_callback(conn, c.attempt_id, completed(result=result)).applied
        stored = conn.execute("SELECT result FROM tasks WHERE id = %s", [task.id]).fetchone()["result"]
        assert stored == result


def test_the_settlement_function_still_takes_reports_as_jsonb_for_an_app_of_the_version_before(conn):
    """While a deploy runs, an app of the version before may still call quire_apply_reports with
    jsonb: that form applies the report as the json one does."""
    make_agent(conn)
    task = make_task(conn)
    (c,) = queue.claim(conn, agent="docs", worker_id="w")
    report = '[{"attempt_id": %d, "status": "completed", "result": {"document_type": "invoice"}, "confidence": 0.9}]'
    [row] = conn.execute("SELECT * FROM quire_apply_reports(%s::jsonb, %s::bigint[], false, NULL, 1, 60)",
                         [report % c.attempt_id, [c.attempt_id]]).fetchall()
    assert (row["kind"], row["task_status"]) == ("completed", "completed")
    assert queue.get_task(conn, task.id).result == {"document_type": "invoice"}
