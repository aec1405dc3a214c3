"""Operator actions shared by the pages and the HTTP API: pausing agents, retrying and cancelling
tasks, and what a bulk action over a whole filter would touch."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg import Connection
from psycopg_pool import ConnectionPool

from app.figure_cache import in_thread
from app.inputs import check_text
from app.services import forget_live
from schema import queue, stats
from schema.errors import InvalidArgument, InvalidTransition, NotFound, UnknownAgent
from schema.models import TERMINAL_STATUSES, Agent, TaskStatus
from schema.stats_types import TaskFilter

# -- agents -------------------------------------------------------------------------------------

async def pause_agent(pool: ConnectionPool, agent: str, *, actor: str, until: datetime | None = None,
                      reason: str | None = None) -> Agent:
    """Pauses an agent: running tasks finish, nothing new starts until `until` or a resume."""
    check_text("reason", reason)
    if until is not None and until.tzinfo is None:
        until = until.replace(tzinfo=UTC)
    agent_row = await in_thread(pool, queue.pause_agent, agent, actor=actor, until=until, reason=reason)
    forget_live(pool)
    return agent_row


async def resume_agent(pool: ConnectionPool, agent: str) -> Agent:
    """Ends an agent's pause at once."""
    agent_row = await in_thread(pool, queue.resume_agent, agent)
    forget_live(pool)
    return agent_row


async def clear_agent_halt(pool: ConnectionPool, agent: str) -> bool:
    """Lets a halted agent's tasks be claimed again; False if it was not halted."""
    return await in_thread(pool, queue.clear_agent_halt, agent)


# -- tasks --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ActionResult:
    """The outcome of retrying or cancelling one task."""

    task_id: int
    ok: bool
    message: str
    new_task_id: int | None = None
    status: str | None = None
    not_found: bool = False
    invalid: bool = False     # the request itself was wrong (an unknown extractor, say)


def _act(conn: Connection, ids: list[int], action: str, actor: str, priority: int | None = None,
         edit: dict[str, Any] | None = None) -> list[ActionResult]:
    results = []
    for task_id in ids:
        try:
            if action == "retry":
                task = queue.retry(conn, task_id, actor=actor, priority=priority, **(edit or {}))
                text = (f"task {task_id} re-extracted as task {task.id}" if task.id != task_id
                        else f"task {task_id} re-enqueued")
            else:
                task = queue.cancel(conn, task_id, actor=actor)
                text = f"task {task_id} cancelled"
            results.append(ActionResult(task_id, True, text, new_task_id=task.id, status=task.status.value))
        except InvalidTransition as exc:
            results.append(ActionResult(task_id, False, str(exc)))
        except UnknownAgent as exc:
            results.append(ActionResult(task_id, False, str(exc), invalid=True))
        except NotFound as exc:
            results.append(ActionResult(task_id, False, str(exc), not_found=True))
        except InvalidArgument as exc:
            results.append(ActionResult(task_id, False, str(exc), invalid=True))
    return results


async def retry_tasks(pool: ConnectionPool, ids: list[int], *, actor: str, priority: int | None = None,
                      agent: str | None = None, extractor: str | None = None,
                      model: str | None = None) -> list[ActionResult]:
    """Retries each task (at `priority` if given, else its own); a completed task gets a re-extraction
    child. An agent, extractor or model given makes it an edit and retry, recorded on the task."""
    edit = {"agent": agent, "extractor": extractor, "model": model}
    return await in_thread(pool, _act, ids, "retry", actor, priority, edit)


async def cancel_tasks(pool: ConnectionPool, ids: list[int], *, actor: str) -> list[ActionResult]:
    return await in_thread(pool, _act, ids, "cancel", actor)


# A bulk action over the whole filter acts on at most this many tasks at once (it says so).
BULK_MAX = 10_000
# Retry takes every ended task (the terminal set); cancel every live one.
BULK_STATES = {"retry": tuple(sorted(s.value for s in TERMINAL_STATUSES)),
               "cancel": (TaskStatus.ENQUEUED.value, TaskStatus.PROCESSING.value)}


@dataclass(frozen=True)
class BulkPreview:
    """What a bulk action over the whole filter would touch, counted before anything is done."""

    action: str
    ids: list[int]
    statuses: dict[str, int]
    capped: bool              # more tasks match than BULK_MAX: the first BULK_MAX (by id) are taken

    @property
    def count(self) -> int:
        return len(self.ids)


async def bulk_preview(pool: ConnectionPool, flt: TaskFilter, action: str) -> BulkPreview:
    """The tasks a retry or cancel of everything the filter selects applies to (every page)."""
    if action not in BULK_STATES:
        raise ValueError(f"unknown bulk action {action!r}: use retry or cancel")
    rows = await in_thread(pool, stats.task_ids_for_bulk_list, flt, BULK_STATES[action], limit=BULK_MAX + 1)
    counts: dict[str, int] = {}
    for _, status in rows[:BULK_MAX]:
        counts[status] = counts.get(status, 0) + 1
    return BulkPreview(action, [i for i, _ in rows[:BULK_MAX]], counts, len(rows) > BULK_MAX)
