"""Enqueue: new tasks, checked and inserted in one statement, with their token estimates."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from schema import payloads
from schema.errors import InvalidArgument, UnknownAgent, UnknownTask
from schema.models import (
    DEFAULT_PRIORITY,
    MAX_DOCUMENT_NAME_CHARS,
    MAX_NAME_CHARS,
    MAX_PRIORITY,
    MAX_URI_CHARS,
    MIN_PRIORITY,
    Task,
    task_from_row,
)
from schema.queue.common import require_int, require_text
from schema.sql import fetch_all as _rows
from schema.sql import fetch_one as _row
from schema.sql import require_idle as _require_idle

# Token estimate when nothing better is known (see estimate_tokens).
TOKENS_PER_PAGE = 650
TOKENS_OVERHEAD = 900
BYTES_PER_PAGE = 50_000
DEFAULT_ESTIMATE_PAGES = 4
# From the text itself: a token for every three characters read (most tokenizers take three to four
# of business text; the model also sees the offline rules' reading), plus the instructions (about
# 3,300 characters) and the JSON answer.
CHARS_PER_TOKEN = 3
TEXT_TOKENS_OVERHEAD = 1500
# The most one attempt reserves: what it may report (input and output tokens, each at the callback
# contract's bound). quire_learned_tokens clamps the learned reservation to the same figure.
MAX_RESERVED_TOKENS = 2 * payloads.MAX_TOKENS


def estimate_tokens(*, pages: int | None = None, document_bytes: int | None = None,
                    document_chars: int | None = None) -> int:
    """A token estimate before the document is read by a model.

    From the characters of its text: one token for every three, plus 1,500 for the instructions
    and the structured answer. Else from pages: 650 tokens a page (a dense page of business text)
    plus 900. From the file size alone: one page per 50 kB, at least one. Nothing: four pages.
    """
    if document_chars:
        return min(TEXT_TOKENS_OVERHEAD + math.ceil(document_chars / CHARS_PER_TOKEN), MAX_RESERVED_TOKENS)
    if pages is None and document_bytes is not None:
        pages = max(1, math.ceil(document_bytes / BYTES_PER_PAGE))
    if pages is None:
        pages = DEFAULT_ESTIMATE_PAGES
    return min(TOKENS_OVERHEAD + TOKENS_PER_PAGE * max(pages, 1), MAX_RESERVED_TOKENS)


# What a new task takes from its submitter beyond its agent and document_uri, with its default;
# with estimate_is_static (worked out here) these are the columns task_insert_batch inserts.
# run_overrides: the run settings (extractor, model) an edit-and-retry gave it, as JSON text.
_TASK_DEFAULTS: dict[str, Any] = {
    "customer": None, "priority": DEFAULT_PRIORITY, "document_name": None, "document_sha256": None,
    "document_bytes": None, "document_chars": None, "pages": None, "estimated_tokens": None,
    "max_attempts": 3, "parent_id": None, "batch_id": None, "held": False, "scanned": False,
    "ocr_work": None, "run_overrides": None}
BATCH_COLUMNS = ("agent", "document_uri", *_TASK_DEFAULTS, "estimate_is_static")
_TASK_FIELDS = frozenset(BATCH_COLUMNS) - {"estimate_is_static"}
_LONGEST = {"agent": MAX_NAME_CHARS, "customer": MAX_NAME_CHARS, "document_name": MAX_DOCUMENT_NAME_CHARS,
            "document_uri": MAX_URI_CHARS}


def enqueue(conn: psycopg.Connection, *, agent: str, document_uri: str, priority: int = DEFAULT_PRIORITY,
            customer: str | None = None, estimated_tokens: int | None = None,
            document_name: str | None = None, document_sha256: str | None = None,
            pages: int | None = None, document_bytes: int | None = None,
            document_chars: int | None = None,
            parent_id: int | None = None, submitted_by: str | None = None,
            max_attempts: int = 3, batch_id: int | None = None, held: bool = False,
            scanned: bool = False, ocr_work: float | None = None, now: datetime | None = None) -> Task:
    """Adds one task to an agent's queue (one round trip); priority 0..9, 9 the most urgent; a held
    task waits for its batch's release."""
    [task] = enqueue_many(conn, [dict(
        agent=agent, document_uri=document_uri, priority=priority, customer=customer,
        estimated_tokens=estimated_tokens, document_name=document_name, document_sha256=document_sha256,
        pages=pages, document_bytes=document_bytes, document_chars=document_chars, parent_id=parent_id,
        max_attempts=max_attempts, batch_id=batch_id, held=held, scanned=scanned, ocr_work=ocr_work)],
        submitted_by=submitted_by, now=now)
    return task


