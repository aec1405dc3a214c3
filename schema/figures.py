"""A filter's dashboard figures as one value: read from the rollups once, then advanced by the folds' log.

Every fold logs what it changed per created hour and key (migration 0011). Figures read at fold F
stay exact by adding the log after F and the marks not folded yet (`Changes`), both read once for
every filter a process holds. A filter whose read goes to the tasks themselves (dates that cut a
rollup bucket, a throughput chart of buckets under an hour) is not advanced: it is read again,
pending marks included.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from schema import rollups
from schema.models import TERMINAL_STATUSES
from schema.sql import fetch_all, fetch_row
from schema.stats_types import (
    CHART_ORIGIN,
    SPEND_METRICS,
    STATUSES,
    Charts,
    Summary,
    TaskFilter,
    bucket_for_span,
    cost_rows,
)

SUMS = ("tasks", "attempted", "attempts", "with_usage", "input_tokens", "output_tokens", "llm_cost_usd",
        "compute_cost_usd", "unpriced", "compute_pending", "confidence_n", "confidence_sum")
METRICS = ("l", "c", "a", "m", "s")
# The totals are kept per status and per agent, each over every task the filter selects, and the spend
# per customer: what the summary (by status) and the cost charts (by agent, by customer) show.
COST_SUMS = ("attempted", "input_tokens", "output_tokens", "llm_cost_usd", "compute_cost_usd")
DIMENSIONS = {"status": SUMS, "agent": SUMS, "customer": COST_SUMS}
ORIGIN = CHART_ORIGIN  # throughput buckets start here, as in the direct read
HOUR = timedelta(hours=1)


@dataclass
class Figures:
    """What one filter's summary and charts are made of, as of fold `fold_id`."""

    flt: TaskFilter
    fold_id: int                 # every fold up to this one is counted
    live: bool                   # advanced by the log; else read again (pending marks included)
    bucket: timedelta            # the throughput chart's bucket
    first_created: datetime | None
    totals: dict[str, dict[str | None, dict[str, Any]]] = field(  # {dimension: {key: sums}}
        default_factory=lambda: {d: {} for d in DIMENSIONS})
    bins: dict[str, dict[int, int]] = field(default_factory=lambda: {m: {} for m in METRICS})
    throughput: dict[tuple[str, datetime], int] = field(default_factory=dict)  # (series, bucket start): tasks
    backlog: rollups.Backlog = rollups.Backlog(0, False)  # catching up: folded rows only, as of backlog.as_of


@dataclass(frozen=True)
class Changes:
    """The log after some fold and the marks not folded yet, read in one snapshot."""

    last_fold: int
    pruned_through: int
    folded: list[dict[str, Any]] = field(default_factory=list)
    folded_bins: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)
    pending_bins: list[dict[str, Any]] = field(default_factory=list)
    backlog: rollups.Backlog = rollups.Backlog(0, False)  # catching up: `pending` left out (too many)


@contextlib.contextmanager
def snapshot(conn: psycopg.Connection) -> Iterator[None]:
    """One read-only snapshot for several statements (inside a caller's transaction: that one)."""
    if not conn.autocommit and conn.info.transaction_status != TransactionStatus.IDLE:
        yield
        return
    with conn.transaction():
        fetch_all(conn, "rollup_snapshot")
        yield


def advanceable(flt: TaskFilter, bucket: timedelta) -> bool:
    """Whether the log, kept per created hour, says exactly what changes in this filter's figures.

    Their read must hold folded rows only: a part read from the tasks themselves (the partial
    buckets at a range's ends) is as of now, not as of the fold, and the log would add it again.
    """
    scope = not flt.customers
    return (bucket >= HOUR and bucket % HOUR == timedelta(0)
            and all(rollups.whole_buckets(flt.date_from, flt.date_to, grains)
                    for grains in (rollups.TOTALS_GRAINS[False], rollups.BINS_GRAINS[scope],
                                   rollups.throughput_grains(scope, bucket))))


