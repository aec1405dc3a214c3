"""Task detail: the document, attempts with run and trace ids, spend, result, errors and timeline."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import Request
from nicegui import app, ui

from app import actions, foresight, inputs, reviews, services
from app.auth import Identity, viewer
from app.components import format as fmt
from app.components.confirm import cancel_consequence, confirm, retry_consequence
from app.components.due import Due
from app.components.layout import frame, watch
from app.components.result_view import attempts_table, fact, result_card, timeline
from app.components.task_table import waiting_text
from schema.errors import NotFound
from schema.models import Task, TaskStatus
from schema.queue import EXTRACTORS
from schema.stats_types import REVIEW_CONFIDENCE, StreamEvent, needs_review
from schema.waiting import WaitReason

# Why-waiting reasons under which the queue's pace says nothing of when the task starts.
STOPPED_REASONS = (WaitReason.AGENT_PAUSED, WaitReason.AGENT_MISCONFIGURED, WaitReason.HELD, WaitReason.CUSTOMER_BUDGET)

RETRY_PRIORITIES = {-1: "its own priority", 9: "9 · urgent", 7: "7 · high", 5: "5 · normal", 3: "3", 0: "0 · bulk"}


def edit_text(edit: dict) -> str:
    """One edit-and-retry as the task page lists it: who, when, and each field from and to."""
    at = datetime.fromisoformat(edit["at"]) if isinstance(edit.get("at"), str) else edit.get("at")
    changes = "; ".join(f"{field} {old if old not in (None, '') else 'the agent’s own'} → {new}"
                        for field, (old, new) in sorted((edit.get("changes") or {}).items()))
    return f"Edited by {edit.get('by') or 'someone'} {fmt.ago(at)} ({fmt.exact(at)}): {changes or 'no change'}"


def time_split(task: Task, now: datetime | None = None) -> tuple[float | None, float, float | None]:
    """Seconds queued, held by an operator, and running (the attempts' own times, summed): three
    figures apart, so a hold never reads as a slow queue."""
    now = now or datetime.now(UTC)
    held = task.held_seconds or 0.0
    if task.held and task.status is TaskStatus.ENQUEUED:
        held = max((now - task.created_at).total_seconds(), 0.0)
    ran = sum((((a.finished_at or now) - a.started_at).total_seconds() for a in task.attempts
               if a.started_at is not None), 0.0) \
        if task.attempts else None
    end = task.finished_at or now
    queued = max((end - task.created_at).total_seconds() - held - (ran or 0.0), 0.0)
    return queued, held, ran


class TaskView:
    """Renders one task and re-renders it when its events arrive."""

    def __init__(self, who: Identity, task: Task) -> None:
        self.who = who
        self.task = task
        self.pool = app.state.pool
        self.settings = app.state.settings
        self.spot_due = Due(1.0)
        self.render()

    @ui.refreshable_method
    def render(self) -> None:
        task = self.task
        with ui.column().classes("w-full gap-6 min-w-0"):
            with ui.row().classes("items-center gap-2 text-sm quire-muted"):
                ui.link("Dashboard", "/dashboard").classes("text-primary")
                ui.label("›")
                ui.label(f"Task {task.id}")
            with ui.card().classes("quire-card w-full p-4 sm:p-5 gap-4 min-w-0"):
                with ui.row().classes("w-full items-start gap-4 no-wrap"):
                    ui.icon("picture_as_pdf", size="40px").classes("text-red-700 shrink-0")
                    with ui.column().classes("gap-1 grow min-w-0"):
                        name = task.document_name or f"task-{task.id}.pdf"
                        # A long name is cut with an ellipsis and shown whole on hover.
                        with ui.link(name, f"/api/tasks/{task.id}/document", new_tab=True) \
                                .classes("text-xl font-semibold text-slate-900 block truncate max-w-full") \
                                .props('data-testid="document-link"'):
                            ui.tooltip(name)
                        ui.label(f"{task.agent} · priority {task.priority} · "
                                 f"{fmt.plural(task.pages, 'page')} · {fmt.size(task.document_bytes)}") \
                            .classes("quire-muted").props('data-testid="document-facts"')
                with ui.row().classes("w-full items-center gap-3 flex-wrap"):
                    ui.badge(task.status.value, color=fmt.STATUS_COLORS[task.status.value]) \
                        .classes("text-sm px-3 py-1").props('data-testid="task-status"')
                    if needs_review(task.status.value, task.confidence):
                        ui.badge("needs review", color="warning").classes("text-sm px-3 py-1") \
                            .props('data-testid="task-needs-review"') \
                            .tooltip(f"Confidence below {fmt.percent(REVIEW_CONFIDENCE)}: check the fields")
                    ui.space()
                    # Retry and cancel never stand side by side: a task can take only one of them.
                    if task.status.retryable:
                        self.retry_priority = ui.select(RETRY_PRIORITIES, value=-1, label="at priority") \
                            .props('outlined dense stack-label data-testid="detail-retry-priority"').classes("w-40")
                        ui.button("Retry" if task.status is not TaskStatus.COMPLETED else "Re-extract", icon="replay",
                                  on_click=lambda: self.act("retry")) \
                            .props('outline color=primary data-testid="detail-retry"').set_enabled(self.who.operator)
                        ui.button("Edit and retry", icon="tune", on_click=self.edit_and_retry) \
                            .props('flat color=primary data-testid="detail-edit-retry"').set_enabled(self.who.operator)
                    if task.held and task.batch_id and task.status is TaskStatus.ENQUEUED:
                        ui.button("Submit batch", icon="play_arrow", on_click=self.release) \
                            .props('outline color=primary data-testid="detail-release"').set_enabled(self.who.operator)
                    if task.status.cancellable:
                        ui.button("Cancel", icon="cancel", on_click=lambda: self.act("cancel")) \
                            .props('flat color=negative data-testid="detail-cancel"').set_enabled(self.who.operator)
                with ui.element("div").classes("grid grid-cols-2 md:grid-cols-4 gap-x-8 gap-y-3 w-full"):
                    if task.status is TaskStatus.ENQUEUED:
                        with ui.column().classes("gap-0 min-w-0"):
                            ui.label("Queue position").classes("quire-kpi-label")
                            self.spot = ui.label("…").classes("text-sm text-slate-900").props('data-testid="queue-position"')
                        waiting = waiting_text(task.waiting_reason, task.waiting_until)
                        if waiting:
                            detail = f"{waiting} ({task.waiting_detail})" if task.waiting_detail else waiting
                            with ui.column().classes("gap-0 min-w-0"):
                                ui.label("Waiting because").classes("quire-kpi-label")
                                ui.label(detail).classes("text-sm text-amber-800 break-words") \
                                    .props('data-testid="waiting-reason"')
                    fact("Customer", task.customer or fmt.DASH)
                    fact("Submitted by", task.submitted_by or fmt.DASH)
                    fact("Submitted", fmt.ago(task.created_at), title=fmt.exact(task.created_at))
                    fact("Finished", fmt.ago(task.finished_at), title=fmt.exact(task.finished_at))
                    queued, held, ran = time_split(task)
                    latency = ((task.finished_at - task.created_at).total_seconds() - held
                               if task.finished_at else None)
                    fact("Response time", fmt.duration(latency), title="from submission to the end, less the time held")
                    fact("Queued", fmt.duration(queued))
                    if held:
                        fact("Held for review", fmt.duration(held))
                    fact("Ran", fmt.duration(ran))
                    fact("Attempts", f"{task.attempt_count} (budget {task.max_attempts}, {task.attempts_left} left)")
                    fact("Confidence", fmt.percent(task.confidence))
                    tokens_in = sum(a.input_tokens or 0 for a in task.attempts)
                    tokens_out = sum(a.output_tokens or 0 for a in task.attempts)
                    fact("Tokens in / out", f"{fmt.tokens(tokens_in)} / {fmt.tokens(tokens_out)}")
                    fact("LLM cost", fmt.llm_cost(task.attempts))
                    fact("Compute cost", fmt.compute_cost(task.attempts))
                    fact("Estimated tokens", fmt.tokens(task.estimated_tokens))
                    fact("SHA-256", task.document_sha256[:16] + "…" if task.document_sha256 else fmt.DASH,
                         mono=True, title=task.document_sha256)
                if task.parent_id:
                    with ui.row().classes("text-sm gap-1"):
                        ui.label("Re-extraction of")
                        ui.link(f"task {task.parent_id}", f"/tasks/{task.parent_id}").classes("text-primary")
                if task.run_overrides:
                    ui.label("Runs with " + ", ".join(f"{k} {v}" for k, v in sorted(task.run_overrides.items()))
                             + " instead of the agent's own settings").classes("text-sm") \
                        .props('data-testid="run-overrides"')
                for edit in task.edits:
                    ui.label(edit_text(edit)).classes("text-sm quire-muted break-words").props('data-testid="task-edit"')
            if task.error:
                with ui.card().classes("quire-card w-full p-4 border-l-4 border-red-600 gap-1"):
                    ui.label("Error").classes("quire-section-title text-negative")
                    ui.label(task.error).classes("text-sm whitespace-pre-wrap").props('data-testid="task-error"')
            with ui.element("div").classes("grid grid-cols-1 lg:grid-cols-3 gap-6 w-full min-w-0"):
                with ui.column().classes("lg:col-span-2 gap-6 min-w-0"):
                    result_card(task)
                    attempts_table(task)
                timeline(task)

    async def act(self, action: str) -> None:
        if not self.who.operator:
            ui.notify(f"{action.capitalize()} needs the operator role; {self.who.name} is a viewer.",
                      type="negative", position="top")
            return
        if action == "retry":
            asked = await confirm(*retry_consequence([self.task.status]), action="Retry", color="primary",
                                  icon="replay")
        else:
            asked = await confirm(*cancel_consequence(1), action="Cancel task", color="negative", icon="cancel")
        if not asked:
            return
        if action == "retry":
            priority = getattr(self, "retry_priority", None)
            results = await actions.retry_tasks(self.pool, [self.task.id], actor=self.who.actor,
                                                priority=None if priority is None or priority.value in (None, -1)
                                                else int(priority.value))
        else:
            results = await actions.cancel_tasks(self.pool, [self.task.id], actor=self.who.actor)
        result = results[0]
        ui.notify(result.message, type="positive" if result.ok else "warning", position="top")
        if result.ok and result.new_task_id and result.new_task_id != self.task.id:
            ui.navigate.to(f"/tasks/{result.new_task_id}")
            return
        await self.reload()

    async def edit_and_retry(self) -> None:
        """Run it again with another agent, extractor, model or priority; the change is recorded."""
        if not self.who.operator:
            ui.notify(f"Retry needs the operator role; {self.who.name} is a viewer.", type="negative", position="top")
            return
        agents = await services.agent_names(self.pool)
        task = self.task
        with ui.dialog() as dialog, ui.card().classes("p-5 gap-3 w-full max-w-md").props('data-testid="edit-dialog"'):
            ui.label("Edit and retry").classes("text-lg font-semibold")
            ui.label("The task runs again with what you change here; the change is kept on the task with "
                     "your name and the time.").classes("text-sm quire-muted")
            agent = ui.select(agents, value=task.agent, label="Agent") \
                .props('outlined dense stack-label data-testid="edit-agent"').classes("w-full")
            extractor = ui.select({"": "the agent's own", **{e: e for e in EXTRACTORS}},
                                  value=task.run_overrides.get("extractor", ""), label="Extractor") \
                .props('outlined dense stack-label data-testid="edit-extractor"').classes("w-full")
            model = ui.input("Model", value=task.run_overrides.get("model", ""),
                             placeholder="the agent's own") \
                .props('outlined dense stack-label data-testid="edit-model"').classes("w-full")
            priority = ui.select(RETRY_PRIORITIES, value=-1, label="Priority") \
                .props('outlined dense stack-label data-testid="edit-priority"').classes("w-full")
            error = ui.label("").classes("text-sm text-negative").props('data-testid="edit-error"')
            with ui.row().classes("w-full justify-end gap-2"):
                ui.button("Keep as is", on_click=lambda: dialog.submit(None)).props('flat data-testid="edit-no"')
                ui.button("Run again", icon="replay", on_click=lambda: dialog.submit(True)) \
                    .props('unelevated color=primary data-testid="edit-yes"')
        while await dialog:
            results = await actions.retry_tasks(
                self.pool, [task.id], actor=self.who.actor,
                priority=None if priority.value in (None, -1) else int(priority.value),
                agent=agent.value if agent.value != task.agent else None,
                extractor=extractor.value or None, model=(model.value or "").strip() or None)
            result = results[0]
            if not result.ok:
                error.set_text(result.message)
                continue
            dialog.close()
            ui.notify(result.message, type="positive", position="top")
            if result.new_task_id and result.new_task_id != task.id:
                ui.navigate.to(f"/tasks/{result.new_task_id}")
                return
            await self.reload()
            return

    async def release(self) -> None:
        if not self.who.operator:
            ui.notify(f"Submitting needs the operator role; {self.who.name} is a viewer.", type="negative", position="top")
            return
        if self.task.batch_id is None:  # only a task of a held batch offers it
            return
        released = await foresight.release_batch(self.pool, self.task.batch_id, actor=self.who.actor)
        ui.notify(f"Batch {self.task.batch_id} submitted: {released} tasks may run now", type="positive", position="top")
        await self.reload()

    async def refresh_spot(self, *, force: bool = False) -> None:
        """The task's queue position and ETA, re-read at most once a second while it is enqueued."""
        if self.task.status is not TaskStatus.ENQUEUED:
            return
        self.spot_due.mark()
        if not self.spot_due.take(force=force):
            return
        spot = (await foresight.queue_spots(self.pool, self.settings, [self.task.id])).get(self.task.id)
        if spot is not None:
            # No ETA while something other than the queue holds it: it would not start in that time.
            eta = None if self.task.waiting_reason in STOPPED_REASONS else foresight.eta_text(spot.eta_seconds, spot.eta_low_seconds, spot.eta_high_seconds)
            self.spot.set_text(" · ".join(x for x in (spot.text, eta) if x))

    async def refresh_if_dirty(self) -> None:
        if self.spot_due.marked:
            await self.refresh_spot()

    async def reload(self) -> None:
        self.task = await services.task_detail(self.pool, self.task.id)
        self.render.refresh()
        await self.refresh_spot(force=True)

    async def on_events(self, events: list[StreamEvent], lagged: bool) -> None:
        if lagged or any(e.task_id == self.task.id for e in events):
            await self.reload()
        elif events:
            await self.refresh_spot()


def not_found(task_id: str) -> None:
    """The page for a task that does not exist, answered with status 404."""
    ui.context.client.status_code = 404
    ui.page_title("No such task · Quire")
    with ui.card().classes("quire-card w-full p-8 items-center gap-2").props('data-testid="not-found"'):
        ui.icon("search_off", size="48px").classes("quire-muted")
        ui.label("404 · no such task").classes("text-lg font-semibold")
        shown = task_id if len(task_id) <= 40 else task_id[:40] + "…"
        ui.label(f"There is no task {shown}.").classes("text-center")
        ui.label("A task is named by its number, as the dashboard lists it.").classes("quire-muted text-center")
        ui.link("Back to the dashboard", "/dashboard").classes("text-primary")


def review_history(history: list[dict], task_id: int) -> None:
    """The reviews of this task and of the tasks it re-extracted: each stays readable."""
    if not history:
        return
    with ui.card().classes("quire-card w-full p-4 gap-2").props('data-testid="review-history"'):
        with ui.row().classes("w-full items-center"):
            ui.label("Review").classes("quire-section-title")
            ui.space()
            ui.link("Open the review", f"/review/{history[0]['task_id']}").classes("text-primary")
        for item in history:
            who = f" by {item['decided_by']}" if item["decided_by"] else ""
            when = f" at {fmt.when(item['decided_at'])}" if item["decided_at"] else ""
            of = "" if item["task_id"] == task_id else f" (task {item['task_id']})"
            ui.link(f"{item['status']}{who}{when}{of} · {fmt.plural(item['corrections'], 'correction')} · "
                    f"queued for {item['reason'].replace('_', ' ')}", f"/review/{item['task_id']}") \
                .classes("text-sm text-slate-900")


@ui.page("/tasks/{task_id}", title="Task · Quire", response_timeout=20)
async def task_page(request: Request, task_id: str):
    who = viewer(request)
    with frame(who, active="dashboard"):
        number = int(task_id) if task_id.isascii() and task_id.isdigit() and len(task_id) < 40 else 0
        try:
            task = await services.task_detail(app.state.pool, number) if inputs.valid_id(number) else None
        except NotFound:
            task = None
        if task is None:
            not_found(task_id)
            return
        ui.page_title(f"{task.document_name or f'Task {task.id}'} · Quire")
        view = TaskView(who, task)
        await view.refresh_spot(force=True)
        review_history(await reviews.history(app.state.pool, task.id), task.id)
    watch(view.on_events, view.reload)
    ui.timer(1.0, view.refresh_if_dirty)
