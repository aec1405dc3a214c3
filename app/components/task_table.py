"""The task table: server-side paging and sorting, retry and cancel per row and for a selection."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from nicegui import app, ui

from app import services
from app.auth import Identity
from app.components import format as fmt
from schema.stats import TaskFilter, TaskRow

RETRYABLE = ("failed", "cancelled", "completed")
RETRY_PRIORITIES = {-1: "own priority", 9: "9 · urgent", 7: "7 · high", 5: "5 · normal", 3: "3", 0: "0 · bulk"}
CANCELLABLE = ("enqueued", "processing")

COLUMNS = [
    {"name": "id", "label": "#", "field": "id", "sortable": True, "align": "left"},
    {"name": "document_name", "label": "Document", "field": "document", "sortable": True, "align": "left"},
    {"name": "status", "label": "Status", "field": "status", "sortable": True, "align": "left"},
    {"name": "agent", "label": "Agent", "field": "agent", "sortable": True, "align": "left"},
    {"name": "customer", "label": "Customer", "field": "customer", "sortable": True, "align": "left"},
    {"name": "priority", "label": "Priority", "field": "priority", "sortable": True, "align": "right"},
    {"name": "pages", "label": "Pages", "field": "pages", "sortable": True, "align": "right"},
    {"name": "tokens", "label": "Tokens in/out", "field": "tokens", "sortable": True, "align": "right"},
    {"name": "llm_cost_usd", "label": "LLM cost", "field": "cost", "sortable": True, "align": "right"},
    {"name": "confidence", "label": "Confidence", "field": "confidence", "sortable": True, "align": "right"},
    {"name": "latency_s", "label": "Response time", "field": "latency", "sortable": True, "align": "right"},
    {"name": "created_at", "label": "Submitted (UTC)", "field": "created", "sortable": True, "align": "left"},
    {"name": "actions", "label": "", "field": "id", "align": "right"},
]

STATUS_SLOT = """
<q-td :props="props">
  <q-badge :color="props.row.status_color" :label="props.value" class="q-px-sm q-py-xs"
           :data-testid="'status-' + props.row.id" />
</q-td>"""
DOCUMENT_SLOT = """
<q-td :props="props" style="max-width: 280px">
  <a :href="'/tasks/' + props.row.id" class="text-primary ellipsis block" style="text-decoration: none"
     :title="props.value">{{ props.value }}</a>
  <div v-if="props.row.error" class="text-negative text-caption ellipsis" :title="props.row.error">
    {{ props.row.error }}</div>
</q-td>"""
ACTIONS_SLOT = """
<q-td :props="props" auto-width class="text-no-wrap">
  <q-btn flat dense round size="sm" icon="replay" color="primary" :data-testid="'retry-' + props.row.id"
         :disable="!['failed','cancelled','completed'].includes(props.row.status)"
         @click="() => $parent.$emit('retry', props.row)"><q-tooltip>Retry</q-tooltip></q-btn>
  <q-btn flat dense round size="sm" icon="cancel" color="negative" :data-testid="'cancel-' + props.row.id"
         :disable="!['enqueued','processing'].includes(props.row.status)"
         @click="() => $parent.$emit('cancel', props.row)"><q-tooltip>Cancel</q-tooltip></q-btn>
