"""The upload page: drop many PDFs or e-invoices, choose agent, priority and customer, follow the batch live."""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from pathlib import Path
from typing import Literal

from fastapi import Request
from nicegui import app, events, ui

from app import foresight, services, submitting
from app.auth import no_submit_reason, submit_rights, viewer
from app.components.batch import BatchView, Entry
from app.components.due import Due
from app.components.forecast_panel import ForecastPanel
from app.components.layout import frame, watch
from app.documents import ACCEPTED_FILES
from schema.errors import InvalidTransition, NotFound
from schema.forecast import FileFacts, Forecast
from schema.models import DEFAULT_PRIORITY, TaskStatus
from schema.stats_types import StreamEvent

SLICE = 25
# Queue positions move with every claim anywhere: they are re-read at most this often.
POSITION_MIN_SECONDS = 1.0
# Held batches shown on the page at once (newest first); the dashboard lists them all.
MAX_SHOWN = 20
FORECAST_FIELDS = frozenset(f.name for f in dataclasses.fields(Forecast))
PRIORITIES = {9: "9 · urgent", 7: "7 · high", 5: "5 · normal", 3: "3", 0: "0 · bulk"}


def _rerun_upload(result: submitting.SubmitResult) -> submitting.Upload | None:
    """A duplicate's bytes are the offered task's stored document: a re-run reads that file."""
    uri = result.duplicate_uri
    return submitting.Upload(result.name, path=Path(uri.removeprefix("file://"))) if uri else None


