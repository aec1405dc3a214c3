"""The row builders make the same objects as the dataclass constructors, without calling them."""

import copy
import dataclasses
import pickle
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from schema.models import (
    Agent,
    Attempt,
    AttemptStatus,
    Claim,
    Task,
    TaskEvent,
    TaskStatus,
    _layout,
    agent_from_row,
    attempt_from_row,
    claim_from_row,
    event_from_row,
    task_from_row,
    task_status,
)
from schema.stats_types import StreamEvent

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def task_row(**changes):
    """A row as the claim statement returns it: every task column, and some the Task lacks."""
    row = dict(id=12, agent="docs", customer="acme", priority=5, status="processing",
               document_uri="file:///a.pdf", document_name="a.pdf", document_sha256="a" * 64,
               document_bytes=1234, pages=2, estimated_tokens=2200, attempt_count=1, attempt_base=0,
               max_attempts=3, run_after=NOW, waiting_since=None, locked_by="w1", lease_expires_at=NOW,
               current_attempt_id=77, parent_id=None, result={"a": [1]}, confidence=0.5, error=None,
               submitted_by="me", cancelled_by=None, retried_by=None, created_at=NOW, updated_at=NOW,
               started_at=NOW, finished_at=None, held=True, batch_id=4,
               # columns no Task field holds
               document_chars=None, estimate_is_static=True, claim_attempt_id=77, claim_attempt_no=1,
               claim_callback_secret="s" * 64)
    row.update(changes)
    return row


def constructed(cls, row, **overrides):
    """What the constructor makes of the row's fields and the overrides."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**{k: v for k, v in row.items() if k in names}, **overrides})


def same(built, made):
    """Equal in every way the code can tell: fields, equality, repr, attribute order."""
    assert type(built) is type(made)
    assert built == made and repr(built) == repr(made)
    assert list(vars(built).items()) == list(vars(made).items())
    assert dataclasses.asdict(built) == dataclasses.asdict(made)


def test_task_from_row_is_the_constructors_task_with_extra_and_missing_columns():
    row = task_row()
    same(task_from_row(row), constructed(Task, row, status=TaskStatus.PROCESSING))
    # Without the columns that have defaults: held, batch_id, and the default_factory lists.
    for missing in (("held",), ("batch_id",), ("held", "batch_id")):
        row = {k: v for k, v in task_row().items() if k not in missing}
        same(task_from_row(row), constructed(Task, row, status=TaskStatus.PROCESSING))
    task = task_from_row(row)
    assert task.held is False and task.batch_id is None and task.attempts == [] and task.events == []


def test_built_objects_stay_frozen_and_replaceable_and_own_their_lists():
    first, second = task_from_row(task_row()), task_from_row(task_row())
    assert first.attempts is not second.attempts and first.events is not second.events
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.priority = 1
    changed = dataclasses.replace(first, priority=9)
    assert changed.priority == 9 and changed == dataclasses.replace(
        constructed(Task, task_row(), status=TaskStatus.PROCESSING), priority=9)
    assert pickle.loads(pickle.dumps(first)) == first and copy.deepcopy(first) == first
    with pytest.raises(TypeError):
        hash(first)  # as the constructor's: unhashable lists inside


def test_task_from_row_with_attempts_and_events():
    attempt_row = dict(id=77, task_id=12, attempt_no=1, agent="docs", worker_id="w1", executor="noop",
                       status="completed", job_run_id=None, pid=None, trace_id=None, estimated_tokens=2200,
                       input_tokens=10, output_tokens=20, llm_cost_usd=Decimal("0.01"),
                       compute_cost_usd=None, dbus=None, compute_seconds=1.5, cpu_seconds=None,
                       usage_recorded_at=NOW, reported_status="completed", callbacks_received=1,
                       started_at=NOW, heartbeat_at=NOW, finished_at=NOW, error=None, callback_secret="x")
    event_row = dict(id=3, task_id=12, status="completed", prev_status="processing", actor=None, at=NOW)
    attempt, event = attempt_from_row(attempt_row), event_from_row(event_row)
    same(attempt, constructed(Attempt, attempt_row, status=AttemptStatus.COMPLETED))
    same(event, constructed(TaskEvent, event_row, status=TaskStatus.COMPLETED,
                            prev_status=TaskStatus.PROCESSING))
    task = task_from_row(task_row(), [attempt], [event])
    assert task.attempts == [attempt] and task.events == [event]


def test_a_row_missing_a_required_column_fails_as_the_constructor_does():
    row = task_row()
    del row["document_uri"]
    with pytest.raises(TypeError, match="document_uri"):
        task_from_row(row)


def test_agent_from_row_fills_defaults():
    row = dict(name="docs", max_concurrent_tasks=None, max_tpm=1000, lease_seconds=300, starvation_seconds=60,
               executor="noop", model=None, price_input_per_mtok=None, price_output_per_mtok=None,
               settings={}, created_at=NOW, updated_at=NOW, unrelated=1)
    same(agent_from_row(row), constructed(Agent, row))
    assert agent_from_row(row).rate_limited_total == 0


def test_claim_from_row_is_the_constructors_claim():
    row = task_row()
    claim = claim_from_row(row)
    same(claim, Claim(task=constructed(Task, row, status=TaskStatus.PROCESSING), attempt_id=77, attempt_no=1,
                      lease_expires_at=NOW, callback_secret="s" * 64))
    assert "s" * 64 not in repr(claim)


def test_stream_events_are_the_constructors_events():
    event = StreamEvent.from_notify({"e": "7", "id": 3, "a": "docs", "s": "processing", "p": "enqueued"})
    same(event, StreamEvent(id=7, task_id=3, agent="docs", status=TaskStatus.PROCESSING,
                            prev_status=TaskStatus.ENQUEUED))
    row = {"id": 8, "task_id": 3, "agent": "docs", "status": "enqueued", "prev_status": None, "actor": "me",
           "at": NOW}
    same(StreamEvent.of(row), StreamEvent(id=8, task_id=3, agent="docs", status=TaskStatus.ENQUEUED,
                                          prev_status=None, actor="me", at=NOW))
    for bad in ({"e": 1, "id": 2, "a": "x", "s": "lost"}, {"e": None, "id": 2, "a": "x", "s": "enqueued"}):
        with pytest.raises((ValueError, TypeError)):
            StreamEvent.from_notify(bad)


def test_task_status_is_the_enum_lookup():
    for status in TaskStatus:
        assert task_status(status.value) is TaskStatus(status.value) is task_status(status)
    for bad in ("lost", None, ["enqueued"]):
        with pytest.raises(ValueError):
            task_status(bad)


def test_the_classes_built_without_their_constructor_allow_it():
    assert all(_layout(cls).direct for cls in (Agent, Attempt, TaskEvent, Task, Claim, StreamEvent))
