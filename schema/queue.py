"""The task state machine: enqueue, claim, heartbeat, callbacks, sweep, cancel and retry.

Every call is one transaction that has committed when it returns; each takes a psycopg
connection that is not inside a transaction, and returns dataclasses from schema.models.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from schema import payloads
from schema.admission import Candidate, Load, admit
from schema.errors import InvalidArgument, InvalidTransition, UnknownAgent, UnknownAttempt, UnknownTask
from schema.models import (
    DEFAULT_PRIORITY,
    MAX_DOCUMENT_NAME_CHARS,
    MAX_NAME_CHARS,
    MAX_PRIORITY,
    MAX_URI_CHARS,
    MIN_PRIORITY,
    Agent,
    Attempt,
    AttemptStatus,
    CallbackKind,
    CallbackOutcome,
    Claim,
    ReportStatus,
    Task,
    TaskStatus,
    agent_from_row,
    attempt_from_row,
    claim_from_row,
    event_from_row,
    task_from_row,
)
from schema.sql import fetch_all as _rows
from schema.sql import fetch_one as _row
from schema.sql import fetch_row
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
# How far past `limit` a throttled claim looks for tasks that fit the remaining budget.
ADMISSION_SCAN_FACTOR = 10
ADMISSION_SCAN_MIN = 100


class _Backoff:
    base_seconds = 5.0
    cap_seconds = 600.0


def set_backoff(base_seconds: float, cap_seconds: float) -> None:
    """Process-wide backoff for retryable failures and swept tasks."""
    if base_seconds <= 0 or cap_seconds <= 0:
        raise InvalidArgument("backoff seconds must be positive")
    _Backoff.base_seconds, _Backoff.cap_seconds = base_seconds, cap_seconds


def _tx(conn: psycopg.Connection) -> Any:  # a transaction block, which re-raises (its type says it may not)
    _require_idle(conn)
    return conn.transaction()


def reads_by_index(conn: psycopg.Connection) -> None:
    """For the rest of this transaction, the planner reads tables through their indexes wherever it
    can, and compiles nothing. The queue's hot statements find their rows by id or by a claim index;
    a connection keeps the plan it made while a table looked small (a new queue, or statistics not
    gathered yet), and a whole-table scan in that plan would then read every task or attempt on
    every call. Before PostgreSQL 18 a scan that stays (a table with no index for it) adds a huge
    cost to the plan, which JIT would take for a reason to spend a second compiling it."""
    conn.execute("SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)")


def _claim_rows(conn: psycopg.Connection, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The unthrottled claim statement, as its own transaction. (Not under reads_by_index: the
    transaction around it would cost a claim of 16 tasks about 0.4 ms more, while the plan it
    guards against, a small tasks table's, reads few rows, and analyzing the table replaces it.)"""
    _require_idle(conn)
    return _rows(conn, "task_claim_batch", {**params, "ids": None, "unthrottled_only": True})


def _set_actor(conn: psycopg.Connection, actor: str | None) -> None:
    # Read by the task trigger, so the event log records who caused a change.
    conn.execute("SELECT set_config('quire.actor', %s, true)", [actor or ""])


def _require_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{what} must be a non-empty string")
    return value


