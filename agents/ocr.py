"""OCR for scanned, image-only PDF pages: Tesseract through pytesseract on pypdfium2 renders.

Pages are rendered at 300 dpi (less for a page so large that its image would pass
QUIRE_OCR_MAX_MEGAPIXELS), straightened (a sheet never lies quite straight on the glass),
read word by word, and the words are laid out into the same rows of cells as a text PDF's
characters, in PDF points, so every rule downstream works unchanged.
"""

from __future__ import annotations

import functools
import os
import shutil
from typing import Any

from agents.layout import Cell, Line, clean_placed
from agents.limits import Limits, ocr_dpi

DEFAULT_LANGUAGES = "eng+ita+fra+deu+nld+spa+por"
DEFAULT_DPI = 300
_MIN_WORD_CONFIDENCE = 20
_MIN_SHORT_CONFIDENCE = 75
_INK = 128
_SKEW_DEGREES = [x / 10 for x in range(-30, 31, 2)]


class OCRUnavailable(RuntimeError):
    """Tesseract or its Python binding is not installed."""


def tesseract_cmd() -> str:
    """The Tesseract executable, from QUIRE_TESSERACT_CMD (default `tesseract` on the PATH)."""
    return os.environ.get("QUIRE_TESSERACT_CMD", "tesseract")


def ocr_problem() -> str | None:
    """Why OCR cannot run here, or None when it can."""
    try:
        import pytesseract  # noqa: F401
    except ImportError:
        return "OCR is not installed (the pytesseract package is missing)"
    if shutil.which(tesseract_cmd()) is None:
        return (f"OCR is not installed (no Tesseract executable {tesseract_cmd()!r}; "
                "install the tesseract-ocr package)")
    return None


def ocr_available() -> bool:
    """Whether scanned pages can be read on this machine."""
    return ocr_problem() is None


@functools.lru_cache(maxsize=4)
def _languages(cmd: str, wanted: str) -> str:
    import pytesseract

    pytesseract.pytesseract.tesseract_cmd = cmd
    installed = set(pytesseract.get_languages(config=""))
    chosen = [lang for lang in wanted.split("+") if lang in installed]
    return "+".join(chosen) or "eng"


def ocr_page(page: Any) -> list[Line]:
    """Rows of cells read from one pypdfium2 page's image."""
    problem = ocr_problem()
    if problem:
        raise OCRUnavailable(problem)
    import pytesseract

    cmd = tesseract_cmd()
    pytesseract.pytesseract.tesseract_cmd = cmd
    # Tesseract's threads fight the worker's parallel tasks on small machines; one each.
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    languages = _languages(cmd, os.environ.get("QUIRE_OCR_LANGUAGES", DEFAULT_LANGUAGES))
    # Read at each page, not at import: a run forked from the fork server has its own environment.
    # The resolution is lowered for a large page so its image stays under the pixel limit; a page
    # too large for any readable resolution is refused (limits.TooCostly) instead of rendered.
    wanted = float(os.environ.get("QUIRE_OCR_DPI") or DEFAULT_DPI)
    width, height = page.get_size()
    scale = ocr_dpi(width, height, wanted, Limits.from_env()) / 72
    image = page.render(scale=scale, grayscale=True).to_pil().convert("L")
    # Grey shading behind table rows hides their figures from Tesseract's own binarisation, so
    # the page is made black and white first, keeping only ink darker than mid-grey. (Filtering
    # out dust specks as well would also erase decimal points: the stray marks they leave are
    # dropped as cells below instead.)
    original = image.size
    image, angle = _straighten(image.point(lambda v: 255 if v > _INK else 0))
    # One uniform block: rows are read across every column, as an invoice's rows are meant.
    data = pytesseract.image_to_data(image, lang=languages, config="--psm 6",
                                     output_type=pytesseract.Output.DICT)
    if angle:
        _unrotate(data, angle, image.size, original)
    return _lines(data, scale)


def _unrotate(data: dict, angle: float, size: tuple[int, int],
              original: tuple[int, int]) -> None:
    """Word boxes of the straightened image moved back onto the page as it was rendered."""
    import math

    # PIL turns the image counter-clockwise about its centre (y grows downwards): undo that
    # for each word's centre and keep its size.
    theta = math.radians(angle)
    cos, sin = math.cos(theta), math.sin(theta)
    cx, cy = size[0] / 2, size[1] / 2
    ox, oy = original[0] / 2, original[1] / 2
    for i in range(len(data["text"])):
        w, h = data["width"][i], data["height"][i]
        x, y = data["left"][i] + w / 2 - cx, data["top"][i] + h / 2 - cy
        data["left"][i] = round(ox + x * cos - y * sin - w / 2)
        data["top"][i] = round(oy + x * sin + y * cos - h / 2)


