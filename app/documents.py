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


def megabytes(num_bytes: int, *, up: bool = False) -> str:
    """A size in MB with one decimal at most ("50", "52.4"); `up` rounds up instead of to the nearest."""
    tenths = num_bytes / 100_000
    tenths = math.ceil(tenths) if up else round(tenths)
    return f"{tenths / 10:g}"


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


def check_files(files: list[tuple[str, Path, int | None]], *, max_bytes: int,
                ) -> list[CheckedDocument | DocumentRejected]:
    """Checks each (name, path, full size) file: type by magic bytes, size, emptiness, then what
    reading it costs, its encryption and readability, in a process of its own (agents.limits)."""
    answers: list[CheckedDocument | DocumentRejected | None] = [None] * len(files)
    pending: list[int] = []
    for i, (name, path, size) in enumerate(files):
        size = max(size or 0, path.stat().st_size)
        if not size:
            answers[i] = DocumentRejected(f"{name}: the file is empty")
        elif size > max_bytes:
            answers[i] = _too_big(name, size, max_bytes)
        else:
            with open(path, "rb") as handle:
                head = handle.read(1024)
            if not head.lstrip().startswith(PDF_MAGIC):
                answers[i] = DocumentRejected(f"{name}: not a PDF (its bytes do not start with %PDF-)")
            else:
                pending.append(i)
    inspected = inspect_files([files[i][1] for i in pending])
    for i, answer in zip(pending, inspected):
        name, path, _ = files[i]
        answers[i] = _judge(name, path, answer)
    return answers  # type: ignore[return-value]


def _judge(name: str, path: Path, answer: dict) -> CheckedDocument | DocumentRejected:
    """The child's answer about one file as a checked document or a refusal."""
    if not answer.get("ok"):
        detail = answer.get("detail") or "it could not be read"
        if answer.get("error") != "pdfium":
            return DocumentRejected(f"{name}: the PDF costs too much to read: {detail}")
        text = detail.lower()
        if "password" in text:
            return DocumentRejected(f"{name}: the PDF is encrypted with a password")
        with open(path, "rb") as handle:
            data = handle.read(EMPTY_TREE_WINDOW)
        if _EMPTY_PAGE_TREE.search(data) and not _PAGE_OBJECT.search(data):
            return DocumentRejected(f"{name}: the PDF has no pages")
        return DocumentRejected(f"{name}: the PDF is damaged and cannot be read ({detail})")
    pages, chars = answer["pages"], answer["chars"]
    if pages == 0:
        return DocumentRejected(f"{name}: the PDF has no pages")
    if not chars:
        from agents.ocr import ocr_problem

        # Refused now rather than failing later in the agent: a scan needs OCR to be read.
        problem = ocr_problem()
        if problem:
            return DocumentRejected(f"{name}: the PDF is a scanned image without text, and {problem}")
    return CheckedDocument(name=name, path=path, sha256=_sha256(path), pages=pages, size=path.stat().st_size,
                           chars=chars or None)


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


def check_document(name: str, data: bytes, *, max_bytes: int, size: int | None = None) -> CheckedDocument:
    """check_files for bytes in memory (tests, samples); the file is kept in a temporary directory."""
    path = Path(tempfile.mkdtemp(prefix="quire-check-")) / "document.pdf"
    path.write_bytes(data)
    [answer] = check_files([(name, path, size)], max_bytes=max_bytes)
    if isinstance(answer, DocumentRejected):
        raise answer
    return answer


def safe_name(name: str) -> str:
    """The file name as stored: safe characters only, at most MAX_STORED_NAME, its extension kept."""
    cleaned = _UNSAFE.sub("_", Path(name).name).strip("._") or "document"
    suffix = Path(cleaned).suffix.lower()
    if suffix != ".pdf":
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

        target = f"{str(files_root).rstrip('/')}/{relative}"
        with open(doc.path, "rb") as handle:
            WorkspaceClient().files.upload(target, handle, overwrite=True)
        return target
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
