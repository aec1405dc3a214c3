"""Checks uploaded documents by their bytes and stores them before any task row is written."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

PDF_MAGIC = b"%PDF-"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class DocumentRejected(ValueError):
    """An upload that cannot become a task, with the reason a person can act on."""


@dataclass(frozen=True)
class CheckedDocument:
    """A document that passed the checks, with what the queue wants to know about it."""

    name: str
    data: bytes
    sha256: str
    pages: int

    @property
    def size(self) -> int:
        return len(self.data)


def check_document(name: str, data: bytes, *, max_bytes: int) -> CheckedDocument:
    """Type by magic bytes, size, emptiness, encryption and readability, in that order."""
    if not data:
        raise DocumentRejected(f"{name}: the file is empty")
    if len(data) > max_bytes:
        raise DocumentRejected(f"{name}: {len(data) / 1e6:.1f} MB is over the {max_bytes / 1e6:.0f} MB limit")
    if not data[:1024].lstrip().startswith(PDF_MAGIC):
        raise DocumentRejected(f"{name}: not a PDF (its bytes do not start with %PDF-)")
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        text = str(exc).lower()
        if "password" in text:
            raise DocumentRejected(f"{name}: the PDF is encrypted with a password") from exc
        raise DocumentRejected(f"{name}: the PDF is damaged and cannot be read ({exc})") from exc
    try:
        pages = len(pdf)
        scanned = pages > 0 and not _has_text(pdf)
    finally:
        pdf.close()
    if pages == 0:
        raise DocumentRejected(f"{name}: the PDF has no pages")
    if scanned:
        from agents.ocr import ocr_problem

        # Refused now rather than failing later in the agent: a scan needs OCR to be read.
        problem = ocr_problem()
        if problem:
            raise DocumentRejected(f"{name}: the PDF is a scanned image without text, and {problem}")
    return CheckedDocument(name=name, data=data, sha256=hashlib.sha256(data).hexdigest(), pages=pages)


def _has_text(pdf) -> bool:
    """Whether any page has a text layer (a scan has only images)."""
    for index in range(len(pdf)):
        page = pdf[index]
        textpage = page.get_textpage()
        try:
            if textpage.count_chars() > 0:
                return True
        finally:
            textpage.close()
            page.close()
    return False


def safe_name(name: str) -> str:
    stem = _UNSAFE.sub("_", Path(name).name).strip("._") or "document"
    return stem[:120]


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
