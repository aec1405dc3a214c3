"""Read a PDF from a local or Unity Catalog Volume path and extract its text page by page."""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw

from agents.einvoice import EInvoice, embedded_einvoice, looks_like_xml, read_einvoice
from agents.errors import DocumentError
from agents.layout import Glyph, Page, lines_from_glyphs, lines_from_text
from agents.limits import Limits, TooCostly, check_page, check_page_count, check_streams
from agents.ocr import ocr_page, ocr_problem
from agents.prompt import estimate_tokens
from agents.signed import looks_signed, unwrap_p7m

log = logging.getLogger(__name__)

# PDF readers accept the header anywhere in the first KiB (some generators prepend junk).
_HEADER_WINDOW = 1024
_SPACES = frozenset((0xA0, 0x2002, 0x2003, 0x2009, 0x202F, 0xFFFE))
_PDFIUM_PASSWORD_ERROR = 4
_PDFIUM_SECURITY_ERROR = 5
_EMPTY_PAGE_TREE = re.compile(
    rb"/Type\s*/Pages\b[^>]*/Count\s+0\b|/Count\s+0\b[^>]*/Type\s*/Pages\b")
_PAGE_OBJECT = re.compile(rb"/Type\s*/Page\b(?!s)")

# Signatures of formats people upload by mistake, for a clearer refusal message.
_OTHER_FORMATS = [
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"PK\x03\x04", "a ZIP archive (for example a .docx or .xlsx file)"),
    (b"\xd0\xcf\x11\xe0", "a legacy Office document"),
    (b"{\\rtf", "an RTF document"),
]


@dataclass
class Document:
    """A PDF's bytes identity and its pages' text and layout."""

    source: str
    name: str
    sha256: str
    size_bytes: int
    pages: list[Page] = field(default_factory=list)
    ocr_pages: list[int] = field(default_factory=list)
    einvoice: EInvoice | None = None  # the e-invoice XML it is, or carries embedded

    @property
    def page_count(self) -> int:
        return len(self.pages)

    @property
    def text(self) -> str:
        return "\n\n".join(page.text for page in self.pages)


def read_document(path: str) -> Document:
    """Load and parse the PDF or e-invoice XML at a local path or a `/Volumes/...` path."""
    data = load_bytes(path)
    return parse_document(data, source=path)


def parse_document(data: bytes, source: str = "<bytes>") -> Document:
    """A PDF, an e-invoice XML, or either inside a signed `.p7m` envelope."""
    name = os.path.basename(source.rstrip("/")) or source
    envelope, original = None, data
    if data and b"%PDF-" not in data[:_HEADER_WINDOW] and not looks_like_xml(data) and looks_signed(data):
        data, envelope = unwrap_p7m(data, name), "CAdES (p7m)"
    if data and b"%PDF-" not in data[:_HEADER_WINDOW] and looks_like_xml(data):
        einvoice = read_einvoice(data, name)
        einvoice.envelope = envelope
        einvoice.tokens = estimate_tokens(data.decode("utf-8", "replace"))
        # An e-invoice XML has no pages: its fields are read from the XML alone.
        return Document(source=source, name=name, sha256=hashlib.sha256(original).hexdigest(),
                        size_bytes=len(original), einvoice=einvoice)
    return parse_pdf(data, source=source)


def load_bytes(path: str) -> bytes:
    """Bytes of a local file, or of a Unity Catalog Volume file through the Databricks SDK."""
    local = _strip_scheme(path)
    if os.path.exists(local):
        if os.path.isdir(local):
            raise DocumentError(f"{path} is a directory, not a PDF file")
        return Path(local).read_bytes()
    if local.startswith("/Volumes/") and os.environ.get("DATABRICKS_HOST"):
        return _download_from_volume(local)
    # A missing file may appear later (a Volume mount still syncing), so this one is retryable.
    raise FileNotFoundError(f"document not found: {path}")


