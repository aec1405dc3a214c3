"""The review queue and its trail: claim the next document, correct fields, approve or reject.

Every write checks the reviewer's claim (its token) under the review row's lock, in one
transaction: a stale save changes nothing and raises StaleReview with a plain message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from enum import Enum
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from schema import stats, stats_types
from schema.errors import InvalidArgument, NotFound, QuireError
from schema.figures import snapshot
from schema.sql import fetch_all, fetch_one, fetch_row

DEFAULT_LEASE_SECONDS = 600


class ReviewStatus(str, Enum):
    """Mirrors the review_status enum."""

    OPEN = "open"              # waits in the queue, or is held by a reviewer until its lease ends
    APPROVED = "approved"      # signed off: the extraction plus its corrections
    REJECTED = "rejected"      # refused by a reviewer
    SUPERSEDED = "superseded"  # re-extracted before anyone decided


class StaleReview(QuireError):
    """The caller's claim on a review no longer holds: re-extracted, decided or taken over."""


@dataclass(frozen=True)
class Claim:
    """A reviewer's hold on one review: the token every later write must show."""

    review_id: int
    claim_token: int


@dataclass(frozen=True)
class Correction:
    """One append-only row of the trail."""

    id: int
    review_id: int
    task_id: int
    field: str
    old_value: Any
    new_value: Any
    actor: str
    at: datetime
    reason: str | None


@dataclass(frozen=True)
class Review:
    """One review with its task's extraction and the document's values now."""

    id: int
    task_id: int
    reason: str
    confidence: float
    status: ReviewStatus
    queued_at: datetime
    claimed_by: str | None
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    claim_token: int
    decided_by: str | None
    decided_at: datetime | None
    decision_note: str | None
    agent: str
    customer: str | None
    document_name: str | None
    document_uri: str
    document_sha256: str | None
    pages: int | None
    parent_id: int | None
    task_created_at: datetime
    result: dict[str, Any]
    values: dict[str, Any]
    corrections: list[Correction] = field(default_factory=list)

    @property
    def fields(self) -> dict[str, dict[str, Any]]:
        """The extraction's fields (value, confidence, stage, evidence), as the agent reported them."""
        found = (self.result or {}).get("fields")
        return found if isinstance(found, dict) else {}


@dataclass(frozen=True)
class QueueEntry:
    """An open review as the queue lists it."""

    id: int
    task_id: int
    reason: str
    confidence: float
    queued_at: datetime
    agent: str
    customer: str | None
    document_name: str | None
    held_by: str | None


@dataclass(frozen=True)
class ReviewFigures:
    """What the corrections teach, for one filter."""

    open: int
    held: int
    approved: int
    rejected: int
    review_p50_s: float | None
    review_p90_s: float | None
    approved_per_day: list[tuple[date, int]]
    field_rates: list[dict[str, Any]]   # field, reviewed, corrected
    accuracy: list[dict[str, Any]]      # agent, extractor, model, documents, fields, right


def _queue_params(flt: stats_types.TaskFilter) -> dict[str, Any]:
    # The queue holds completed tasks only: a status or needs-review filter does not narrow it.
    return {**flt.params(), "statuses": None, "needs_review": False}


def _claimed(row: dict | None) -> Claim | None:
    return Claim(row["id"], row["claim_token"]) if row else None


def claim_next(conn: psycopg.Connection, who: str, flt: stats_types.TaskFilter | None = None, *,
               lease_seconds: int = DEFAULT_LEASE_SECONDS, now: datetime | None = None) -> Claim | None:
    """The review `who` holds already, else the next open one in the filter (None when none waits)."""
    _require_who(who)
    params = {**_queue_params(flt or stats_types.TaskFilter()), "who": who, "lease_seconds": lease_seconds, "now": now}
    with conn.transaction():
        held = fetch_one(conn, "review_claim_held_one", params)
        if held:
            return _claimed(held)
        rows = stats._run(conn, "review_claim_next", params)
        return _claimed(rows[0] if rows else None)


