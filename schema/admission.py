"""Decides which candidates of one agent's backlog a claim admits under its throttles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Candidate:
    """A claimable task as admission sees it, in claim order."""

    id: int
    priority: int
    estimated_tokens: int
    waiting_since: datetime | None


@dataclass(frozen=True)
class Load:
    """The agent's work already admitted: tasks in flight and tokens reserved in the window."""

    in_flight: int
    reserved_tokens: int


@dataclass(frozen=True)
class Admission:
    """The tasks admitted, and those refused for the token budget that start waiting now."""

    admitted: list[int]
    now_waiting: list[int]
    blocked_by: int | None = None  # a starving task that holds the budget for itself


def fits_budget(estimate: int, reserved: int, max_tpm: int) -> bool:
    """A task fits if it stays within budget; one larger than the whole budget fits only alone."""
    if estimate > max_tpm:
        return reserved == 0
    return reserved + estimate <= max_tpm


def admit(candidates: list[Candidate], *, limit: int, load: Load, max_concurrent_tasks: int | None,
          max_tpm: int | None, starvation_seconds: int, now: datetime) -> Admission:
    """Walks candidates in claim order and admits what both limits allow (the stricter wins).

    A task refused for the budget does not stop smaller ones behind it, unless it has waited
    longer than the starvation bound: then the budget is kept for it, and nothing behind it
    (same or lower priority, by claim order) is admitted until it fits.
    """
    admitted: list[int] = []
    waiting: list[int] = []
    in_flight, reserved = load.in_flight, load.reserved_tokens
    starving_after = timedelta(seconds=starvation_seconds)
    for c in candidates:
        if len(admitted) >= limit:
            break
        if max_concurrent_tasks is not None and in_flight >= max_concurrent_tasks:
            break
        if max_tpm is not None and not fits_budget(c.estimated_tokens, reserved, max_tpm):
            if c.waiting_since is None:
                waiting.append(c.id)
            elif now - c.waiting_since >= starving_after:
                return Admission(admitted, waiting, blocked_by=c.id)
            continue
        admitted.append(c.id)
        in_flight += 1
        reserved += c.estimated_tokens
    return Admission(admitted, waiting)
