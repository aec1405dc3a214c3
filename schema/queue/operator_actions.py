"""Operator actions: cancel, retry (with an edit of its agent, extractor, model or priority), and
reading a task or an attempt."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from schema.errors import InvalidArgument, InvalidTransition, UnknownAttempt, UnknownTask
from schema.models import (
    MAX_NAME_CHARS,
    MAX_PRIORITY,
    MIN_PRIORITY,
    Attempt,
    Task,
    TaskStatus,
    attempt_from_row,
    event_from_row,
    task_from_row,
)
from schema.queue.agent_config import get_agent
from schema.queue.common import require_int, require_text, set_actor, transaction
from schema.queue.enqueueing import BATCH_COLUMNS
from schema.sql import fetch_all as _rows
from schema.sql import fetch_one as _row
from schema.sql import fetch_row


def cancel(conn: psycopg.Connection, task_id: int, *, actor: str, now: datetime | None = None) -> Task:
    """Cancels an enqueued or processing task; its running attempts are cancelled with it."""
    require_int(task_id, "task_id", low=1)
    require_text(actor, "actor")
    with transaction(conn):
        task = _row(conn, "task_lock", {"task_id": task_id})
        if task is None:
            raise UnknownTask(f"unknown task {task_id}")
        set_actor(conn, actor)
        row = _row(conn, "task_cancel_if_live", {"task_id": task_id, "actor": actor, "now": now})
        if row is None:
            raise InvalidTransition(f"task {task_id} is {task['status']}: only enqueued or processing tasks can be cancelled")
        _rows(conn, "attempt_cancel_open", {"task_id": task_id, "now": now})
    return get_task(conn, task_id)


def retry(conn: psycopg.Connection, task_id: int, *, actor: str, priority: int | None = None,
          agent: str | None = None, extractor: str | None = None, model: str | None = None,
          now: datetime | None = None) -> Task:
    """Re-runs a failed or cancelled task; on a completed one, enqueues a re-extraction child.

    Edit and retry: another agent, extractor, model or priority for the run, recorded on the task
    that runs (who, when, each field from and to)."""
    require_int(task_id, "task_id", low=1)
    require_text(actor, "actor")
    if priority is not None:
        require_int(priority, "priority", low=MIN_PRIORITY, high=MAX_PRIORITY)
    for value, name in ((agent, "agent"), (extractor, "extractor"), (model, "model")):
        if value is not None:
            require_text(value, name)
            if len(value) > MAX_NAME_CHARS or "\x00" in value:
                raise InvalidArgument(f"The {name} name is at most {MAX_NAME_CHARS} characters, without NUL")
    if extractor is not None and extractor not in EXTRACTORS:
        raise InvalidArgument(f"There is no extractor {extractor[:40]!r}: choose one of {', '.join(EXTRACTORS)}")
    with transaction(conn):
        task = _row(conn, "task_lock", {"task_id": task_id})
        if task is None:
            raise UnknownTask(f"unknown task {task_id}")
        set_actor(conn, actor)
        edit = _run_edit(conn, task, priority=priority, agent=agent, extractor=extractor, model=model)
        if task["status"] == TaskStatus.COMPLETED.value:
            # The child goes in through the enqueue's statement, every column copied from its parent,
            # with the agent and run settings of the edit.
            child = {**{k: task[k] for k in BATCH_COLUMNS}, "parent_id": task_id, "batch_id": None, "held": False,
                     "priority": task["priority"] if priority is None else priority,
                     "agent": edit["agent"], "run_overrides": json.dumps(edit["run_overrides"])}
            row = fetch_row(conn, "task_insert_batch", {**{k: [v] for k, v in child.items()},
                                                   "submitted_by": actor, "retried_by": actor, "now": now})
            new_id = row["id"]
        elif task["status"] in (TaskStatus.FAILED.value, TaskStatus.CANCELLED.value):
            new_id = task_id
        else:
            raise InvalidTransition(f"task {task_id} is {task['status']}: only failed, cancelled or completed tasks can be retried")
        if edit["changes"]:
            # Set before the reopen: the reopen's event then wakes the new agent's claimers.
            _row(conn, "task_edit_for_retry", {"task_id": new_id, "agent": edit["agent"],
                                               "run_overrides": Jsonb(edit["run_overrides"]),
                                               "changes": Jsonb(edit["changes"]), "actor": actor, "now": now})
        if new_id == task_id:
            reopened = _row(conn, "task_reopen_if_ended", {"task_id": task_id, "actor": actor,
                                                           "priority": priority, "now": now})
            if reopened is None:
                raise InvalidTransition(f"task {task_id} is {task['status']}: only failed, cancelled or completed tasks can be retried")
    return get_task(conn, new_id)


# The extractors an agent's runs can be edited to use (agents/extract.py names them).
EXTRACTORS = ("offline", "llm", "cascade")


def _run_edit(conn: psycopg.Connection, task: Mapping[str, Any], *, priority: int | None, agent: str | None,
              extractor: str | None, model: str | None) -> dict[str, Any]:
    """What an edit-and-retry changes: the agent, the run overrides, and each changed field as
    [from, to] (empty when nothing changes)."""
    current = get_agent(conn, task["agent"])
    target = get_agent(conn, agent) if agent is not None and agent != task["agent"] else current
    overrides = dict(task.get("run_overrides") or {})
    if target is not current:
        overrides = {}  # another agent's own settings apply, unless named again below
    changes: dict[str, list[Any]] = {}
    if target is not current:
        changes["agent"] = [current.name, target.name]
    was_extractor = (task.get("run_overrides") or {}).get("extractor") or (current.settings or {}).get("extractor")
    was_model = (task.get("run_overrides") or {}).get("model") or current.model
    if extractor is not None and extractor != was_extractor:
        overrides["extractor"] = extractor
        changes["extractor"] = [was_extractor, extractor]
    if model is not None and model != was_model:
        overrides["model"] = model
        changes["model"] = [was_model, model]
    if priority is not None and priority != task["priority"]:
        changes["priority"] = [task["priority"], priority]
    return {"agent": target.name, "run_overrides": overrides, "changes": changes}


def get_task(conn: psycopg.Connection, task_id: int) -> Task:
    """One task with its attempts and its timeline."""
    require_int(task_id, "task_id", low=1)
    with transaction(conn):
        row = _row(conn, "task_get", {"task_id": task_id})
        if row is None:
            raise UnknownTask(f"unknown task {task_id}")
        attempts = [attempt_from_row(r) for r in _rows(conn, "attempt_list_for_task", {"task_id": task_id})]
        events = [event_from_row(r) for r in _rows(conn, "task_events_for_task", {"task_id": task_id})]
    return task_from_row(row, attempts, events)


def get_attempt(conn: psycopg.Connection, attempt_id: int) -> Attempt:
    row = _row(conn, "attempt_get", {"attempt_id": attempt_id})
    if row is None:
        raise UnknownAttempt(f"unknown attempt {attempt_id}")
    return attempt_from_row(row)
