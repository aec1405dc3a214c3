"""The task table: server-side paging and sorting, retry and cancel per row, for a selection, and
for every task the filter selects (counted first, with an undo window)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from nicegui import app, ui

from app import actions, services
from app.auth import Identity
from app.components import format as fmt
from app.components.confirm import cancel_consequence, confirm, retry_consequence
from schema.models import TaskStatus
from schema.stats import NEWEST_FIRST, TaskCount
from schema.stats_types import TaskFilter, TaskRow
from schema.waiting import REASON_WORDS, WaitReason

# Seconds between confirming a bulk action over the whole filter and doing it: time to undo. Counted
# here, on the server: a busy phone may show the bar a few seconds late, and still has time.
UNDO_SECONDS = 10
RETRY_PRIORITIES = {-1: "own priority", 9: "9 · urgent", 7: "7 · high", 5: "5 · normal", 3: "3", 0: "0 · bulk"}
MAX_CURSOR_WALK = 50
MAX_ROWS_PER_PAGE = 200  # whatever the browser asks for: one page is never more rows than this

COLUMNS: list[dict[str, Any]] = [
    {"name": "id", "label": "#", "field": "id", "sortable": True, "align": "left"},
    {"name": "document_name", "label": "Document", "field": "document", "sortable": True, "align": "left"},
    {"name": "status", "label": "Status", "field": "status", "sortable": True, "align": "left"},
    {"name": "actions", "label": "Actions", "field": "id", "align": "left"},
    {"name": "agent", "label": "Agent", "field": "agent", "sortable": True, "align": "left"},
    {"name": "customer", "label": "Customer", "field": "customer", "sortable": True, "align": "left"},
    {"name": "priority", "label": "Priority", "field": "priority", "sortable": True, "align": "right"},
    {"name": "pages", "label": "Pages", "field": "pages", "sortable": True, "align": "right"},
    {"name": "tokens", "label": "Tokens in/out", "field": "tokens", "sortable": True, "align": "right"},
    {"name": "llm_cost_usd", "label": "LLM cost", "field": "cost", "sortable": True, "align": "right"},
    {"name": "confidence", "label": "Confidence", "field": "confidence", "sortable": True, "align": "right"},
    {"name": "latency_s", "label": "Response time", "field": "latency", "sortable": True, "align": "right"},
    {"name": "created_at", "label": "Submitted", "field": "created", "sortable": True, "align": "left"},
]

STATUS_SLOT = """
<q-td :props="props">
  <q-badge :color="props.row.status_color" :label="props.value" class="q-px-sm q-py-xs"
           :data-testid="'status-' + props.row.id" />
  <div v-if="props.row.waiting" class="text-caption quire-muted ellipsis" style="max-width: 200px"
       :title="props.row.waiting_detail" :data-testid="'waiting-' + props.row.id">{{ props.row.waiting }}</div>
</q-td>"""
DOCUMENT_SLOT = """
<q-td :props="props" style="max-width: 280px">
  <a :href="'/tasks/' + props.row.id" class="text-primary ellipsis block" style="text-decoration: none"
     :title="props.value">{{ props.value }}</a>
  <div v-if="props.row.error" class="text-negative text-caption ellipsis" :title="props.row.error">
    {{ props.row.error }}</div>
</q-td>"""
# Retry and cancel sit apart, each in its own colour; the one that does not apply is greyed out.
ACTION_BUTTONS = """
<q-btn flat dense round size="sm" icon="replay" color="primary" :data-testid="'retry-' + props.row.id"
       :disable="VIEWER || !props.row.retryable" @click="() => $parent.$emit('retry', props.row)">
  <q-tooltip>{{ props.row.reextracts ? 'Re-extract (spends tokens again)' : 'Retry' }}</q-tooltip></q-btn>
<span class="q-mx-xs"
      style="display:inline-block;width:1px;height:18px;background:#cbd5e1;vertical-align:middle"></span>