def _lines(data: dict, scale: float) -> list[Line]:
    """Tesseract's text lines as rows of cells: a gap wider than the text height starts a cell."""
    rows: dict[tuple, list[int]] = {}
    for i, text in enumerate(data["text"]):
        word, confidence = text.strip(), float(data["conf"][i])
        # Dust reads as one- or two-letter words of low confidence ("o", "7"); real ones are
        # read with confidence in the nineties.
        if word and confidence >= (_MIN_SHORT_CONFIDENCE if len(word) <= 2 else
                                   _MIN_WORD_CONFIDENCE):
            key = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
            rows.setdefault(key, []).append(i)
    lines = []
    for key in sorted(rows, key=lambda k: min(data["top"][i] for i in rows[k])):
        words = sorted(rows[key], key=lambda i: data["left"][i])
        heights = sorted(data["height"][i] for i in words)
        em = heights[len(heights) // 2]
        cells: list[Cell] = []
        group: list[int] = []
        for i in words:
            if group and data["left"][i] - _right(data, group[-1]) > 1.2 * em:
                cells.append(_word_cell(data, group, scale))
                group = []
            group.append(i)
        cells.append(_word_cell(data, group, scale))
        # Table rules and dust read as "|", "_" or ".": cells with no letter or digit are noise.
        cells = [trimmed for c in cells
                 if (trimmed := _trim(c)) and any(ch.isalnum() for ch in trimmed.text)]
        if cells:
            lines.append(Line(tuple(cells)))
    return lines


def _right(data: dict, i: int) -> int:
    return data["left"][i] + data["width"][i]


def _word_cell(data: dict, words: list[int], scale: float) -> Cell:
    """One cell of words, each character given an equal share of its word's width (points)."""
    chars: list[str] = []
    boxes: list[tuple[float, float]] = []
    for n, i in enumerate(words):
        word = data["text"][i].strip()
        left, width = data["left"][i], max(1, data["width"][i])
        if n:
            chars.append(" ")
            boxes.append((_right(data, words[n - 1]) / scale, left / scale))
        step = width / max(1, len(word))
        for k, ch in enumerate(word):
            chars.append(ch)
            boxes.append(((left + k * step) / scale, (left + (k + 1) * step) / scale))
    text, edges = clean_placed(chars, boxes)
    top = min(data["top"][i] for i in words) / scale
    bottom = max(data["top"][i] + data["height"][i] for i in words) / scale
    return Cell(text, data["left"][words[0]] / scale, _right(data, words[-1]) / scale,
                top, bottom, edges)


def _trim(cell: Cell) -> Cell | None:
    """The cell without the rule and dust marks at its ends."""
    text = cell.text
    start, end = 0, len(text)
    while start < end and text[start] in " |_[]{}":
        start += 1
    while end > start and text[end - 1] in " |_[]{}":
        end -= 1
    if start == end:
        return None
    edges = cell.edges[start:end]
    return Cell(text[start:end], edges[0][0], edges[-1][1], cell.top, cell.bottom, edges)


def _straighten(image):
    """The page rotated by the small angle that makes its text rows most horizontal, and
    that angle (degrees, counter-clockwise)."""
    import numpy as np
    from PIL import Image

    small = image.resize((image.width // 4, image.height // 4))
    ink = Image.eval(small, lambda v: 255 if v < 160 else 0)
    best_angle, best_score = 0.0, -1.0
    for angle in _SKEW_DEGREES:
        rows = np.asarray(ink.rotate(angle, fillcolor=0), dtype=np.float32).sum(axis=1)
        # Straight rows of text give sharp peaks and empty gaps between them.
        score = float(np.square(np.diff(rows)).sum())
        if score > best_score:
            best_angle, best_score = angle, score
    if best_angle == 0.0:
        return image, 0.0
    return (image.rotate(best_angle, fillcolor=255, resample=Image.Resampling.BICUBIC, expand=True),
            best_angle)