</q-td>"""


class PagedTable(ui.table):
    """A server-paged table that ignores pagination echoes equal to what it already holds."""

    @property
    def pagination(self) -> dict:
        return self._props["pagination"]

    @pagination.setter
    def pagination(self, value: dict) -> None:
        # QTable reports its pagination back once mounted; storing an equal value would resend the
        # whole table and make the browser re-render every row and slot for nothing.
        if value != self._props.get("pagination"):
            self._props["pagination"] = value


def table_row(row: TaskRow) -> dict[str, Any]:
    tokens = (f"{fmt.tokens(row.input_tokens)} / {fmt.tokens(row.output_tokens)}"
              if row.input_tokens is not None or row.output_tokens is not None else fmt.DASH)
    return {"id": row.id, "document": row.document_name or f"task {row.id}", "status": row.status,
            "status_color": fmt.STATUS_COLORS.get(row.status, "grey"), "agent": row.agent,
            "customer": row.customer or fmt.DASH, "priority": row.priority, "pages": fmt.count(row.pages),
            "tokens": tokens, "cost": fmt.money(row.llm_cost_usd), "confidence": fmt.percent(row.confidence),
            "latency": fmt.duration(row.latency_s) if row.status in ("completed", "failed") else fmt.DASH,
            "created": fmt.when(row.created_at),
            "error": row.error if row.status == "failed" else None}


class TaskTable:
    """Pages, sorts and acts on tasks; the server does the paging and the sorting."""

    def __init__(self, who: Identity, on_changed: Callable[[], Awaitable[None]]) -> None:
        self.who = who
        self.filter = TaskFilter()
        self._on_changed = on_changed
        self.pagination = {"page": 1, "rowsPerPage": 25, "sortBy": "id", "descending": True, "rowsNumber": 0}
        with ui.card().classes("quire-card w-full p-0 gap-0"):
            with ui.row().classes("w-full items-center px-4 py-3 gap-3"):
                ui.label("Tasks").classes("quire-section-title")
                self.count_label = ui.label("").classes("text-sm quire-muted")
                ui.space()
                self.selected_label = ui.label("").classes("text-sm quire-muted")
                # Row and bulk retries alike run at this priority (own: each task keeps its own).
                self.retry_priority = ui.select(RETRY_PRIORITIES, value=-1, label="Retry at") \
                    .props('outlined dense stack-label options-dense data-testid="retry-priority"').classes("w-40")
                self.retry_selected = ui.button("Retry selected", icon="replay", on_click=self._retry_selection) \
                    .props('outline dense color=primary data-testid="retry-selected"')
                self.cancel_selected = ui.button("Cancel selected", icon="cancel", on_click=self._cancel_selection) \
                    .props('outline dense color=negative data-testid="cancel-selected"')
            self.table = PagedTable(columns=COLUMNS, rows=[], row_key="id", selection="multiple",
                                  pagination=dict(self.pagination), on_select=self._selection_changed) \
                .props('flat wrap-cells rows-per-page-label="Rows per page" :rows-per-page-options="[10,25,50,100]" '
                       'no-data-label="No tasks match these filters" data-testid="task-table"') \
                .classes("w-full")
            self.table.add_slot("body-cell-status", STATUS_SLOT)
            self.table.add_slot("body-cell-document_name", DOCUMENT_SLOT)
            self.table.add_slot("body-cell-actions", ACTIONS_SLOT)
            self.table.on("request", self._on_request, ["pagination"])
            self.table.on("retry", lambda e: self._act("retry", [int(e.args["id"])]))
            self.table.on("cancel", lambda e: self._act("cancel", [int(e.args["id"])]))
        self._selection_changed()

    async def _on_request(self, event) -> None:
        self.pagination.update({k: event.args["pagination"][k]
                                for k in ("page", "rowsPerPage", "sortBy", "descending") if k in event.args["pagination"]})
        await self.refresh()

    async def set_filter(self, flt: TaskFilter) -> None:
        self.filter = flt
        self.pagination["page"] = 1
        self.table.selected = []
        self._selection_changed()
        await self.refresh()

    async def refresh(self) -> None:
        per_page = self.pagination["rowsPerPage"] or 1000
        rows, total = await services.task_page(app.state.pool, self.filter, sort=self.pagination["sortBy"] or "id",
                                               descending=bool(self.pagination["descending"]),
                                               page=self.pagination["page"], per_page=per_page)
        self.pagination["rowsNumber"] = total
        self.table.rows = [table_row(r) for r in rows]
        self.table.pagination = dict(self.pagination)
        self.count_label.text = f"{total:,} matching"
        # Keep selected rows' statuses current so the bulk buttons act on what is shown.
        by_id = {r["id"]: r for r in self.table.rows}
        self.table.selected = [by_id.get(r["id"], r) for r in self.table.selected]
        self._selection_changed()

    def _selection_changed(self, *_: Any) -> None:
        selected = self.table.selected
        self.selected_label.text = f"{len(selected)} selected" if selected else ""
        self.retry_selected.set_enabled(any(r["status"] in RETRYABLE for r in selected))
        self.cancel_selected.set_enabled(any(r["status"] in CANCELLABLE for r in selected))

    async def _retry_selection(self) -> None:
        await self._act("retry", [r["id"] for r in self.table.selected if r["status"] in RETRYABLE])

    async def _cancel_selection(self) -> None:
        await self._act("cancel", [r["id"] for r in self.table.selected if r["status"] in CANCELLABLE])

    async def _act(self, action: str, ids: list[int]) -> None:
        if not self.who.operator:
            # The handler checks the role itself: a disabled button is a hint, not a guard.
            ui.notify(f"{action.capitalize()} needs the operator role; {self.who.name} is a viewer.",
                      type="negative", position="top")
            return
        if not ids:
            return
        if action == "retry":
            priority = self.retry_priority.value
            results = await services.retry_tasks(app.state.pool, ids, actor=self.who.name,
                                                 priority=None if priority in (None, -1) else int(priority))
        else:
            results = await services.cancel_tasks(app.state.pool, ids, actor=self.who.name)
        done = [r for r in results if r.ok]
        failed = [r for r in results if not r.ok]
        if done:
            text = done[0].message if len(done) == 1 else f"{len(done)} tasks: {action} done"
            ui.notify(text, type="positive", position="top")
        for result in failed[:3]:
            ui.notify(result.message, type="warning", position="top")
        self.table.selected = []
        await self._on_changed()
