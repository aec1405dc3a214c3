"""Why a waiting task waits: one reason per enqueued task, read for a page of tasks at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

import psycopg

from schema.sql import fetch_all


class WaitReason(str, Enum):
    """What keeps an enqueued task from starting, first cause first (quire_wait_reasons)."""

    HELD = "held"                                # its batch waits for an operator to release it
    AGENT_PAUSED = "agent_paused"                # an operator paused its agent
    RETRY_BACKOFF = "retry_backoff"              # a failed attempt's backoff has not passed yet
    AGENT_MISCONFIGURED = "agent_misconfigured"  # its agent cannot run as configured
    CUSTOMER_BUDGET = "customer_budget"          # its customer spent its monthly LLM budget
    CONCURRENCY_CAP = "concurrency_cap"          # its agent runs as many tasks as it may
    TOKEN_BUDGET = "token_budget"                # its agent's tokens a minute are spent (or Retry-After)
    FAIR_SHARE = "fair_share"                    # its turn: higher priorities and other customers first


# How each reason reads to a person.
REASON_WORDS: dict[WaitReason, str] = {
    WaitReason.HELD: "held for review",
    WaitReason.AGENT_PAUSED: "agent paused",
    WaitReason.RETRY_BACKOFF: "waiting to retry",
    WaitReason.AGENT_MISCONFIGURED: "agent cannot run",
    WaitReason.CUSTOMER_BUDGET: "customer over budget",
    WaitReason.CONCURRENCY_CAP: "agent at its limit of tasks at once",
    WaitReason.TOKEN_BUDGET: "agent at its token budget",
    WaitReason.FAIR_SHARE: "waiting its turn",
}


@dataclass(frozen=True)
class Waiting:
    """Why one task waits, until when (where known) and a detail (the pause's reason, the load)."""

    task_id: int
    reason: WaitReason
    until: datetime | None = None
    detail: str | None = None

    @property
    def words(self) -> str:
        """The reason in plain words."""
        return REASON_WORDS[self.reason]


def task_wait_reason_list(conn: psycopg.Connection, task_ids: Iterable[int], *,
                          now: datetime | None = None) -> dict[int, Waiting]:
    """Why each of these tasks waits, by task id; tasks that are not enqueued are left out."""
    ids = sorted({int(i) for i in task_ids})
    if not ids:
        return {}
    rows = fetch_all(conn, "task_wait_reason_list", {"ids": ids, "now": now})
    return {r["task_id"]: Waiting(r["task_id"], WaitReason(r["reason"]), r["until"], r["detail"]) for r in rows}


Row = TypeVar("Row")


def with_wait_reasons(conn: psycopg.Connection, rows: list[Row], *, now: datetime | None = None) -> list[Row]:
    """Rows (tasks or task table rows) with waiting_reason, waiting_until and waiting_detail set
    on the enqueued ones: one query for the page, none when nothing on it waits."""
    # Tasks and task table rows alike: read by the attributes both have.
    items: list[Any] = list(rows)
    waiting = [r.id for r in items if getattr(r.status, "value", r.status) == "enqueued"]
    if not waiting:
        return rows
    why = task_wait_reason_list(conn, waiting, now=now)
    return [dataclasses.replace(r, waiting_reason=why[r.id].reason.value, waiting_until=why[r.id].until,
                                waiting_detail=why[r.id].detail) if r.id in why else r for r in items]
