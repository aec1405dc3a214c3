"""Checks uploaded documents by their bytes and stores them before any task row is written."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import selectors
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

PDF_MAGIC = b"%PDF-"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# PDFium refuses a document whose page tree is empty; these say the file is a valid PDF without pages.
_EMPTY_PAGE_TREE = re.compile(rb"/Count\s+0(?![0-9])")
_PAGE_OBJECT = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
MAX_STORED_NAME = 120
# Kept as given: PDFs, e-invoice XML and signed (.p7m) e-invoices; anything else is stored as .pdf.
STORED_SUFFIXES = (".pdf", ".xml", ".p7m")
# What the upload widgets offer to pick (the bytes decide what is accepted).
ACCEPTED_FILES = ".pdf,.xml,.p7m,application/pdf,text/xml,application/xml,application/pkcs7-mime"
EMPTY_TREE_WINDOW = 1_000_000
CHUNK = 1 << 20
_ROOT = str(Path(__file__).resolve().parent.parent)
# Checks running at once in this process: each child may take QUIRE_CHECK_MEMORY_MB.
CHECKS_AT_ONCE = 2
_CHECKS = threading.BoundedSemaphore(CHECKS_AT_ONCE)


class DocumentRejected(ValueError):
    """An upload that cannot become a task, with the reason a person can act on."""


@dataclass(frozen=True)
class CheckedDocument:
    """A document that passed the checks, with what the queue wants to know about it.

    Its bytes stay in `path`, a file the caller owns: nothing holds a whole document in memory.
    """

    name: str
    path: Path
    sha256: str
    pages: int
    size: int
    chars: int | None = None  # characters of the text layer (None: a scan without one)
    einvoice: str | None = None  # the e-invoice standard it is or embeds (Factur-X, FatturaPA, ...)
    ocr_work: float | None = None  # a scan's OCR work in standard pages (agents/scanwork.py)

    @property
    def scanned(self) -> bool:
        """No text layer: its pages go through OCR."""
        return bool(self.pages) and not self.chars


def megabytes(num_bytes: int, *, up: bool = False) -> str:
    """A size in MB with one decimal at most ("50", "52.4"); `up` rounds up instead of to the nearest."""
    tenths = num_bytes / 100_000
    tenths = math.ceil(tenths) if up else round(tenths)
    return f"{tenths / 10:g}"


# Why scans are refused for agents that run as Databricks jobs: serverless compute has no Tesseract.
SERVERLESS_SCANS = ("its agent runs as a Databricks serverless job, which has no OCR (Tesseract) to read "
                    "scans: upload a PDF with a text layer, or give the scans to an agent that runs on a "
                    "machine with Tesseract (executor \"local\")")


def scan_problem_for(executor: str) -> str | None:
    """Why scans cannot be read by an agent with this executor, or None when they can."""
    if executor == "databricks":
        return SERVERLESS_SCANS
    from agents.ocr import ocr_problem

    return ocr_problem()


def _too_big(name: str, size: int, max_bytes: int) -> DocumentRejected:
    shown = megabytes(size)
    if float(shown) <= max_bytes / 1e6:
        shown = megabytes(size, up=True)  # 50.04 MB reads "50.1", never "50 MB is over the 50 MB limit"
    return DocumentRejected(f"{name}: {shown} MB is over the {megabytes(max_bytes)} MB limit")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_files(files: list[tuple[str, Path, int | None]], *, max_bytes: int, executor: str | None = None,
                ) -> list[CheckedDocument | DocumentRejected]:
    """Checks each (name, path, full size) file: type by magic bytes, size, emptiness, then what
    reading it costs, its encryption and readability, in a process of its own (agents.limits).
    An e-invoice XML, or a signed (.p7m) one, is read here: it has no pages to render. Given the
    agent's `executor`, a scan is refused where that agent cannot read it (readable_where_it_runs)."""
    answers: list[CheckedDocument | DocumentRejected | None] = [None] * len(files)
    pending: list[tuple[int, Path]] = []  # (file, the PDF to inspect: the file, or what a .p7m wraps)
    for i, (name, path, size) in enumerate(files):
        size = max(size or 0, path.stat().st_size)
        if not size:
            answers[i] = DocumentRejected(f"{name}: the file is empty")
        elif size > max_bytes:
            answers[i] = _too_big(name, size, max_bytes)
        else:
            with open(path, "rb") as handle:
                head = handle.read(1024)
            if head.lstrip().startswith(PDF_MAGIC):
                pending.append((i, path))
            else:
                try:
                    answers[i] = _check_structured(name, path, size)
                except DocumentRejected as exc:
                    answers[i] = exc
                except _WrappedPdf as wrapped:
                    pending.append((i, wrapped.path))
    inspected = inspect_files([pdf for _, pdf in pending])
    for (i, pdf), answer in zip(pending, inspected):
        name, path, _ = files[i]
        answers[i] = _judge(name, path, pdf, answer)
    if executor is not None:
        return [readable_where_it_runs(answer, executor) for answer in answers]  # type: ignore[arg-type]
    return answers  # type: ignore[return-value]


