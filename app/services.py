"""Operations shared by the pages and the HTTP API, run off the event loop over the pool."""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Literal

from psycopg_pool import ConnectionPool

from app import figure_cache
from app.figure_cache import in_thread as _in_thread
from app.documents import CheckedDocument, DocumentRejected, check_files, readable_where_it_runs, store_document
from schema import queue, rollups, stats, waiting
from schema.errors import InvalidArgument, InvalidTransition, NotFound, QuireError, UnknownAgent
from schema.models import (DEFAULT_PRIORITY, MAX_DOCUMENT_NAME_CHARS, MAX_NAME_CHARS, TERMINAL_STATUSES, Agent, Task,
                           TaskStatus)
from schema.settings import Settings, get_settings
from schema.stats import Charts, StreamEvent, Summary, TaskCount, TaskFilter, TaskRow

SAMPLES_DIR = Path(__file__).with_name("samples")
SAMPLES_SUBMITTER = "samples"


STATUSES = [s.value for s in TaskStatus] + [stats.HELD]  # the filter's: held is queued and held for review
MAX_ID = 2**63 - 1  # ids are bigint


def valid_id(value: int) -> bool:
    """Whether an id can name a row at all (a bigint of at least 1)."""
    return 1 <= value <= MAX_ID


def check_text(what: str, value: str | None, longest: int | None = None) -> None:
    """ValueError for text Postgres cannot store (a NUL character), that is not valid Unicode, or
    that is longer than `longest` characters."""
    if value is None:
        return
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character")
    if longest is not None and len(value) > longest:
        raise ValueError(f"{what[:1].upper()}{what[1:]} is too long: at most {longest:,} characters, "
                         f"not {len(value):,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode") from None


# Dates a filter may name: tasks exist only within these (the callback contract's clock bounds too).
FIRST_DATE, LAST_DATE = date(2000, 1, 1), date(2199, 12, 31)
_DATE_BOUNDS = f"a date from {FIRST_DATE:%Y-%m-%d} to {LAST_DATE:%Y-%m-%d}"


def _moment(value: str | None, *, end: bool) -> datetime | None:
    """An ISO date or datetime from FIRST_DATE to LAST_DATE; a plain date as an end bound includes
    that whole day."""
    if not value:
        return None
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            moment = datetime.combine(day, time(), tzinfo=timezone.utc)
        else:
            moment = datetime.fromisoformat(value)
            moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
        day = moment.astimezone(timezone.utc).date()
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"Dates must be {_DATE_BOUNDS} (ISO, like 2026-03-01): not {value[:40]!r}") from exc
    if not FIRST_DATE <= day <= LAST_DATE:
        raise ValueError(f"Dates must be {_DATE_BOUNDS}: not {value[:40]!r}")
    return moment + timedelta(days=1) if end and len(value) == 10 else moment


def make_filter(date_from: str | None = None, date_to: str | None = None, statuses: list[str] | None = None,
                agents: list[str] | None = None, customers: list[str] | None = None,
                needs_review: bool = False) -> TaskFilter:
    """A TaskFilter from loosely typed inputs (query strings, form controls); ValueError if invalid."""
    for what, values in (("status", statuses), ("agent", agents), ("customer", customers),
                         ("date", [date_from, date_to])):
        for value in values or ():
            check_text(what, value)
    unknown = set(statuses or ()) - set(STATUSES)
    if unknown:
        raise ValueError(f"unknown status {', '.join(sorted(unknown))}: use {', '.join(STATUSES)}")
    start, end = _moment(date_from, end=False), _moment(date_to, end=True)
    if start is not None and end is not None and start >= end:
        raise ValueError(f"“from” ({date_from}) is after “to” ({date_to}): no task can match")
    return TaskFilter(date_from=start, date_to=end,
                      statuses=tuple(statuses or ()), agents=tuple(a for a in agents or () if a),
                      customers=tuple(c for c in customers or () if c), needs_review=bool(needs_review))


# -- reading ------------------------------------------------------------------------------------