<q-btn flat dense round size="sm" icon="cancel" color="negative" :data-testid="'cancel-' + props.row.id"
       :disable="VIEWER || !props.row.cancellable" @click="() => $parent.$emit('cancel', props.row)">
  <q-tooltip>Cancel</q-tooltip></q-btn>"""
ACTIONS_SLOT = f"""
<q-td :props="props" auto-width class="text-no-wrap">{ACTION_BUTTONS}
</q-td>"""
CREATED_SLOT = """
<q-td :props="props" class="text-no-wrap">
  <span :data-testid="'created-' + props.row.id">{{ props.value }}</span>
  <q-tooltip>{{ props.row.created_exact }}</q-tooltip>
</q-td>"""
# On a phone each task is a card: status and actions first, then the document and a few figures.
CARD_SLOT = f"""
<div class="q-pa-xs col-12">
  <q-card flat bordered class="quire-card" :data-testid="'card-' + props.row.id">
    <q-card-section class="q-pa-sm">
      <div class="row items-center no-wrap q-gutter-x-sm">
        <q-checkbox dense v-model="props.selected" />
        <q-badge :color="props.row.status_color" :label="props.row.status" class="q-px-sm q-py-xs"
                 :data-testid="'status-' + props.row.id" />
        <span v-if="props.row.waiting" class="text-caption quire-muted ellipsis"
              :title="props.row.waiting_detail" :data-testid="'waiting-' + props.row.id">{{{{ props.row.waiting }}}}</span>
        <q-space />{ACTION_BUTTONS}
      </div>
      <a :href="'/tasks/' + props.row.id" class="text-primary ellipsis block q-mt-xs"
         style="text-decoration: none" :title="props.row.document">
        #{{{{ props.row.id }}}} · {{{{ props.row.document }}}}</a>
      <div v-if="props.row.error" class="text-negative text-caption ellipsis">{{{{ props.row.error }}}}</div>
      <div class="text-caption quire-muted ellipsis">
        {{{{ props.row.agent }}}} · {{{{ props.row.customer }}}} · {{{{ props.row.cost }}}} ·
        <span :title="props.row.created_exact">{{{{ props.row.created }}}}</span></div>
    </q-card-section>
  </q-card>