def readable_where_it_runs(doc: CheckedDocument | DocumentRejected, executor: str,
                           ) -> CheckedDocument | DocumentRejected:
    """The document, or its refusal when it is a scan and the agent's executor has no OCR: refused
    now rather than failing later in the agent."""
    if isinstance(doc, DocumentRejected) or not doc.scanned or doc.einvoice is not None:
        return doc
    problem = scan_problem_for(executor)
    if problem:
        return DocumentRejected(f"{doc.name}: the PDF is a scanned image without text, and {problem}")
    return doc


class _WrappedPdf(Exception):
    """A signed (.p7m) file around a PDF: the PDF, unwrapped to `path`, is checked like any other."""

    def __init__(self, path: Path):
        super().__init__(str(path))
        self.path = path


def _check_structured(name: str, path: Path, size: int) -> CheckedDocument:
    """An e-invoice XML (FatturaPA, UBL, CII), possibly signed (.p7m); refused with the reason otherwise."""
    from agents.einvoice import looks_like_xml, read_einvoice
    from agents.errors import DocumentError
    from agents.signed import looks_signed, unwrap_p7m

    content = path.read_bytes()  # at most the upload limit; an XML is parsed whole anyway
    try:
        if not looks_like_xml(content) and looks_signed(content):
            content = unwrap_p7m(content, name)
            if content[:1024].lstrip().startswith(PDF_MAGIC):
                inner = path.with_name(path.name + ".unwrapped.pdf")
                inner.write_bytes(content)
                raise _WrappedPdf(inner)
        if not looks_like_xml(content):
            raise DocumentRejected(f"{name}: not a PDF or an e-invoice XML (its bytes start with neither "
                                   "%PDF- nor an XML element)")
        einvoice = read_einvoice(content, name)
    except DocumentError as exc:
        raise DocumentRejected(str(exc)) from None
    # An e-invoice XML has no pages and no text for a model to read: its fields are exact.
    return CheckedDocument(name=name, path=path, sha256=_sha256(path), pages=0, size=size,
                           einvoice=einvoice.standard)


def _judge(name: str, path: Path, pdf: Path, answer: dict) -> CheckedDocument | DocumentRejected:
    """The child's answer about one PDF (`pdf`: the file at `path`, or what it wraps) as a checked
    document or a refusal."""
    if not answer.get("ok"):
        detail = answer.get("detail") or "it could not be read"
        if answer.get("error") != "pdfium":
            return DocumentRejected(f"{name}: the PDF costs too much to read: {detail}")
        text = detail.lower()
        if "password" in text:
            return DocumentRejected(f"{name}: the PDF is encrypted with a password")
        with open(pdf, "rb") as handle:
            data = handle.read(EMPTY_TREE_WINDOW)
        if _EMPTY_PAGE_TREE.search(data) and not _PAGE_OBJECT.search(data):
            return DocumentRejected(f"{name}: the PDF has no pages")
        return DocumentRejected(f"{name}: the PDF is damaged and cannot be read ({detail})")
    pages, chars, einvoice = answer["pages"], answer["chars"], answer.get("einvoice")
    if pages == 0:
        return DocumentRejected(f"{name}: the PDF has no pages")
    return CheckedDocument(name=name, path=path, sha256=_sha256(path), pages=pages, size=path.stat().st_size,
                           chars=chars or None, einvoice=einvoice, ocr_work=answer.get("ocr_work"))