def figures_read(conn: psycopg.Connection, flt: TaskFilter, *, now: datetime | None = None,
                 advance: bool = True) -> Figures:
    """The filter's figures from the rollups; pending marks included unless the figures will be advanced.

    Never folds. While a backlog is folded in the background (a bulk load, a backfill), the figures
    hold the folded rows only and say so (`backlog.catching_up`); they are then read again, not advanced.
    """
    params = flt.params()
    moment = now or datetime.now(UTC)
    with snapshot(conn):
        backlog = rollups.rollup_backlog(conn)
        fold_id = fetch_row(conn, "rollup_log_state")["last_fold"]
        first = rollups.first_created(conn, params)
        bucket = bucket_for_span(params["date_from"] or first, params["date_to"] or (moment if first else None))
        live = advance and advanceable(flt, bucket) and not backlog.catching_up
        # No mark in this snapshot: nothing to correct, and the corrections' branches are not planned.
        params = {**params, "with_pending": not live and not backlog.catching_up and backlog.marks > 0}
        fig = Figures(flt=flt, fold_id=fold_id, live=live, bucket=bucket, first_created=first, backlog=backlog)
        for r in rollups.projected_totals(conn, params):
            fig.totals[r["dimension"]][r["key"]] = {k: r[k] for k in DIMENSIONS[r["dimension"]]}
        fig.bins = rollups.bins(conn, params)
        for r in rollups.throughput(conn, params, bucket=bucket, origin=ORIGIN, start=first):
            fig.throughput[(r["series"], r["bucket"])] = r["n"]
    return fig


def changes_read(conn: psycopg.Connection, after: int, *, pending: bool = True) -> Changes:
    """The log after fold `after` and (`pending`) the marks not folded yet, for every filter at once.

    Never folds. The log costs what the folds since `after` changed; the pending marks cost what they
    number, so they are left out while catching up, and when the caller wants figures as of the last fold."""
    with snapshot(conn):
        backlog = rollups.rollup_backlog(conn) if pending else rollups.rollup_marks_exist(conn)
        state = fetch_row(conn, "rollup_log_state")
        marks = (_grouped(fetch_all(conn, "rollup_pending_contrib"))
                 if pending and not backlog.catching_up else {})
        return Changes(last_fold=state["last_fold"], pruned_through=state["pruned_through"],
                       folded=fetch_all(conn, "rollup_changes_after", {"after": after}),
                       folded_bins=fetch_all(conn, "rollup_change_bins_after", {"after": after}),
                       backlog=backlog, **marks)


BIN_COLUMNS = {"l": "latency_bin", "c": "confidence_bin", "a": "llm_bin", "m": "compute_bin", "s": "spend_bin"}


