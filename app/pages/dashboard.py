"""The operator dashboard: live counts, spend, response time, quality, charts and the task table."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime

from fastapi import Request
from nicegui import app, events, ui

from app import actions, foresight, live, reviews, services
from app.auth import viewer
from app.components.agent_controls import AgentControls
from app.components.agent_problems import AgentProblems
from app.components.budgets import BudgetBoard
from app.components.charts import ChartsBoard
from app.components.due import Due
from app.components.filters import FilterBar, FilterValues
from app.components.held_batches import HeldBatches
from app.components.kpis import KpiBoard
from app.components.layout import frame, watch
from app.components.review_board import ReviewBoard
from app.components.task_table import TaskTable
from app.figure_cache import CHART_MIN_SECONDS, REFRESH_MIN_SECONDS
from schema.errors import InvalidTransition
from schema.models import TaskStatus
from schema.stats import NEWEST_FIRST
from schema.stats_types import StreamEvent, Summary, TaskFilter, page_touched

# However many events arrive, a page asks for its figures and table at most once a second
# (REFRESH_MIN_SECONDS) and redraws its charts at most every five (CHART_MIN_SECONDS); what it asks
# for is read once for every page of the process (app.figure_cache).
# Below this width (px) the filters start folded and the task table shows cards.
NARROW_PX = 700
# Reports the page's width now and after each resize (once it settles).
REPORT_WIDTH = """(() => {
  const report = () => emitEvent("quire_width", window.innerWidth);
  let settle;
  window.addEventListener("resize", () => { clearTimeout(settle); settle = setTimeout(report, 200); });
  report();
})()"""


def deltas_apply(flt: TaskFilter) -> bool:
    """Whether events alone say a task is in the filter (they carry agent and status only)."""
    return not (flt.customers or flt.date_from or flt.date_to or flt.needs_review or flt.exact_only)


def apply_deltas(summary: Summary, flt: TaskFilter, events: list[StreamEvent]) -> Summary:
    """The counts after these status changes, where the events alone say a task is in the filter.

    Events carry agent and status, not customer or submission time: with a customer or date filter
    the counts wait for the next (throttled) refresh instead.
    """
    if not deltas_apply(flt):
        return summary
    counts = dict(summary.counts)
    for event in events:
        if flt.agents and event.agent not in flt.agents:
            continue
        for status, step in ((event.prev_status, -1), (event.status, 1)):
            if status is not None and (not flt.statuses or status in flt.statuses) and status in counts:
                counts[status] = max(counts[status] + step, 0)
    return dataclasses.replace(summary, counts=counts, total=sum(counts.values()))


class Dashboard:
    """One viewer's dashboard: its filter, its widgets, and when each was last redrawn."""

    def __init__(self, who, initial: FilterValues | None = None) -> None:
        self.pool = app.state.pool
        self.summary: Summary | None = None
        # Counts and charts refresh apart: a slow chart redraw never holds back a count.
        self.counts_lock = asyncio.Lock()
        self.charts_lock = asyncio.Lock()
        # When each section is read again (the table goes with the counts, when events touch it).
        self.counts_due, self.table_due = Due(REFRESH_MIN_SECONDS), Due(0)
        self.charts_due, self.review_due, self.budgets_due = Due(CHART_MIN_SECONDS), Due(REFRESH_MIN_SECONDS), Due(0)
        self.events_seen = 0
        # When the page last learnt the figures changed (events, the poll, a new filter, an action):
        # what it shows must have been read after that, else it asks again a second later.
        self.changed_at = time.monotonic()
        with ui.row().classes("w-full items-end justify-between"):
            with ui.column().classes("gap-0"):
                ui.label("Operations").classes("text-2xl font-semibold text-slate-900")
                ui.label("Progress, spend and quality of every document task").classes("quire-muted")
            self.updated = ui.label("").classes("text-xs quire-muted").props('data-testid="updated-at"')
        # A bulk load or backfill is being folded in the background: say what the figures count.
        self.catching_up = ui.label("").classes("text-xs text-amber-700").props('data-testid="catching-up"')
        self.catching_up.set_visibility(False)
        self.agent_problems = AgentProblems(on_clear=self.clear_halt if who.operator else None)
        self.agent_controls = AgentControls(who, self.pause_agent, self.resume_agent)
        # Agents whose model endpoint rate-limited them run at adaptive limits below the configured.
        self.throttles = ui.label("").classes("text-xs text-amber-700").props('data-testid="adaptive-limits"')
        self.held = HeldBatches(who, self.release_batch, self.discard_batch)
        self.filters = FilterBar(self.apply_filter, path="/dashboard", initial=initial)
        self.filter: TaskFilter = self.filters.filter
        self.kpis = KpiBoard(lambda: services.compute_cost(self.pool, self.filter))
        self.who = who
        self.charts = ChartsBoard()
        self.review_board = ReviewBoard(
            lambda kind: self.filters.export_url(kind).replace("/api/export.", "/api/review/export."), self.review_url)
        self.table = TaskTable(who, self.after_action)
        self.table.filter = self.filter
        self.filters.validate()  # a shared link may carry dates that cannot be used: say so
        self.budgets = BudgetBoard(who, self.save_budget)
        self.narrow = False  # the table until the browser reports a narrow screen

    def fit_screen(self, event: events.GenericEventArguments) -> None:
        """Shows cards on a narrow screen and the table on a wide one, as the browser reports its width
        (once it has loaded, then after each resize); the filters fold when the screen turns narrow."""
        narrow = int(event.args or 0) < NARROW_PX
        if narrow == self.narrow:
            return
        self.narrow = narrow
        self.table.set_compact(narrow)
        if narrow:
            self.filters.panel.value = False

    async def refresh_counts(self, *, table: bool = True) -> None:
        async with self.counts_lock:
            flt, seen = self.filter, self.events_seen
            since = self.changed_at
            summary, current = await services.live_summary(self.pool, flt, since=since)
            if flt != self.filter:
                return  # the filter changed meanwhile; its own refresh is under way
            if self.summary is not None and (seen != self.events_seen or (not current and deltas_apply(flt))):
                # Events arrived during the read, or the figures are as of a fold that predates some of
                # them: their deltas are already in the counts shown. Keep those counts; the next
                # refresh (marked due) settles them.
                summary = dataclasses.replace(summary, counts=self.summary.counts, total=self.summary.total)
            self.summary = summary
            self.kpis.update(summary)
            note = services.catching_up_note(summary)
            self.catching_up.text = note or ""
            self.catching_up.set_visibility(note is not None)
            if not current:
                self.counts_due.mark()
            if table:
                self.table.total_hint = summary.total if self.table.filter == flt else None
                if not await self.table.refresh(since=since):
                    self.counts_due.mark()
                    self.table_due.mark()
            limits, _ = await services.live(self.pool, "adaptive_limits", lambda: services.adaptive_limits(self.pool),
                                            since=since)
            self.throttles.text = "; ".join(limits)
            self.updated.text = f"Updated {datetime.now(UTC):%H:%M:%S} UTC"

    async def refresh_charts(self) -> None:
        async with self.charts_lock:
            flt = self.filter
            charts, current = await services.live_charts(self.pool, flt, since=self.changed_at)
            if flt == self.filter:
                self.charts.update(charts)
                self.charts_due.settle(current=current)

    async def refresh_all(self) -> None:
        await self.refresh_counts()
        await self.refresh_charts()
        await self.refresh_budgets()
        await self.refresh_agents()
        await self.refresh_review()
        await self.refresh_held()

    def review_url(self) -> str:
        """/review with the dashboard's filters (the first agent and customer chosen)."""
        from urllib.parse import urlencode

        flt = self.filter
        query = {"agent": flt.agents[0] if flt.agents else None,
                 "customer": flt.customers[0] if flt.customers else None,
                 "date_from": flt.date_from.isoformat() if flt.date_from else None,
                 "date_to": flt.date_to.isoformat() if flt.date_to else None}
        text = urlencode({k: v for k, v in query.items() if v})
        return "/review" + (f"?{text}" if text else "")

    async def refresh_review(self) -> None:
        flt = self.filter
        figures = await reviews.figures(self.pool, flt)
        if flt == self.filter:
            self.review_board.update(figures)
            self.review_due.settle()

    async def refresh_held(self) -> None:
        """The batches held for review (listed whatever the filter: none is hidden)."""
        held, _ = await services.live(self.pool, "held_batches", lambda: foresight.held_batches(self.pool),
                                      since=self.changed_at)
        self.held.update(held)

    async def release_batch(self, batch_id: int) -> bool:
        if not self.who.operator:
            return False
        released = await foresight.release_batch(self.pool, batch_id, actor=self.who.name)
        ui.notify(f"Batch {batch_id} submitted: {released} tasks may run now.", type="positive", position="top")
        await self.after_action()
        return True

    async def discard_batch(self, batch_id: int) -> bool:
        if not self.who.operator:
            return False
        try:
            cancelled = await foresight.discard_batch(self.pool, batch_id, actor=self.who.name)
        except InvalidTransition:  # no longer held: someone submitted or discarded it meanwhile
            cancelled = None
        ui.notify(f"Batch {batch_id} discarded: {cancelled} documents cancelled." if cancelled is not None
                  else f"Batch {batch_id} is no longer held.", type="info", position="top")
        await self.after_action()
        return True

    async def refresh_budgets(self) -> None:
        budgets, current = await services.live(self.pool, "budgets", lambda: foresight.budgets(self.pool),
                                               since=self.changed_at)
        self.budgets.update(budgets)
        self.budgets_due.settle(current=current)

    async def refresh_agent_problems(self, *, live: bool = True) -> None:
        """The agents that cannot run, and which of them an operator may clear (halted ones)."""
        if live:
            problems, _ = await services.live(self.pool, "agent_config_errors",
                                              lambda: services.agent_config_errors(self.pool))
            halted, _ = await services.live(self.pool, "halted_agents", lambda: services.halted_agents(self.pool))
        else:
            problems, halted = await services.agent_config_errors(self.pool), await services.halted_agents(self.pool)
        self.agent_problems.update(problems, set(halted))

    async def clear_halt(self, agent: str) -> None:
        """An operator lets a halted agent's tasks be claimed again."""
        if not self.who.operator:
            return
        cleared = await actions.clear_agent_halt(self.pool, agent)
        ui.notify(f"Agent {agent}: cleared; its tasks will be claimed again" if cleared
                  else f"Agent {agent} was not halted", type="positive" if cleared else "info", position="top")
        services.forget_live(self.pool)
        await self.refresh_agent_problems(live=False)

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
        services.forget_live(self.pool)
        self.changed_at = time.monotonic()
        await self.refresh_budgets()
        return True

    async def refresh_agents(self) -> None:
        agents, _ = await services.live(self.pool, "agents", lambda: services.agents(self.pool), since=self.changed_at)
        self.agent_controls.update(agents)

    async def pause_agent(self, name: str, until: datetime | None, reason: str | None) -> bool:
        if not self.who.operator:
            ui.notify(f"Pausing an agent needs the operator role; {self.who.name} is a viewer.", type="negative",
                      position="top")
            return False
        try:
            await actions.pause_agent(self.pool, name, actor=self.who.name, until=until, reason=reason)
        except ValueError as exc:
            ui.notify(str(exc), type="negative", position="top")
            return False
        ui.notify(f"Agent {name} paused: running tasks finish, nothing new starts.", type="positive", position="top")
        await self.after_action()
        return True

    async def resume_agent(self, name: str) -> bool:
        if not self.who.operator:
            return False
        await actions.resume_agent(self.pool, name)
        ui.notify(f"Agent {name} resumed.", type="positive", position="top")
        await self.after_action()
        return True

    async def apply_filter(self, flt: TaskFilter) -> None:
        self.filter = flt
        self.changed_at = time.monotonic()
        self.summary = None
        self.kpis.reset_compute()
        async with self.counts_lock:
            await self.table.set_filter(flt)
        await self.refresh_counts(table=False)
        await self.refresh_charts()
        await self.refresh_review()

    async def after_action(self) -> None:
        services.forget_live(self.pool)
        self.changed_at = time.monotonic()
        await self.refresh_all()

    async def on_events(self, events: list[StreamEvent], lagged: bool) -> None:
        """Applies the events' status changes to the counts at once; the database is read later, throttled."""
        self.charts_due.mark()
        self.counts_due.mark()
        self.changed_at = time.monotonic()
        if lagged or any(e.status in (TaskStatus.COMPLETED, TaskStatus.FAILED) for e in events):
            self.budgets_due.mark()  # spend is recorded with the report that ends a task
        self.events_seen += len(events) + int(lagged)
        shown = {row["id"] for row in self.table.table.rows}
        # The table is read again only when the events can change what it shows.
        if (lagged or self.table.pagination.get("sortBy") not in (None, "id", NEWEST_FIRST)
                or page_touched(self.filter, shown, events)):
            self.table_due.mark()
        if not lagged and self.summary is not None:
            self.summary = apply_deltas(self.summary, self.filter, events)
            self.kpis.update(self.summary)

    async def refresh_if_due(self) -> None:
        """At most one database refresh per REFRESH_MIN_SECONDS, whatever the rate of events."""
        if self.counts_due.take():
            await self.refresh_counts(table=self.table_due.take())
            await self.refresh_held()
        await self.redraw_charts_if_due()

    async def redraw_charts_if_due(self) -> None:
        if self.charts_due.take():
            await self.refresh_charts()
        if self.budgets_due.take():
            await self.refresh_budgets()
        if self.review_due.take():
            await self.refresh_review()

    async def on_poll(self) -> None:
        """The fallback: everything is marked due and refresh_if_due reads it, so the event feed never waits."""
        options, _ = await services.live(self.pool, "filter_options", lambda: services.filter_options(self.pool))
        self.filters.set_options(options)
        await self.refresh_agent_problems()
        await self.refresh_agents()
        await self.refresh_held()
        self.changed_at = time.monotonic()
        for due in (self.counts_due, self.table_due, self.review_due):
            due.mark()
        self.charts_due.expire()

    def watch_reviews(self) -> None:
        """Review changes (queued, decided) mark the review section due; refresh_if_due reads it."""
        sub = live.current().subscribe_reviews(max_events=500)
        ui.context.client.on_delete(sub.close)

        def mark() -> None:
            if sub.pending:
                sub.drain()
                self.review_due.mark()
        ui.timer(0.5, mark)


@ui.page("/dashboard", title="Dashboard · Quire", response_timeout=20)
async def dashboard_page(request: Request):
    who = viewer(request)
    initial = FilterValues.from_query({k: request.query_params.getlist(k) for k in request.query_params})
    with frame(who, active="dashboard"):
        board = Dashboard(who, initial)
        board.filters.set_options(await services.filter_options(board.pool))
        await board.refresh_agent_problems(live=False)
        await board.refresh_all()
    watch(board.on_events, board.on_poll)
    board.watch_reviews()
    ui.timer(0.25, board.refresh_if_due)
    # The browser tells its width, unasked: a round trip from here would wait on a busy browser.
    ui.on("quire_width", board.fit_screen)
    ui.run_javascript(REPORT_WIDTH)
