"""Callbacks and the adaptive throttle: an agent's report applied to its attempt and task, and
what the model endpoint's rate limits teach the agent's admission."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg
from psycopg.rows import dict_row

from agents.report import ReportStatus
from schema import payloads
from schema.errors import UnknownAttempt
from schema.models import CallbackKind, CallbackOutcome, TaskStatus
from schema.queue.common import Backoff, require_int, transaction
from schema.sql import fetch_all as _rows
from schema.sql import fetch_one as _row
from schema.sql import q


def apply_callback(conn: psycopg.Connection, attempt_id: int, payload: Mapping[str, Any], *,
                   now: datetime | None = None) -> CallbackOutcome:
    """Applies an agent's report for one attempt: idempotent, fenced, spend recorded once."""
    require_int(attempt_id, "attempt_id", low=1)
    report = payloads.parse_callback(payload)
    with transaction(conn):
        if _row(conn, "task_lock_for_attempt", {"attempt_id": attempt_id}) is None:
            raise UnknownAttempt(f"unknown attempt {attempt_id}")
        done = apply_reports(conn, [(attempt_id, report)], now=now)[attempt_id]
    return done.outcome()


# What quire_apply_reports says each report did ("none": nothing of it, its compute alone).
_KINDS = {"duplicate": CallbackKind.DUPLICATE, "ignored": CallbackKind.IGNORED, "completed": CallbackKind.APPLIED,
          "failed": CallbackKind.APPLIED, "recorded": CallbackKind.RECORDED}


@dataclass(frozen=True)
class Applied:
    """What applying one report did to its attempt and task."""

    attempt_id: int
    task_id: int
    kind: str                            # quire_apply_reports' kind: none, duplicate, ignored, completed, ...
    task_status: TaskStatus              # the task's status after it
    previously_reported: str | None      # what the attempt had reported before (None: never)
    usage_recorded: bool                 # its tokens and cost were recorded by this report
    superseded_ids: tuple[int, ...] = ()  # the task's other open attempts it superseded

    @property
    def completed(self) -> bool:
        """The report completed its task."""
        return self.kind == "completed"

    def outcome(self) -> CallbackOutcome:
        """The callback's answer for it."""
        return CallbackOutcome(kind=_KINDS[self.kind], task_id=self.task_id, attempt_id=self.attempt_id,
                               task_status=self.task_status, usage_recorded=self.usage_recorded,
                               superseded_attempt_ids=self.superseded_ids)


def _report_fields(report: payloads.Report) -> dict[str, Any]:
    """A report as quire_apply_reports reads it (one JSON object per attempt)."""
    return {"status": report.status.value, "result": report.result, "confidence": report.confidence,
            "error": report.error, "retryable": report.retryable and not report.agent_cannot_run,
            "rate_limited": bool(report.rate_limited), "pages": report.pages, "has_usage": report.has_usage,
            "input_tokens": report.input_tokens, "output_tokens": report.output_tokens,
            "llm_cost_usd": report.llm_cost_usd, "report_compute_cost_usd": report.compute_cost_usd,
            "llm_unpriced": report.unpriced, "run_id": report.run_id, "trace_id": report.trace_id}


def _reports_json(items: list[dict[str, Any]]) -> str:
    """The reports as quire_apply_reports reads them: orjson writes them at a ninth of json's cost
    (a worker settles every task this way); what it cannot write (an integer past 64 bits in a
    result) json does. Reports are storable (payloads.check_storable): no NaN, no lone surrogate."""
    try:
        return orjson.dumps(items).decode()
    except TypeError:
        return json.dumps(items)