def claim_one(conn: psycopg.Connection, review_id: int, who: str, *, lease_seconds: int = DEFAULT_LEASE_SECONDS,
              now: datetime | None = None) -> Claim | None:
    """Claims a chosen open review; None when another reviewer's lease holds it or it is decided."""
    _require_who(who)
    return _claimed(fetch_one(conn, "review_claim_one", {"review_id": review_id, "who": who,
                                                          "lease_seconds": lease_seconds, "now": now}))


def _stale_reason(row: dict | None, review_id: int, claim_token: int, who: str) -> str | None:
    """Why a write under this claim may not happen, in words for the reviewer; None if it may."""
    if row is None:
        raise NotFound(f"review {review_id} does not exist")
    if row["status"] == ReviewStatus.SUPERSEDED.value:
        return f"this document was re-extracted meanwhile ({row['decision_note']}); open the new review"
    if row["status"] != ReviewStatus.OPEN.value:
        return (f"this document was already {row['status']} by {row['decided_by']} "
                f"at {row['decided_at']:%Y-%m-%d %H:%M} UTC")
    if row["claim_token"] != claim_token or row["claimed_by"] != who:
        holder = row["claimed_by"] or "nobody"
        return f"your claim on this document lapsed and {holder} holds it now; nothing was saved"
    return None


def _lock_current(conn: psycopg.Connection, review_id: int, claim_token: int, who: str) -> dict:
    row = fetch_one(conn, "review_lock_one", {"review_id": review_id})
    reason = _stale_reason(row, review_id, claim_token, who)
    if reason:
        raise StaleReview(reason)
    assert row is not None  # _stale_reason raised NotFound
    return row


def _changes(current: dict[str, Any], values: dict[str, Any]) -> list[dict[str, Any]]:
    # A field the document has is changed when its value differs; one it lacks, when given a value.
    return [{"field": name, "old_value": current.get(name), "new_value": value}
            for name, value in values.items()
            if (current[name] != value if name in current else value is not None)]


def _write(conn: psycopg.Connection, review_id: int, claim_token: int, who: str, values: dict[str, Any],
           reason: str | None, lease_seconds: int, now: datetime | None) -> int:
    """Under the claim's lock: the changed values appended to the trail (how many), the lease renewed."""
    row = _lock_current(conn, review_id, claim_token, who)
    changes: list[dict[str, Any]] = []
    if values:
        current = fetch_row(conn, "review_values_one", {"review_id": review_id})["values"]
        changes = _changes(current, values)
        if changes:
            fetch_all(conn, "review_correction_insert_batch", {
                "review_id": review_id, "task_id": row["task_id"], "who": who, "now": now, "reason": reason,
                "changes": Jsonb(changes)})
    fetch_all(conn, "review_extend_lease_if_current", {"review_id": review_id, "claim_token": claim_token,
                                                        "who": who, "lease_seconds": lease_seconds, "now": now})
    return len(changes)


def save(conn: psycopg.Connection, review_id: int, claim_token: int, who: str, values: dict[str, Any], *,
         reason: str | None = None, lease_seconds: int = DEFAULT_LEASE_SECONDS, now: datetime | None = None) -> int:
    """Appends a correction for every value that differs from the document's value now; returns
    how many. Raises StaleReview (nothing written) when the claim no longer holds."""
    _require_who(who)
    _require_fields(values)
    with conn.transaction():
        return _write(conn, review_id, claim_token, who, values, reason, lease_seconds, now)


def decide(conn: psycopg.Connection, review_id: int, claim_token: int, who: str, status: ReviewStatus, *,
           values: dict[str, Any] | None = None, note: str | None = None, now: datetime | None = None) -> None:
    """Approves (with any last corrections, in the same transaction) or rejects a claimed review."""
    _require_who(who)
    if status not in (ReviewStatus.APPROVED, ReviewStatus.REJECTED):
        raise InvalidArgument(f"a review ends approved or rejected, not {status}")
    _require_fields(values or {})
    with conn.transaction():
        _write(conn, review_id, claim_token, who, values or {}, note, DEFAULT_LEASE_SECONDS, now)
        fetch_all(conn, "review_decide_if_current", {"review_id": review_id, "claim_token": claim_token, "who": who,
                                                      "status": status.value, "note": note, "now": now})