def _require_int(value: Any, what: str, *, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer, not {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise InvalidArgument(f"{what} must be {bounds}, not {value}")
    return value


# -- agents -------------------------------------------------------------------------------------

_AGENT_DEFAULTS: dict[str, Any] = {
    "lease_seconds": 60, "starvation_seconds": 120, "executor": "local", "model": None,
    "price_input_per_mtok": None, "price_output_per_mtok": None, "settings": {},
}


def configure_agent(conn: psycopg.Connection, name: str, *, max_concurrent_tasks: int | None = None,
                    max_tpm: int | None = None, now: datetime | None = None, **more: Any) -> Agent:
    """Creates or updates an agent; None limits mean unlimited; unnamed settings keep their value."""
    unknown = set(more) - set(_AGENT_DEFAULTS)
    if unknown:
        raise InvalidArgument(f"unknown agent settings: {', '.join(sorted(unknown))}")
    _require_text(name, "agent name")
    if max_concurrent_tasks is not None:
        _require_int(max_concurrent_tasks, "max_concurrent_tasks", low=1)
    if max_tpm is not None:
        _require_int(max_tpm, "max_tpm", low=1)
    for key in ("lease_seconds", "starvation_seconds"):
        if key in more:
            _require_int(more[key], key, low=1 if key == "lease_seconds" else 0)
    with _tx(conn):
        existing = _row(conn, "agent_lock_for_admission", {"agent": name})
        config = {k: existing[k] for k in _AGENT_DEFAULTS} if existing else dict(_AGENT_DEFAULTS)
        config.update(more)
        config.update(name=name, max_concurrent_tasks=max_concurrent_tasks, max_tpm=max_tpm,
                      settings=Jsonb(config["settings"] or {}), now=now)
        try:
            row = fetch_row(conn, "agent_upsert", config)
        except pg_errors.CheckViolation as exc:
            raise InvalidArgument(f"invalid agent configuration for {name!r}: {exc.diag.message_primary}") from exc
    return agent_from_row(row)


def get_agent(conn: psycopg.Connection, name: str) -> Agent:
    row = _row(conn, "agent_get", {"agent": name})
    if row is None:
        raise UnknownAgent(f"unknown agent {name!r}")
    return agent_from_row(row)


def list_agents(conn: psycopg.Connection) -> list[Agent]:
    return [agent_from_row(r) for r in _rows(conn, "agent_list", {})]


def pause_agent(conn: psycopg.Connection, name: str, *, actor: str, until: datetime | None = None,
                reason: str | None = None, now: datetime | None = None) -> Agent:
    """Pauses an agent (until a time, or until resumed): its running tasks finish, nothing new starts."""
    _require_text(name, "agent name")
    _require_text(actor, "actor")
    if reason is not None:
        reason = reason.strip() or None
        if reason is not None and len(reason) > 500:
            raise InvalidArgument("the reason must be at most 500 characters")
    if until is not None and (until.tzinfo is None):
        raise InvalidArgument("the pause's end needs a time zone")
    with _tx(conn):
        row = _row(conn, "agent_pause", {"agent": name, "until": until, "reason": reason, "actor": actor,
                                         "now": now})
    if row is None:
        raise UnknownAgent(f"unknown agent {name!r}")
    return agent_from_row(row)


def resume_agent(conn: psycopg.Connection, name: str, *, now: datetime | None = None) -> Agent:
    """Ends an agent's pause at once."""
    _require_text(name, "agent name")
    with _tx(conn):
        row = _row(conn, "agent_resume", {"agent": name, "now": now})
    if row is None:
        raise UnknownAgent(f"unknown agent {name!r}")
    return agent_from_row(row)


def agents_with_backlog(conn: psycopg.Connection, *, now: datetime | None = None) -> list[str]:
    """Agents with at least one task claimable now."""
    return [r["name"] for r in _rows(conn, "agent_backlog_list", {"now": now})]


# -- enqueue ------------------------------------------------------------------------------------

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
    "run_overrides": None}
_BATCH_COLUMNS = ("agent", "document_uri", *_TASK_DEFAULTS, "estimate_is_static")
_TASK_FIELDS = frozenset(_BATCH_COLUMNS) - {"estimate_is_static"}
_LONGEST = {"agent": MAX_NAME_CHARS, "customer": MAX_NAME_CHARS, "document_name": MAX_DOCUMENT_NAME_CHARS,
            "document_uri": MAX_URI_CHARS}


def enqueue(conn: psycopg.Connection, *, agent: str, document_uri: str, priority: int = DEFAULT_PRIORITY,
            customer: str | None = None, estimated_tokens: int | None = None,
            document_name: str | None = None, document_sha256: str | None = None,
            pages: int | None = None, document_bytes: int | None = None,
            document_chars: int | None = None,
            parent_id: int | None = None, submitted_by: str | None = None,
            max_attempts: int = 3, batch_id: int | None = None, held: bool = False,
            scanned: bool = False, now: datetime | None = None) -> Task:
    """Adds one task to an agent's queue (one round trip); priority 0..9, 9 the most urgent; a held
    task waits for its batch's release."""
    [task] = enqueue_many(conn, [dict(
        agent=agent, document_uri=document_uri, priority=priority, customer=customer,
        estimated_tokens=estimated_tokens, document_name=document_name, document_sha256=document_sha256,
        pages=pages, document_bytes=document_bytes, document_chars=document_chars, parent_id=parent_id,
        max_attempts=max_attempts, batch_id=batch_id, held=held, scanned=scanned)],
        submitted_by=submitted_by, now=now)
    return task


def _checked(item: Mapping[str, Any], n: int) -> dict[str, Any]:
    """One task of a batch with its defaults, or InvalidArgument naming the entry."""
    unknown = set(item) - _TASK_FIELDS
    if unknown:
        raise InvalidArgument(f"task {n}: unknown fields {', '.join(sorted(unknown))}")
    task = {**_TASK_DEFAULTS, **item}
    try:
        _require_text(task.get("agent"), "agent")
        _require_text(task.get("document_uri"), "document_uri")
        _require_int(task["priority"], "priority", low=MIN_PRIORITY, high=MAX_PRIORITY)
        _require_int(task["max_attempts"], "max_attempts", low=1)
        if task["pages"] is not None:
            _require_int(task["pages"], "pages", low=0, high=payloads.MAX_PAGES)
        if task["document_bytes"] is not None:
            _require_int(task["document_bytes"], "document_bytes", low=0, high=2**63 - 1)
        if task["document_chars"] is not None:
            _require_int(task["document_chars"], "document_chars", low=1, high=2**31 - 1)
        if task["parent_id"] is not None:
            _require_int(task["parent_id"], "parent_id", low=1)
        if task["batch_id"] is not None:
            _require_int(task["batch_id"], "batch_id", low=1)
        if not isinstance(task["held"], bool):
            raise InvalidArgument("held must be true or false")
        if not isinstance(task["scanned"], bool):
            raise InvalidArgument("scanned must be true or false")
        # A static estimate is replaced at claim by what the agent learned documents cost.
        task["estimate_is_static"] = task["estimated_tokens"] is None
        if task["estimated_tokens"] is None:
            task["estimated_tokens"] = estimate_tokens(pages=task["pages"], document_bytes=task["document_bytes"],
                                                       document_chars=task["document_chars"])
        _require_int(task["estimated_tokens"], "estimated_tokens", low=1, high=MAX_RESERVED_TOKENS)
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
    params: dict[str, Any] = {k: [t[k] for t in checked] for k in _BATCH_COLUMNS}
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


# -- claim --------------------------------------------------------------------------------------

def claim(conn: psycopg.Connection, *, agent: str, worker_id: str, limit: int = 1,
          lease_seconds: int | None = None, executor: str | None = None,
          now: datetime | None = None) -> list[Claim]:
    """Claims up to `limit` tasks of one agent, in priority order, within the agent's throttles."""
    _require_text(worker_id, "worker_id")
    _require_int(limit, "limit", low=1)
    if lease_seconds is not None:
        _require_int(lease_seconds, "lease_seconds", low=1)
    params = dict(agent=agent, worker_id=worker_id, now=now, executor=executor, lease_seconds=lease_seconds,
                  executors=[None], pools=["all"], slots=[limit])
    # Unthrottled agents: one statement, its own transaction, claims with SKIP LOCKED alone.
    rows = _claim_rows(conn, params)
    if not rows:
        # Nothing claimed: the agent is throttled, unknown, or has nothing claimable now.
        with _tx(conn):
            row = _row(conn, "agent_get", {"agent": agent})
            if row is None:
                raise UnknownAgent(f"unknown agent {agent!r}")
            if not agent_from_row(row).throttled:
                return []
            rows = _claim_admitted(conn, params, limit=limit, now=now)
    return _claims(rows)


def claim_many(conn: psycopg.Connection, *, worker_id: str, slots: Mapping[str, tuple[str, int]],
               lease_seconds: int | None = None, now: datetime | None = None) -> list[Claim]:
    """Claims for every unthrottled agent at once: `slots` maps an executor to (pool, free slots).

    One statement: each pool's free slots go to the best claimable tasks of the agents whose
    executor is in it. Throttled agents are claimed one by one with claim_throttled.
    """
    _require_text(worker_id, "worker_id")
    wanted = [(name, pool, free) for name, (pool, free) in slots.items() if free > 0]
    if not wanted:
        return []
    return _claims(_claim_rows(conn, {
        "agent": None, "worker_id": worker_id, "now": now, "executor": None, "lease_seconds": lease_seconds,
        "executors": [w[0] for w in wanted], "pools": [w[1] for w in wanted], "slots": [w[2] for w in wanted]}))


def claim_throttled(conn: psycopg.Connection, *, agent: str, worker_id: str, limit: int,
                    now: datetime | None = None) -> list[Claim]:
    """Claims up to `limit` tasks of an agent with limits, admission serialised on its row."""
    _require_int(limit, "limit", low=1)
    params = dict(agent=agent, worker_id=worker_id, now=now, executor=None, lease_seconds=None,
                  executors=[None], pools=["all"], slots=[limit])
    with _tx(conn):
        return _claims(_claim_admitted(conn, params, limit=limit, now=now))


def halt_agent(conn: psycopg.Connection, agent: str, reason: str, *, now: datetime | None = None) -> bool:
    """Stops claiming for an agent that cannot run; True if it was running until now."""
    with _tx(conn):
        return bool(_rows(conn, "agent_halt_if_running", {"agent": agent, "reason": reason, "now": now}))


def clear_agent_halt(conn: psycopg.Connection, agent: str) -> bool:
    """Lets a halted agent's tasks be claimed again; True if it was halted."""
    _require_text(agent, "agent")
    with _tx(conn):
        return bool(_rows(conn, "agent_clear_halt", {"agent": agent}))


def admission_reopens_in(conn: psycopg.Connection, agent: str, *, now: datetime | None = None) -> float | None:
    """Seconds until a throttled agent's admission may admit more with no run ending (Retry-After
    over, or tokens leaving the window); None when only a run's end can make room."""
    row = _row(conn, "agent_admission_reopens_one", {"agent": agent, "now": now})
    if row is None or row["seconds"] is None:
        return None
    return max(0.0, float(row["seconds"]))


def _claim_admitted(conn: psycopg.Connection, params: dict[str, Any], *, limit: int,
                    now: datetime | None) -> list[dict[str, Any]]:
    reads_by_index(conn)
    # Throttled agents take turns on their row, so admission sees every earlier claim.
    row = _row(conn, "agent_lock_for_admission", {"agent": params["agent"]})
    if row is None:
        raise UnknownAgent(f"unknown agent {params['agent']!r}")
    ids = _admit(conn, agent_from_row(row), limit=limit, now=now)
    if not ids:
        return []
    return _rows(conn, "task_claim_batch", {**params, "ids": ids, "unthrottled_only": False})


def _claims(rows: list[dict[str, Any]]) -> list[Claim]:
    rows.sort(key=lambda r: (-r["priority"], r["created_at"], r["id"]))
    return [claim_from_row(r) for r in rows]


def _admit(conn: psycopg.Connection, agent: Agent, *, limit: int, now: datetime | None) -> list[int]:
    load_row = fetch_row(conn, "agent_load_one", {"agent": agent.name, "now": now})
    load = Load(in_flight=load_row["in_flight"], reserved_tokens=int(load_row["reserved_tokens"]))
    clock = load_row["now"]
    if agent.throttled_until is not None and clock < agent.throttled_until:
        return []  # the model endpoint asked us to wait (Retry-After)
    max_concurrent, max_tpm = agent.concurrency_limit, agent.tpm_limit
    if max_concurrent is not None:
        limit = min(limit, max_concurrent - load.in_flight)
        if limit <= 0:
            return []
    scan = limit if max_tpm is None else max(limit * ADMISSION_SCAN_FACTOR, ADMISSION_SCAN_MIN)
    candidates = [Candidate(**r) for r in
                  _rows(conn, "task_candidates_for_admission", {"agent": agent.name, "now": now, "scan": scan})]
    decision = admit(candidates, limit=limit, load=load, max_concurrent_tasks=max_concurrent,
                     max_tpm=max_tpm, starvation_seconds=agent.starvation_seconds, now=clock)
    if decision.now_waiting:
        _rows(conn, "task_mark_waiting", {"ids": decision.now_waiting, "now": now})
    return decision.admitted


# -- leases -------------------------------------------------------------------------------------

def heartbeat(conn: psycopg.Connection, attempt_id: int, *, lease_seconds: int | None = None,
              now: datetime | None = None) -> bool:
    """Extends the attempt's lease; False once the attempt is no longer its task's live attempt."""
    _require_int(attempt_id, "attempt_id", low=1)
    with _tx(conn):
        task_id = _attempt_task_id(conn, attempt_id)
        if lease_seconds is None:
            task = fetch_row(conn, "task_get", {"task_id": task_id})
            lease_seconds = fetch_row(conn, "agent_get", {"agent": task["agent"]})["lease_seconds"]
        extended = _row(conn, "task_extend_lease_if_current",
                        {"task_id": task_id, "attempt_id": attempt_id, "now": now,
                         "lease_seconds": lease_seconds})
        if extended is None:
            return False
        _rows(conn, "attempt_touch_heartbeat", {"attempt_id": attempt_id, "now": now})
    return True


def sweep(conn: psycopg.Connection, *, now: datetime | None = None, batch: int = 500) -> int:
    """Takes back every task whose lease expired; returns how many."""
    total = 0
    while True:
        with _tx(conn):
            rows = _rows(conn, "task_requeue_expired",
                         {"now": now, "batch": batch, "backoff_base": _Backoff.base_seconds,
                          "backoff_cap": _Backoff.cap_seconds})
        total += len(rows)
        if len(rows) < batch:
            return total


def hand_back(conn: psycopg.Connection, attempt_id: int, *, reason: str | None = None,
              now: datetime | None = None) -> bool:
    """Gives a running attempt's task back to the queue at once, its attempt not counted (worker
    shutdown, or a task claimed ahead that found no slot); `reason` becomes the attempt's error."""
    with _tx(conn):
        return bool(_rows(conn, "task_hand_back_from_attempt",
                          {"attempt_id": attempt_id, "reason": reason, "now": now}))


def _attempt_task_id(conn: psycopg.Connection, attempt_id: int) -> int:
    row = _row(conn, "attempt_task_id", {"attempt_id": attempt_id})
    if row is None:
        raise UnknownAttempt(f"unknown attempt {attempt_id}")
    return row["task_id"]


# -- callbacks ----------------------------------------------------------------------------------

def apply_callback(conn: psycopg.Connection, attempt_id: int, payload: Mapping[str, Any], *,
                   now: datetime | None = None) -> CallbackOutcome:
    """Applies an agent's report for one attempt: idempotent, fenced, spend recorded once."""
    _require_int(attempt_id, "attempt_id", low=1)
    report = payloads.parse_callback(payload)
    with _tx(conn):
        task = _row(conn, "task_lock_for_attempt", {"attempt_id": attempt_id})
        if task is None:
            raise UnknownAttempt(f"unknown attempt {attempt_id}")
        task_id, status = task["id"], TaskStatus(task["status"])
        noted = fetch_row(conn, "attempt_note_report", {
            "attempt_id": attempt_id, "status": report.status.value, "run_id": report.run_id,
            "trace_id": report.trace_id, "has_usage": report.has_usage, "now": now,
            "input_tokens": report.input_tokens, "output_tokens": report.output_tokens,
            "llm_cost_usd": report.llm_cost_usd, "compute_cost_usd": report.compute_cost_usd,
            "llm_unpriced": report.unpriced})

        def outcome(kind: CallbackKind, task_status: TaskStatus, superseded: tuple[int, ...] = ()) -> CallbackOutcome:
            return CallbackOutcome(kind=kind, task_id=task_id, attempt_id=attempt_id,
                                   task_status=task_status, usage_recorded=noted["usage_recorded"],
                                   superseded_attempt_ids=superseded)

        if noted["previously_reported"] == report.status:
            return outcome(CallbackKind.DUPLICATE, status)
        if noted["previously_reported"] is None:
            # What the endpoint taught counts once per attempt: a second report of another status
            # (failed, then completed) or a replay of the first after it does not pause the agent again.
            _adapt_throttle(conn, task, attempt_id, report, now)
        if report.agent_cannot_run:
            # The endpoint refused the agent itself: every task of it would fail alike, so its tasks
            # wait (halted) instead of each spending its attempts on the same answer.
            _rows(conn, "agent_halt_if_running", {"agent": task["agent"], "now": now,
                                                  "reason": f"the model endpoint refused it: {report.error}"})
        common = {"task_id": task_id, "attempt_id": attempt_id, "now": now, "pages": report.pages}
        if status.terminal:
            if report.pages is not None:
                _rows(conn, "task_set_pages", common)
            return outcome(CallbackKind.IGNORED, status)
        if report.status is ReportStatus.COMPLETED:
            done = fetch_row(conn, "task_complete_from_attempt",
                             {**common, "result": Jsonb(report.result), "confidence": report.confidence})
            return outcome(CallbackKind.APPLIED, TaskStatus.COMPLETED, tuple(done["superseded_ids"]))
        is_current = status is TaskStatus.PROCESSING and task["current_attempt_id"] == attempt_id
        if not is_current:
            _rows(conn, "attempt_finish", {"attempt_id": attempt_id, "status": AttemptStatus.FAILED.value,
                                           "error": report.error, "now": now})
            if report.pages is not None:
                _rows(conn, "task_set_pages", common)
            return outcome(CallbackKind.RECORDED, status)
        spent = task["attempt_count"] - task["attempt_base"]
        failed = fetch_row(conn, "task_fail_from_current_attempt", {
            **common, "requeue": report.retryable and not report.agent_cannot_run and spent < task["max_attempts"],
            "error": report.error,
            "backoff_base": _Backoff.base_seconds, "backoff_cap": _Backoff.cap_seconds})
        return outcome(CallbackKind.APPLIED, TaskStatus(failed["status"]))


# Adaptive throttle (AIMD): a rate limit cuts the agent's effective TPM and concurrency to 70% of
# the endpoint's quota as best known (the limit it stated, else the tokens it served the agent in
# the minute before the first 429), and admission waits out the Retry-After. Each attempt that ran
# without one gives back 5% of the configured TPM and one slot, up to 95% of that quota; after ten
# quiet minutes that cap rises by 5% of the configured TPM a minute, up to the configured limits.
THROTTLE_FACTOR = 0.7
THROTTLE_FLOOR_TPM = 1000
THROTTLE_STEP = 0.05
THROTTLE_CEILING_SHARE = 0.95
THROTTLE_QUIET_SECONDS = 600


def throttle_back_off(conn: psycopg.Connection, agent: str, attempt_id: int, *, count: int,
                      retry_after: float | None, limited_at: datetime | None = None,
                      stated_tpm: int | None = None, now: datetime | None = None) -> dict[str, Any] | None:
    """Records rate limits an attempt met (the first at `limited_at`, the endpoint stating
    `stated_tpm` as its limit, when known); cuts the agent's effective limits once per round."""
    return _row(conn, "agent_throttle_back_off", {
        "agent": agent, "attempt_id": attempt_id, "count": count,
        "retry_after": min(retry_after or 0, payloads.MAX_PAUSE_SECONDS),
        "limited_at": limited_at, "stated_tpm": stated_tpm,
        "factor": THROTTLE_FACTOR, "floor_tpm": THROTTLE_FLOOR_TPM, "now": now})


def throttle_recover(conn: psycopg.Connection, successes: Mapping[str, int], *,
                     now: datetime | None = None) -> list[dict[str, Any]]:
    """Attempts ran without a rate limit: raises backed-off agents' effective limits additively."""
    if not successes:
        return []
    return _rows(conn, "agent_throttle_recover_list", {
        "agents": list(successes), "counts": list(successes.values()), "step": THROTTLE_STEP,
        "ceiling_share": THROTTLE_CEILING_SHARE, "quiet_seconds": THROTTLE_QUIET_SECONDS, "now": now})


def _adapt_throttle(conn: psycopg.Connection, task: Mapping[str, Any], attempt_id: int,
                    report: payloads.Report, now: datetime | None) -> None:
    if report.rate_limited:
        limited_at = (datetime.fromtimestamp(report.rate_limited_at, UTC)
                      if report.rate_limited_at is not None else None)
        throttle_back_off(conn, task["agent"], attempt_id, count=report.rate_limited,
                          retry_after=report.pause_seconds, limited_at=limited_at,
                          stated_tpm=report.rate_limit_tpm, now=now)
    elif report.status is ReportStatus.COMPLETED and (report.input_tokens or report.output_tokens):
        throttle_recover(conn, {task["agent"]: 1}, now=now)


def attempt_secret(conn: psycopg.Connection, attempt_id: int) -> tuple[str, str | None]:
    """The stored callback key of an attempt and its executor; UnknownAttempt if none."""
    row = _row(conn, "attempt_get_secret", {"attempt_id": attempt_id})
    if row is None:
        raise UnknownAttempt(f"unknown attempt {attempt_id}")
    return row["callback_secret"], row["executor"]


# -- operator actions ---------------------------------------------------------------------------

def cancel(conn: psycopg.Connection, task_id: int, *, actor: str, now: datetime | None = None) -> Task:
    """Cancels an enqueued or processing task; its running attempts are cancelled with it."""
    _require_int(task_id, "task_id", low=1)
    _require_text(actor, "actor")
    with _tx(conn):
        task = _row(conn, "task_lock", {"task_id": task_id})
        if task is None:
            raise UnknownTask(f"unknown task {task_id}")
        _set_actor(conn, actor)
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
    _require_int(task_id, "task_id", low=1)
    _require_text(actor, "actor")
    if priority is not None:
        _require_int(priority, "priority", low=MIN_PRIORITY, high=MAX_PRIORITY)
    for value, name in ((agent, "agent"), (extractor, "extractor"), (model, "model")):
        if value is not None:
            _require_text(value, name)
            if len(value) > MAX_NAME_CHARS or "\x00" in value:
                raise InvalidArgument(f"The {name} name is at most {MAX_NAME_CHARS} characters, without NUL")
    if extractor is not None and extractor not in EXTRACTORS:
        raise InvalidArgument(f"There is no extractor {extractor[:40]!r}: choose one of {', '.join(EXTRACTORS)}")
    with _tx(conn):
        task = _row(conn, "task_lock", {"task_id": task_id})
        if task is None:
            raise UnknownTask(f"unknown task {task_id}")
        _set_actor(conn, actor)
        edit = _run_edit(conn, task, priority=priority, agent=agent, extractor=extractor, model=model)
        if task["status"] == TaskStatus.COMPLETED.value:
            # The child goes in through the enqueue's statement, every column copied from its parent,
            # with the agent and run settings of the edit.
            child = {**{k: task[k] for k in _BATCH_COLUMNS}, "parent_id": task_id, "batch_id": None, "held": False,
                     "priority": task["priority"] if priority is None else priority,
                     "agent": edit["agent"], "run_overrides": json.dumps(edit["run_overrides"])}
            new_id = fetch_row(conn, "task_insert_batch", {**{k: [v] for k, v in child.items()},
                                                           "submitted_by": actor, "retried_by": actor,
                                                           "now": now})["id"]
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
            row = _row(conn, "task_reopen_if_ended", {"task_id": task_id, "actor": actor,
                                                      "priority": priority, "now": now})
            if row is None:
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
    _require_int(task_id, "task_id", low=1)
    with _tx(conn):
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


# -- executor bookkeeping -----------------------------------------------------------------------

def record_executor_info(conn: psycopg.Connection, attempt_id: int, *, pid: int | None = None,
                         job_run_id: str | None = None, executor: str | None = None) -> None:
    """Stores the executor's handle on an attempt (process id, job run id)."""
    with _tx(conn):
        _rows(conn, "attempt_set_executor_info", {"attempt_id": attempt_id, "pid": pid,
                                                  "job_run_id": job_run_id, "executor": executor})


def record_compute(conn: psycopg.Connection, attempt_id: int, *, compute_seconds: float | None = None,
                   cpu_seconds: float | None = None, compute_cost_usd: float | None = None,
                   dbus: float | None = None, compute_state: str | None = None) -> None:
    """Stores compute measured by the executor, apart from the LLM spend the agent reports.

    compute_state: 'measured' (cost known now) or 'pending' (the billing reconciler fills it in)."""
    with _tx(conn):
        _rows(conn, "attempt_record_compute", {
            "attempt_id": attempt_id, "compute_seconds": compute_seconds, "cpu_seconds": cpu_seconds,
            "compute_cost_usd": compute_cost_usd, "dbus": dbus, "compute_state": compute_state})
