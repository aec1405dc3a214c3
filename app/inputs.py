"""Checking what people type before it reaches the database: ids, free text, and the filter over
the task list."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from schema.models import TaskStatus
from schema.stats_types import HELD, TaskFilter

STATUSES = [s.value for s in TaskStatus] + [HELD]  # the filter's: held is queued and held for review
MAX_ID = 2**63 - 1  # ids are bigint


def valid_id(value: int) -> bool:
    """Whether an id can name a row at all (a bigint of at least 1)."""
    return 1 <= value <= MAX_ID


def check_text(what: str, value: str | None, longest: int | None = None) -> None:
    """ValueError for text Postgres cannot store (a NUL character), that is not valid Unicode, or
    that is longer than `longest` characters."""
    if value is None:
        return
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character")
    if longest is not None and len(value) > longest:
        raise ValueError(f"{what[:1].upper()}{what[1:]} is too long: at most {longest:,} characters, "
                         f"not {len(value):,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode") from None


# Dates a filter may name: tasks exist only within these (the callback contract's clock bounds too).
FIRST_DATE, LAST_DATE = date(2000, 1, 1), date(2199, 12, 31)
_DATE_BOUNDS = f"a date from {FIRST_DATE:%Y-%m-%d} to {LAST_DATE:%Y-%m-%d}"


def _moment(value: str | None, *, end: bool) -> datetime | None:
    """An ISO date or datetime from FIRST_DATE to LAST_DATE; a plain date as an end bound includes
    that whole day."""
    if not value:
        return None
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            moment = datetime.combine(day, time(), tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(value)
            moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
        day = moment.astimezone(UTC).date()
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"Dates must be {_DATE_BOUNDS} (ISO, like 2026-03-01): not {value[:40]!r}") from exc
    if not FIRST_DATE <= day <= LAST_DATE:
        raise ValueError(f"Dates must be {_DATE_BOUNDS}: not {value[:40]!r}")
    return moment + timedelta(days=1) if end and len(value) == 10 else moment


def make_filter(date_from: str | None = None, date_to: str | None = None, statuses: list[str] | None = None,
                agents: list[str] | None = None, customers: list[str] | None = None,
                needs_review: bool = False) -> TaskFilter:
    """A TaskFilter from loosely typed inputs (query strings, form controls); ValueError if invalid."""
    for what, values in (("status", statuses), ("agent", agents), ("customer", customers),
                         ("date", [date_from, date_to])):
        for value in values or ():
            check_text(what, value)
    unknown = set(statuses or ()) - set(STATUSES)
    if unknown:
        raise ValueError(f"unknown status {', '.join(sorted(unknown))}: use {', '.join(STATUSES)}")
    start, end = _moment(date_from, end=False), _moment(date_to, end=True)
    if start is not None and end is not None and start >= end:
        raise ValueError(f"“from” ({date_from}) is after “to” ({date_to}): no task can match")
    return TaskFilter(date_from=start, date_to=end,
                      statuses=tuple(statuses or ()), agents=tuple(a for a in agents or () if a),
                      customers=tuple(c for c in customers or () if c), needs_review=bool(needs_review))
