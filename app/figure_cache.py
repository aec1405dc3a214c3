"""The process's one reader of dashboard figures, shared by every open page.

Per filter, the figures are read once (schema.figures) and then advanced by one read a second, for
every filter at once, of what the folds logged: ten pages on five filters cost one small read a
second, not fifty full ones. Open pages take the figures as of the last fold (the worker folds every
two seconds; a page applies the events' status changes to its counts at once). An API client asks
for exact figures: the read a second then also adds the marks not folded yet, which costs what
those marks number, and is shared by every client. The other reads a page repeats (its table's
first page, the agents' adaptive limits, the budgets) are shared for a second by every page that
asks the same thing.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from psycopg_pool import ConnectionPool

from schema import figures, stats
from schema.stats_types import Charts, Summary, TaskFilter, bucket_for_span

T = TypeVar("T")
# However many events arrive, a page asks for its figures at most once a second and redraws its
# charts at most every five seconds; this cache reads the database at most once a second whatever
# the number of pages.
REFRESH_MIN_SECONDS = 1.0
CHART_MIN_SECONDS = 5.0
FORGET_AFTER_SECONDS = 300.0  # figures no page asked for this long are dropped
MAX_SHARED = 512


async def in_thread(pool: ConnectionPool, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Runs `work(conn, ...)` with a pooled connection in a worker thread."""
    def call() -> T:
        with pool.connection() as conn:
            return work(conn, *args, **kwargs)
    return await asyncio.to_thread(call)


@dataclass
class _Held:
    """One filter's figures, when they were read, and the views made of them since the last sync."""

    fig: figures.Figures
    read_at: float
    used_at: float
    view_of: int = -1                  # the sync generation the views below belong to
    view: figures.Figures | None = None
    summary: Summary | None = None
    charts: Charts | None = None