class UploadForm:
    """The submission form and the batch it produces."""

    def __init__(self, who, agents: list[str], customers: list[str]) -> None:
        self.who = who
        self.rights = submit_rights(who, app.state.settings)
        self.pool = app.state.pool
        self.settings = app.state.settings
        self.toast: ui.notification | None = None
        with ui.row().classes("w-full items-end justify-between"), ui.column().classes("gap-0"):
            ui.label("Submit documents").classes("text-2xl font-semibold text-slate-900")
            ui.label("Invoices, contracts and financial statements as PDF; e-invoices as XML (FatturaPA, "
                     "UBL, CII) or signed .p7m. Every file is checked before "
                     "anything is stored; a file submitted before is offered, not run twice.") \
                    .classes("quire-muted")
        if self.rights is None:
            ui.label(no_submit_reason(who) + ".").classes("quire-muted").props('data-testid="upload-refused"')
            self.batch = BatchView(self._rerun)
            self.panels: dict[int, ForecastPanel] = {}
            self.positions_due = Due(POSITION_MIN_SECONDS)
            return
        if self.rights.customers is not None:
            customers = sorted(self.rights.customers)
        with ui.card().classes("quire-card w-full p-5 gap-4"):
            with ui.row().classes("w-full gap-4 items-end flex-wrap"):
                default = (self.settings.default_agent if self.settings.default_agent in agents
                           else agents[0] if agents else None)
                self.agent = ui.select(agents, value=default, label="Agent") \
                    .props('outlined dense stack-label data-testid="upload-agent"').classes("w-56")
                priorities = {p: text for p, text in PRIORITIES.items() if p <= self.rights.max_priority}
                self.priority = ui.select(priorities, value=min(DEFAULT_PRIORITY, self.rights.max_priority),
                                          label="Priority") \
                    .props('outlined dense stack-label data-testid="upload-priority"').classes("w-44")
                self.customer = ui.input("Customer", autocomplete=customers,
                                         placeholder="e.g. Northwind Audit") \
                    .props('outlined dense stack-label clearable data-testid="upload-customer"').classes("w-64")
                # Only an operator may release a held batch: others' batches run at once.
                self.review = ui.switch("Review the forecast before it runs", value=who.operator) \
                    .props('data-testid="upload-review"')
                ui.space()
                ui.label(f"Up to {self.settings.max_upload_mb} MB per file").classes("text-sm quire-muted")
            self.uploader = ui.upload(multiple=True, auto_upload=True, label="PDF documents or e-invoice XML",
                                      max_file_size=self.settings.max_upload_mb * 1_000_000,
                                      max_files=self.settings.max_batch_files,
                                      on_rejected=self._refused_by_browser,
                                      on_begin_upload=self._begin, on_multi_upload=self._received) \
                .props(f'flat color=primary data-testid="uploader" accept="{ACCEPTED_FILES}"').classes("w-full")
            self.busy = ui.row().classes("items-center gap-2")
            with self.busy:
                ui.spinner(size="sm")
                self.busy_label = ui.label("Checking files…").classes("text-sm quire-muted")
            self.busy.visible = False
        self.batch = BatchView(self._rerun)
        self.panels = {}
        self.positions_due = Due(POSITION_MIN_SECONDS)

    def _options(self, **overrides) -> submitting.SubmitOptions:
        values = dict(agent=self.agent.value or self.settings.default_agent, priority=int(self.priority.value or 0),
                      customer=(self.customer.value or "").strip() or None)
        values.update(overrides)
        return submitting.SubmitOptions(**values)

    def _refused_by_browser(self) -> None:
        ui.notify(f"Some files were not sent: not a PDF, XML or .p7m file, larger than "
                  f"{self.settings.max_upload_mb} MB, or more than {self.settings.max_batch_files} at once.", type="warning", position="top")

    def _begin(self) -> None:
        self.busy_label.text = "Uploading and checking files…"
        self.busy.visible = True

    async def _received(self, event: events.MultiUploadEventArguments) -> None:
        created = rejected = 0
        options = self._options()
        hold = bool(self.review.value) and self.who.operator
        refusal = (no_submit_reason(self.who) if self.rights is None
                   else self.rights.refusal(self.who, options.customer, options.priority))
        if refusal:
            self.say(refusal, "negative")
            self.busy.visible = False
            self.uploader.reset()
            return
        try:
            submitting.check_submission([f.name for f in event.files], options)
            # Held while under review: the files are checked and stored, nothing runs until submitted.
            batch_id, _ = await foresight.open_batch(
                self.pool, self.settings, agent=options.agent, priority=options.priority, customer=options.customer,
                files=[FileFacts(document_bytes=f.size()) for f in event.files], held=hold, submitted_by=self.who.name)
            options = submitting.SubmitOptions(**{**options.__dict__, "batch_id": batch_id, "held": hold})
            facts: list[FileFacts] = []
            # Hundreds of files arrive in one drop: read and submit them a slice at a time, so
            # memory holds one slice of documents and the batch list fills in as it goes.
            for start in range(0, len(event.files), SLICE):
                files = event.files[start:start + SLICE]
                self.busy_label.text = f"Checking files {start + 1}–{start + len(files)} of {len(event.files)}…"
                limit = self.settings.max_upload_mb * 1_000_000
                # Each file is copied to disk a chunk at a time: memory never holds a whole document.
                with tempfile.TemporaryDirectory(prefix="quire-upload-",
                                                 dir=submitting.spool_root(self.settings)) as workdir:
                    uploads = []
                    for n, f in enumerate(files):
                        path = Path(workdir) / f"{n}.pdf"
                        await submitting.spool(f.iterate(), path, limit)
                        uploads.append(submitting.Upload(f.name, path=path, size=f.size()))
                    results = await submitting.submit(self.pool, self.settings, uploads, options,
                                                      submitted_by=self.who.name)
                # A duplicate can be run again on request, from the offered task's stored file.
                self.batch.add(results, {r.name: u for r in results
                                         if r.outcome == "duplicate" and (u := _rerun_upload(r))})
                created += sum(r.outcome == "created" for r in results)
                rejected += sum(r.outcome == "rejected" for r in results)
                facts += [r.file_facts() for r in results if r.outcome == "created"]
            if facts:
                self.busy_label.text = "Forecasting…"
                plan = await foresight.settle_forecast(self.pool, self.settings, batch_id, agent=options.agent,
                                                       priority=options.priority, files=facts,
                                                       customer=options.customer or None)
                with self.batch.forecasts:
                    self.panels[batch_id] = ForecastPanel(batch_id, plan, held=hold, operator=self.who.operator,
                                                          on_release=self._release, on_discard=self._discard)
                await self.refresh_positions(force=True)
            verb = "stored, held for review" if hold else "queued"
            duplicates = len(event.files) - created - rejected
            parts = [f"{created} of {len(event.files)} files {verb}"]
            parts += [f"{rejected} rejected"] if rejected else []
            parts += [f"{duplicates} already submitted"] if duplicates else []
            message = ", ".join(parts)
            warning = plan.warning if facts else None  # the agent cannot run, or is paused: say it now
            if warning:
                message += f". {warning}"
            self.say(message, "warning" if rejected or warning else ("info" if duplicates else "positive"))
        except ValueError as exc:  # a request Postgres could not store: nothing was written
            self.say(str(exc), "negative")
        finally:
            self.busy.visible = False
            self.uploader.reset()

    def say(self, message: str, kind: Literal["positive", "negative", "warning", "info"]) -> None:
        """One toast at a time: a new one replaces the last, so an outdated warning never lingers."""
        if self.toast is not None:
            self.toast.dismiss()
        self.toast = ui.notification(message, type=kind, position="top", timeout=5, close_button=True)

    async def _release(self, batch_id: int) -> bool:
        if not self.who.operator:
            ui.notify(f"Submitting needs the operator role; {self.who.name} is a viewer.", type="negative", position="top")
            return False
        released = await foresight.release_batch(self.pool, batch_id, actor=self.who.name)
        ui.notify(f"Batch {batch_id} submitted: {released} tasks may run now", type="positive", position="top")
        await self.refresh_positions(force=True)
        return True

    async def _discard(self, batch_id: int) -> bool:
        if not self.who.operator:
            ui.notify(f"Discarding needs the operator role; {self.who.name} is a viewer.", type="negative",
                      position="top")
            return False
        try:
            cancelled = await foresight.discard_batch(self.pool, batch_id, actor=self.who.name)
        except InvalidTransition:
            self.say(f"Batch {batch_id} is no longer held: it was submitted or discarded already.", "warning")
            return False
        self.say(f"Batch {batch_id} discarded: {cancelled} documents cancelled, nothing of it runs.", "info")
        await self.on_poll()
        return True

    async def show_batches(self, only: int | None = None) -> None:
        """Batches that outlive the page: every held batch (or the one asked for), with its files and
        forecast, so a reload never hides one."""
        ids = [only] if only is not None else [b.batch_id for b in await foresight.held_batches(self.pool)][:MAX_SHOWN]
        for batch_id in reversed(ids):
            try:
                outcome = await foresight.batch_outcome(self.pool, batch_id)
            except NotFound:
                self.say(f"There is no batch {batch_id}.", "warning")
                continue
            files = await foresight.batch_files(self.pool, batch_id)
            results = [submitting.SubmitResult(f["document_name"] or f"task {f['id']}", "created", task_id=f["id"],
                                               pages=f["pages"], scanned=f["scanned"]) for f in files]
            self.batch.add(results, {})
            self.batch.apply({f["id"]: f["status"] for f in files})
            plan = Forecast(**{k: v for k, v in outcome.forecast.items() if k in FORECAST_FIELDS})
            with self.batch.forecasts:
                self.panels[batch_id] = ForecastPanel(batch_id, plan, held=outcome.held, operator=self.who.operator,
                                                      on_release=self._release, on_discard=self._discard)
                if outcome.discarded:
                    self.panels[batch_id].show_state(held=False, operator=self.who.operator, discarded=True)
        if ids:
            await self.refresh_positions(force=True)

    async def refresh_positions(self, *, force: bool = False) -> None:
        """Re-reads the batch's queue positions and ETAs, at most once a second."""
        self.positions_due.mark()
        if not self.positions_due.take(force=force):
            return  # still marked: the timer picks it up within the second
        ids = self.batch.queued_ids()
        if ids:
            spots = await foresight.queue_spots(self.pool, self.settings, ids[:2000])
            self.batch.set_spots({i: " · ".join(x for x in (s.text, foresight.eta_text(s.eta_seconds, s.eta_low_seconds, s.eta_high_seconds)) if x)
                                  for i, s in spots.items()})
        for batch_id, panel in self.panels.items():
            if panel.comparison.visible:
                continue
            outcome = await foresight.batch_outcome(self.pool, batch_id)
            if outcome.done:
                panel.show_outcome(outcome.comparison())

    async def _rerun(self, entry: Entry) -> submitting.SubmitResult | None:
        if entry.upload is None or self.rights is None:
            return None
        refusal = self.rights.refusal(self.who, self._options().customer, self._options().priority)
        if refusal:
            self.say(refusal, "negative")
            return None
        earlier = (entry.result.duplicate_of or {}).get("id")
        with tempfile.TemporaryDirectory(prefix="quire-rerun-", dir=submitting.spool_root(self.settings)) as workdir:
            upload = entry.upload
            assert upload.path is not None  # what was submitted kept its file
            if not upload.path.is_file():  # stored in a Unity Catalog Volume: copied here a chunk at a time
                local = Path(workdir) / "document.pdf"
                await asyncio.to_thread(submitting.copy_stored, str(upload.path), local)
                upload = submitting.Upload(upload.name, path=local)
            results = await submitting.submit(self.pool, self.settings, [upload],
                                              self._options(rerun_duplicates=True, parent_id=earlier),
                                              submitted_by=self.who.name)
        result = results[0]
        if result.outcome != "created":
            self.say(result.error or "could not run it again", "negative")
            return None
        self.say(f"{result.name}: queued again as task {result.task_id}", "positive")
        return result

    async def on_events(self, events: list[StreamEvent], lagged: bool) -> None:
        mine = set(self.batch.task_ids())
        if lagged:
            await self.on_poll()
            return
        latest = {e.task_id: e.status.value for e in events if e.task_id in mine}
        if latest:
            if TaskStatus.FAILED.value in latest.values():
                await self.on_poll()  # the error text is not in the event
                return
            self.batch.apply(latest)
        if mine and events:
            # Any claim of the agent moves the batch's tasks up the queue, not only their own events.
            await self.refresh_positions(force=bool(latest))

    async def refresh_if_dirty(self) -> None:
        if self.positions_due.marked:
            await self.refresh_positions()

    async def on_poll(self) -> None:
        ids = self.batch.task_ids()
        if ids:
            rows = await services.batch_status(self.pool, ids)
            self.batch.apply({i: r["status"] for i, r in rows.items()}, {i: r["error"] for i, r in rows.items()})
            await self.refresh_positions(force=True)


@ui.page("/", title="Upload · Quire", response_timeout=20)
async def upload_page(request: Request, batch: int | None = None):
    who = viewer(request)
    agents = await services.agent_names(app.state.pool)
    customers = (await services.filter_options(app.state.pool))["customer"]
    with frame(who, active="upload"):
        form = UploadForm(who, agents, customers)
    await form.show_batches(only=batch)
    watch(form.on_events, form.on_poll)
    ui.timer(POSITION_MIN_SECONDS, form.refresh_if_dirty)