def _hour(t: datetime | None) -> datetime | None:
    return None if t is None else t.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _grouped(signed: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Signed per-task contributions grouped as the fold logs them: per created hour and key."""
    totals: dict[tuple, dict[str, Any]] = {}
    bins: dict[tuple, int] = {}
    for r in signed:
        sign, hour = r["sign"], _hour(r["created_at"])
        key = (hour, _hour(r["finished_at"]), r["agent"], r["customer"], r["status"], r["review"])
        sums = totals.setdefault(key, dict.fromkeys(SUMS, 0))
        sums["tasks"] += sign
        for k in SUMS[1:]:
            sums[k] += sign * r[k]
        for metric, column in BIN_COLUMNS.items():
            if r[column] is not None:
                bkey = (hour, r["agent"], r["customer"], r["status"], r["review"], metric, r[column])
                bins[bkey] = bins.get(bkey, 0) + sign
    names = ("hour", "finished", "agent", "customer", "status", "review")
    return {"pending": [{**dict(zip(names, key)), **sums} for key, sums in totals.items() if any(sums.values())],
            "pending_bins": [{"hour": h, "agent": a, "customer": c, "status": st, "review": rv, "metric": m,
                              "bin": b, "n": n}
                             for (h, a, c, st, rv, m, b), n in bins.items() if n]}


def _selects(flt: TaskFilter, row: dict[str, Any]) -> bool:
    """Whether a log row (per created hour) belongs to the filter; exact for on-the-hour dates."""
    return ((not flt.agents or row["agent"] in flt.agents)
            and (not flt.customers or row["customer"] in flt.customers)
            and (not flt.statuses or row["status"] in flt.statuses)
            and (not flt.needs_review or row["review"])
            and (flt.date_from is None or row["hour"] >= flt.date_from)
            and (flt.date_to is None or row["hour"] < flt.date_to))


def _bin_start(t: datetime, bucket: timedelta) -> datetime:
    return ORIGIN + (t - ORIGIN) // bucket * bucket


def _add(fig: Figures, rows: list[dict[str, Any]], bin_rows: list[dict[str, Any]]) -> None:
    for row in rows:
        if not _selects(fig.flt, row):
            continue
        for dimension, keys in DIMENSIONS.items():
            sums = fig.totals[dimension].setdefault(row[dimension], dict.fromkeys(keys, 0))
            for k in keys:
                sums[k] += row[k]
        if row["tasks"]:
            start = ("submitted", _bin_start(row["hour"], fig.bucket))
            fig.throughput[start] = fig.throughput.get(start, 0) + row["tasks"]
            if row["finished"] is not None and row["status"] in TERMINAL_STATUSES:
                end = (row["status"], _bin_start(row["finished"], fig.bucket))
                fig.throughput[end] = fig.throughput.get(end, 0) + row["tasks"]
    for row in bin_rows:
        if _selects(fig.flt, row):
            hist = fig.bins[row["metric"]]
            hist[row["bin"]] = hist.get(row["bin"], 0) + row["n"]


def advance(fig: Figures, changes: Changes) -> bool:
    """Adds the folds after fig.fold_id; False when the figures must be read again instead."""
    if not fig.live or fig.fold_id < changes.pruned_through or changes.backlog.catching_up:
        return False
    rows = [r for r in changes.folded if r["fold_id"] > fig.fold_id]
    bin_rows = [r for r in changes.folded_bins if r["fold_id"] > fig.fold_id]
    if _moves_first(fig, rows + changes.pending):
        return False
    _add(fig, rows, bin_rows)
    fig.fold_id = max(fig.fold_id, changes.last_fold)
    return True


def _moves_first(fig: Figures, rows: list[dict[str, Any]]) -> bool:
    """Whether tasks enter or leave the filter as early as its first one (the chart's span may move)."""
    floor = None if fig.first_created is None else _hour(fig.first_created)
    return any(r["tasks"] != 0 and _selects(fig.flt, r) and (floor is None or r["hour"] <= floor) for r in rows)


def current(fig: Figures, changes: Changes | None) -> Figures:
    """The figures with the marks not folded yet added (a copy); as read when they were read with them."""
    if not fig.live or changes is None or not (changes.pending or changes.pending_bins):
        return fig
    now = copy.deepcopy(fig)
    _add(now, changes.pending, changes.pending_bins)
    return now


def summary_of(fig: Figures, *, now: datetime | None = None) -> Summary:
    """The headline figures: exact counts and spend, percentiles from the histograms."""
    by_status = fig.totals["status"]
    rows = list(by_status.values())
    counts = {status: by_status[status]["tasks"] if status in by_status else 0 for status in STATUSES}

    def total(key: str) -> Any:
        return sum((r[key] for r in rows if r[key] is not None), 0)
    confidence_n = total("confidence_n")
    hist = fig.bins
    first = fig.first_created if sum(counts.values()) else None
    return Summary(
        counts=counts, total=sum(counts.values()), input_tokens=int(total("input_tokens")),
        output_tokens=int(total("output_tokens")), llm_cost_usd=Decimal(total("llm_cost_usd")),
        compute_cost_usd=Decimal(total("compute_cost_usd")), tasks_with_usage=int(total("with_usage")),
        attempts=int(total("attempts")),
        avg_confidence=float(total("confidence_sum") / confidence_n) if confidence_n else None,
        median_latency_s=rollups.percentile("l", hist["l"], 0.5),
        p95_latency_s=rollups.percentile("l", hist["l"], 0.95),
        first_created_at=first, last_activity_at=(now or datetime.now(UTC)) if first else None,
        catching_up=fig.backlog.catching_up, as_of=fig.backlog.as_of,
        backlog=fig.backlog.marks if fig.backlog.catching_up else 0,
        unpriced_attempts=int(total("unpriced")), compute_pending_attempts=int(total("compute_pending")),
        spend_per_task={name: {"p50": rollups.percentile(m, hist[m], 0.5), "p90": rollups.percentile(m, hist[m], 0.9),
                               "tasks": sum(hist[m].values())}
                        for name, m in SPEND_METRICS.items()})


def charts_of(fig: Figures) -> Charts:
    """Throughput, cost by agent and customer, latency and confidence distributions."""
    def rows(dimension: str) -> list[dict[str, Any]]:
        return [{dimension: key, **sums} for key, sums in fig.totals[dimension].items()]
    latency_bins = [{"lo": lo, "hi": hi, "n": n} for b, n in sorted(fig.bins["l"].items()) if n
                    for lo, hi in [rollups.bin_range("l", b)]]
    confidence_bins = [{"lo": (b - 1) / 10, "hi": b / 10, "n": n} for b, n in sorted(fig.bins["c"].items()) if n]
    throughput = [{"series": series, "bucket": start, "n": n}
                  for (series, start), n in sorted(fig.throughput.items(), key=lambda kv: (kv[0][1], kv[0][0])) if n]
    return Charts(bucket_seconds=int(fig.bucket.total_seconds()), throughput=throughput,
                  cost_by_agent=cost_rows(rows("agent"), "agent"),
                  cost_by_customer=cost_rows(rows("customer"), "customer", limit=30),
                  latency_bins=latency_bins, confidence_bins=confidence_bins,
                  catching_up=fig.backlog.catching_up, as_of=fig.backlog.as_of)
