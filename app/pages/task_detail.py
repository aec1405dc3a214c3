"""Task detail: the document, attempts with run and trace ids, spend, result, errors and timeline."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import RedirectResponse
from nicegui import app, ui

from app import services
from app.auth import Identity
from app.components import format as fmt
from app.components.layout import frame, guard, watch
from app.components.result_view import attempts_table, fact, result_card, timeline
from schema.errors import NotFound
from schema.models import Task
from schema.stats import REVIEW_CONFIDENCE, StreamEvent, needs_review


class TaskView:
    """Renders one task and re-renders it when its events arrive."""

    def __init__(self, who: Identity, task: Task) -> None:
        self.who = who
        self.task = task
        self.pool = app.state.pool
        self.body = ui.column().classes("w-full gap-6")
        self.render()

    def render(self) -> None:
        task = self.task
        self.body.clear()
        with self.body:
            with ui.row().classes("items-center gap-2 text-sm quire-muted"):
                ui.link("Dashboard", "/dashboard").classes("text-primary")
                ui.label("›")
                ui.label(f"Task {task.id}")
            with ui.card().classes("quire-card w-full p-5 gap-4"):
                with ui.row().classes("w-full items-start no-wrap gap-4"):
                    ui.icon("picture_as_pdf", size="40px").classes("text-red-700")
                    with ui.column().classes("gap-1 grow min-w-0"):
                        ui.link(task.document_name or f"task-{task.id}.pdf", f"/api/tasks/{task.id}/document",
                                new_tab=True).classes("text-xl font-semibold text-slate-900 truncate") \
                            .props('data-testid="document-link"')
                        ui.label(f"{task.agent} · priority {task.priority} · "
                                 f"{fmt.count(task.pages)} pages · {fmt.size(task.document_bytes)}").classes("quire-muted")
                    ui.badge(task.status.value, color=fmt.STATUS_COLORS[task.status.value]) \
                        .classes("text-sm px-3 py-1").props('data-testid="task-status"')
                    if needs_review(task.status.value, task.confidence):
                        ui.badge("needs review", color="warning").classes("text-sm px-3 py-1") \
                            .props('data-testid="task-needs-review"') \
                            .tooltip(f"Confidence below {fmt.percent(REVIEW_CONFIDENCE)}: check the fields")
                    if task.status.value in ("failed", "cancelled", "completed"):
                        ui.button("Retry" if task.status.value != "completed" else "Re-extract", icon="replay",
                                  on_click=lambda: self.act("retry")).props('outline color=primary data-testid="detail-retry"') \
                            .set_enabled(self.who.operator)
                    if task.status.value in ("enqueued", "processing"):
                        ui.button("Cancel", icon="cancel", on_click=lambda: self.act("cancel")) \
                            .props('outline color=negative data-testid="detail-cancel"').set_enabled(self.who.operator)
                with ui.element("div").classes("grid grid-cols-2 md:grid-cols-4 gap-x-8 gap-y-3 w-full"):
                    fact("Customer", task.customer or fmt.DASH)
                    fact("Submitted by", task.submitted_by or fmt.DASH)
                    fact("Submitted (UTC)", fmt.when(task.created_at))
                    fact("Finished (UTC)", fmt.when(task.finished_at))
                    latency = (task.finished_at - task.created_at).total_seconds() if task.finished_at else None
                    fact("Response time", fmt.duration(latency))
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
            if task.error:
                with ui.card().classes("quire-card w-full p-4 border-l-4 border-red-600 gap-1"):
                    ui.label("Error").classes("quire-section-title text-negative")
                    ui.label(task.error).classes("text-sm whitespace-pre-wrap").props('data-testid="task-error"')
            with ui.element("div").classes("grid grid-cols-1 lg:grid-cols-3 gap-6 w-full"):
                with ui.column().classes("lg:col-span-2 gap-6"):
                    result_card(task)
                    attempts_table(task)
                timeline(task)

    async def act(self, action: str) -> None:
        if not self.who.operator:
            ui.notify(f"{action.capitalize()} needs the operator role; {self.who.name} is a viewer.",
                      type="negative", position="top")
            return
        run = services.retry_tasks if action == "retry" else services.cancel_tasks
        result = (await run(self.pool, [self.task.id], actor=self.who.name))[0]
        ui.notify(result.message, type="positive" if result.ok else "warning", position="top")
        if result.ok and result.new_task_id and result.new_task_id != self.task.id:
            ui.navigate.to(f"/tasks/{result.new_task_id}")
            return
        await self.reload()

    async def reload(self) -> None:
        self.task = await services.task_detail(self.pool, self.task.id)
        self.render()

    async def on_events(self, events: list[StreamEvent], lagged: bool) -> None:
        if lagged or any(e.task_id == self.task.id for e in events):
            await self.reload()


@ui.page("/tasks/{task_id}", title="Task · Quire", response_timeout=20)
async def task_page(request: Request, task_id: int):
    who = guard(request, path=f"/tasks/{task_id}")
    if isinstance(who, RedirectResponse):
        return who
    with frame(who, active="dashboard"):
        try:
            if not services.valid_id(task_id):
                raise NotFound(f"unknown task {task_id}")
            task = await services.task_detail(app.state.pool, task_id)
        except NotFound:
            ui.context.client.status_code = 404
            with ui.card().classes("quire-card w-full p-8 items-center gap-2"):
                ui.icon("search_off", size="48px").classes("quire-muted")
                ui.label(f"There is no task {task_id}.").classes("text-lg")
                ui.link("Back to the dashboard", "/dashboard").classes("text-primary")
            return
        ui.page_title(f"{task.document_name or f'Task {task.id}'} · Quire")
        view = TaskView(who, task)
    watch(view.on_events, view.reload)