def _strip_scheme(path: str) -> str:
    for prefix in ("file://", "dbfs:"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def _download_from_volume(path: str) -> bytes:
    from databricks.sdk import WorkspaceClient

    response = WorkspaceClient().files.download(path)
    if response.contents is None:
        raise OSError(f"the Volume sent no content for {path}")
    with response.contents as stream:
        return stream.read()


def parse_pdf(data: bytes, source: str = "<bytes>") -> Document:
    """Check the bytes are a readable, unencrypted PDF with text, and extract every page."""
    name = os.path.basename(source.rstrip("/")) or source
    if not data:
        raise DocumentError(f"{name}: the file is empty (0 bytes)")
    _check_magic(data, name)
    limits = Limits.from_env()
    try:
        # Before PDFium parses anything: a deflate bomb is refused with bounded memory.
        check_streams(data, limits)
    except TooCostly as exc:
        raise DocumentError(f"{name}: {exc}") from exc
    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise DocumentError(f"{name}: {_load_failure(data, exc)}") from exc
    try:
        if len(pdf) == 0:
            raise DocumentError(f"{name}: the PDF has no pages")
        check_page_count(len(pdf), limits)
        pages = [_read_page(pdf, index, name, limits) for index in range(len(pdf))]
        einvoice = embedded_einvoice(pdf, name)
        ocr_pages = _ocr_missing_text(pdf, pages, name, required=einvoice is None)
    except TooCostly as exc:
        raise DocumentError(f"{name}: {exc}") from exc
    finally:
        pdf.close()
    if not any(page.lines for page in pages) and einvoice is None:
        raise DocumentError(f"{name}: the PDF has no extractable text, and OCR found none either")
    return Document(
        source=source,
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        size_bytes=len(data),
        pages=pages,
        ocr_pages=ocr_pages,
        einvoice=einvoice,
    )


def _ocr_missing_text(pdf: pdfium.PdfDocument, pages: list[Page], name: str,
                      required: bool = True) -> list[int]:
    """OCR every page without a text layer (scans); the numbers of the pages read that way."""
    missing = [i for i, page in enumerate(pages) if not page.lines]
    if not missing:
        return []
    problem = ocr_problem()
    if problem:
        if len(missing) == len(pages) and required:
            raise DocumentError(f"{name}: the PDF is a scanned image without text, and {problem}")
        return []  # a blank page among text pages: nothing lost without OCR
    for index in missing:
        page = pdf[index]
        try:
            width, height = page.get_size()
            pages[index] = Page(number=index + 1, lines=ocr_page(page), width=width,
                                height=height)
        finally:
            page.close()
    return [index + 1 for index in missing]


def _load_failure(data: bytes, exc: pdfium.PdfiumError) -> str:
    # PDFium's error code is process-global and not reset on every failure, so the bytes
    # themselves confirm what the code suggests.
    code = getattr(exc, "err_code", None)
    encrypted = b"/Encrypt" in data
    if encrypted and code == _PDFIUM_PASSWORD_ERROR:
        return "the PDF is password-protected (encrypted)"
    if encrypted and code == _PDFIUM_SECURITY_ERROR:
        return "the PDF uses an unsupported encryption scheme"
    if _EMPTY_PAGE_TREE.search(data) and not _PAGE_OBJECT.search(data):
        return "the PDF has no pages"
    return f"the PDF is corrupt or unreadable ({exc})"


def _check_magic(data: bytes, name: str) -> None:
    if b"%PDF-" in data[:_HEADER_WINDOW]:
        return
    for signature, label in _OTHER_FORMATS:
        if data.startswith(signature):
            raise DocumentError(f"{name}: not a PDF, the content is {label}")
    if _looks_like_text(data[:_HEADER_WINDOW]):
        raise DocumentError(f"{name}: not a PDF, the content looks like plain text")
    raise DocumentError(f"{name}: not a PDF (no %PDF- header)")


def _looks_like_text(head: bytes) -> bool:
    # A multi-byte character cut at the window's end is still text, hence the trimmed retries.
    for trim in range(4):
        try:
            decoded = head[: len(head) - trim].decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    else:
        return False
    return all(ch.isprintable() or ch in "\t\n\r" for ch in decoded)


def _read_page(pdf: pdfium.PdfDocument, index: int, name: str, limits: Limits) -> Page:
    try:
        page = pdf[index]
        width, height = page.get_size()
        try:
            check_page(index + 1, width, height, limits)
        except TooCostly:
            page.close()
            raise
        textpage = page.get_textpage()
        try:
            lines = lines_from_glyphs(_glyphs(textpage), height)
            if not lines:
                # Some producers give text without usable positions: fall back to the stream.
                lines = lines_from_text(textpage.get_text_range().replace("\r\n", "\n"))
        finally:
            textpage.close()
            page.close()
    except pdfium.PdfiumError as exc:
        raise DocumentError(f"{name}: page {index + 1} is corrupt ({exc})") from exc
    return Page(number=index + 1, lines=lines, width=width, height=height)


def _glyphs(textpage: pdfium.PdfTextPage) -> list[Glyph]:
    handle = textpage.raw
    box = pdfium_raw.FS_RECTF()
    count = pdfium_raw.FPDFText_CountChars(handle)
    text = textpage.get_text_range(0, count) if count > 0 else ""
    # One call for all characters when they map one to one (no surrogate pairs), else per char.
    codes = [ord(ch) for ch in text] if len(text) == count else [
        pdfium_raw.FPDFText_GetUnicode(handle, i) for i in range(count)]
    glyphs = []
    for i, code in enumerate(codes):
        # Spaces and line breaks (some invented by PDFium) are re-derived from positions.
        if code <= 32 or code in _SPACES:
            continue
        if not pdfium_raw.FPDFText_GetLooseCharBox(handle, i, box):
            continue
        size = pdfium_raw.FPDFText_GetFontSize(handle, i)
        glyphs.append(Glyph(chr(code), box.left, box.bottom, box.right, box.top, size))
    return glyphs