</div>"""


def for_viewer(slot: str, who: Identity) -> str:
    """A slot whose action buttons are disabled for a viewer (the handlers and the server refuse them anyway)."""
    return slot.replace("VIEWER", "false" if who.operator else "true")


def page_request(pagination: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any]:
    """The pagination a browser asked for, within bounds: a page of 1 to MAX_ROWS_PER_PAGE rows."""
    merged: dict[str, Any] = {**pagination, **{k: asked[k] for k in ("page", "rowsPerPage", "sortBy", "descending")
                                               if k in asked}}
    try:
        rows = int(merged["rowsPerPage"] or MAX_ROWS_PER_PAGE)  # Quasar's 0 means "all"
        page = int(merged["page"] or 1)
    except (TypeError, ValueError, OverflowError):
        rows, page = pagination["rowsPerPage"], 1
    merged["rowsPerPage"] = min(max(rows, 1), MAX_ROWS_PER_PAGE)
    merged["page"] = min(max(page, 1), 10**9)
    merged["sortBy"] = merged["sortBy"] if isinstance(merged["sortBy"], str) else NEWEST_FIRST
    merged["descending"] = bool(merged["descending"])
    return merged


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


def table_row(row: TaskRow, now: datetime | None = None) -> dict[str, Any]:
    tokens = (f"{fmt.tokens(row.input_tokens)} / {fmt.tokens(row.output_tokens)}"
              if row.input_tokens is not None or row.output_tokens is not None else fmt.DASH)
    status = row.status
    return {"id": row.id, "document": row.document_name or f"task {row.id}", "status": status.value,
            "status_color": fmt.STATUS_COLORS[status.value], "agent": row.agent,
            "retryable": status.retryable, "cancellable": status.cancellable,
            "reextracts": status is TaskStatus.COMPLETED,  # a retry of a completed task makes a child
            "customer": row.customer or fmt.DASH, "priority": row.priority, "pages": fmt.count(row.pages),
            "tokens": tokens, "cost": fmt.money(row.llm_cost_usd), "confidence": fmt.percent(row.confidence),
            "latency": fmt.duration(row.latency_s) if status in (TaskStatus.COMPLETED, TaskStatus.FAILED) else fmt.DASH,
            "created": fmt.ago(row.created_at, now), "created_exact": fmt.exact(row.created_at),
            "error": row.error if status is TaskStatus.FAILED else None,
            "waiting": (waiting_text(row.waiting_reason, row.waiting_until, now)
                        if status is TaskStatus.ENQUEUED else None),
            "waiting_detail": row.waiting_detail}


def waiting_text(reason: str | None, until: datetime | None, now: datetime | None = None) -> str | None:
    """Why a task waits, in plain words, with how long where known ("waiting to retry · in 40 s")."""
    if reason is None:
        return None
    words = REASON_WORDS[WaitReason(reason)]
    if until is None:
        return words
    now = now or datetime.now(UTC)
    return f"{words} · {fmt.until(until, now)}"


class TaskTable:
    """Pages, sorts and acts on tasks; the server does the paging and the sorting."""

    def __init__(self, who: Identity, on_changed: Callable[[], Awaitable[None]]) -> None:
        self.who = who
        self.filter = TaskFilter()
        self._on_changed = on_changed
        self.pagination: dict[str, Any] = {"page": 1, "rowsPerPage": 25, "sortBy": NEWEST_FIRST, "descending": True,
                                           "rowsNumber": 0}
        # Keyset paging: page n+1 starts after the (sort value, id) of page n's last row.
        self._cursors: dict[int, tuple[Any, int]] = {}
        self.total_hint: int | None = None  # the filter's total, when the caller just read it
        with ui.card().classes("quire-card w-full p-0 gap-0"):
            with ui.row().classes("w-full items-center px-4 py-3 gap-3"):
                ui.label("Tasks").classes("quire-section-title")
                self.count_label = ui.label("").classes("text-sm quire-muted")
                ui.space()
                self.selected_label = ui.label("").classes("text-sm quire-muted")
                # Row and bulk retries alike run at this priority (own: each task keeps its own).
                self.retry_priority = ui.select(RETRY_PRIORITIES, value=-1, label="Retry at") \
                    .props('outlined dense stack-label options-dense data-testid="retry-priority"').classes("w-40")
                # Retry and cancel stand apart: a spacer between them, and cancel in red.
                with ui.row().classes("items-center gap-6"):
                    self.retry_selected = ui.button("Retry selected", icon="replay",
                                                    on_click=self._retry_selection) \
                        .props('outline dense color=primary data-testid="retry-selected"')
                    self.cancel_selected = ui.button("Cancel selected", icon="cancel",
                                                     on_click=self._cancel_selection) \
                        .props('flat dense color=negative data-testid="cancel-selected"')
            # Bulk over the whole filter: every matching task on every page, counted first, then an
            # undo window before anything is done.
            with ui.row().classes("w-full items-center px-4 pb-3 gap-3 flex-wrap"):
                ui.label("Every matching task, on all pages:").classes("text-sm quire-muted")
                self.retry_all = ui.button("Retry all matching", icon="replay", on_click=lambda: self._bulk("retry")) \
                    .props('flat dense color=primary data-testid="retry-all"')
                self.cancel_all = ui.button("Cancel all matching", icon="cancel", on_click=lambda: self._bulk("cancel")) \
                    .props('flat dense color=negative data-testid="cancel-all"')
                self.retry_all.set_enabled(who.operator)
                self.cancel_all.set_enabled(who.operator)
            with ui.row().classes("w-full items-center gap-3 px-4 py-2 bg-amber-50 no-wrap") \
                    .props('data-testid="bulk-pending" role="status"') as self.pending:
                self.pending_label = ui.label("").classes("text-sm grow min-w-0").props('data-testid="bulk-pending-text"')
                ui.button("Undo", icon="undo", on_click=self._undo) \
                    .props('dense unelevated color=warning text-color=black data-testid="bulk-undo"')
            self.pending.visible = False
            self._undone = False
            self.table = PagedTable(columns=COLUMNS, rows=[], row_key="id", selection="multiple",
                                    pagination=dict(self.pagination), on_select=self._selection_changed) \
                .props('flat rows-per-page-label="Rows per page" :rows-per-page-options="[10,25,50,100]" '
                       'no-data-label="No tasks match these filters" data-testid="task-table"') \
                .classes("w-full")
            self.table.add_slot("body-cell-status", STATUS_SLOT)
            self.table.add_slot("body-cell-document_name", DOCUMENT_SLOT)
            self.table.add_slot("body-cell-actions", for_viewer(ACTIONS_SLOT, who))
            self.table.add_slot("body-cell-created_at", CREATED_SLOT)
            self.table.add_slot("item", for_viewer(CARD_SLOT, who))
            self.table.on("request", self._on_request, ["pagination"])
            self.table.on("retry", lambda e: self._act("retry", [e.args]))
            self.table.on("cancel", lambda e: self._act("cancel", [e.args]))
        self._selection_changed()

    async def _on_request(self, event) -> None:
        before = {k: self.pagination.get(k) for k in ("rowsPerPage", "sortBy", "descending")}
        asked = event.args.get("pagination") if isinstance(event.args, dict) else None
        self.pagination.update(page_request(self.pagination, asked if isinstance(asked, dict) else {}))
        if before != {k: self.pagination.get(k) for k in before}:
            self._cursors = {}  # another order or page size: cursors of the old one mean nothing
        await self.refresh()

    async def _cursor_for(self, page: int) -> tuple[Any, int] | None:
        """The keyset cursor page `page` starts after; walks forward from the nearest known page."""
        if page <= 1:
            return None
        known = max((p for p in self._cursors if p <= page), default=1)
        cursor = self._cursors.get(known)
        per_page = self.pagination["rowsPerPage"] or MAX_ROWS_PER_PAGE
        sort, descending = self.pagination["sortBy"] or NEWEST_FIRST, bool(self.pagination["descending"])
        # A far jump walks at most MAX_CURSOR_WALK pages (the table offers next and previous).
        for p in range(known, min(page, known + MAX_CURSOR_WALK)):
            (_, cursor), _ = await services.live_task_page(app.state.pool, self.filter, sort=sort,
                                                           descending=descending, after=cursor, per_page=per_page)
            if cursor is None:
                return None
            self._cursors[p + 1] = cursor
        return cursor

    async def set_filter(self, flt: TaskFilter) -> None:
        self.filter = flt
        self.pagination["page"] = 1
        self._cursors = {}
        self.table.selected = []
        self._selection_changed()
        await self.refresh()

    async def refresh(self, *, since: float | None = None) -> bool:
        """Shows the current page; False when it was not read after `since` (see services.live_summary)."""
        per_page = self.pagination["rowsPerPage"] or MAX_ROWS_PER_PAGE
        page = max(int(self.pagination["page"] or 1), 1)
        after = await self._cursor_for(page)
        (rows, cursor), current = await services.live_task_page(app.state.pool, self.filter,
                                                                sort=self.pagination["sortBy"] or NEWEST_FIRST,
                                                                descending=bool(self.pagination["descending"]),
                                                                after=after, per_page=per_page, since=since)
        if cursor is not None:
            self._cursors[page + 1] = cursor
        # The page's summary read the same exact total a moment ago: no second read for it.
        hint, self.total_hint = self.total_hint, None
        if hint is not None:
            count = TaskCount(hint)
        else:
            count, counted = await services.live_task_count(app.state.pool, self.filter, since=since)
            current = current and counted
        total = count.n
        self.pagination["rowsNumber"] = total
        now = datetime.now(UTC)
        self.table.rows = [table_row(r, now) for r in rows]
        self.table.pagination = dict(self.pagination)
        self.count_label.text = f"{total:,} matching" if count.exact else f"about {fmt.approx(total)} matching"
        # Keep selected rows' statuses current so the bulk buttons act on what is shown.
        by_id = {r["id"]: r for r in self.table.rows}
        self.table.selected = [by_id.get(r["id"], r) for r in self.table.selected]
        self._selection_changed()
        return current

    def set_compact(self, compact: bool) -> None:
        """Cards on a narrow screen (status and actions first), the full table on a wide one."""
        if compact:
            self.table.props("grid")
        else:
            self.table.props(remove="grid")

    def _selection_changed(self, *_: Any) -> None:
        selected = self.table.selected
        self.selected_label.text = f"{len(selected)} selected" if selected else ""
        self.retry_selected.set_enabled(self.who.operator and any(r["retryable"] for r in selected))
        self.cancel_selected.set_enabled(self.who.operator and any(r["cancellable"] for r in selected))

    async def _retry_selection(self) -> None:
        await self._act("retry", [r for r in self.table.selected if r["retryable"]])

    async def _cancel_selection(self) -> None:
        await self._act("cancel", [r for r in self.table.selected if r["cancellable"]])

    async def _act(self, action: str, rows: list[dict[str, Any]]) -> None:
        if not self.who.operator:
            # The handler checks the role itself: a disabled button is a hint, not a guard.
            ui.notify(f"{action.capitalize()} needs the operator role; {self.who.name} is a viewer.",
                      type="negative", position="top")
            return
        if not rows:
            return
        if action == "retry":
            title, body = retry_consequence(TaskStatus(r["status"]) for r in rows)
            if not await confirm(title, body, action="Retry", color="primary", icon="replay"):
                return
        elif not await confirm(*cancel_consequence(len(rows)), action="Cancel tasks", color="negative",
                               icon="cancel"):
            return
        ids = [int(r["id"]) for r in rows]
        if action == "retry":
            priority = self.retry_priority.value
            results = await actions.retry_tasks(app.state.pool, ids, actor=self.who.actor,
                                                priority=None if priority in (None, -1) else int(priority))
        else:
            results = await actions.cancel_tasks(app.state.pool, ids, actor=self.who.actor)
        done = [r for r in results if r.ok]
        failed = [r for r in results if not r.ok]
        if done:
            verb = "re-enqueued or re-extracted" if action == "retry" else "cancelled"
            text = done[0].message if len(done) == 1 else f"{len(done)} tasks {verb}"
            ui.notify(text, type="positive", position="top")
        for result in failed[:3]:
            ui.notify(result.message, type="warning", position="top")
        self.table.selected = []
        await self._on_changed()

    async def _bulk(self, action: str) -> None:
        """Retry or cancel every task the filter selects: the count first, then a few seconds to undo."""
        if not self.who.operator:
            ui.notify(f"{action.capitalize()} needs the operator role; {self.who.name} is a viewer.",
                      type="negative", position="top")
            return
        if self.pending.visible:
            ui.notify("Another bulk action is about to run: undo it or wait for it first.", type="warning",
                      position="top")
            return
        preview = await actions.bulk_preview(app.state.pool, self.filter, action)
        if not preview.count:
            ui.notify(f"No matching task can be {'retried' if action == 'retry' else 'cancelled'}.",
                      type="info", position="top")
            return
        every = (f" This is every matching task on all pages ({preview.count:,}), not only the page shown."
                 + (f" More match: the first {actions.BULK_MAX:,} are taken." if preview.capped else ""))
        if action == "retry":
            title, body = retry_consequence(TaskStatus(s) for s, n in preview.statuses.items() for _ in range(n))
            asked = await confirm(title, body + every, action="Retry", color="primary", icon="replay")
        else:
            title, body = cancel_consequence(preview.count)
            asked = await confirm(title, body + every, action="Cancel tasks", color="negative", icon="cancel")
        if not asked:
            return
        verb = "Retrying" if action == "retry" else "Cancelling"
        self._undone = False
        self.pending.visible = True
        for left in range(UNDO_SECONDS, 0, -1):
            self.pending_label.set_text(f"{verb} {preview.count:,} tasks in {left} s. Nothing changes until then.")
            await asyncio.sleep(1)
            if self._undone:
                break
        self.pending.visible = False
        if self._undone:
            ui.notify(f"Undone: no task was {'retried' if action == 'retry' else 'cancelled'}.", type="info",
                      position="top")
            return
        if action == "retry":
            priority = self.retry_priority.value
            results = await actions.retry_tasks(app.state.pool, preview.ids, actor=self.who.actor,
                                                priority=None if priority in (None, -1) else int(priority))
        else:
            results = await actions.cancel_tasks(app.state.pool, preview.ids, actor=self.who.actor)
        done = sum(r.ok for r in results)
        skipped = len(results) - done
        text = f"{done:,} tasks {'retried' if action == 'retry' else 'cancelled'}"
        if skipped:
            text += f"; {skipped:,} had changed meanwhile and were left as they are"
        ui.notify(text, type="positive" if done else "warning", position="top")
        await self._on_changed()

    def _undo(self) -> None:
        self._undone = True
        self.pending_label.set_text("Undoing…")
