"""Typed objects for the rows the engine returns; nothing above this module sees raw rows."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Any


class TaskStatus(str, Enum):
    """Mirrors the Postgres enum task_status."""

    ENQUEUED = "enqueued"      # waiting to be claimed (maybe backing off until run_after)
    PROCESSING = "processing"  # claimed by a worker; an attempt is running under a lease
    COMPLETED = "completed"    # an attempt reported a result
    FAILED = "failed"          # a non-retryable failure, or the attempt budget is spent
    CANCELLED = "cancelled"    # an operator cancelled it

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES

    @property
    def cancellable(self) -> bool:
        """An operator may cancel it: it has not ended yet."""
        return not self.terminal

    @property
    def retryable(self) -> bool:
        """An operator may retry it: it ended (a completed task is re-extracted as a child)."""
        return self.terminal


# Priorities run from MIN_PRIORITY (bulk) to MAX_PRIORITY (the most urgent); the tasks table's CHECK
# holds the same range. DEFAULT_PRIORITY is what a submission gets unless it names one ("normal"):
# the engine, the UI, the API and `quire submit` all use it.
MIN_PRIORITY = 0
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 5


def is_priority(value: object) -> bool:
    """Whether `value` is a priority: a whole number (not a bool) from MIN_PRIORITY to MAX_PRIORITY."""
    return isinstance(value, int) and not isinstance(value, bool) and MIN_PRIORITY <= value <= MAX_PRIORITY
# Longest names stored: agent and customer names are in indexes (a btree row holds about 2,700
# bytes); a document's name is the file name it was uploaded under.
MAX_NAME_CHARS = 200
MAX_DOCUMENT_NAME_CHARS = 500
MAX_URI_CHARS = 4000

TERMINAL_STATUSES = frozenset({TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})

_TASK_STATUSES = {status.value: status for status in TaskStatus}


def task_status(value: Any) -> TaskStatus:
    """TaskStatus(value), looked up directly for the values the database and the events carry."""
    try:
        return _TASK_STATUSES[value]
    except (KeyError, TypeError):
        return TaskStatus(value)


class AttemptStatus(str, Enum):
    """Mirrors the Postgres enum attempt_status."""

    PROCESSING = "processing"    # claimed, running
    COMPLETED = "completed"      # reported the result that completed the task
    FAILED = "failed"            # reported a failure
    LOST = "lost"                # lease expired without a report; swept
    SUPERSEDED = "superseded"    # another attempt completed the task first
    CANCELLED = "cancelled"      # the task was cancelled while it ran
    HANDED_BACK = "handed_back"  # its worker shut down and gave the task back


@dataclass(frozen=True)
class Agent:
    """An agent type and its throttle configuration."""

    name: str
    max_concurrent_tasks: int | None
    max_tpm: int | None
    lease_seconds: int
    starvation_seconds: int
    executor: str
    model: str | None
    price_input_per_mtok: Decimal | None   # None: not configured, usage is unpriced
    price_output_per_mtok: Decimal | None
    settings: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    config_error: str | None = None  # why it cannot run as configured; its tasks wait meanwhile
    # The adaptive throttle's limits after the model endpoint rate-limited (None: the configured one).
    effective_tpm: int | None = None
    effective_concurrency: int | None = None
    throttled_until: datetime | None = None
    rate_limited_total: int = 0
    # Why claims stopped on what its runs showed (the endpoint refused it, or its claim failed);
    # its tasks wait until its configuration changes or an operator clears it.
    halt_reason: str | None = None
    halted_at: datetime | None = None

    @property
    def cannot_run(self) -> str | None:
        """Why nothing is claimed for this agent (misconfigured or halted), or None when it runs."""
        return self.config_error or self.halt_reason

    # An operator's pause: nothing new starts from paused_at until paused_until (None: until resumed).
    paused_at: datetime | None = None
    paused_until: datetime | None = None
    paused_reason: str | None = None
    paused_by: str | None = None

    def paused(self, now: datetime) -> bool:
        """Whether the agent is paused at `now` (a pause whose time has passed has ended)."""
        return self.paused_at is not None and (self.paused_until is None or self.paused_until > now)

    @property
    def throttled(self) -> bool:
        return any(v is not None for v in (self.max_concurrent_tasks, self.max_tpm, self.effective_tpm,
                                           self.effective_concurrency))

    @property
    def tpm_limit(self) -> int | None:
        """The TPM admission uses: the stricter of the configured and the adaptive one."""
        return _stricter(self.max_tpm, self.effective_tpm)

    @property
    def concurrency_limit(self) -> int | None:
        """The concurrency admission uses: the stricter of the configured and the adaptive one."""
        return _stricter(self.max_concurrent_tasks, self.effective_concurrency)


def _stricter(configured: int | None, adaptive: int | None) -> int | None:
    limits = [v for v in (configured, adaptive) if v is not None]
    return min(limits) if limits else None


@dataclass(frozen=True)
class Attempt:
    """One execution attempt of a task."""

    id: int
    task_id: int
    attempt_no: int
    agent: str
    worker_id: str
    executor: str | None
    status: AttemptStatus
    job_run_id: str | None
    pid: int | None
    trace_id: str | None
    estimated_tokens: int
    input_tokens: int | None
    output_tokens: int | None
    llm_cost_usd: Decimal | None
    compute_cost_usd: Decimal | None
    dbus: Decimal | None
    compute_seconds: float | None
    cpu_seconds: float | None
    usage_recorded_at: datetime | None
    reported_status: str | None
    callbacks_received: int
    started_at: datetime
    heartbeat_at: datetime | None
    finished_at: datetime | None
    error: str | None
    llm_unpriced: bool = False           # tokens spent with no configured price: cost unknown, not $0
    # measured | pending (billing not in yet) | billed (provisional) | final | unbilled (never billed)
    compute_state: str | None = None
    compute_unpriced: bool = False       # DBUs billed with no list price: part of the cost unknown
    extractor: str | None = None         # the extractor it ran with (learned rates are per extractor)


@dataclass(frozen=True)
class TaskEvent:
    """One state change of a task, from the event log."""

    id: int
    status: TaskStatus
    prev_status: TaskStatus | None
    actor: str | None
    at: datetime


@dataclass(frozen=True)
class Task:
    """One logical unit of work: a document for an agent."""

    id: int
    agent: str
    customer: str | None
    priority: int
    status: TaskStatus
    document_uri: str
    document_name: str | None
    document_sha256: str | None
    document_bytes: int | None
    pages: int | None
    estimated_tokens: int
    attempt_count: int
    attempt_base: int
    max_attempts: int
    run_after: datetime
    waiting_since: datetime | None
    locked_by: str | None
    lease_expires_at: datetime | None
    current_attempt_id: int | None
    parent_id: int | None
    result: dict[str, Any] | None
    confidence: float | None
    error: str | None
    submitted_by: str | None
    cancelled_by: str | None
    retried_by: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    held: bool = False                # stored and enqueued, but no claim takes it until released
    batch_id: int | None = None       # the upload it came with, and that upload's forecast
    scanned: bool = False             # no text layer: its pages go through OCR
    ocr_work: float | None = None     # a scan's OCR work in standard pages (agents/scanwork.py)
    held_seconds: float = 0.0         # time held before an operator released it (not queue time)
    document_chars: int | None = None  # characters of its text, when read before the run
    estimate_is_static: bool = False   # estimated before anything was learned: claims re-size it
    # Why it waits while enqueued (schema.waiting.WaitReason), until when, and a detail.
    waiting_reason: str | None = None
    waiting_until: datetime | None = None
    waiting_detail: str | None = None
    # Edit and retry: what its runs use instead of its agent's settings (extractor, model), and
    # each edit as {at, by, changes: {field: [from, to]}}.
    run_overrides: dict[str, Any] = field(default_factory=dict)
    edits: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    events: list[TaskEvent] = field(default_factory=list)

    @property
    def attempts_left(self) -> int:
        return self.max_attempts - (self.attempt_count - self.attempt_base)


@dataclass(frozen=True)
class Claim:
    """A task handed to a worker: the attempt it opened, its lease and its callback key."""

    task: Task
    attempt_id: int
    attempt_no: int
    lease_expires_at: datetime
    callback_secret: str = field(repr=False)


class CallbackKind(str, Enum):
    """What a callback did."""

    APPLIED = "applied"      # it changed the task
    RECORDED = "recorded"    # it only updated its attempt's own row
    DUPLICATE = "duplicate"  # a replay of something already recorded
    IGNORED = "ignored"      # the task was already terminal


@dataclass(frozen=True)
class CallbackOutcome:
    """The effect of one callback, and the states it left behind."""

    kind: CallbackKind
    task_id: int
    attempt_id: int
    task_status: TaskStatus
    usage_recorded: bool = False
    superseded_attempt_ids: tuple[int, ...] = ()

    @property
    def applied(self) -> bool:
        return self.kind is CallbackKind.APPLIED


_NO_DEFAULT = object()


@dataclass(frozen=True)
class _Layout:
    """What building a dataclass instance without its __init__ needs to know of its fields."""

    names: frozenset[str]
    template: dict[str, Any]             # every field in order: its default, or _NO_DEFAULT
    required: frozenset[str]             # fields without a default or a default factory
    factories: tuple[tuple[str, Any], ...]
    direct: bool                         # its __init__ only stores the fields: it may be skipped


@functools.cache
def _layout(cls: type[Any]) -> _Layout:
    """The dataclass's fields as _build and assemble use them (worked out once per class)."""
    fields = dataclasses.fields(cls)
    template = {f.name: f.default if f.default is not dataclasses.MISSING else _NO_DEFAULT
                for f in fields}
    factories = tuple((f.name, f.default_factory) for f in fields
                      if f.default_factory is not dataclasses.MISSING)
    required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING
                         and f.default_factory is dataclasses.MISSING)
    # (An InitVar is not among the fields, and only __post_init__ could use one.)
    own_setattr: object = cls.__setattr__
    direct = (all(f.init for f in fields) and not hasattr(cls, "__post_init__")
              and "__slots__" not in cls.__dict__
              and (cls.__dataclass_params__.frozen or own_setattr is object.__setattr__))
    return _Layout(frozenset(template), template, required, factories, direct)


