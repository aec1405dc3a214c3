"""The dashboard filter bar: date range, status, agent and customer, applied to every figure.

The filters live in the page's query string too (`?from=…&to=…&status=…&agent=…&customer=…`):
a reload keeps them, and a link shares them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from urllib.parse import urlencode

from nicegui import ui

from app.inputs import STATUSES, make_filter
from schema.stats_types import TaskFilter

QUERY_KEYS = ("from", "to", "status", "agent", "customer", "review")


class FilterValues:
    """The raw filter inputs, as the query string and the controls hold them."""

    def __init__(self, date_from: str | None = None, date_to: str | None = None, status: Sequence[str] = (),
                 agent: Sequence[str] = (), customer: Sequence[str] = (), review: bool = False) -> None:
        self.date_from, self.date_to = date_from or None, date_to or None
        self.status, self.agent, self.customer = list(status), list(agent), list(customer)
        self.review = review

    @classmethod
    def from_query(cls, query: Mapping[str, list[str]]) -> FilterValues:
        """From parsed query parameters (every key a list, as Starlette's `getlist` gives)."""
        def first(key: str) -> str | None:
            values = query.get(key)
            return values[0] if values else None

        return cls(first("from"), first("to"), [s for s in query.get("status", []) if s in STATUSES],
                   query.get("agent", []), query.get("customer", []), first("review") in ("1", "true"))

    def query_string(self) -> str:
        pairs = [("from", self.date_from), ("to", self.date_to)]
        pairs += [("status", s) for s in self.status] + [("agent", a) for a in self.agent]
        pairs += [("customer", c) for c in self.customer] + [("review", "1" if self.review else None)]
        return urlencode([(k, v) for k, v in pairs if v])

    def active(self) -> int:
        return sum(bool(v) for v in (self.date_from, self.date_to, self.status, self.agent, self.customer,
                                     self.review))

    def to_filter(self) -> TaskFilter:
        """The TaskFilter these select; ValueError with a message for a person if they cannot be used."""
        return make_filter(self.date_from, self.date_to, self.status, self.agent, self.customer, self.review)


class FilterBar:
    """Filter controls in a collapsible panel; `on_change` receives the new TaskFilter after each edit."""

    def __init__(self, on_change: Callable[[TaskFilter], Awaitable[None]], *, path: str = "/dashboard",
                 initial: FilterValues | None = None) -> None:
        self._on_change = on_change
        self._path = path
        initial = initial or FilterValues()
        try:
            self._last = initial.to_filter()
        except ValueError:
            self._last = TaskFilter()
        with ui.card().classes("quire-card w-full p-0"):
            self.panel = ui.expansion("Filters", icon="filter_alt", value=True) \
                .props('dense header-class="text-base font-medium" data-testid="filter-panel"').classes("w-full")
            with self.panel:
                with ui.row().classes("w-full items-end gap-3 flex-wrap px-2 pb-3"):
                    self.date_from = self._date("Submitted from", initial.date_from, "filter-date-from")
                    self.date_to = self._date("Submitted to", initial.date_to, "filter-date-to")
                    self.status = self._select("Status", STATUSES, initial.status, "filter-status")
                    self.agent = self._select("Agent", initial.agent, initial.agent, "filter-agent")
                    self.customer = self._select("Customer", initial.customer, initial.customer, "filter-customer")
                    self.review = ui.checkbox("Needs review", value=initial.review) \
                        .props('dense data-testid="filter-review"').tooltip("Completed with a low confidence")
                    ui.space()
                    ui.button("Clear", icon="clear_all", on_click=self.clear).props("flat color=secondary")
                    # The per-task cost table for these filters, from the same route the API offers.
                    for kind in ("csv", "xlsx"):
                        ui.button(kind.upper(), icon="download", on_click=lambda k=kind: self.export(k)) \
                            .props(f'flat color=primary data-testid="export-{kind}"')
                self.error = ui.label("").classes("text-negative text-sm px-2 pb-2") \
                    .props('data-testid="filter-error" role="alert"')
        self._caption()
        for control in (self.date_from, self.date_to, self.status, self.agent, self.customer, self.review):
            control.on_value_change(self._changed)

    @staticmethod
    def _date(label: str, value: str | None, testid: str) -> ui.input:
        return ui.input(label, value=value or "") \
            .props(f'type=date dense outlined stack-label clearable data-testid="{testid}"').classes("w-40 sm:w-44")

    @staticmethod
    def _select(label: str, options: list[str], value: list[str], testid: str) -> ui.select:
        return ui.select(list(options), label=label, multiple=True, clearable=True, value=list(value)) \
            .props(f'dense outlined use-chips stack-label data-testid="{testid}"').classes("min-w-[170px]")

    @property
    def filter(self) -> TaskFilter:
        """The filter in force (the last valid one)."""
        return self._last

    def set_options(self, options: dict[str, list[str]]) -> None:
        """New agents and customers appear as tasks arrive; selected values stay selectable."""
        for select, key in ((self.agent, "agent"), (self.customer, "customer")):
            values = sorted(set(options.get(key, [])) | set(select.value or []))
            if values != list(select.options):
                select.set_options(values, value=select.value)

    def values(self) -> FilterValues:
        return FilterValues(self.date_from.value, self.date_to.value, self.status.value or [],
                            self.agent.value or [], self.customer.value or [], bool(self.review.value))

    def validate(self) -> bool:
        """Shows why the current inputs cannot be used; True when they can."""
        try:
            self.values().to_filter()
        except ValueError as exc:
            self.error.text = str(exc)
            return False
        self.error.text = ""
        return True

    def _caption(self) -> None:
        active = self.values().active()
        self.panel.props(f'caption="{active} active"' if active else 'caption=""')

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
        values = self.values()
        self._caption()
        try:
            flt = values.to_filter()
        except ValueError as exc:
            self.error.text = str(exc)
            return
        self.error.text = ""
        query = values.query_string()
        ui.navigate.history.replace(f"{self._path}?{query}" if query else self._path)
        # Clearing several controls fires several changes that all land on the same filter.
        if flt != self._last:
            self._last = flt
            await self._on_change(flt)

    async def clear(self) -> None:
        for control in (self.date_from, self.date_to):
            control.set_value("")
        for choice in (self.status, self.agent, self.customer):
            choice.set_value([])
        self.review.set_value(False)