def release(conn: psycopg.Connection, review_id: int, claim_token: int, who: str) -> bool:
    """Hands a claimed review back to the queue now; False when the claim was no longer current."""
    return bool(fetch_all(conn, "review_release_if_current",
                          {"review_id": review_id, "claim_token": claim_token, "who": who}))


def extend(conn: psycopg.Connection, review_id: int, claim_token: int, who: str, *,
           lease_seconds: int = DEFAULT_LEASE_SECONDS, now: datetime | None = None) -> bool:
    """Renews the lease while the reviewer works; False when the claim was no longer current."""
    return bool(fetch_all(conn, "review_extend_lease_if_current", {
        "review_id": review_id, "claim_token": claim_token, "who": who, "lease_seconds": lease_seconds, "now": now}))


def read(conn: psycopg.Connection, review_id: int) -> Review:
    """One review with its extraction, its values now and its trail."""
    row = fetch_one(conn, "review_read_one", {"review_id": review_id})
    if row is None:
        raise NotFound(f"review {review_id} does not exist")
    trail = [Correction(**c) for c in fetch_all(conn, "review_corrections_of_one", {"review_id": review_id})]
    return Review(**{**row, "status": ReviewStatus(row["status"]), "result": row["result"] or {},
                     "corrections": trail})


def review_of_task(conn: psycopg.Connection, task_id: int) -> int | None:
    """The id of a task's review, if it has one."""
    row = fetch_one(conn, "review_of_task_one", {"task_id": task_id})
    return row["id"] if row else None


def history_of_task(conn: psycopg.Connection, task_id: int) -> list[dict[str, Any]]:
    """The reviews of a task and of the tasks it re-extracted, newest first."""
    return fetch_all(conn, "review_history_of_task", {"task_id": task_id})


def queue(conn: psycopg.Connection, flt: stats_types.TaskFilter | None = None, *, limit: int = 50,
          now: datetime | None = None) -> list[QueueEntry]:
    """The open reviews in claim order."""
    params = {**_queue_params(flt or stats_types.TaskFilter()), "limit": limit, "now": now}
    return [QueueEntry(**r) for r in stats._run(conn, "review_queue_filtered", params)]


def figures(conn: psycopg.Connection, flt: stats_types.TaskFilter | None = None, *,
            now: datetime | None = None) -> ReviewFigures:
    """Backlog, decisions, time to review, approvals per day, correction rates and accuracy (one snapshot)."""
    params = {**(flt or stats_types.TaskFilter()).params(), "now": now}
    with snapshot(conn):
        head = stats._run(conn, "review_backlog_filtered", params)[0]
        per_day = [(r["day"], r["approved"]) for r in stats._run(conn, "review_approved_per_day_filtered", params)]
        rates = stats._run(conn, "review_field_rates_filtered", params)
        accuracy = stats._run(conn, "review_accuracy_filtered", params)
    return ReviewFigures(approved_per_day=per_day, field_rates=rates, accuracy=accuracy, **head)


def export_rows(conn: psycopg.Connection, flt: stats_types.TaskFilter | None = None) -> list[dict[str, Any]]:
    """Approved documents with their corrected values and who approved them, oldest decision first."""
    return stats._run(conn, "review_export_filtered", (flt or stats_types.TaskFilter()).params())


def events_after(conn: psycopg.Connection, after_id: int, *, limit: int = 1000) -> list[dict[str, Any]]:
    """Review events after an id, oldest first."""
    return fetch_all(conn, "review_events_after", {"after_id": after_id, "limit": limit})


def last_event_id(conn: psycopg.Connection) -> int:
    return fetch_row(conn, "review_events_last_id")["last_id"]


def _require_who(who: str) -> None:
    if not isinstance(who, str) or not who.strip():
        raise InvalidArgument("a reviewer must be named")


def _require_fields(values: dict[str, Any]) -> None:
    for name in values:
        if not isinstance(name, str) or not name or len(name) > 200:
            raise InvalidArgument(f"not a field name: {name!r}")
