"""Queue positions in claim order (priority, then fair share across customers, then age), counted
within a bound so that a million queued tasks cost no more than the bound; past it, an estimate."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import psycopg

from schema.sql import fetch_all, fetch_row, run_query

# Counting stops here: further tasks ahead are estimated from the planner's statistics.
POSITION_BOUND = 10_000

Waiting = Literal["held", "budget", "backoff", "token budget", "agent paused", "agent cannot run"]


@dataclass(frozen=True)
class Position:
    """Where one enqueued task stands: how many tasks are claimed before it, exact or about."""

    task_id: int
    agent: str
    ahead: int | None          # None while it cannot be claimed at all (held, over budget)
    exact: bool                # False: past the counting bound, `ahead` is the planner's estimate
    waiting: Waiting | None    # why it waits beyond its turn, if it does
    pages: int | None = None
    # Its agent: why it cannot run (nothing is claimed for it until that is fixed), or how long a
    # Retry-After still pauses it.
    agent_cannot_run: str | None = None
    agent_paused_seconds: float | None = None
    scanned: bool = False      # no text layer: its pages go through OCR (a longer run)
    ocr_work: float | None = None  # a scan's OCR work in standard pages (None: its pages)

    def describe(self) -> str:
        """How the batch view and task detail say it."""
        if self.waiting in ("held", "budget"):
            return f"waiting: {self.waiting}"
        if self.agent_cannot_run:
            return f"waiting: its agent cannot run ({self.agent_cannot_run[:200]})"
        if self.ahead is None:
            return "queued"
        if self.exact:
            text = "next in line" if self.ahead == 0 else f"{self.ahead:,} ahead"
        else:
            text = f"about {round(self.ahead, -2):,.0f} ahead"
        if self.waiting == "agent paused" and self.agent_paused_seconds is not None:
            return text + f" · waiting: the model endpoint paused its agent for {self.agent_paused_seconds:,.0f} s"
        return text + (f" · waiting: {self.waiting}" if self.waiting else "")


def _estimate(conn: psycopg.Connection, agent: str, priority: int, created_at: datetime) -> int:
    plan = fetch_row(conn, "task_ahead_estimate", {"agent": agent, "priority": priority, "created_at": created_at})
    return int(plan["QUERY PLAN"][0]["Plan"]["Plan Rows"])


def task_positions(conn: psycopg.Connection, ids: list[int], *, now: datetime | None = None,
                   bound: int = POSITION_BOUND) -> dict[int, Position]:
    """Positions of the given tasks that are enqueued; tasks in any other state are left out.

    A customer's k-th queued task at a priority ranks k plus the customer's tasks in flight; a
    task of another customer at the same priority is ahead when its rank is not higher (ties count
    as ahead). Every count is bounded: one group listing, one count per customer at that priority.
    """
    facts = [r for r in fetch_all(conn, "task_queue_facts_by_ids", {"ids": ids, "now": now})
             if r["status"] == "enqueued"]
    clock = now or run_query(conn, "SELECT now() AS n")[0]["n"]
    out: dict[int, Position] = {}
    groups: dict[tuple[str, int, str], list[dict]] = defaultdict(list)
    for row in facts:
        if row["held"] or row["over_budget"]:
            out[row["id"]] = Position(row["id"], row["agent"], None, True, "held" if row["held"] else "budget",
                                      row["pages"])
        else:
            groups[(row["agent"], row["priority"], row["customer"] or "")].append(row)
    higher_cache: dict[tuple[str, int], int] = {}
    for (agent, priority, ckey), rows in groups.items():
        key = {"agent": agent, "priority": priority, "bound": bound, "now": now}
        if (agent, priority) not in higher_cache:
            higher_cache[(agent, priority)] = fetch_row(conn, "task_ahead_higher_priority_bounded", key)["n"]
        higher = higher_cache[(agent, priority)]
        order = fetch_all(conn, "task_fair_group_queue_list", {**key, "ckey": ckey})
        index = {r["id"]: i for i, r in enumerate(order)}
        reach = max((index[r["id"]] + 1 for r in rows if r["id"] in index), default=0)
        # Other customers' queues matter only as deep as ours reaches: count no further than that.
        peers = fetch_all(conn, "task_fair_groups_at_priority", {**key, "count_bound": min(bound, reach + 64) + 1})
        mine = next((p for p in peers if p["ckey"] == ckey), {"in_flight": 0})
        others = [p for p in peers if p["ckey"] != ckey and not p["over_budget"]]
        deepest = mine["in_flight"] + reach
        # Each other customer's queue, as far as any of ours reaches: who is ahead at equal rank is by age.
        heads = {p["ckey"]: [r["created_at"] for r in fetch_all(conn, "task_fair_group_queue_list", {
                     **key, "ckey": p["ckey"], "bound": max(0, min(bound, deepest - p["in_flight"]))})]
                 for p in others}
        for row in rows:
            waiting: Waiting | None = ("agent cannot run" if row["agent_cannot_run"]
                                       else "agent paused" if row["agent_paused_seconds"]
                                       else "backoff" if row["run_after"] > clock
                                       else "token budget" if row["waiting_since"] else None)
            agent_facts = {"agent_cannot_run": row["agent_cannot_run"],
                           "agent_paused_seconds": row["agent_paused_seconds"], "scanned": row["scanned"],
                           "ocr_work": row["ocr_work"]}
            i = index.get(row["id"])
            if i is None:  # past the bound in its own customer's queue
                out[row["id"]] = Position(row["id"], agent, max(bound, _estimate(conn, agent, priority, row["created_at"])),
                                          False, waiting, row["pages"], **agent_facts)
                continue
            rank = mine["in_flight"] + i + 1
            same = 0
            for p in others:
                k = rank - p["in_flight"]  # their k-th task has our rank
                created = heads[p["ckey"]]
                same += min(len(created), max(0, k - 1))
                if 1 <= k <= len(created) and created[k - 1] < row["created_at"]:
                    same += 1
            capped = higher >= bound or any(len(heads[p["ckey"]]) >= bound and rank - p["in_flight"] > bound
                                            for p in others)
            ahead = higher + i + same
            if capped:
                ahead = max(ahead, _estimate(conn, agent, priority, row["created_at"]))
            out[row["id"]] = Position(row["id"], agent, ahead, not capped, waiting, row["pages"], **agent_facts)
    return out