async def summary(pool: ConnectionPool, flt: TaskFilter) -> Summary:
    return await _in_thread(pool, stats.stats_summary_filtered, flt)


async def charts(pool: ConnectionPool, flt: TaskFilter) -> Charts:
    """Chart data; the filter's time span picks the throughput bucket."""
    return await _in_thread(pool, stats.stats_charts_filtered, flt)


async def task_page(pool: ConnectionPool, flt: TaskFilter, *, sort: str, descending: bool,
                    after: tuple[Any, int] | None, per_page: int) -> tuple[list[TaskRow], tuple[Any, int] | None]:
    """One keyset page of the task table and the cursor of the next (None on the last page)."""
    return await _in_thread(pool, stats.task_list_keyset, flt, sort=sort, descending=descending,
                            after=after, limit=per_page)


async def task_count(pool: ConnectionPool, flt: TaskFilter) -> TaskCount:
    return await _in_thread(pool, stats.task_count, flt)


def catching_up_note(summary: Summary) -> str | None:
    """The words shown while a backlog is folded in the background (None when the figures are exact)."""
    if not summary.catching_up:
        return None
    since = f" since {summary.as_of:%Y-%m-%d %H:%M:%S} UTC" if summary.as_of else ""
    # Past the bound the number is the table's estimate, which may lag a fresh bulk load.
    waiting = (f"about {summary.backlog:,}" if summary.backlog > rollups.PENDING_EXACT_MAX + 1
               else f"more than {rollups.PENDING_EXACT_MAX:,}")
    return (f"Catching up: {waiting} changes{since} are not counted yet; "
            "the figures count what is folded so far.")


# -- what open pages read: shared by every page of the process (app.figure_cache) ---------------
# Each returns (value, current): current means read after `since` (time.monotonic() of the events
# the page saw; by default the ask itself). A value not current was served to keep the database to
# one read a second: the page asks again a second later.

async def live_summary(pool: ConnectionPool, flt: TaskFilter, *, since: float | None = None,
                       exact: bool = False) -> tuple[Summary, bool]:
    """Pages: as of the last fold. API clients: exact (the marks not folded yet added), shared a second."""
    return await figure_cache.for_pool(pool).summary(flt, since=since, exact=exact)


async def live_charts(pool: ConnectionPool, flt: TaskFilter, *, since: float | None = None,
                      exact: bool = False) -> tuple[Charts, bool]:
    return await figure_cache.for_pool(pool).charts(flt, since=since, exact=exact)


async def live_task_page(pool: ConnectionPool, flt: TaskFilter, *, sort: str, descending: bool,
                         after: tuple[Any, int] | None, per_page: int, since: float | None = None,
                         ) -> tuple[tuple[list[TaskRow], tuple[Any, int] | None], bool]:
    """A page of the task table and its next cursor, shared by every page showing the same one."""
    return await figure_cache.for_pool(pool).shared(
        ("task_page", flt, sort, descending, after, per_page),
        lambda: task_page(pool, flt, sort=sort, descending=descending, after=after, per_page=per_page),
        since=since)


async def live_task_count(pool: ConnectionPool, flt: TaskFilter, *,
                          since: float | None = None) -> tuple[TaskCount, bool]:
    return await figure_cache.for_pool(pool).shared(("task_count", flt), lambda: task_count(pool, flt), since=since)


async def live(pool: ConnectionPool, name: str, read: Callable[[], Any], *,
               since: float | None = None) -> tuple[Any, bool]:
    """Any other read every open page repeats (agents, budgets, filter options)."""
    return await figure_cache.for_pool(pool).shared((name,), read, since=since)


def forget_live(pool: ConnectionPool) -> None:
    """After an operator's action: every page's next ask goes to the database."""
    figure_cache.for_pool(pool).forget()


async def tasks_before(pool: ConnectionPool, flt: TaskFilter, *, before_id: int | None,
                       limit: int) -> list[TaskRow]:
    return await _in_thread(pool, stats.task_list_after, flt, before_id=before_id, limit=limit)


