"""One upload batch on the upload page: each file's outcome and live status, and overall progress."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from nicegui import ui

from app.components import format as fmt
from app.submitting import SubmitResult, Upload
from schema.models import TERMINAL_STATUSES, TaskStatus

ENQUEUED, FAILED = TaskStatus.ENQUEUED.value, TaskStatus.FAILED.value

@dataclass
class Entry:
    """A file of the batch and the widgets that show it."""

    result: SubmitResult
    upload: Upload | None
    status: str | None = None
    spot: str | None = None  # queue position and ETA while enqueued
    refresh: Callable[[], object] = field(default=lambda: None, repr=False)


class BatchView:
    """The files of this page's uploads, newest batch first; statuses follow the task events."""

    def __init__(self, rerun: Callable[[Entry], Awaitable[SubmitResult | None]]) -> None:
        self._rerun = rerun
        self.entries: list[Entry] = []
        with ui.card().classes("quire-card w-full p-5 gap-3") as self.card:
            with ui.row().classes("w-full items-center"):
                ui.label("This batch").classes("quire-section-title")
                ui.space()
                self.summary = ui.label("").classes("text-sm quire-muted").props('data-testid="batch-summary"')
            self.progress = ui.linear_progress(0, show_value=False, size="10px").props(
                'rounded color=positive track-color=grey-3 data-testid="batch-progress"')
            self.progress_label = ui.label("").classes("text-sm quire-muted")
            self.forecasts = ui.column().classes("w-full gap-3")
            self.list = ui.column().classes("w-full gap-0")
        self.card.visible = False

    def task_ids(self) -> list[int]:
        return [e.result.task_id for e in self.entries if e.result.task_id is not None]

    def add(self, results: list[SubmitResult], uploads: dict[str, Upload]) -> None:
        self.card.visible = True
        for result in results:
            entry = Entry(result, uploads.get(result.name), status=ENQUEUED if result.task_id else None)
            self.entries.append(entry)
            self._render(entry)
        self._update_progress()

    def _render(self, entry: Entry) -> None:
        @ui.refreshable
        def row() -> None:
            with ui.row().classes("w-full items-center gap-3 py-2 border-b border-slate-100 no-wrap") \
                    .props('data-testid="batch-row"'):
                self._row(entry)

        with self.list:
            row()
        entry.refresh = row.refresh

    def _show(self, entry: Entry) -> None:
        entry.refresh()

    def _row(self, entry: Entry) -> None:
        """One file's row, built from its current outcome and status."""
        result = entry.result
        if result.outcome == "rejected":
            icon, color, badge = "error", "negative", "rejected"
            # The row already names the file; the message need not repeat it.
            message, tone = (result.error or "rejected").removeprefix(f"{result.name}: "), "text-negative"
        elif result.outcome == "duplicate":
            earlier = result.duplicate_of or {}
            icon, color, badge = "content_copy", "warning", "already submitted"
            message = (f"Same file as task {earlier.get('id')} ({earlier.get('status', '')}). "
                       "Open its result, or run it again.")
            tone = "quire-muted"
        else:
            status = entry.status or ENQUEUED
            icon, color, badge = fmt.STATUS_ICONS[status], fmt.STATUS_COLORS[status], status
            message = f"{fmt.plural(result.pages, 'page')} · task {result.task_id}" if result.pages \
                else f"task {result.task_id}"
            if result.einvoice:
                message = f"{result.einvoice} e-invoice · {message}"
            if status == ENQUEUED and entry.spot:
                message += f" · {entry.spot}"
            if status == FAILED and result.error:
                message += f" · {result.error}"
            tone = "text-negative" if status == FAILED else "quire-muted"
        ui.icon(icon, size="22px", color=color)
        with ui.column().classes("gap-0 grow min-w-0"):
            name = ui.label(result.name).classes("font-medium truncate w-full").props('data-testid="file-name"')
            name._props["title"] = result.name  # cut with an ellipsis: the whole name on hover
            ui.label(message).classes(f"text-sm {tone}").props('data-testid="file-message"')
        with ui.row().classes("gap-2 items-center no-wrap"):
            if result.outcome == "duplicate":
                earlier_id = (result.duplicate_of or {}).get("id")
                ui.button("Earlier result", icon="open_in_new",
                          on_click=lambda: ui.navigate.to(f"/tasks/{earlier_id}")) \
                    .props('flat dense color=primary data-testid="open-earlier"')
                ui.button("Run again", icon="replay", on_click=lambda: self._run_again(entry)) \
                    .props('outline dense color=primary data-testid="run-again"')
            elif result.outcome == "created":
                ui.link("Details", f"/tasks/{result.task_id}").classes("text-sm text-primary")
        ui.badge(badge, color=color).classes("px-2 py-1").props('data-testid="file-status"')

    async def _run_again(self, entry: Entry) -> None:
        result = await self._rerun(entry)
        if result is not None:
            entry.result, entry.status, entry.upload = result, ENQUEUED if result.task_id else None, None
            self._show(entry)
            self._update_progress()

    def apply(self, statuses: dict[int, str], errors: dict[int, str | None] | None = None) -> None:
        """New statuses for some of the batch's tasks."""
        changed = False
        for entry in self.entries:
            task_id = entry.result.task_id
            if task_id in statuses and statuses[task_id] != entry.status:
                entry.status = statuses[task_id]
                if errors and errors.get(task_id):
                    entry.result.error = errors[task_id]
                self._show(entry)
                changed = True
        if changed:
            self._update_progress()

    def queued_ids(self) -> list[int]:
        return [e.result.task_id for e in self.entries if e.result.task_id is not None and e.status == ENQUEUED]

    def set_spots(self, spots: dict[int, str]) -> None:
        """Queue position and ETA of the batch's enqueued tasks; a task missing from `spots` has left the queue."""
        for entry in self.entries:
            if entry.result.task_id is None or entry.status != ENQUEUED:
                continue
            spot = spots.get(entry.result.task_id)
            if spot != entry.spot:
                entry.spot = spot
                self._show(entry)

    def _update_progress(self) -> None:
        tasks = [e for e in self.entries if e.result.task_id is not None]
        done = sum(e.status in TERMINAL_STATUSES for e in tasks)
        failed = sum(e.status == FAILED for e in tasks)
        rejected = sum(e.result.outcome == "rejected" for e in self.entries)
        duplicates = sum(e.result.outcome == "duplicate" for e in self.entries)
        self.progress.set_value(done / len(tasks) if tasks else 0)
        self.progress_label.set_text(f"{done} of {len(tasks)} tasks finished" + (f" · {failed} failed" if failed else ""))
        parts = [f"{len(self.entries)} files", f"{len(tasks)} queued"]
        if rejected:
            parts.append(f"{rejected} rejected")
        if duplicates:
            parts.append(f"{duplicates} already submitted")
        self.summary.set_text(" · ".join(parts))