def assemble(cls: type, values: dict[str, Any]) -> Any:
    """An instance of the dataclass `cls` made from `values`, which holds every one of its fields
    in field order, without calling its __init__ (a frozen one sets each field by a slow call)."""
    instance: Any = object.__new__(cls)
    instance.__dict__.update(values)
    return instance


def _build(cls: type, row: Mapping[str, Any], **overrides: Any) -> Any:
    """cls(**the row's fields, **overrides): the row's other columns are ignored, and fields it
    lacks take their defaults. The same object as the constructor's, made faster."""
    layout = _layout(cls)
    names = layout.names
    values = dict(row)  # a copy, then the columns that are no field dropped: half a filtering dictcomp's cost
    for extra in row.keys() - names:
        del values[extra]
    values.update(overrides)
    if not layout.direct or not overrides.keys() <= names:
        return cls(**values)
    if len(values) < len(names):
        if not layout.required <= values.keys():
            return cls(**values)  # it raises the constructor's TypeError for the missing fields
        for name, factory in layout.factories:
            if name not in values:
                values[name] = factory()
    return assemble(cls, layout.template | values)


def agent_from_row(row: Mapping[str, Any]) -> Agent:
    return _build(Agent, row)


def attempt_from_row(row: Mapping[str, Any]) -> Attempt:
    return _build(Attempt, row, status=AttemptStatus(row["status"]))


def event_from_row(row: Mapping[str, Any]) -> TaskEvent:
    prev = row["prev_status"]
    return _build(TaskEvent, row, status=task_status(row["status"]),
                  prev_status=task_status(prev) if prev else None)


def task_from_row(row: Mapping[str, Any], attempts: list[Attempt] | None = None,
                  events: list[TaskEvent] | None = None) -> Task:
    return _build(Task, row, status=task_status(row["status"]), attempts=attempts or [],
                  events=events or [])


def claim_from_row(row: Mapping[str, Any]) -> Claim:
    """A claim from a row of the claim statement: the task's columns, and its claim_attempt_id,
    claim_attempt_no and claim_callback_secret."""
    return assemble(Claim, {"task": task_from_row(row), "attempt_id": row["claim_attempt_id"],
                            "attempt_no": row["claim_attempt_no"],
                            "lease_expires_at": row["lease_expires_at"],
                            "callback_secret": row["claim_callback_secret"]})