def _task_with_wait_reason(conn, task_id: int) -> Task:
    return waiting.with_wait_reasons(conn, [queue.get_task(conn, task_id)])[0]


async def task_detail(pool: ConnectionPool, task_id: int) -> Task:
    """One task with its attempts and timeline, and why it waits if it is enqueued."""
    return await _in_thread(pool, _task_with_wait_reason, task_id)


async def pause_agent(pool: ConnectionPool, agent: str, *, actor: str, until: datetime | None = None,
                      reason: str | None = None) -> Agent:
    """Pauses an agent: running tasks finish, nothing new starts until `until` or a resume."""
    check_text("reason", reason)
    if until is not None and until.tzinfo is None:
        until = until.replace(tzinfo=timezone.utc)
    agent_row = await _in_thread(pool, queue.pause_agent, agent, actor=actor, until=until, reason=reason)
    forget_live(pool)
    return agent_row


async def resume_agent(pool: ConnectionPool, agent: str) -> Agent:
    """Ends an agent's pause at once."""
    agent_row = await _in_thread(pool, queue.resume_agent, agent)
    forget_live(pool)
    return agent_row


async def agents(pool: ConnectionPool) -> list[Agent]:
    """Every configured agent (its limits, pause and problems)."""
    return await _in_thread(pool, queue.list_agents)


async def batch_status(pool: ConnectionPool, ids: list[int]) -> dict[int, dict[str, Any]]:
    rows = await _in_thread(pool, stats.task_list_by_ids, ids)
    return {r["id"]: r for r in rows}


async def filter_options(pool: ConnectionPool) -> dict[str, list[str]]:
    return await _in_thread(pool, stats.stats_filter_options)


async def adaptive_limits(pool: ConnectionPool) -> list[str]:
    """One line per agent running at adaptive limits after rate limits: effective vs configured."""
    lines = []
    for a in await _in_thread(pool, queue.list_agents):
        if a.effective_tpm is None and a.effective_concurrency is None:
            continue
        parts = []
        if a.effective_tpm is not None:
            parts.append(f"{a.effective_tpm:,} of {a.max_tpm:,} TPM" if a.max_tpm else f"{a.effective_tpm:,} TPM")
        if a.effective_concurrency is not None:
            parts.append(f"{a.effective_concurrency} of {a.max_concurrent_tasks} at once" if a.max_concurrent_tasks
                         else f"{a.effective_concurrency} at once")
        lines.append(f"{a.name}: {', '.join(parts)} after {a.rate_limited_total:,} rate limits")
    return lines


async def agent_names(pool: ConnectionPool) -> list[str]:
    agents = await _in_thread(pool, queue.list_agents)
    return [a.name for a in agents]


async def agent_config_errors(pool: ConnectionPool) -> dict[str, str]:
    """Agents that cannot run (misconfigured, or halted), with the reason; their tasks wait."""
    agents = await _in_thread(pool, queue.list_agents)
    return {a.name: a.cannot_run for a in agents if a.cannot_run}


async def halted_agents(pool: ConnectionPool) -> dict[str, str]:
    """Agents halted on what their runs showed, with the reason; an operator may clear each."""
    agents = await _in_thread(pool, queue.list_agents)
    return {a.name: a.halt_reason for a in agents if a.halt_reason}


async def clear_agent_halt(pool: ConnectionPool, agent: str) -> bool:
    """Lets a halted agent's tasks be claimed again; False if it was not halted."""
    return await _in_thread(pool, queue.clear_agent_halt, agent)


async def events_after(pool: ConnectionPool, after_id: int, *, limit: int = 1000) -> list[StreamEvent]:
    return await _in_thread(pool, stats.task_events_after, after_id, limit=limit)


async def snapshot(pool: ConnectionPool) -> dict[str, Any]:
    """What an SSE client starts from: the newest event id and the counts per agent and status."""
    def read(conn):
        return {"last_event_id": stats.task_events_last_id(conn), "counts": stats.status_counts(conn)}
    return await _in_thread(pool, read)


