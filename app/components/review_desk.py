"""The review desk: one reviewer's session on the review page, with the document's page on one side,
its fields on the other, the keys that drive it, and the news of someone else deciding meanwhile."""

from __future__ import annotations

from nicegui import app, ui
from nicegui.events import KeyEventArguments

from app import live, review_values, reviews
from app.auth import Identity
from app.components import format as fmt
from app.components.page_viewer import PageViewer
from app.components.review_fields import KEYS_SCRIPT, REVIEW_CSS, FieldRow, field_row, keys_legend, phone_view
from schema.review import Review, ReviewStatus, StaleReview
from schema.stats_types import TaskFilter

# Review events that end this reviewer's hold on a document (someone else claimed it, or it changed).
NEWS = (ReviewStatus.SUPERSEDED.value, ReviewStatus.APPROVED.value, ReviewStatus.REJECTED.value, "claimed")

REASONS = {"low_confidence": "low confidence", "finding": "failed cross-check", "flagged": "flagged by the agent",
           "sample": "spot check", "re-extraction": "re-extraction"}


class ReviewDesk:
    """One reviewer's session: the document held, the field selected, and the keys that drive it."""

    def __init__(self, who: Identity, flt: TaskFilter, item: Review | None, *, mine: bool) -> None:
        self.who, self.flt = who, flt
        self.pool, self.settings = app.state.pool, app.state.settings
        self.item = item
        self.mine = mine          # whether this reviewer holds the claim on `item`
        self.stale: str | None = None
        self.selected = 0
        self.accepted: set[str] = set()
        self.rows: dict[str, FieldRow] = {}
        self.names: list[str] = []
        self.viewer: PageViewer | None = None
        self.reviewed = 0
        self.deciding = False
        ui.add_css(REVIEW_CSS)
        # The review keys must not also scroll the page, outside the text fields.
        ui.add_body_html(KEYS_SCRIPT)
        ui.keyboard(on_key=self.on_key, ignore=["input", "textarea", "select"])
        self.body = ui.column().classes("w-full gap-4 min-w-0")
        self.reject_dialog()

    # Rendering ----------------------------------------------------------------------------------

    async def render(self) -> None:
        self.body.clear()
        self.rows, self.names, self.accepted, self.selected, self.viewer = {}, [], set(), 0, None
        with self.body:
            if self.item is None:
                await self.render_empty()
                return
            item = self.item
            self.style = review_values.decimal_style(item.result)
            self.names = review_values.field_order(item.result.get("document_type"),
                                                   list(dict.fromkeys([*item.fields, *item.values])))
            self.render_head(item)
            with ui.row().classes("quire-desk w-full gap-5 no-wrap items-start"):
                # The page stays in view while the fields scroll past it.
                with ui.card().classes("quire-card p-3 min-w-0").style("flex: 1 1 58%; position: sticky; top: 72px"):
                    self.viewer = PageViewer(item.task_id, item.document_uri, item.document_sha256,
                                             item.pages or (item.result.get("pages") or 1), self.on_pick)
                with ui.column().classes("gap-2 min-w-0").style("flex: 1 1 42%; max-width: 560px"):
                    self.render_fields(item)
            phone_view(item, self.names, self.style, enabled=self.mine, on_approve=self.approve,
                       on_reject=self.open_reject)
        if self.viewer is not None:
            self.viewer.set_boxes(self.evidence_boxes())
            await self.viewer.show(1)
            await self.select(0)
        # Keys drive the new document from the start, whatever held the focus before.
        ui.run_javascript("document.activeElement && document.activeElement.blur()")

    def render_head(self, item: Review) -> None:
        with ui.card().classes("quire-card w-full p-3 sm:p-4"):
            with ui.row().classes("w-full items-center gap-3 flex-wrap"):
                ui.icon("fact_check", size="28px").classes("text-primary")
                with ui.column().classes("gap-0 min-w-0 grow"):
                    ui.link(item.document_name or f"task {item.task_id}", f"/tasks/{item.task_id}") \
                        .classes("text-lg font-semibold text-slate-900 truncate").props('data-testid="review-document"')
                    ui.label(" · ".join(filter(None, [
                        f"task {item.task_id}", item.agent, item.customer, item.result.get("document_type"),
                        f"extractor {item.result.get('extractor') or 'unknown'}",
                        f"amounts like {'1.234,56' if self.style == 'comma' else '1,234.56'}"]))) \
                        .classes("text-sm quire-muted")
                ui.badge(REASONS.get(item.reason, item.reason), color="warning").props('data-testid="review-reason"')
                ui.badge(f"lowest {fmt.percent(item.confidence)}", color="grey-7")
                status = item.status.value if item.status is not ReviewStatus.OPEN else (
                    "yours" if self.mine else f"held by {item.claimed_by}" if item.claimed_by else "open")
                ui.badge(status, color="positive" if self.mine else "grey-7").props('data-testid="review-status"')
            self.banner = ui.label(self.stale or "").classes("text-negative font-medium") \
                .props('data-testid="review-banner" role="alert"')
            self.banner.set_visibility(bool(self.stale) or not self.mine)
            if not self.mine:
                self.banner.text = self.read_only_reason(item)
            with ui.row().classes("quire-desk w-full items-center gap-2"):
                self.approve_button = ui.button("Approve & next", icon="check_circle", on_click=self.approve) \
                    .props('color=positive data-testid="review-approve"')
                ui.button("Reject", icon="block", on_click=self.open_reject) \
                    .props('outline color=negative data-testid="review-reject"').set_enabled(self.mine)
                ui.button("Skip", icon="skip_next", on_click=self.skip).props('flat data-testid="review-skip"') \
                    .set_enabled(self.mine)
                ui.space()
                self.count = ui.label(f"{self.reviewed} reviewed this session").classes("text-sm quire-muted") \
                    .props('data-testid="review-count"')
                self.approve_button.set_enabled(self.mine)
            keys_legend()

    def read_only_reason(self, item: Review) -> str:
        if item.status is not ReviewStatus.OPEN:
            return (f"{item.status.value.capitalize()} by {item.decided_by or 'Quire'}"
                    f"{' at ' + fmt.when(item.decided_at) if item.decided_at else ''}"
                    f"{': ' + item.decision_note if item.decision_note else ''}. Read only.")
        if not self.who.reviewer:
            return "You can read this review; checking documents needs the reviewer role."
        return f"{item.claimed_by} is reviewing this document. Read only."

    def render_fields(self, item: Review) -> None:
        for index, name in enumerate(self.names):
            row = field_row(index, name, item.fields.get(name) or {}, item.values.get(name), self.style,
                            editable=self.mine)
            row.box.on("click", lambda _, i=index: self.select(i))
            row.input.on("keydown.enter.exact", lambda _, n=name: self.commit_and_next(n))
            row.input.on("keydown.ctrl.enter", self.approve)
            row.input.on("keydown.meta.enter", self.approve)
            row.input.on("keydown.esc", lambda _, n=name: self.cancel_edit(n))
            row.input.on("focus", lambda _, i=index: self.select(i, focus=False))
            self.rows[name] = row
            self.show_note(row)

    async def render_empty(self) -> None:
        backlog = await reviews.figures(self.pool, self.flt)
        with ui.card().classes("quire-card w-full p-6 items-center gap-2").props('data-testid="review-empty"'):
            ui.icon("task_alt", size="48px").classes("text-positive")
            if not self.who.reviewer:
                ui.label("Reviewing documents needs the reviewer role.").classes("text-lg font-semibold")
            else:
                ui.label("Nothing waits for review." if not backlog.open else
                         f"Every waiting document is held by another reviewer ({backlog.held}).") \
                    .classes("text-lg font-semibold")
            ui.label(f"{self.reviewed} reviewed this session · {backlog.open} open · {backlog.approved} approved · "
                     f"{backlog.rejected} rejected").classes("quire-muted").props('data-testid="review-count"')
            ui.link("Back to the dashboard", "/dashboard").classes("text-primary")

    def reject_dialog(self) -> None:
        with ui.dialog() as self.dialog, ui.card().classes("p-4 gap-3").style("min-width: 340px"):
            ui.label("Reject this document?").classes("text-lg font-semibold")
            self.reject_note = ui.input("Why (optional)").props('autofocus outlined data-testid="reject-note"') \
                .classes("w-full")
            self.reject_note.on("keydown.enter", self.reject)
            with ui.row().classes("w-full justify-end gap-2"):
                ui.button("Keep reviewing", on_click=self.dialog.close).props("flat")
                ui.button("Reject", icon="block", on_click=self.reject) \
                    .props('color=negative data-testid="reject-confirm"')

    # Fields -------------------------------------------------------------------------------------

    @property
    def open_item(self) -> Review:
        """The document the desk shows; read only while one is open."""
        if self.item is None:
            raise RuntimeError("no document is open on this desk")
        return self.item

    def evidence_boxes(self) -> dict[str, tuple[int, tuple[float, float, float, float]]]:
        boxes: dict[str, tuple[int, tuple[float, float, float, float]]] = {}
        for name, extracted in self.open_item.fields.items():
            evidence = extracted.get("evidence") if isinstance(extracted, dict) else None
            if not isinstance(evidence, dict):
                continue
            bbox = evidence.get("bbox")
            if isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, (int, float)) for v in bbox):
                page = evidence.get("page")
                page = page if isinstance(page, int) else 1
                left, top, right, bottom = (float(v) for v in bbox)
                boxes[name] = (page, (left, top, right, bottom))
        return boxes

    def current_text(self, name: str) -> str:
        return review_values.show(self.open_item.values.get(name), self.rows[name].kind, self.style)

    def show_note(self, row: FieldRow) -> None:
        extracted = (self.open_item.fields.get(row.name) or {}).get("value")
        now = self.open_item.values.get(row.name)
        if row.name in {c.field for c in self.open_item.corrections} and now != extracted:
            row.note.text = f"corrected · extracted: {review_values.show(extracted, row.kind, self.style) or '—'}"
        elif row.name in self.accepted:
            row.note.text = "accepted"
        else:
            evidence = (self.open_item.fields.get(row.name) or {}).get("evidence")
            row.note.text = f"page: “{evidence['text']}”" if isinstance(evidence, dict) and evidence.get("text") else ""
        row.note.set_visibility(bool(row.note.text))
        row.box.classes(add="accepted") if row.name in self.accepted else row.box.classes(remove="accepted")

    async def select(self, index: int, *, focus: bool = False) -> None:
        if not self.names:
            return
        index = max(0, min(index, len(self.names) - 1))
        previous = self.rows.get(self.names[self.selected]) if self.selected < len(self.names) else None
        if previous is not None:
            previous.box.classes(remove="selected")
        self.selected = index
        row = self.rows[self.names[index]]
        row.box.classes(add="selected")
        row.box.run_method("scrollIntoView", {"block": "nearest"})
        if self.viewer is not None:
            await self.viewer.select(row.name)
        if focus:
            row.input.run_method("focus")

    async def commit(self, name: str) -> bool:
        """Saves a field whose text changed; accepts it either way. False on a refused value."""
        row = self.rows[name]
        row.error.set_visibility(False)
        if not self.mine:
            return False
        text = row.input.value or ""
        if text != self.current_text(name):
            try:
                self.item = await reviews.save(self.pool, self.settings, self.open_item.id, self.open_item.claim_token,
                                               self.who.actor, {name: text})
            except reviews.FieldError as exc:
                row.error.text = exc.message
                row.error.set_visibility(True)
                return False
            except StaleReview as exc:
                self.lost(str(exc))
                return False
            row.input.value = self.current_text(name)
        self.accepted.add(name)
        self.show_note(row)
        return True

    async def commit_and_next(self, name: str) -> None:
        if await self.commit(name):
            row = self.rows[name]
            row.input.run_method("blur")
            await self.select(self.names.index(name) + 1)

    async def cancel_edit(self, name: str) -> None:
        row = self.rows[name]
        row.input.value = self.current_text(name)
        row.error.set_visibility(False)
        row.input.run_method("blur")

    async def on_pick(self, text: str, _box: object) -> None:
        """Text clicked on the page goes into the selected field, ready to save with Enter."""
        if not self.names or not self.mine:
            return
        row = self.rows[self.names[self.selected]]
        row.input.value = text
        row.input.run_method("focus")

    # Decisions ----------------------------------------------------------------------------------

    def lost(self, message: str) -> None:
        self.stale = message
        self.mine = False
        self.banner.text = message
        self.banner.set_visibility(True)
        self.approve_button.set_enabled(False)
        ui.notify(message, type="warning", position="top")

    def pending(self) -> dict[str, str]:
        return {name: row.input.value or "" for name, row in self.rows.items()
                if (row.input.value or "") != self.current_text(name)}

    async def approve(self) -> None:
        await self.decide(ReviewStatus.APPROVED)

    def open_reject(self) -> None:
        if self.mine:
            self.reject_note.value = ""
            self.dialog.open()

    async def reject(self) -> None:
        # Focus leaves the note first: the closing dialog would keep it, and the next keys typed into it.
        self.reject_note.run_method("blur")
        self.dialog.close()
        await self.decide(ReviewStatus.REJECTED, note=(self.reject_note.value or "").strip() or None)

    async def decide(self, status: ReviewStatus, *, note: str | None = None) -> None:
        if not self.mine or self.item is None or self.deciding:
            return
        self.deciding = True
        try:
            await self._decide(status, note)
        finally:
            self.deciding = False

    async def _decide(self, status: ReviewStatus, note: str | None) -> None:
        try:
            await reviews.decide(self.pool, self.open_item.id, self.open_item.claim_token, self.who.actor, status,
                                 values=self.pending() if status is ReviewStatus.APPROVED else {}, note=note)
        except reviews.FieldError as exc:
            row = self.rows.get(exc.field)
            if row is not None:
                row.error.text = exc.message
                row.error.set_visibility(True)
                await self.select(self.names.index(exc.field))
            return
        except StaleReview as exc:
            self.lost(str(exc))
            return
        self.reviewed += 1
        ui.notify(f"{'Approved' if status is ReviewStatus.APPROVED else 'Rejected'}: "
                  f"{self.open_item.document_name or self.open_item.task_id}", type="positive", position="bottom-right",
                  timeout=1500)
        await self.open_next()

    async def skip(self) -> None:
        if self.mine and self.item is not None:
            await reviews.release(self.pool, self.item.id, self.item.claim_token, self.who.actor)
            skipped = self.item.id
            await self.open_next()
            if self.item is not None and self.item.id == skipped:
                await self.render()

    async def open_next(self) -> None:
        self.stale = None
        self.item = await reviews.claim_next(self.pool, self.settings, self.who.actor, self.flt) \
            if self.who.reviewer else None
        self.mine = self.item is not None
        if self.item is not None:
            ui.navigate.history.replace(f"/review/{self.item.task_id}")
        await self.render()

    # Keys and live updates ----------------------------------------------------------------------

    async def on_key(self, event: KeyEventArguments) -> None:
        if not event.action.keydown or self.item is None:
            return
        key, mods = event.key, event.modifiers
        if key.enter and (mods.ctrl or mods.meta):
            await self.approve()
        elif key.arrow_down or (key.name == "j" and not mods.ctrl):
            await self.select(self.selected + 1)
        elif key.arrow_up or (key.name == "k" and not mods.ctrl):
            await self.select(self.selected - 1)
        elif key.enter or key.name == "e":
            await self.select(self.selected, focus=True)
        elif key.space or key.name == "a":
            if self.names and await self.commit(self.names[self.selected]):
                await self.select(self.selected + 1)
        elif key.name == "R" and mods.shift:
            self.open_reject()
        elif key.name == "S" and mods.shift:
            await self.skip()
        elif key.page_down and self.viewer:
            await self.viewer.show(self.viewer.page + 1)
        elif key.page_up and self.viewer:
            await self.viewer.show(self.viewer.page - 1)

    async def keep_lease(self) -> None:
        if self.mine and self.item is not None and not await reviews.extend(
                self.pool, self.settings, self.item.id, self.item.claim_token, self.who.actor):
            self.lost("Your claim on this document ended (re-extracted, decided or taken over). "
                          "Nothing more will be saved.")

    def watch(self) -> None:
        """Tells the reviewer at once when someone else decides or re-extracts the document held."""
        sub = live.current().subscribe_reviews(max_events=500)
        ui.context.client.on_delete(sub.close)

        async def tick() -> None:
            if not sub.pending:
                return
            items, _ = sub.drain()
            held = self.item
            if held is None or not self.mine or self.deciding:
                return  # (this reviewer's own decision is no news to them)
            if any(i.get("r") == held.id and i.get("k") in NEWS
                   for i in items):
                current = await reviews.read(self.pool, held.id)
                if self.item is not held or self.deciding:
                    return  # the reviewer moved on meanwhile
                if current.status is not ReviewStatus.OPEN or current.claim_token != held.claim_token:
                    self.lost(self.read_only_reason(current) if current.status is not ReviewStatus.SUPERSEDED
                              else f"This document was re-extracted meanwhile ({current.decision_note}). "
                                   "Nothing more will be saved here.")
        ui.timer(0.5, tick)
        ui.timer(60.0, self.keep_lease)
