"""The one submit path (pages, API, CLI): uploads spooled and checked, duplicates offered, the rest
stored and enqueued together."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from psycopg import Connection
from psycopg_pool import ConnectionPool

from app.documents import CheckedDocument, DocumentRejected, check_files, readable_where_it_runs, store_document
from app.figure_cache import in_thread
from app.inputs import check_text
from schema import queue, stats
from schema.errors import NotFound, QuireError
from schema.forecast import FileFacts
from schema.models import DEFAULT_PRIORITY, MAX_DOCUMENT_NAME_CHARS, MAX_NAME_CHARS, Task
from schema.settings import Settings

SAMPLES_DIR = Path(__file__).with_name("samples")
SAMPLES_SUBMITTER = "samples"

@dataclass(frozen=True)
class Upload:
    """A file as it arrived: its name, and its bytes in memory or spooled to a file on disk."""

    name: str
    data: bytes | None = None
    size: int | None = None  # the full size, when only the first bytes past the limit were kept
    path: Path | None = None  # the spooled file; the caller removes it after submitting


SPOOL_CHUNK = 1 << 20


async def spool(chunks: AsyncIterable[bytes], path: Path, limit: int) -> int:
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
    if download.contents is None:
        raise FileNotFoundError(f"the Volume sent no content for {uri}")
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
    ocr_work: float | None = None  # a scan's OCR work in standard pages (agents/scanwork.py)

    def file_facts(self) -> FileFacts:
        """What the batch forecast knows of this file."""
        return FileFacts(pages=self.pages, einvoice=bool(self.einvoice), scanned=self.scanned, ocr_work=self.ocr_work)


def check_submission(names: list[str], options: SubmitOptions) -> None:
    """ValueError, before anything is read or written, for a request Postgres could not store."""
    check_text("the agent name", options.agent, MAX_NAME_CHARS)
    check_text("the customer", options.customer, MAX_NAME_CHARS)
    for name in names:
        check_text(f"the file name {name[:80]!r}", name, MAX_DOCUMENT_NAME_CHARS)


def submit_documents(conn: Connection, settings: Settings, uploads: list[Upload], options: SubmitOptions,
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


def _enqueue_checked(conn: Connection, settings: Settings, uploads: list[Upload],
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
                                        einvoice=doc.einvoice, scanned=doc.scanned, ocr_work=doc.ocr_work))
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
    entries: list[Mapping[str, Any]]
    entries = [dict(agent=options.agent, document_uri=store_document(settings.files_path, doc),
                    priority=options.priority, customer=options.customer or None, document_name=doc.name,
                    document_sha256=doc.sha256, pages=doc.pages, document_bytes=doc.size,
                    document_chars=doc.chars,
                    # An e-invoice is read from its XML: it reserves no model tokens.
                    **({"estimated_tokens": 1} if doc.einvoice else {}),
                    parent_id=options.parent_id or (earlier.get(doc.sha256) or {}).get("id"),
                    batch_id=options.batch_id, held=options.held, scanned=doc.scanned, ocr_work=doc.ocr_work)
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


def _discard_unreferenced(conn: Connection, stored: list[tuple[str, str]]) -> None:
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
        return await in_thread(pool, submit_documents, settings, uploads, options, submitted_by, checked)


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