@dataclass(frozen=True)
class ComputeCost:
    """Compute spend for a filter, and where the figure came from."""

    cost_usd: Decimal | None
    source: Literal["billing", "measured"]
    detail: str


def warehouse_id() -> str | None:
    """The SQL warehouse for billing queries (QUIRE_WAREHOUSE_ID); unset means no billing tables."""
    return get_settings().warehouse_id


async def compute_cost(pool: ConnectionPool, flt: TaskFilter) -> ComputeCost:
    """Compute spend recorded per attempt: measured locally, or billed per Databricks job run."""
    measured = await _in_thread(pool, stats.stats_compute_measured_filtered, flt)
    seconds = measured["compute_seconds"] or 0.0
    pending = measured["attempts_pending"] or 0
    if warehouse_id():
        # The worker's billing reconciler writes each job run's DBUs and cost as billing has them.
        notes = [f"{pending} job runs pending billing"]
        for key, what in (("attempts_provisional", "not final yet"), ("attempts_unbilled", "never billed"),
                          ("attempts_unpriced", "with DBUs that have no list price")):
            if measured[key]:
                notes.append(f"{measured[key]} {what}")
        return ComputeCost(cost_usd=measured["compute_cost_usd"] or Decimal(0), source="billing",
                           detail=f"{measured['attempts_measured']} of {measured['attempts']} attempts billed, "
                                  f"{float(measured['dbus'] or 0):,.2f} DBU at list price; " + "; ".join(notes)
                                  + "; cloud VM cost of classic clusters is not included")
    return ComputeCost(cost_usd=measured["compute_cost_usd"] or Decimal(0), source="measured",
                       detail=f"{measured['attempts_measured']} of {measured['attempts']} attempts measured, "
                              f"{seconds / 60:,.1f} min of run time"
                              + (f"; {pending} job runs pending billing" if pending else ""))


# -- operator actions ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ActionResult:
    """The outcome of retrying or cancelling one task."""

    task_id: int
    ok: bool
    message: str
    new_task_id: int | None = None
    status: str | None = None
    not_found: bool = False
    invalid: bool = False     # the request itself was wrong (an unknown extractor, say)


def _act(conn, ids: list[int], action: str, actor: str, priority: int | None = None,
         edit: dict[str, str | None] | None = None) -> list[ActionResult]:
    results = []
    for task_id in ids:
        try:
            if action == "retry":
                task = queue.retry(conn, task_id, actor=actor, priority=priority, **(edit or {}))
                text = (f"task {task_id} re-extracted as task {task.id}" if task.id != task_id
                        else f"task {task_id} re-enqueued")
            else:
                task = queue.cancel(conn, task_id, actor=actor)
                text = f"task {task_id} cancelled"
            results.append(ActionResult(task_id, True, text, new_task_id=task.id, status=task.status.value))
        except InvalidTransition as exc:
            results.append(ActionResult(task_id, False, str(exc)))
        except UnknownAgent as exc:
            results.append(ActionResult(task_id, False, str(exc), invalid=True))
        except NotFound as exc:
            results.append(ActionResult(task_id, False, str(exc), not_found=True))
        except InvalidArgument as exc:
            results.append(ActionResult(task_id, False, str(exc), invalid=True))
    return results


async def retry_tasks(pool: ConnectionPool, ids: list[int], *, actor: str, priority: int | None = None,
                      agent: str | None = None, extractor: str | None = None,
                      model: str | None = None) -> list[ActionResult]:
    """Retries each task (at `priority` if given, else its own); a completed task gets a re-extraction
    child. An agent, extractor or model given makes it an edit and retry, recorded on the task."""
    edit = {"agent": agent, "extractor": extractor, "model": model}
    return await _in_thread(pool, _act, ids, "retry", actor, priority, edit)


async def cancel_tasks(pool: ConnectionPool, ids: list[int], *, actor: str) -> list[ActionResult]:
    return await _in_thread(pool, _act, ids, "cancel", actor)


