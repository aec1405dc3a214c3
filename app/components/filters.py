"""The dashboard filter bar: date range, status, agent and customer, applied to every figure."""

from __future__ import annotations

from typing import Awaitable, Callable
from urllib.parse import urlencode

from nicegui import ui

from app.services import STATUSES, make_filter
from schema.stats import TaskFilter


class FilterBar:
    """Filter controls; `on_change` receives the new TaskFilter after each edit."""

    def __init__(self, on_change: Callable[[TaskFilter], Awaitable[None]]) -> None:
        self._on_change = on_change
        self._last = TaskFilter()
        self.error: ui.label
        with ui.card().classes("quire-card w-full px-4 py-3"):
            with ui.row().classes("w-full items-end gap-3 flex-wrap"):
                ui.icon("filter_alt", size="22px").classes("quire-muted self-center")
                self.date_from = ui.input("Submitted from").props('type=date dense outlined stack-label clearable '
                                                                  'data-testid="filter-date-from"').classes("w-44")
                self.date_to = ui.input("Submitted to").props('type=date dense outlined stack-label clearable '
                                                              'data-testid="filter-date-to"').classes("w-44")
                self.status = self._select("Status", STATUSES, "filter-status")
                self.agent = self._select("Agent", [], "filter-agent")
                self.customer = self._select("Customer", [], "filter-customer")
                self.review = ui.checkbox("Needs review").props('dense data-testid="filter-review"') \
                    .tooltip("Completed with a low confidence")
                ui.space()
                ui.button("Clear", icon="clear_all", on_click=self.clear).props("flat color=secondary")
                # The per-task cost table for these filters, from the same route the API offers.
                for kind in ("csv", "xlsx"):
                    ui.button(kind.upper(), icon="download", on_click=lambda k=kind: self.export(k)) \
                        .props(f'flat color=primary data-testid="export-{kind}"')
            self.error = ui.label("").classes("text-negative text-sm")
        for control in (self.date_from, self.date_to, self.status, self.agent, self.customer, self.review):
            control.on_value_change(self._changed)

    @staticmethod
    def _select(label: str, options: list[str], testid: str) -> ui.select:
        return ui.select(options, label=label, multiple=True, clearable=True, value=[]) \
            .props(f'dense outlined use-chips stack-label data-testid="{testid}"').classes("min-w-[170px]")

    def set_options(self, options: dict[str, list[str]]) -> None:
        """New agents and customers appear as tasks arrive; selected values stay selectable."""
        for select, key in ((self.agent, "agent"), (self.customer, "customer")):
            values = sorted(set(options.get(key, [])) | set(select.value or []))
            if values != list(select.options):
                select.set_options(values, value=select.value)

    def current(self) -> TaskFilter:
        return make_filter(self.date_from.value or None, self.date_to.value or None, self.status.value or [],
                           self.agent.value or [], self.customer.value or [], bool(self.review.value))

    def export_url(self, kind: str) -> str:
        """/api/export.<kind> with the dashboard's filters as its query string."""
        query = [(name, control.value) for name, control in (("date_from", self.date_from),
                                                              ("date_to", self.date_to)) if control.value]
        for name, control in (("status", self.status), ("agent", self.agent), ("customer", self.customer)):
            query += [(name, value) for value in control.value or []]
        return f"/api/export.{kind}" + (f"?{urlencode(query)}" if query else "")

    def export(self, kind: str) -> None:
        ui.navigate.to(self.export_url(kind))

    async def _changed(self) -> None:
        try:
            flt = self.current()
        except ValueError as exc:
            self.error.text = str(exc)
            return
        self.error.text = ""
        # Clearing several controls fires several changes that all land on the same filter.
        if flt != self._last:
            self._last = flt
            await self._on_change(flt)

    async def clear(self) -> None:
        for control in (self.date_from, self.date_to):
            control.set_value(None)
        for control in (self.status, self.agent, self.customer):
            control.set_value([])
        self.review.set_value(False)
