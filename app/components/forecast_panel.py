"""A batch's forecast before it runs, the submit and hold choice, and forecast against actual at the end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from nicegui import ui

from app.components import format as fmt
from schema.forecast import Forecast


def eta_range(plan: Forecast) -> str:
    """The ETA as the range it likely falls in (what recent runs strayed from their forecast)."""
    low, high = plan.eta_low_seconds, plan.eta_high_seconds
    if low is None or high is None or fmt.duration(low) == fmt.duration(high):
        return fmt.duration(plan.eta_seconds)
    return f"{fmt.duration(low)} to {fmt.duration(high)}"


class ForecastPanel:
    """Shows one batch's forecast; the operator submits it or keeps it held."""

    def __init__(self, batch_id: int, plan: Forecast, *, held: bool, operator: bool,
                 on_release: Callable[[int], Awaitable[bool]],
                 on_discard: Callable[[int], Awaitable[bool]] | None = None) -> None:
        self.batch_id = batch_id
        self.plan = plan
        self._on_release = on_release
        self._on_discard = on_discard
        with ui.card().classes("quire-card w-full p-4 gap-2 border-l-4 border-blue-700") \
                .props(f'data-testid="forecast-{batch_id}"') as self.card:
            with ui.row().classes("w-full items-center gap-3"):
                ui.icon("query_stats", size="24px").classes("text-blue-800")
                ui.label(f"Forecast · batch {batch_id}").classes("quire-section-title")
                ui.space()
                self.state = ui.badge("").classes("px-2 py-1").props('data-testid="forecast-state"')
            with ui.element("div").classes("grid grid-cols-2 md:grid-cols-5 gap-x-8 gap-y-2 w-full"):
                scans = f" ({plan.scanned_pages:,} scanned)" if plan.scanned_pages else ""
                self._figure("Documents", f"{plan.documents:,} · {plan.pages:,} pages{scans}", "forecast-documents")
                self._figure("Tokens", f"~{fmt.tokens(plan.tokens)}", "forecast-tokens")
                self._figure("LLM cost", fmt.money(plan.llm_cost_usd) if plan.llm_cost_usd is not None else "unpriced",
                             "forecast-llm-cost")
                self._figure("Compute cost", fmt.money(plan.compute_cost_usd), "forecast-compute-cost")
                self._figure("ETA", eta_range(plan), "forecast-eta")
            ahead = fmt.plural(plan.ahead_tasks, "task") if plan.ahead_exact else f"about {plan.ahead_tasks:,} tasks"
            tpm = f", {plan.max_tpm:,} tokens/min" if plan.max_tpm else ""
            ui.label(f"{ahead} queued ahead at priority {plan.priority} or above; {fmt.at_once(plan.concurrency)}"
                     f"{tpm}; {plan.basis}.").classes("text-sm quire-muted")
            if plan.warning:  # the agent cannot run, or is paused: said before anyone waits on the ETA
                ui.label(plan.warning).classes("text-sm text-red-800").props('data-testid="forecast-warning" role="alert"')
            if plan.budget_warning:
                ui.label(plan.budget_warning).classes("text-sm text-red-800") \
                    .props('data-testid="forecast-budget-warning" role="alert"')
            self.actions = ui.row().classes("gap-2 items-center")
            self.comparison = ui.label("").classes("text-sm font-medium").props('data-testid="forecast-vs-actual"')
            self.comparison.visible = False
        self.show_state(held=held, operator=operator)

    def _figure(self, label: str, value: str, testid: str) -> None:
        with ui.column().classes("gap-0"):
            ui.label(label).classes("quire-kpi-label")
            ui.label(value).classes("text-base font-semibold text-slate-900").props(f'data-testid="{testid}"')

    def show_state(self, *, held: bool, operator: bool, discarded: bool = False) -> None:
        """Held: Submit and Discard; submitted or discarded: no action (nothing left to submit)."""
        self.actions.clear()
        self.state.set_text("held: not running" if held else "discarded" if discarded else "submitted")
        self.state.props(f"color={'warning' if held else 'grey-7' if discarded else 'positive'}")
        if not held:
            return
        with self.actions:
            ui.button("Submit batch", icon="play_arrow", on_click=self._release) \
                .props('unelevated color=primary data-testid="forecast-submit"').set_enabled(operator)
            if self._on_discard is not None:
                ui.button("Discard", icon="delete_outline", on_click=self._discard) \
                    .props('outline color=negative data-testid="forecast-discard"').set_enabled(operator)
            ui.label("Held: the documents are stored and queued, and nothing runs until submitted.") \
                .classes("text-sm quire-muted")

    async def _release(self) -> None:
        if await self._on_release(self.batch_id):
            self.show_state(held=False, operator=True)

    async def _discard(self) -> None:
        if self._on_discard is not None and await self._on_discard(self.batch_id):
            self.show_state(held=False, operator=True, discarded=True)

    def show_outcome(self, text: str) -> None:
        """Forecast against actual, once the batch has ended."""
        self.comparison.set_text(f"Forecast against actual: {text}")
        self.comparison.visible = True
