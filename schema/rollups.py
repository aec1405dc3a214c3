"""Reads of the rollups (migrations 0007 and 0011): which buckets a date range covers, the fold, and the figures."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

from schema.sql import fetch_row, q, run_query

# Grains, coarsest first, and the grains each table holds per scope (all customers or one).
# ALL is one bucket holding every task (migration 0011), read when a filter has no dates. WEEK is ISO
# weeks from Monday: totals for the throughput chart's 7-day buckets (migration 0024), and a
# customer's histograms, which have no days (migration 0036).
ALL, MONTH, WEEK, DAY, HOUR = "a", "m", "w", "d", "h"
TOTALS_GRAINS: dict[bool, tuple[str, ...]] = {True: (ALL, MONTH, WEEK, DAY, HOUR), False: (ALL, MONTH, WEEK, DAY)}
BINS_GRAINS: dict[bool, tuple[str, ...]] = {True: (ALL, MONTH, DAY), False: (ALL, MONTH, WEEK)}
# Sentinels for an unbounded or empty range: timestamptz holds both.
NEVER_BEFORE = datetime(1, 1, 1, tzinfo=UTC)
NEVER_AFTER = datetime(9999, 12, 31, tzinfo=UTC)
EMPTY = (NEVER_BEFORE, NEVER_BEFORE)
# A read adds the marks not folded yet to the folded rows (exact figures) when at most this many
# wait; beyond that (a bulk load, a backfill) it answers from what is folded and says it is catching
# up. No read ever folds: the worker, or an app without one, folds in steps of FOLD_STEP_MARKS.
PENDING_EXACT_MAX = 5_000
FOLD_STEP_MARKS = 20_000

# Histogram bins: log scale from these bases with a factor of 1.25 (see quire_log_bin).
LOG_BASE = {"l": 0.1, "a": 1e-6, "m": 1e-6, "s": 1e-6}
LOG_FACTOR = 1.25


def _floor(t: datetime, grain: str) -> datetime:
    t = t.astimezone(UTC)
    if grain == MONTH:
        return t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if grain == DAY:
        return t.replace(hour=0, minute=0, second=0, microsecond=0)
    if grain == WEEK:
        day = t.replace(hour=0, minute=0, second=0, microsecond=0)
        return day - timedelta(days=day.weekday())  # Monday, as date_trunc('week') (0001-01-01 is one)
    return t.replace(minute=0, second=0, microsecond=0)


def _next(t: datetime, grain: str) -> datetime:
    """The start of the bucket after the one `t` is in."""
    t = _floor(t, grain)
    try:
        if grain == MONTH:
            return t.replace(year=t.year + 1, month=1) if t.month == 12 else t.replace(month=t.month + 1)
        return t + {DAY: timedelta(days=1), WEEK: timedelta(days=7)}.get(grain, timedelta(hours=1))
    except (OverflowError, ValueError):  # the last bucket Python's dates hold: it runs to the end
        return NEVER_AFTER if t < NEVER_AFTER else datetime.max.replace(tzinfo=UTC)


def plan(date_from: datetime | None, date_to: datetime | None,
         grains: tuple[str, ...]) -> dict[str, list[tuple[datetime, datetime]]]:
    """Splits [date_from, date_to) into whole buckets per grain and raw ends ("r"), coarsest first.

    Greedy from the start: the coarsest whole bucket that fits, else raw up to the next boundary
    of any grain; a week is not taken across the start of a month that fits whole. The result has at
    most two ranges per grain, four of days, and four raw ranges (two when the finest grain is a day
    or an hour: with weeks the finest, each end can have a raw part on both sides of a run of weeks).
    """
    pieces: dict[str, list[tuple[datetime, datetime]]] = {g: [] for g in (*grains, "r")}
    if grains[0] == ALL:
        if date_from is None and date_to is None:
            pieces[ALL].append((NEVER_BEFORE, NEVER_AFTER))
            return pieces
        grains = grains[1:]  # the all-time bucket is never whole inside a bounded range

    def add(kind: str, lo: datetime, hi: datetime) -> None:
        ranges = pieces[kind]
        if ranges and ranges[-1][1] == lo:
            ranges[-1] = (ranges[-1][0], hi)
        else:
            ranges.append((lo, hi))

    def fits(start: datetime, grain: str) -> bool:
        return _floor(start, grain) == start and (date_to is None or _next(start, grain) <= date_to)

    def cuts_a_month(week: datetime) -> bool:
        """Whether the week from `week` crosses the start of a month that fits whole."""
        month = _next(week, MONTH)
        return MONTH in grains and month < _next(week, WEEK) and fits(month, MONTH)

    coarsest = grains[0]
    if date_from is None:
        if date_to is None:
            add(coarsest, NEVER_BEFORE, NEVER_AFTER)
            return pieces
        cur = _floor(date_to, coarsest)
        add(coarsest, NEVER_BEFORE, cur)
    else:
        cur = date_from

    while date_to is None or cur < date_to:
        for grain in grains:
            if fits(cur, grain) and not (grain == WEEK and cuts_a_month(cur)):
                if date_to is None and grain == coarsest:
                    add(grain, cur, NEVER_AFTER)
                    return pieces
                add(grain, cur, _next(cur, grain))
                cur = _next(cur, grain)
                break
        else:
            end = min(_next(cur, grain) for grain in grains)
            end = min(end, date_to) if date_to is not None else end
            add("r", cur, end)
            cur = end
    return pieces


def plan_params(date_from: datetime | None, date_to: datetime | None, grains: tuple[str, ...]) -> dict[str, Any]:
    """The %(m1_lo)s ... %(r4_hi)s parameters of the rollup_segment and rollup_raw_range fragments."""
    pieces = plan(date_from, date_to, grains)
    params: dict[str, Any] = {}
    for kind in (ALL, MONTH, WEEK, DAY, HOUR, "r"):
        ranges, most = pieces.get(kind, []), 4 if kind in (DAY, "r") else 2
        if len(ranges) > most:
            raise AssertionError(f"a date range split into {len(ranges)} {kind!r} ranges: {ranges}")
        ranges = ranges + [EMPTY] * (most - len(ranges))
        for i, (lo, hi) in enumerate(ranges, start=1):
            params[f"{kind}{i}_lo"], params[f"{kind}{i}_hi"] = lo, hi
    return params


def composed(name: str, params: dict[str, Any]) -> sql.Composed:
    """The named query with the rollup fragments composed in: the key and date conditions the filter
    sets, and only those (a condition the filter leaves open is TRUE, never `param IS NULL OR ...`,
    which a prepared statement's generic plan could not use an index for)."""
    # Each fragment by its full name, so one grep finds a query's definition and its users.
    keys = [sql.SQL(q(fragment)) for fragment, used in (
        ("rollup_key_statuses", params.get("statuses")), ("rollup_key_agents", params.get("agents")),
        ("rollup_key_customers", params.get("customers")), ("rollup_key_review", params.get("needs_review")))
        if used]
    in_range = [sql.SQL(q(fragment)) for fragment, used in (
        ("rollup_from", params.get("date_from")), ("rollup_to", params.get("date_to"))) if used is not None]
    raw = _any(q("rollup_raw_range"), params, ("r",))
    blocks = {"pending": params.get("with_pending", True), "raw": raw != FALSE}
    fragments = {"keys": _all(keys), "in_range": _all(in_range), "raw": raw,
                 "segments": _any(q("rollup_segment"), params, (ALL, MONTH, WEEK, DAY, HOUR))}
    text = _kept(q(name), blocks)
    if "{totals_rows}" in text:  # the totals' reads: their shared rows and sums
        fragments["totals_rows"] = sql.SQL(_kept(q("rollup_totals_rows"), blocks)).format(**fragments)
        fragments["totals_sums"] = sql.SQL(q("rollup_totals_sums"))
    return sql.SQL(text).format(**fragments)


def _kept(text: str, blocks: dict[str, bool]) -> str:
    """The query with each {if_NAME} ... {end_NAME} block's text kept or dropped as blocks[NAME] says."""
    return BLOCK.sub(lambda m: m.group(2) if blocks[m.group(1)] else "", text)


def _all(conditions: Sequence[sql.Composable]) -> sql.Composable:
    return sql.SQL("({})").format(sql.SQL(" AND ").join(conditions)) if conditions else sql.SQL("TRUE")


FALSE = sql.SQL("FALSE")
# A branch of a rollup read that only some reads need: the corrections for the marks not folded yet
# (`pending`), and the partial buckets read from the tasks (`raw`).
BLOCK = re.compile(r"\{if_(\w+)\}(.*?)\{end_\1\}", re.DOTALL)


def _any(fragment: str, params: dict[str, Any], kinds: Sequence[str]) -> sql.Composable:
    """The fragment once per range of these kinds the parameters hold (plan_params), OR'd; FALSE for none."""
    arms = [sql.SQL(fragment).format(grain=sql.Literal(kind), lo=sql.Placeholder(f"{kind}{i}_lo"),
                                     hi=sql.Placeholder(f"{kind}{i}_hi"))
            for kind in kinds for i in range(1, 5)
            if f"{kind}{i}_lo" in params and (params[f"{kind}{i}_lo"], params[f"{kind}{i}_hi"]) != EMPTY]
    return sql.SQL("({})").format(sql.SQL(" OR ").join(arms)) if arms else FALSE


def run(conn: psycopg.Connection, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Runs a rollup read; the marks not folded yet are added as corrections unless with_pending is False.

    Never prepared: each read is planned for its own values, which drop the corrections' branches
    when there are none. Once prepared, Postgres may switch a statement to one generic plan for every
    value, which keeps every branch, and for some filters costs ten times as much (docs/BENCHMARKS.md)."""
    return run_query(conn, composed(name, params), {"with_pending": True, **params}, prepare=False)


def count(conn: psycopg.Connection, flt_params: dict[str, Any]) -> int:
    """How many tasks the filter selects (what is folded only when with_pending is False)."""
    return run(conn, "rollup_count_filtered", filter_params(flt_params, TOTALS_GRAINS))[0]["n"]


def rollup_fold(conn: psycopg.Connection, *, max_marks: int | None = None) -> int:
    """Folds pending marks (at most `max_marks` of them); the number of tasks folded, or -1 when another
    fold holds the lock."""
    return fetch_row(conn, "rollup_fold", {"max_marks": max_marks})["folded"]


def drain_under_way(conn: psycopg.Connection) -> bool:
    """Whether tasks run while others wait their turn (due and not held)."""
    return bool(fetch_row(conn, "rollup_drain_under_way_one")["draining"])


def rollup_pending_count(conn: psycopg.Connection) -> int:
    return fetch_row(conn, "rollup_pending_count")["n"]


@dataclass(frozen=True)
class Backlog:
    """The marks not folded yet, as a read sees them: few enough to count exactly, or catching up."""

    marks: int                      # exact up to PENDING_EXACT_MAX; beyond it, the table's estimate
    catching_up: bool               # too many to add to a read: figures are as of `as_of`
    as_of: datetime | None = None   # when the oldest change not counted yet was made (catching up)


def rollup_backlog(conn: psycopg.Connection) -> Backlog:
    """How far the folds are behind, at a cost bounded by PENDING_EXACT_MAX marks, never the backlog's size."""
    row = fetch_row(conn, "rollup_backlog_bounded", {"cap": PENDING_EXACT_MAX + 1})
    if row["n"] <= PENDING_EXACT_MAX:
        return Backlog(row["n"], False)
    return Backlog(max(row["estimate"], row["n"]), True, row["oldest"])


def rollup_marks_exist(conn: psycopg.Connection) -> Backlog:
    """Whether any mark waits, as a backlog of one mark or none: the figures it goes with are as of
    the last fold and advance by the log, whatever the backlog (it says nothing of catching up)."""
    return Backlog(int(fetch_row(conn, "rollup_marks_exist")["waiting"]), False)


def filter_params(flt_params: dict[str, Any], grains: dict[bool, tuple[str, ...]], *,
                  all_customers: bool | None = None) -> dict[str, Any]:
    """Parameters for a rollup read: the filter, its scope, and its segments at the scope's grains."""
    scope = flt_params["customers"] is None if all_customers is None else all_customers
    return {**flt_params, "all_customers": scope,
            **plan_params(flt_params["date_from"], flt_params["date_to"], grains[scope])}


def bin_range(metric: str, b: int) -> tuple[float, float]:
    """The [lo, hi) a histogram bin covers."""
    if metric == "c":
        return (b - 1) / 10, b / 10
    base = LOG_BASE[metric]
    if b == 0:
        return 0.0, base
    return base * LOG_FACTOR ** (b - 1), base * LOG_FACTOR ** b


def percentile(metric: str, bins: dict[int, int], p: float) -> float | None:
    """The p-quantile from histogram bins, interpolated within its bin (geometrically on log bins)."""
    total = sum(bins.values())
    if total <= 0:
        return None
    rank = p * total
    seen = 0
    for b in sorted(bins):
        n = bins[b]
        if n <= 0:
            continue
        if seen + n >= rank:
            lo, hi = bin_range(metric, b)
            share = (rank - seen) / n
            if metric == "c" or lo == 0:
                return lo + (hi - lo) * share
            return math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * share)
        seen += n
    return bin_range(metric, max(bins))[1]


def totals(conn: psycopg.Connection, flt_params: dict[str, Any]) -> list[dict[str, Any]]:
    """Per agent, customer (None in the all-customers scope) and status: counts, spend, confidence
    (/metrics and the status counts; a dashboard reads projected_totals)."""
    return run(conn, "rollup_totals_by_key", filter_params(flt_params, TOTALS_GRAINS))


def projected_totals(conn: psycopg.Connection, flt_params: dict[str, Any]) -> list[dict[str, Any]]:
    """What a dashboard shows of the totals (`dimension`, `key`, sums): every sum per status and per
    agent, and spend per customer (the sums of stats_types.cost_rows)."""
    return (run(conn, "rollup_totals_by_status_and_agent", filter_params(flt_params, TOTALS_GRAINS))
            + run(conn, "rollup_cost_by_customer", filter_params(flt_params, TOTALS_GRAINS, all_customers=False)))


def bins(conn: psycopg.Connection, flt_params: dict[str, Any]) -> dict[str, dict[int, int]]:
    """{metric: {bin: tasks}} for latency (l), confidence (c), LLM (a), compute (m) and total (s) spend."""
    out: dict[str, dict[int, int]] = {m: {} for m in ("l", "c", "a", "m", "s")}
    for row in run(conn, "rollup_bins_by_metric", filter_params(flt_params, BINS_GRAINS)):
        out[row["metric"]][row["bin"]] = row["n"]
    return out


def throughput_grains(all_customers: bool, bucket: timedelta) -> tuple[str, ...]:
    """The rollup grains a throughput chart of this bucket reads; none: it reads the tasks."""
    if bucket >= timedelta(days=7) and bucket % timedelta(days=7) == timedelta(0):
        return (WEEK, DAY, HOUR) if all_customers else (WEEK, DAY)
    if bucket >= timedelta(days=1):
        return (DAY, HOUR) if all_customers else (DAY,)
    if bucket >= timedelta(hours=1) and all_customers:
        return (HOUR,)
    return ()


def whole_buckets(date_from: datetime | None, date_to: datetime | None, grains: tuple[str, ...]) -> bool:
    """Whether the range is made of whole buckets of these grains, with nothing read from the tasks."""
    return bool(grains) and not plan(date_from, date_to, grains)["r"]


def throughput(conn: psycopg.Connection, flt_params: dict[str, Any], *, bucket: timedelta, origin: datetime,
               start: datetime | None) -> list[dict[str, Any]]:
    """Submissions and outcomes per bucket; whole rollup buckets where the chart's bucket allows."""
    scope = flt_params["customers"] is None
    grains = throughput_grains(scope, bucket)
    if origin != _floor(origin, WEEK):  # week rows start on a Monday: another origin's weeks cut them
        grains = tuple(g for g in grains if g != WEEK)
    if grains:
        params = filter_params(flt_params, {scope: grains})
    else:
        # A fine bucket means a short span: read it raw, from the first task the filter selects.
        params = {**flt_params, "all_customers": scope,
                  **plan_params(None, None, (MONTH,)),
                  "m1_lo": EMPTY[0], "m1_hi": EMPTY[1],
                  "r1_lo": flt_params["date_from"] or start or NEVER_BEFORE,
                  "r1_hi": flt_params["date_to"] or NEVER_AFTER,
                  # No folded row is read, so the unfolded marks correct nothing: a marked task
                  # created before `start` whose status left the filter would count -1.
                  "with_pending": False}
    return run(conn, "rollup_throughput_series", {**params, "bucket": bucket, "origin": origin})


def first_created(conn: psycopg.Connection, flt_params: dict[str, Any]) -> datetime | None:
    """When the first task the filter selects was submitted."""
    rows = run(conn, "task_first_created_filtered", flt_params)
    return rows[0]["created_at"] if rows else None