class FigureCache:
    """Figures per filter for every page of the process; reads counted in `reads` by kind."""

    def __init__(self, pool: ConnectionPool, *, interval: float = REFRESH_MIN_SECONDS) -> None:
        self.pool = pool
        self.interval = interval
        self.reads: Counter[str] = Counter()
        self._held: dict[TaskFilter, _Held] = {}
        self._changes: figures.Changes | None = None
        self._changes_exact = False        # whether the last sync also read the marks not folded yet
        self._synced_at = -math.inf
        self._generation = 0
        self._lock = asyncio.Lock()
        self._shared: dict[Hashable, tuple[float, Any]] = {}
        self._shared_locks: dict[Hashable, asyncio.Lock] = {}

    async def _in_thread(self, work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await in_thread(self.pool, work, *args, **kwargs)

    async def summary(self, flt: TaskFilter, *, since: float | None = None,
                      exact: bool = True) -> tuple[Summary, bool]:
        """The filter's summary, and whether it was read after `since` (see `shared`). Not `exact`:
        as of the last fold (what an open page shows), which spares the read of the unfolded marks."""
        if (parts := flt.held_apart()) is not None:  # held + other outcomes: each part as it is read
            (others, current), (held_tasks, held_current) = [await self.summary(part, since=since, exact=exact)
                                                              for part in parts]
            return stats.with_held(others, held_tasks), current and held_current
        if flt.exact_only:
            return await self.shared(("summary", flt), lambda: self._in_thread(stats.stats_summary_direct, flt),
                                     since=since)
        held, current = await self._current(flt, since, exact)
        if held.summary is None:
            assert held.view is not None  # made by _current
            held.summary = figures.summary_of(held.view)
        return held.summary, current

    async def charts(self, flt: TaskFilter, *, since: float | None = None,
                     exact: bool = True) -> tuple[Charts, bool]:
        if (parts := flt.held_apart()) is not None:  # held + other outcomes: held tasks add submissions
            others_filter, held_filter = parts
            others, current = await self.charts(others_filter, since=since, exact=exact)
            submitted, held_current = await self.shared(
                ("held_throughput", held_filter, others.bucket_seconds),
                lambda: self._in_thread(stats.held_throughput, held_filter, others.bucket_seconds), since=since)
            return stats.charts_with_held(others, submitted), current and held_current
        if flt.exact_only:
            return await self.shared(("charts", flt), lambda: self._in_thread(stats.stats_charts_exact, flt),
                                     since=since)
        held, current = await self._current(flt, since, exact)
        if held.charts is None:
            assert held.view is not None  # made by _current
            held.charts = figures.charts_of(held.view)
        return held.charts, current

    def forget(self) -> None:
        """After an operator's action: the next ask reads again (figures advanced by the log: syncs)."""
        self._shared.clear()
        self._synced_at = -math.inf
        for held in self._held.values():
            if not held.fig.live:
                held.read_at = -math.inf

    async def shared(self, key: Hashable, read: Callable[[], Awaitable[T]], *,
                     since: float | None = None) -> tuple[T, bool]:
        """`read()`'s value for every page that asks with the same key, and whether it is current.

        Current means read after `since` (a time.monotonic() moment, by default the ask's own: the
        events the asker saw are in it). A value read less than a second ago is served anyway, not
        current: the asker asks again later, and the database is read at most once a second.
        """
        since = time.monotonic() if since is None else since
        lock = self._shared_locks.setdefault(key, asyncio.Lock())
        async with lock:
            hit = self._shared.get(key)
            now = time.monotonic()
            if hit is not None and (hit[0] >= since or now - hit[0] < self.interval):
                return hit[1], hit[0] >= since
            self.reads[str(key[0]) if isinstance(key, tuple) else str(key)] += 1
            value = await read()
            self._shared[key] = (now, value)
            if len(self._shared) > MAX_SHARED:
                self._prune_shared()
            return value, True

    def _prune_shared(self) -> None:
        cutoff = time.monotonic() - self.interval
        for key in [k for k, (at, _) in self._shared.items() if at < cutoff]:
            self._shared.pop(key, None)
            lock = self._shared_locks.get(key)
            if lock is not None and not lock.locked():
                self._shared_locks.pop(key, None)

    def _due(self, held: _Held | None, now: float, since: float) -> bool:
        """Whether the filter's figures must be read (again) rather than advanced."""
        if held is None:
            return True
        fig = held.fig
        if not fig.live:
            return held.read_at < since and now - held.read_at >= self.interval
        if fig.first_created is not None:
            # The chart's bucket grows with the span: a new bucket means new rows to read.
            end = fig.flt.date_to or datetime.now(UTC)
            return bucket_for_span(fig.flt.date_from or fig.first_created, end) != fig.bucket
        return False

    async def _current(self, flt: TaskFilter, since: float | None, exact: bool) -> tuple[_Held, bool]:
        since = time.monotonic() if since is None else since
        async with self._lock:
            held = await self._ready(flt, since, exact)
            held.used_at = time.monotonic()
            if held.view_of != self._generation or held.view is None:
                held.view = figures.current(held.fig, self._changes) if held.fig.live else held.fig
                held.view_of, held.summary, held.charts = self._generation, None, None
            if not held.fig.live:
                return held, held.read_at >= since
            # As of the last fold only: current when nothing waited unfolded at the sync.
            complete = exact or self._changes_exact or (self._changes is not None and self._changes.backlog.marks == 0)
            return held, self._synced_at >= since and complete

    async def _ready(self, flt: TaskFilter, since: float, exact: bool) -> _Held:
        """The filter's figures, read or advanced to the last sync (one a second at most; an exact ask
        after a sync that left out the unfolded marks syncs again with them)."""
        for _ in range(3):
            now = time.monotonic()
            held = self._held.get(flt)
            read = self._due(held, now, since)
            if read or held is None:  # (_due is True for a filter not held)
                held = await self._read(flt, now, advance=True)
            if not held.fig.live:
                return held
            if (read or self._changes is None or self._changes.last_fold < held.fig.fold_id
                    or (exact and not self._changes_exact)
                    or (self._synced_at < since and now - self._synced_at >= self.interval)):
                await self._sync(now, exact=exact or (read and self._changes_exact))
            if self._held.get(flt) is held:
                return held
            # The sync could not advance them (the log was pruned, or the chart's span moved): read again.
        return await self._read(flt, time.monotonic(), advance=False)

    async def _read(self, flt: TaskFilter, now: float, *, advance: bool) -> _Held:
        self.reads["figures"] += 1
        fig = await self._in_thread(figures.figures_read, flt, advance=advance)
        held = self._held[flt] = _Held(fig, read_at=now, used_at=now)
        return held

    async def _sync(self, now: float, *, exact: bool) -> None:
        """One read of the log (and the pending marks when `exact`); advances every filter held, drops
        what cannot be."""
        for flt in [f for f, h in self._held.items() if now - h.used_at > FORGET_AFTER_SECONDS]:
            del self._held[flt]
        live = [h for h in self._held.values() if h.fig.live]
        if not live:
            return
        self.reads["changes"] += 1
        changes = await self._in_thread(figures.changes_read, min(h.fig.fold_id for h in live), pending=exact)
        for flt, held in list(self._held.items()):
            if held.fig.live and not figures.advance(held.fig, changes):
                del self._held[flt]  # read again when next asked
        self._changes, self._changes_exact, self._synced_at = changes, exact, now
        self._generation += 1


_caches: weakref.WeakKeyDictionary[ConnectionPool, FigureCache] = weakref.WeakKeyDictionary()


def for_pool(pool: ConnectionPool) -> FigureCache:
    """The process's cache over this pool (one per pool: the app has one)."""
    cache = _caches.get(pool)
    if cache is None:
        cache = _caches[pool] = FigureCache(pool)
    return cache
