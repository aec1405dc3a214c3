"""Batches held for review, listed on the dashboard: none is hidden, and each is released or discarded here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from nicegui import ui

from app.auth import Identity
from app.components import format as fmt
from app.foresight import HeldBatch

OnBatch = Callable[[int], Awaitable[bool]]


def batch_line(batch: HeldBatch) -> str:
    """What a held batch holds and what it would cost, in one line."""
    f = batch.forecast or {}
    cost = fmt.money(f.get("llm_cost_usd")) if f.get("llm_cost_usd") is not None else "LLM cost unpriced"
    customer = f" for {batch.customer}" if batch.customer else ""
    by = f" by {batch.submitted_by}" if batch.submitted_by else ""
    return (f"{fmt.plural(batch.held_tasks, 'document')} held · {fmt.plural(batch.pages, 'page')} · "
            f"agent {batch.agent}{customer} · forecast {cost} · uploaded {fmt.ago(batch.created_at)}{by}")


class HeldBatches:
    """The held batches, newest first, with Open, Submit and Discard (operators)."""

    def __init__(self, who: Identity, on_release: OnBatch, on_discard: OnBatch) -> None:
        self.who = who
        self._on_release = on_release
        self._on_discard = on_discard
        self.shown: list[tuple] | None = None
        with ui.card().classes("quire-card w-full p-4 gap-2 border-l-4 border-amber-500 min-w-0") \
                .props('data-testid="held-batches"') as self.card:
            with ui.row().classes("items-center gap-2 no-wrap"):
                ui.icon("pause_circle", size="22px").classes("text-amber-700")
                self.title = ui.label("").classes("quire-section-title").props('data-testid="held-batches-title"')
            ui.label("Stored and queued, waiting for an operator to submit them: nothing of these runs yet.") \
                .classes("text-sm quire-muted")
            self.list = ui.column().classes("w-full gap-1 min-w-0")
        self.card.visible = False

    def update(self, batches: list[HeldBatch]) -> None:
        key = [(b.batch_id, b.held_tasks, b.tasks) for b in batches]
        if key == self.shown:
            return
        self.shown = key
        self.card.visible = bool(batches)
        self.title.set_text(f"Held · {len(batches):,} {'batch' if len(batches) == 1 else 'batches'}")
        self.list.clear()
        with self.list:
            for batch in batches:
                with ui.row().classes("w-full items-center gap-2 py-1 border-b border-slate-100 min-w-0") \
                        .props(f'data-testid="held-batch-{batch.batch_id}"'):
                    with ui.column().classes("gap-0 grow min-w-0"):
                        ui.link(f"Batch {batch.batch_id}", f"/?batch={batch.batch_id}") \
                            .classes("font-medium text-primary").props(f'data-testid="held-batch-open-{batch.batch_id}"')
                        line = ui.label(batch_line(batch)).classes("text-sm quire-muted truncate w-full")
                        line._props["title"] = batch_line(batch)
                    with ui.row().classes("gap-2 items-center no-wrap"):
                        ui.button("Submit", icon="play_arrow",
                                  on_click=lambda b=batch.batch_id: self._on_release(b)) \
                            .props(f'dense unelevated color=primary data-testid="held-batch-submit-{batch.batch_id}"') \
                            .set_enabled(self.who.operator)
                        ui.button("Discard", icon="delete_outline",
                                  on_click=lambda b=batch.batch_id: self._on_discard(b)) \
                            .props(f'dense outline color=negative data-testid="held-batch-discard-{batch.batch_id}"') \
                            .set_enabled(self.who.operator)