# A bulk action over the whole filter acts on at most this many tasks at once (it says so).
BULK_MAX = 10_000
# Retry takes every ended task (the terminal set); cancel every live one.
BULK_STATES = {"retry": tuple(sorted(s.value for s in TERMINAL_STATUSES)),
               "cancel": (TaskStatus.ENQUEUED.value, TaskStatus.PROCESSING.value)}


@dataclass(frozen=True)
class BulkPreview:
    """What a bulk action over the whole filter would touch, counted before anything is done."""

    action: str
    ids: list[int]
    statuses: dict[str, int]
    capped: bool              # more tasks match than BULK_MAX: the first BULK_MAX (by id) are taken

    @property
    def count(self) -> int:
        return len(self.ids)


async def bulk_preview(pool: ConnectionPool, flt: TaskFilter, action: str) -> BulkPreview:
    """The tasks a retry or cancel of everything the filter selects applies to (every page)."""
    if action not in BULK_STATES:
        raise ValueError(f"unknown bulk action {action!r}: use retry or cancel")
    rows = await _in_thread(pool, stats.task_ids_for_bulk_list, flt, BULK_STATES[action], limit=BULK_MAX + 1)
    counts: dict[str, int] = {}
    for _, status in rows[:BULK_MAX]:
        counts[status] = counts.get(status, 0) + 1
    return BulkPreview(action, [i for i, _ in rows[:BULK_MAX]], counts, len(rows) > BULK_MAX)


# -- submitting ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Upload:
    """A file as it arrived: its name, and its bytes in memory or spooled to a file on disk."""

    name: str
    data: bytes | None = None
    size: int | None = None  # the full size, when only the first bytes past the limit were kept
    path: Path | None = None  # the spooled file; the caller removes it after submitting


SPOOL_CHUNK = 1 << 20


async def spool(chunks, path: Path, limit: int) -> int:
    """Writes a stream of chunks to `path`, up to `limit + 1` bytes (enough to refuse a file past
    the limit); returns the bytes written. Memory holds one chunk."""
    written = 0
    with open(path, "wb") as handle:
        async for chunk in chunks:
            piece = chunk[:limit + 1 - written]
            await asyncio.to_thread(handle.write, piece)
            written += len(piece)
            if written > limit:
                break
    return written


def copy_stored(uri: str, target: Path) -> None:
    """Copies a document stored in a Unity Catalog Volume to a local file, a chunk at a time."""
    import shutil

    from databricks.sdk import WorkspaceClient

    download = WorkspaceClient().files.download(uri)
    with download.contents as stream, open(target, "wb") as out:
        shutil.copyfileobj(stream, out, SPOOL_CHUNK)


def check_uploads(settings: Settings, uploads: list[Upload], workdir: Path,
                  ) -> list[CheckedDocument | DocumentRejected]:
    """Each upload checked (app.documents.check_files); bytes in memory are written under `workdir` first."""
    files = []
    for n, upload in enumerate(uploads):
        path = upload.path
        if path is None:
            path = workdir / f"{n}.pdf"
            path.write_bytes(upload.data or b"")
        files.append((upload.name, path, upload.size))
    return check_files(files, max_bytes=settings.max_upload_mb * 1_000_000)


@dataclass(frozen=True)
class SubmitOptions:
    agent: str
    priority: int = DEFAULT_PRIORITY
    customer: str | None = None
    rerun_duplicates: bool = False
    parent_id: int | None = None
    batch_id: int | None = None
    held: bool = False          # stored and enqueued, not claimable until the batch is released


@dataclass
class SubmitResult:
    """What became of one file: created, rejected (with the reason) or a duplicate (with its match)."""

    name: str
    outcome: Literal["created", "rejected", "duplicate"]
    task_id: int | None = None
    error: str | None = None
    sha256: str | None = None
    pages: int | None = None
    duplicate_of: dict[str, Any] | None = None
    einvoice: str | None = None   # the e-invoice standard the file is or embeds
    duplicate_uri: str | None = None  # where the offered task's document is stored (never shown)
    scanned: bool = False         # no text layer: its pages go through OCR