def inspect_files(paths: list[Path]) -> list[dict]:
    """Runs `python -m agents.limits` over the files, a few checks at once in the whole process.

    The child caps its own address space and CPU time; a file that kills it (past a cap, or a
    crash in PDFium) or takes longer than QUIRE_CHECK_SECONDS is answered as too costly, and a
    new child checks the files after it.
    """
    answers: list[dict] = []
    while len(answers) < len(paths):
        with _CHECKS:
            answers += _inspect_until_failure(paths[len(answers):])
    return answers


def _inspect_until_failure(paths: list[Path]) -> list[dict]:
    """The child's answers, one per file, up to and including the file it failed on."""
    from agents.limits import Limits

    limits = Limits.from_env()
    answers: list[dict] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_ROOT, os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryFile() as errors, subprocess.Popen(
            [sys.executable, "-m", "agents.limits", *map(str, paths)], stdout=subprocess.PIPE, stderr=errors,
            stdin=subprocess.DEVNULL, cwd=_ROOT, env=env) as child:
        assert child.stdout is not None  # a pipe
        with selectors.DefaultSelector() as selector:
            selector.register(child.stdout, selectors.EVENT_READ)
            buffer = b""
            while len(answers) < len(paths):
                # Each file gets its own deadline: a hostile one cannot hold the check for long.
                if not selector.select(limits.check_seconds):
                    child.kill()
                    answers.append({"ok": False, "error": "time", "detail":
                                    f"reading it takes more than {limits.check_seconds:g} s (QUIRE_CHECK_SECONDS)"})
                    return answers
                chunk = os.read(child.stdout.fileno(), 65536)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer and len(answers) < len(paths):
                    line, buffer = buffer.split(b"\n", 1)
                    answers.append(json.loads(line))
        child.wait()
        if len(answers) < len(paths):
            errors.seek(0)
            stderr = errors.read()[-2000:].decode(errors="replace")
            answers.append({"ok": False, "error": "memory", "detail": (
                f"reading it needs more than {limits.check_memory_mb} MB (QUIRE_CHECK_MEMORY_MB)"
                if "MemoryError" in stderr or "bad_alloc" in stderr or child.returncode < 0
                else f"the check failed: {stderr[-300:]}")})
    return answers


def check_document(name: str, data: bytes, *, max_bytes: int, size: int | None = None,
                   executor: str = "local") -> CheckedDocument:
    """check_files for bytes in memory (tests, samples); the file is kept in a temporary directory."""
    path = Path(tempfile.mkdtemp(prefix="quire-check-")) / "document"
    path.write_bytes(data)
    [answer] = check_files([(name, path, size)], max_bytes=max_bytes, executor=executor)
    if isinstance(answer, DocumentRejected):
        raise answer
    return answer


def safe_name(name: str) -> str:
    """The file name as stored: safe characters only, at most MAX_STORED_NAME, its extension kept."""
    cleaned = _UNSAFE.sub("_", Path(name).name).strip("._") or "document"
    suffix = Path(cleaned).suffix.lower()
    if suffix not in STORED_SUFFIXES:
        suffix = ".pdf"
        stem = cleaned
    else:
        stem = cleaned[:-len(suffix)]
    return stem[:MAX_STORED_NAME - len(suffix)].rstrip("._") + suffix


def store_document(files_root: Path, doc: CheckedDocument) -> str:
    """Stores the checked file (content-addressed, so a re-upload reuses it) and returns its URI.

    A root under /Volumes/ is a Unity Catalog Volume and is written through the Files API.
    """
    relative = f"{doc.sha256[:2]}/{doc.sha256}/{safe_name(doc.name)}"
    if str(files_root).startswith("/Volumes/") and not Path("/Volumes").exists():
        from databricks.sdk import WorkspaceClient

        remote = f"{str(files_root).rstrip('/')}/{relative}"
        with open(doc.path, "rb") as handle:
            WorkspaceClient().files.upload(remote, handle, overwrite=True)
        return remote
    target = files_root / relative
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + f".{os.getpid()}.{threading.get_ident()}.part")
        try:
            os.link(doc.path, partial)  # the caller's spooled file, without copying it
        except OSError:
            shutil.copyfile(doc.path, partial)
        partial.replace(target)
    return str(target.resolve())
