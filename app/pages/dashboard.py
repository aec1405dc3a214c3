"""The operator dashboard: live counts, spend, response time, quality, charts and the task table."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone

from fastapi import Request
from fastapi.responses import RedirectResponse
from nicegui import app, ui

from app import foresight, services
from app.components.budgets import BudgetBoard
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
        self.filters = FilterBar(self.apply_filter)
        self.kpis = KpiBoard(lambda: services.compute_cost(self.pool, self.filter))
        self.who = who
        self.charts = ChartsBoard()
        self.table = TaskTable(who, self.after_action)
        self.budgets = BudgetBoard(who, self.save_budget)
        self.budgets_dirty = False

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
        await self.refresh_budgets()

    async def refresh_budgets(self) -> None:
        self.budgets.update(await foresight.budgets(self.pool))

    async def save_budget(self, customer: str, amount: float | None) -> bool:
        if not self.who.operator:
            ui.notify(f"Budgets need the operator role; {self.who.name} is a viewer.", type="negative", position="top")
            return False
        try:
            saved = await foresight.set_budget(self.pool, customer, amount, actor=self.who.name)
        except ValueError as exc:
            ui.notify(str(exc), type="negative", position="top")
            return False
        text = (f"{customer}: budget {saved.monthly_llm_budget_usd:,.2f} USD a month" if amount is not None
                else f"{customer}: budget cleared")
        ui.notify(text, type="positive", position="top")
        await self.refresh_budgets()
        return True

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
        if any(e.status in ("completed", "failed") for e in events):
            self.budgets_dirty = True  # spend is recorded with the report that ends a task

    async def redraw_charts_if_due(self) -> None:
        if self.charts_dirty and time.monotonic() - self.charts_at >= CHART_MIN_SECONDS:
            await self.refresh_charts()
        if self.budgets_dirty:
            self.budgets_dirty = False
            await self.refresh_budgets()

    async def on_poll(self) -> None:
        self.filters.set_options(await services.filter_options(self.pool))
        await self.refresh_all()


@ui.page("/dashboard", title="Dashboard · Quire", response_timeout=20)
async def dashboard_page(request: Request):
    who = guard(request, path="/dashboard")
    if isinstance(who, RedirectResponse):
        return who
    with frame(who, active="dashboard"):
        board = Dashboard(who)
        board.filters.set_options(await services.filter_options(board.pool))
        await board.refresh_all()
    watch(board.on_events, board.on_poll)
    ui.timer(1.0, board.redraw_charts_if_due)