def _checked(item: Mapping[str, Any], n: int) -> dict[str, Any]:
    """One task of a batch with its defaults, or InvalidArgument naming the entry."""
    unknown = set(item) - _TASK_FIELDS
    if unknown:
        raise InvalidArgument(f"task {n}: unknown fields {', '.join(sorted(unknown))}")
    task = {**_TASK_DEFAULTS, **item}
    try:
        require_text(task.get("agent"), "agent")
        require_text(task.get("document_uri"), "document_uri")
        require_int(task["priority"], "priority", low=MIN_PRIORITY, high=MAX_PRIORITY)
        require_int(task["max_attempts"], "max_attempts", low=1)
        if task["pages"] is not None:
            require_int(task["pages"], "pages", low=0, high=payloads.MAX_PAGES)
        if task["document_bytes"] is not None:
            require_int(task["document_bytes"], "document_bytes", low=0, high=2**63 - 1)
        if task["document_chars"] is not None:
            require_int(task["document_chars"], "document_chars", low=1, high=2**31 - 1)
        if task["parent_id"] is not None:
            require_int(task["parent_id"], "parent_id", low=1)
        if task["batch_id"] is not None:
            require_int(task["batch_id"], "batch_id", low=1)
        if not isinstance(task["held"], bool):
            raise InvalidArgument("held must be true or false")
        if not isinstance(task["scanned"], bool):
            raise InvalidArgument("scanned must be true or false")
        if task["ocr_work"] is not None:
            work = task["ocr_work"]
            if isinstance(work, bool) or not isinstance(work, (int, float)) or not 0 <= work <= payloads.MAX_PAGES * 10:
                raise InvalidArgument(f"ocr_work must be a number of standard pages from 0 to "
                                      f"{payloads.MAX_PAGES * 10:,}, not {work!r}")
        # A static estimate is replaced at claim by what the agent learned documents cost.
        task["estimate_is_static"] = task["estimated_tokens"] is None
        if task["estimated_tokens"] is None:
            task["estimated_tokens"] = estimate_tokens(pages=task["pages"], document_bytes=task["document_bytes"],
                                                       document_chars=task["document_chars"])
        require_int(task["estimated_tokens"], "estimated_tokens", low=1, high=MAX_RESERVED_TOKENS)
        if task["document_sha256"] is not None and not payloads.is_sha256(task["document_sha256"]):
            raise InvalidArgument("document_sha256 must be 64 lowercase hex digits")
        for key in ("document_uri", "document_name", "customer"):
            if isinstance(task[key], str) and "\x00" in task[key]:
                raise InvalidArgument(f"{key} must not contain NUL characters")
        for key, longest in _LONGEST.items():
            if isinstance(task[key], str) and len(task[key]) > longest:
                raise InvalidArgument(f"{key} is at most {longest:,} characters long, not {len(task[key]):,}")
    except InvalidArgument as exc:
        raise InvalidArgument(f"task {n}: {exc}" if n else str(exc)) from None
    return task


def enqueue_many(conn: psycopg.Connection, tasks: list[Mapping[str, Any]], *, submitted_by: str | None = None,
                 now: datetime | None = None) -> list[Task]:
    """Adds many tasks in one statement, all or none; returns them in the order given.

    Each entry takes enqueue's keyword arguments (agent and document_uri required). An unknown
    agent or parent fails the whole batch with UnknownAgent or UnknownTask.
    """
    checked = [_checked(t, n if len(tasks) > 1 else 0) for n, t in enumerate(tasks, start=1)]
    if not checked:
        return []
    _require_idle(conn)
    params: dict[str, Any] = {k: [t[k] for t in checked] for k in BATCH_COLUMNS}
    params.update(submitted_by=submitted_by, retried_by=None, now=now)
    try:
        rows = _rows(conn, "task_insert_batch", params)
    except pg_errors.ForeignKeyViolation as exc:
        if "parent" in (exc.diag.constraint_name or ""):
            raise UnknownTask(f"parent task does not exist: {exc.diag.message_detail}") from None
        agents = sorted({t["agent"] for t in checked})
        raise UnknownAgent(f"unknown agent {agents[0]!r}" if len(agents) == 1
                           else f"unknown agent among {', '.join(map(repr, agents))}") from None
    rows.sort(key=lambda r: r["id"])
    if len(rows) >= FIRST_ANALYZE_BATCH:
        analyze_if_never_analyzed(conn)
    return [task_from_row(r) for r in rows]


# A tasks table that was never analyzed (a new database) is planned with default selectivities. Past
# a few tens of thousands of enqueued tasks, the claim's plan then looked for a backlog's next
# fair-share group by reading every enqueued task: a claim of 16 took 6 ms at 40,000 tasks, against
# 1.4 ms once analyzed, and autovacuum analyzes a new table only after its next round (a minute by
# default). A batch of at least FIRST_ANALYZE_BATCH tasks that leaves such a table at
# FIRST_ANALYZE_BYTES or more analyzes it once (35-65 ms at 40,000 tasks: it reads a sample of at
# most 30,000 rows at the default statistics target); single enqueues never do.
FIRST_ANALYZE_BATCH = 100
FIRST_ANALYZE_BYTES = 1 << 20


def analyze_if_never_analyzed(conn: psycopg.Connection) -> bool:
    """Analyzes the tasks table if it was never analyzed and is no longer small; True if it tried.

    SKIP_LOCKED: while autovacuum holds the table (its first vacuum, say), the enqueue does not wait
    for it; the next bulk batch tries again. That, and a role that may not analyze the table, get a
    warning from the server, not an error. The tasks are in by then: an analyze that fails anyway
    (a statement timeout) is given up, never raised to the caller."""
    try:
        row = _row(conn, "tasks_first_analyze_due", {"bytes": FIRST_ANALYZE_BYTES})
        if not (row and row["due"]):
            return False
        _rows(conn, "tasks_first_analyze")
    except psycopg.DatabaseError:
        return False
    return True