def check_submission(names: list[str], options: SubmitOptions) -> None:
    """ValueError, before anything is read or written, for a request Postgres could not store."""
    check_text("the agent name", options.agent, MAX_NAME_CHARS)
    check_text("the customer", options.customer, MAX_NAME_CHARS)
    for name in names:
        check_text(f"the file name {name[:80]!r}", name, MAX_DOCUMENT_NAME_CHARS)


def submit_documents(conn, settings: Settings, uploads: list[Upload], options: SubmitOptions,
                     submitted_by: str, checked: list[CheckedDocument | DocumentRejected] | None = None,
                     ) -> list[SubmitResult]:
    """The one submit path (UI, API, CLI): checks every file, offers duplicates, enqueues the rest at once.

    `checked` is check_uploads' answer when the caller ran it already (off the connection).
    ValueError, with nothing written, when the request itself cannot be stored (see check_submission).
    """
    check_submission([u.name for u in uploads], options)
    try:
        agent = queue.get_agent(conn, options.agent)
    except NotFound as exc:
        return [SubmitResult(u.name, "rejected", error=str(exc)) for u in uploads]
    with tempfile.TemporaryDirectory(prefix="quire-submit-", dir=spool_root(settings)) as workdir:
        if checked is None:
            checked = check_uploads(settings, uploads, Path(workdir))
        checked = [readable_where_it_runs(doc, agent.executor) for doc in checked]
        return _enqueue_checked(conn, settings, uploads, checked, options, submitted_by)


def _enqueue_checked(conn, settings: Settings, uploads: list[Upload],
                     checked: list[CheckedDocument | DocumentRejected], options: SubmitOptions,
                     submitted_by: str) -> list[SubmitResult]:
    results: list[SubmitResult] = []
    accepted: list[tuple[SubmitResult, CheckedDocument]] = []
    # Every file is checked before anything is written, so a bad file leaves no trace.
    for upload, doc in zip(uploads, checked):
        if isinstance(doc, DocumentRejected):
            results.append(SubmitResult(upload.name, "rejected", error=str(doc)))
        else:
            results.append(SubmitResult(upload.name, "created", sha256=doc.sha256, pages=doc.pages,
                                        einvoice=doc.einvoice, scanned=bool(doc.pages) and not doc.chars))
            accepted.append((results[-1], doc))
    # Looked up on a re-run too: the new task is linked to the one it repeats. Only the same
    # customer's documents are offered: another customer's task and result are none of theirs.
    earlier = stats.task_find_by_sha256(conn, [d.sha256 for _, d in accepted], customer=options.customer)
    fresh: dict[str, tuple[SubmitResult, CheckedDocument]] = {}
    copies: list[tuple[SubmitResult, str]] = []
    for result, doc in accepted:
        match = earlier.get(doc.sha256)
        if match is not None and not options.rerun_duplicates:
            result.outcome, result.duplicate_of = "duplicate", _jsonable(match)
            result.duplicate_uri = match["document_uri"]
        elif doc.sha256 in fresh and not options.rerun_duplicates:
            copies.append((result, doc.sha256))  # a second copy in this batch: a duplicate of the first
        else:
            fresh[f"{doc.sha256}:{len(fresh)}" if options.rerun_duplicates else doc.sha256] = (result, doc)
    if not fresh:
        return results
    entries = [dict(agent=options.agent, document_uri=store_document(settings.files_path, doc),
                    priority=options.priority, customer=options.customer or None, document_name=doc.name,
                    document_sha256=doc.sha256, pages=doc.pages, document_bytes=doc.size,
                    document_chars=doc.chars,
                    # An e-invoice is read from its XML: it reserves no model tokens.
                    **({"estimated_tokens": 1} if doc.einvoice else {}),
                    parent_id=options.parent_id or (earlier.get(doc.sha256) or {}).get("id"),
                    batch_id=options.batch_id, held=options.held, scanned=bool(doc.pages) and not doc.chars)
               for _, doc in fresh.values()]
    try:
        tasks = queue.enqueue_many(conn, entries, submitted_by=submitted_by)
    except BaseException as exc:
        _discard_unreferenced(conn, [(e["document_uri"], doc.sha256) for e, (_, doc) in zip(entries, fresh.values())])
        if not isinstance(exc, QuireError):
            raise
        for result, _ in fresh.values():
            result.outcome, result.error = "rejected", str(exc)
        for result, _ in copies:
            result.outcome, result.error = "rejected", str(exc)
        return results
    created: dict[str, Task] = {}
    for (result, doc), task in zip(fresh.values(), tasks):
        result.task_id = task.id
        created.setdefault(doc.sha256, task)
    for result, sha in copies:
        task = created[sha]
        result.outcome = "duplicate"
        result.duplicate_of = {"id": task.id, "status": task.status.value, "document_name": task.document_name,
                               "confidence": None, "created_at": task.created_at.isoformat()}
    return results


