"""Customers' LLM spend this month against their budgets, and the operator's budget editor."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from nicegui import ui

from app.auth import Identity
from app.components import format as fmt
from schema.customers import MAX_BUDGET_USD, CustomerBudget


def budget_problem(amount: float | None) -> str | None:
    """What is wrong with a typed budget, in plain words (None: it can be saved; empty clears it)."""
    if amount is None:
        return None
    if amount != amount or amount < 0:  # NaN or negative
        return "A budget cannot be negative. Enter 0 or more, or leave it empty for no budget."
    if amount > MAX_BUDGET_USD:
        return f"A monthly budget can be at most {MAX_BUDGET_USD:,} USD."
    return None


class BudgetBoard:
    """One row per budgeted (or spending) customer; operators set or clear a budget."""

    def __init__(self, who: Identity, on_save: Callable[[str, float | None], Awaitable[bool]]) -> None:
        self.who = who
        self._on_save = on_save
        with ui.card().classes("quire-card w-full p-4 gap-3").props('data-testid="budgets"'):
            with ui.row().classes("w-full items-center gap-3"):
                ui.label("Customer budgets").classes("quire-section-title")
                self.month = ui.label("").classes("text-sm quire-muted")
                ui.space()
                if who.operator:
                    self.customer_in = ui.input("Customer").props('outlined dense data-testid="budget-customer"') \
                        .classes("w-48")
                    self.amount_in = ui.number("Monthly LLM budget (USD)", min=0, max=float(MAX_BUDGET_USD), step=10) \
                        .props('outlined dense data-testid="budget-amount"').classes("w-56")
                    ui.button("Set", icon="savings", on_click=self._save_form) \
                        .props('outline dense color=primary data-testid="budget-save"')
            self.rows = ui.column().classes("w-full gap-1")
        self.shown: list[CustomerBudget] | None = None

    async def _save_form(self) -> None:
        customer = (self.customer_in.value or "").strip()
        if not customer:
            ui.notify("Name the customer first.", type="warning", position="top")
            return
        amount = self.amount_in.value
        problem = budget_problem(amount)
        if problem:
            ui.notify(problem, type="warning", position="top")
            return
        if await self._on_save(customer, float(amount) if amount is not None else None):
            self.customer_in.value, self.amount_in.value = "", None

    def update(self, budgets: list[CustomerBudget]) -> None:
        if budgets == self.shown:
            return  # unchanged: no redraw
        self.shown = budgets
        self.rows.clear()
        if budgets:
            self.month.set_text(f"{budgets[0].month:%B %Y} (UTC)")
        with self.rows:
            if not budgets:
                ui.label("No budgets set and no LLM spend this month.").classes("text-sm quire-muted")
            for b in budgets:
                self._row(b)

    def _row(self, b: CustomerBudget) -> None:
        with ui.row().classes("w-full items-center gap-3 no-wrap py-1 border-b border-slate-100") \
                .props(f'data-testid="budget-row-{b.customer}"'):
            ui.label(b.customer).classes("w-48 font-medium truncate")
            if b.monthly_llm_budget_usd is None:
                ui.label(f"{fmt.money(b.month_llm_cost_usd)} spent · no budget").classes("text-sm quire-muted grow") \
                    .props('data-testid="budget-text"')
            else:
                used = min(b.used_fraction or 0.0, 1.0)
                ui.linear_progress(used, show_value=False, size="8px") \
                    .props(f"rounded color={'negative' if b.over_budget else 'positive'} track-color=grey-3") \
                    .classes("w-48")
                ui.label(f"{fmt.money(b.month_llm_cost_usd)} of {fmt.money(b.monthly_llm_budget_usd)}") \
                    .classes("text-sm grow").props('data-testid="budget-text"')
                if b.over_budget:
                    ui.badge("over budget: tasks waiting", color="negative").props('data-testid="budget-over"')
            if self.who.operator and b.monthly_llm_budget_usd is not None:
                ui.button(icon="backspace", on_click=lambda name=b.customer: self._on_save(name, None)) \
                    .props(f'flat dense round size=sm color=grey-7 data-testid="budget-clear-{b.customer}"') \
                    .tooltip("Clear the budget")