def apply_reports(conn: psycopg.Connection, reports: Sequence[tuple[int, payloads.Report | None]], *,
                  compute: Mapping[int, Mapping[str, Any]] | None = None, fresh_only: bool = False,
                  now: datetime | None = None) -> dict[int, Applied]:
    """Applies agents' reports to their attempts and tasks, in the caller's transaction, their tasks
    locked by it: the one way a report changes a task (the callback applies one, the worker's
    settlement a batch). Then what the reports taught each agent's throttle, and halts.

    `reports`: (attempt id, report, or None for compute alone); `compute`: per attempt id, the
    compute the worker measured (compute_seconds, cpu_seconds, compute_cost_usd, dbus,
    compute_state). fresh_only: a report applies only to an attempt that never reported, is still
    open, and whose task has not ended (the worker's batch). One attempt per task is applied per
    call; the others of the same task are left out of the answer.
    """
    parsed = dict(reports)  # an attempt named twice: its last report
    # Absent keys read as NULL: the fields a report leaves unset (most of them) are not written.
    items = [{key: value for key, value in {"attempt_id": attempt_id, **(compute or {}).get(attempt_id, {}),
                                            **(_report_fields(report) if report is not None else {})}.items()
              if value is not None} for attempt_id, report in parsed.items()]
    # An explicit cursor: inside the worker's pipeline, fetching is what sends the batch.
    cursor = conn.cursor(row_factory=dict_row)
    cursor.execute(q("task_apply_reports_batch"), {
        "reports": _reports_json(items), "attempt_ids": list(parsed), "fresh_only": fresh_only, "now": now,
        "backoff_base": Backoff.base_seconds, "backoff_cap": Backoff.cap_seconds})
    done = {row["attempt_id"]: row for row in cursor.fetchall()}
    recovered: dict[str, int] = {}
    for attempt_id, row in done.items():
        report = parsed[attempt_id]
        if report is None or row["kind"] in ("none", "duplicate"):
            continue
        if row["previously_reported"] is None:
            # What the endpoint taught counts once per attempt: a second report of another status
            # (failed, then completed) or a replay of the first after it does not pause the agent again.
            if report.rate_limited:
                limited_at = (datetime.fromtimestamp(report.rate_limited_at, UTC)
                              if report.rate_limited_at is not None else None)
                throttle_back_off(conn, row["agent"], attempt_id, count=report.rate_limited,
                                  retry_after=report.pause_seconds, limited_at=limited_at,
                                  stated_tpm=report.rate_limit_tpm, in_flight=row["in_flight"], now=now)
            elif report.status is ReportStatus.COMPLETED and (report.input_tokens or report.output_tokens):
                recovered[row["agent"]] = recovered.get(row["agent"], 0) + 1
        if report.agent_cannot_run:
            # The endpoint refused the agent itself: every task of it would fail alike, so its tasks
            # wait (halted) instead of each spending its attempts on the same answer.
            _rows(conn, "agent_halt_if_running", {"agent": row["agent"], "now": now,
                                                  "reason": f"the model endpoint refused it: {report.error}"})
    throttle_recover(conn, recovered, now=now)
    return {attempt_id: Applied(attempt_id, row["task_id"], row["kind"], TaskStatus(row["task_status"]),
                                row["previously_reported"], row["usage_recorded"], tuple(row["superseded_ids"]))
            for attempt_id, row in done.items()}


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
                      stated_tpm: int | None = None, in_flight: int | None = None,
                      now: datetime | None = None) -> dict[str, Any] | None:
    """Records rate limits an attempt met (the first at `limited_at`, the endpoint stating
    `stated_tpm` as its limit, when known); cuts the agent's effective limits once per round.
    in_flight: the agent's running tasks when the report came (else counted now)."""
    return _row(conn, "agent_throttle_back_off", {
        "agent": agent, "attempt_id": attempt_id, "count": count,
        "retry_after": min(retry_after or 0, payloads.MAX_PAUSE_SECONDS),
        "limited_at": limited_at, "stated_tpm": stated_tpm, "in_flight": in_flight,
        "factor": THROTTLE_FACTOR, "floor_tpm": THROTTLE_FLOOR_TPM, "now": now})


def throttle_recover(conn: psycopg.Connection, successes: Mapping[str, int], *,
                     now: datetime | None = None) -> list[dict[str, Any]]:
    """Attempts ran without a rate limit: raises backed-off agents' effective limits additively."""
    if not successes:
        return []
    return _rows(conn, "agent_throttle_recover_list", {
        "agents": list(successes), "counts": list(successes.values()), "step": THROTTLE_STEP,
        "ceiling_share": THROTTLE_CEILING_SHARE, "quiet_seconds": THROTTLE_QUIET_SECONDS, "now": now})


def attempt_secret(conn: psycopg.Connection, attempt_id: int) -> tuple[str, str | None]:
    """The stored callback key of an attempt and its executor; UnknownAttempt if none."""
    row = _row(conn, "attempt_get_secret", {"attempt_id": attempt_id})
    if row is None:
        raise UnknownAttempt(f"unknown attempt {attempt_id}")
    return row["callback_secret"], row["executor"]