def _discard_unreferenced(conn, stored: list[tuple[str, str]]) -> None:
    """Removes the files a failed enqueue stored that no task refers to (a local data dir only): a
    refused request leaves nothing behind. Best effort: the original error is what the caller sees."""
    try:
        referenced = stats.task_sha256_in_use(conn, [sha for _, sha in stored])
    except Exception:
        return
    for uri, sha in stored:
        path = Path(uri)
        if sha not in referenced and path.is_absolute() and not uri.startswith("/Volumes/"):
            path.unlink(missing_ok=True)


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row.items()
            if k not in ("document_sha256", "document_uri")}


async def submit(pool: ConnectionPool, settings: Settings, uploads: list[Upload], options: SubmitOptions, *,
                 submitted_by: str) -> list[SubmitResult]:
    """Checks every file, then stores and enqueues the good ones; duplicates are offered, not run.

    ValueError, with nothing written, when the request itself cannot be stored (see check_submission).
    """
    with tempfile.TemporaryDirectory(prefix="quire-submit-", dir=spool_root(settings)) as workdir:
        # Checked before a connection is taken: a slow or hostile file holds no database connection.
        checked = await asyncio.to_thread(check_uploads, settings, uploads, Path(workdir))
        return await _in_thread(pool, submit_documents, settings, uploads, options, submitted_by, checked)


def spool_root(settings: Settings) -> Path:
    """Where uploads are spooled while they are checked: beside the stored files when they are local,
    so storing one is a link, not a copy."""
    root = (settings.data_dir if str(settings.files_path).startswith("/Volumes/") else settings.files_path) / ".incoming"
    root.mkdir(parents=True, exist_ok=True)
    return root


def sample_documents() -> list[tuple[Upload, str | None]]:
    """The bundled sample PDFs with the customer each belongs to."""
    manifest_path = SAMPLES_DIR / "samples.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    return [(Upload(p.name, p.read_bytes()), manifest.get(p.name, {}).get("customer"))
            for p in sorted(SAMPLES_DIR.glob("*.pdf"))]


async def submit_samples(pool: ConnectionPool, settings: Settings) -> list[SubmitResult]:
    """Enqueues the bundled samples that were never submitted (same sha256 means already there)."""
    results: list[SubmitResult] = []
    for upload, customer in sample_documents():
        options = SubmitOptions(agent=settings.default_agent, customer=customer)
        results += await submit(pool, settings, [upload], options, submitted_by=SAMPLES_SUBMITTER)
    return results


# -- health and metrics -------------------------------------------------------------------------

async def database_ok(pool: ConnectionPool, *, timeout: float = 3.0) -> tuple[bool, str]:
    try:
        await asyncio.wait_for(_in_thread(pool, stats.health_ping), timeout)
        return True, "ok"
    except Exception as exc:  # any failure means unhealthy; the message says which
        return False, f"{type(exc).__name__}: {exc}".strip()


async def metrics_data(pool: ConnectionPool) -> dict[str, Any]:
    """What /metrics reads from the database: the rollups' totals and the queue's head per agent."""
    def read(conn):
        return {"totals": stats.stats_totals_all(conn), "queue": stats.stats_queue_health(conn)}
    return await _in_thread(pool, read)
