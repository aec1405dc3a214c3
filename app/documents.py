"""Checks uploaded documents by their bytes and stores them before any task row is written."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

PDF_MAGIC = b"%PDF-"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# PDFium refuses a document whose page tree is empty; these say the file is a valid PDF without pages.
_EMPTY_PAGE_TREE = re.compile(rb"/Count\s+0(?![0-9])")
_PAGE_OBJECT = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
MAX_STORED_NAME = 120


class DocumentRejected(ValueError):
    """An upload that cannot become a task, with the reason a person can act on."""


@dataclass(frozen=True)
class CheckedDocument:
    """A document that passed the checks, with what the queue wants to know about it."""

    name: str
    data: bytes
    sha256: str
    pages: int
    chars: int | None = None  # characters of the text layer (None: a scan without one)

    @property
    def size(self) -> int:
        return len(self.data)


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


def check_document(name: str, data: bytes, *, max_bytes: int, size: int | None = None,
                   executor: str = "local") -> CheckedDocument:
    """Type by magic bytes, size, emptiness, encryption and readability, in that order.

    `size` is the file's full size when only its first bytes were read (past the limit).
    """
    size = max(size or 0, len(data))
    if not size:
        raise DocumentRejected(f"{name}: the file is empty")
    if size > max_bytes:
        shown = megabytes(size)
        if float(shown) <= max_bytes / 1e6:
            shown = megabytes(size, up=True)  # 50.04 MB reads "50.1", never "50 MB is over the 50 MB limit"
        raise DocumentRejected(f"{name}: {shown} MB is over the {megabytes(max_bytes)} MB limit")
    if not data[:1024].lstrip().startswith(PDF_MAGIC):
        raise DocumentRejected(f"{name}: not a PDF (its bytes do not start with %PDF-)")
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        text = str(exc).lower()
        if "password" in text:
            raise DocumentRejected(f"{name}: the PDF is encrypted with a password") from exc
        if _EMPTY_PAGE_TREE.search(data) and not _PAGE_OBJECT.search(data):
            raise DocumentRejected(f"{name}: the PDF has no pages") from exc
        raise DocumentRejected(f"{name}: the PDF is damaged and cannot be read ({exc})") from exc
    try:
        pages = len(pdf)
        chars = _text_chars(pdf)
        scanned = pages > 0 and not chars
    finally:
        pdf.close()
    if pages == 0:
        raise DocumentRejected(f"{name}: the PDF has no pages")
    if scanned:
        # Refused now rather than failing later in the agent: a scan needs OCR to be read where it runs.
        problem = scan_problem_for(executor)
        if problem:
            raise DocumentRejected(f"{name}: the PDF is a scanned image without text, and {problem}")
    return CheckedDocument(name=name, data=data, sha256=hashlib.sha256(data).hexdigest(), pages=pages,
                           chars=chars or None)


def _text_chars(pdf) -> int:
    """The characters of every page's text layer (0 for a scan, which has only images): what a
    model will read, and so what sizes the document's token reservation."""
    total = 0
    for index in range(len(pdf)):
        page = pdf[index]
        textpage = page.get_textpage()
        try:
            total += max(0, textpage.count_chars())
        finally:
            textpage.close()
            page.close()
    return total


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
    """Writes the file (content-addressed, so a re-upload reuses it) and returns its URI.

    A root under /Volumes/ is a Unity Catalog Volume and is written through the Files API.
    """
    relative = f"{doc.sha256[:2]}/{doc.sha256}/{safe_name(doc.name)}"
    if str(files_root).startswith("/Volumes/") and not Path("/Volumes").exists():
        import io

        from databricks.sdk import WorkspaceClient

        target = f"{str(files_root).rstrip('/')}/{relative}"
        WorkspaceClient().files.upload(target, io.BytesIO(doc.data), overwrite=True)
        return target
    target = files_root / relative
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + ".part")
        partial.write_bytes(doc.data)
        partial.replace(target)
    return str(target.resolve())
