"""The operator dashboard: live counts, spend, response time, quality, charts and the task table."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

from fastapi import Request
from fastapi.responses import RedirectResponse
from nicegui import app, ui

from app import services
from app.components.agent_problems import AgentProblems
from app.components.charts import ChartsBoard
from app.components.filters import FilterBar
from app.components.kpis import KpiBoard
from app.components.layout import frame, guard, watch
from app.components.task_table import TaskTable
from schema.stats import StreamEvent, Summary, TaskFilter

# Charts are the heaviest queries: under a stream of changes they redraw at most this often.
CHART_MIN_SECONDS = 2.0


class Dashboard:
    """One viewer's dashboard: its filter, its widgets, and when each was last redrawn."""

    def __init__(self, who) -> None:
        self.pool = app.state.pool
        self.filter = TaskFilter()
        self.summary: Summary | None = None
        # Counts and charts refresh apart: a slow chart redraw never holds back a count.
        self.counts_lock = asyncio.Lock()
        self.charts_lock = asyncio.Lock()
        self.charts_dirty = False
        self.charts_at = 0.0
        with ui.row().classes("w-full items-end justify-between"):
            with ui.column().classes("gap-0"):
                ui.label("Operations").classes("text-2xl font-semibold text-slate-900")
                ui.label("Progress, spend and quality of every document task").classes("quire-muted")
            self.updated = ui.label("").classes("text-xs quire-muted").props('data-testid="updated-at"')
        self.agent_problems = AgentProblems()
        self.filters = FilterBar(self.apply_filter)
        self.kpis = KpiBoard(lambda: services.compute_cost(self.pool, self.filter))
        self.charts = ChartsBoard()
        self.table = TaskTable(who, self.after_action)

    async def refresh_counts(self, *, table: bool = True) -> None:
        async with self.counts_lock:
            flt = self.filter
            summary = await services.summary(self.pool, flt)
            if flt != self.filter:
                return  # the filter changed meanwhile; its own refresh is under way
            self.summary = summary
            self.kpis.update(summary)
            if table:
                await self.table.refresh()
            self.updated.text = f"Updated {datetime.now(timezone.utc):%H:%M:%S} UTC"

    async def refresh_charts(self) -> None:
        async with self.charts_lock:
            flt = self.filter
            summary = self.summary or await services.summary(self.pool, flt)
            charts = await services.charts(self.pool, flt, summary)
            if flt == self.filter:
                self.charts.update(charts)
                self.charts_at, self.charts_dirty = time.monotonic(), False

    async def refresh_all(self) -> None:
        await self.refresh_counts()
        await self.refresh_charts()

    async def apply_filter(self, flt: TaskFilter) -> None:
        self.filter = flt
        self.summary = None
        self.kpis.reset_compute()
        async with self.counts_lock:
            await self.table.set_filter(flt)
        await self.refresh_counts(table=False)
        await self.refresh_charts()

    async def after_action(self) -> None:
        await self.refresh_all()

    async def on_events(self, events: list[StreamEvent], lagged: bool) -> None:
        self.charts_dirty = True
        await self.refresh_counts()

    async def redraw_charts_if_due(self) -> None:
        if self.charts_dirty and time.monotonic() - self.charts_at >= CHART_MIN_SECONDS:
            await self.refresh_charts()

    async def on_poll(self) -> None:
        self.filters.set_options(await services.filter_options(self.pool))
        self.agent_problems.update(await services.agent_config_errors(self.pool))
        await self.refresh_all()


@ui.page("/dashboard", title="Dashboard · Quire", response_timeout=20)
async def dashboard_page(request: Request):
    who = guard(request, path="/dashboard")
    if isinstance(who, RedirectResponse):
        return who
    with frame(who, active="dashboard"):
        board = Dashboard(who)
        board.filters.set_options(await services.filter_options(board.pool))
        board.agent_problems.update(await services.agent_config_errors(board.pool))
        await board.refresh_all()
    watch(board.on_events, board.on_poll)
    ui.timer(1.0, board.redraw_charts_if_due)
