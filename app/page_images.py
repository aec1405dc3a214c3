"""Pages of a stored PDF as PNG images and as word boxes, rendered on the server with pypdfium2
(offline), cached under the data dir by the document's content hash."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

SCALE = 2.0  # 144 dpi: sharp on a laptop screen, about 150-300 KB a page
_pdfium_lock = threading.Lock()  # PDFium is not thread-safe: one call into it at a time


@dataclass(frozen=True)
class Word:
    """A word on the page, its box in points from the top-left, and the line it belongs to."""

    text: str
    bbox: tuple[float, float, float, float]
    line: int


@dataclass(frozen=True)
class PageText:
    """A page's size in points and its words."""

    width: float
    height: float
    words: tuple[Word, ...]


def document_bytes(uri: str) -> bytes:
    """The stored PDF: a local file, or a Unity Catalog Volume file (mounted, else through the Files API)."""
    if uri.startswith("/Volumes/") and not Path("/Volumes").exists():
        from databricks.sdk import WorkspaceClient

        contents = WorkspaceClient().files.download(uri).contents
        if contents is None:
            raise FileNotFoundError(f"the Volume sent no content for {uri}")
        return contents.read()
    path = Path(uri.removeprefix("file://"))
    if not path.is_file():
        raise FileNotFoundError(f"the document is no longer stored at {uri}")
    return path.read_bytes()


def _key(uri: str, sha256: str | None) -> str:
    return sha256 or hashlib.sha256(uri.encode()).hexdigest()


def page_png(cache_dir: Path, uri: str, sha256: str | None, page: int) -> Path:
    """The PNG of page `page` (from 1), rendered once and then read from the cache."""
    target = Path(cache_dir) / _key(uri, sha256)[:2] / f"{_key(uri, sha256)}-p{page}-x{SCALE:g}.png"
    if target.exists():
        return target
    import pypdfium2 as pdfium

    data = document_bytes(uri)
    with _pdfium_lock:
        doc = pdfium.PdfDocument(data)
        try:
            if not 1 <= page <= len(doc):
                raise IndexError(f"the document has {len(doc)} pages, not {page}")
            image = doc[page - 1].render(scale=SCALE).to_pil()
        finally:
            doc.close()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written aside and renamed: a reader never sees half a file, and two renders of one page agree.
    handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".part")
    with os.fdopen(handle, "wb") as out:
        image.save(out, format="PNG", optimize=False)
    os.replace(temporary, target)
    return target


@functools.lru_cache(maxsize=256)
def page_text(uri: str, sha256: str | None, page: int) -> PageText:
    """The page's size and words (pypdfium2's character boxes joined into words and lines)."""
    import pypdfium2 as pdfium

    data = document_bytes(uri)
    with _pdfium_lock:
        doc = pdfium.PdfDocument(data)
        try:
            if not 1 <= page <= len(doc):
                raise IndexError(f"the document has {len(doc)} pages, not {page}")
            pdf_page = doc[page - 1]
            width, height = pdf_page.get_size()
            textpage = pdf_page.get_textpage()
            count = textpage.count_chars()
            text = textpage.get_text_range(0, count) if count else ""
            boxes = [textpage.get_charbox(i) for i in range(count)]
        finally:
            doc.close()
    return PageText(width, height, tuple(_words(text, boxes, height)))


def _words(text: str, boxes: list[tuple[float, float, float, float]], height: float) -> list[Word]:
    """Characters to words (split at spaces and line breaks), each with its line number."""
    words: list[Word] = []
    current: list[int] = []
    line = 0

    def flush() -> None:
        if current:
            left = min(boxes[i][0] for i in current)
            right = max(boxes[i][2] for i in current)
            bottom = min(boxes[i][1] for i in current)
            top = max(boxes[i][3] for i in current)
            words.append(Word("".join(text[i] for i in current),
                              (round(left, 1), round(height - top, 1), round(right, 1), round(height - bottom, 1)),
                              line))
            current.clear()

    for i, char in enumerate(text[:len(boxes)]):
        if char in "\r\n":
            flush()
            if char == "\n":
                line += 1
        elif char.isspace():
            flush()
        else:
            current.append(i)
    flush()
    return words
