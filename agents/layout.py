"""Page layout as rows of positioned text cells, built from PDF characters or from plain text."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

_COLUMN_GAP = re.compile(r"\s{2,}|\t+")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Cell:
    """A run of text on one line with its horizontal extent (points for PDFs, columns for text).

    Cells read from a PDF or by OCR also know where they stand: `top` and `bottom` in points
    from the page's top-left corner, and `edges`, the left and right of each character of
    `text`, so the box of any part of the text can be told (empty for plain text).
    """

    text: str
    x0: float
    x1: float
    top: float = field(default=0.0, compare=False)
    bottom: float = field(default=0.0, compare=False)
    edges: tuple[tuple[float, float], ...] = field(default=(), compare=False, repr=False)

    @property
    def placed(self) -> bool:
        """Whether the cell's position on a page is known (false for plain text)."""
        return bool(self.edges) and self.bottom > self.top

    def span_box(self, start: int, end: int) -> tuple[float, float, float, float] | None:
        """The box [x0, top, x1, bottom] of text[start:end], or None without positions."""
        if not self.placed or not 0 <= start < end <= len(self.edges):
            return None
        return (self.edges[start][0], self.top, self.edges[end - 1][1], self.bottom)

    def overlaps(self, other: Cell) -> float:
        """Horizontal overlap with another cell, in the page's units (0 when disjoint)."""
        return max(0.0, min(self.x1, other.x1) - max(self.x0, other.x0))

    @property
    def center(self) -> float:
        return (self.x0 + self.x1) / 2


@dataclass(frozen=True)
class Line:
    """One visual row of a page: cells ordered left to right."""

    cells: tuple[Cell, ...]

    @property
    def text(self) -> str:
        # Two spaces keep column boundaries visible to readers of plain text (and to the LLM),
        # and let from_text() rebuild the same cells.
        return "  ".join(c.text for c in self.cells)


@dataclass
class Page:
    """One page's text and layout; `number` counts from 1."""

    number: int
    lines: list[Line] = field(default_factory=list)
    width: float = 0.0   # points; 0 when unknown
    height: float = 0.0

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)


def clean(text: str) -> str:
    """Collapse whitespace (including PDF soft hyphens and NBSPs) inside one cell."""
    text = text.replace("\u00ad", "").replace("\ufffe", "").replace("\x02", "")
    return _SPACES.sub(" ", text).strip()


_DROPPED = frozenset("\u00ad\ufffe\x02")


def clean_placed(chars: Sequence[str], boxes: Sequence[tuple[float, float]]
                 ) -> tuple[str, tuple[tuple[float, float], ...]]:
    """clean() over characters with their boxes, keeping one box per character kept."""
    text: list[str] = []
    kept: list[tuple[float, float]] = []
    for ch, box in zip(chars, boxes):
        if ch in _DROPPED:
            continue
        if ch.isspace():
            if not text or text[-1] == " ":
                continue
            ch = " "
        text.append(ch)
        kept.append(box)
    while text and text[-1] == " ":
        text.pop()
        kept.pop()
    return "".join(text), tuple(kept)


def lines_from_text(text: str) -> list[Line]:
    """Cells from plain text: runs separated by two or more spaces or tabs form columns."""
    lines = []
    for raw in text.splitlines():
        cells = []
        pos = 0
        for part in _COLUMN_GAP.split(raw):
            start = raw.find(part, pos) if part else pos
            pos = start + len(part)
            if part.strip():
                cells.append(Cell(clean(part), float(start), float(pos)))
        if cells:
            lines.append(Line(tuple(cells)))
    return lines


@dataclass(frozen=True)
class Glyph:
    """One visible character with its advance box (PDF coordinates, y upwards) and font size."""

    char: str
    left: float
    bottom: float
    right: float
    top: float
    size: float

    @property
    def middle(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def em(self) -> float:
        return self.size if self.size > 1.5 else max(self.top - self.bottom, 1.0)


# Gaps measured in ems of the font: a word space is about a quarter em (0.6 in monospace
# fonts), table columns sit further apart than a whole em.
_SPACE_GAP = 0.15
_COLUMN_GAP_EM = 1.0


def lines_from_glyphs(glyphs: list[Glyph], page_height: float = 0.0) -> list[Line]:
    """Rows of cells from characters: rows by vertical position, cells split at wide gaps.

    With the page's height, each cell also gets its box measured from the top-left corner.
    """
    ordered = sorted(glyphs, key=lambda g: (-g.middle, g.left))
    rows: list[list[Glyph]] = []
    row_middle = 0.0
    for glyph in ordered:
        if rows and abs(glyph.middle - row_middle) <= 0.35 * glyph.em:
            rows[-1].append(glyph)
            continue
        rows.append([glyph])
        row_middle = glyph.middle
    return [line for line in (_row_cells(row, page_height) for row in rows) if line.cells]


def _placed_cell(glyphs: list[Glyph], text: list[str], boxes: list[tuple[float, float]],
                 start: float, end: float, page_height: float) -> Cell:
    if page_height <= 0:
        return Cell(clean("".join(text)), start, end)
    cleaned, edges = clean_placed(text, boxes)
    return Cell(cleaned, start, end, page_height - max(g.top for g in glyphs),
                page_height - min(g.bottom for g in glyphs), edges)


def _row_cells(row: list[Glyph], page_height: float = 0.0) -> Line:
    row.sort(key=lambda g: g.left)
    cells: list[Cell] = []
    text: list[str] = []
    boxes: list[tuple[float, float]] = []
    members: list[Glyph] = []
    start = end = 0.0
    previous: Glyph | None = None
    for glyph in row:
        if previous is not None:
            gap = glyph.left - previous.right
            em = max(glyph.em, previous.em)
            if glyph.char == previous.char and abs(glyph.left - previous.left) < 0.1 * em:
                continue  # the same character printed twice over itself (simulated bold)
            if gap > _COLUMN_GAP_EM * em:
                cells.append(_placed_cell(members, text, boxes, start, end, page_height))
                text, boxes, members, previous = [], [], [], None
            elif gap > _SPACE_GAP * em:
                text.append(" ")
                boxes.append((previous.right, glyph.left))
        if previous is None:
            start = glyph.left
        text.append(glyph.char)
        boxes.append((glyph.left, glyph.right))
        members.append(glyph)
        end = max(end, glyph.right) if previous is not None else glyph.right
        previous = glyph
    if text:
        cells.append(_placed_cell(members, text, boxes, start, end, page_height))
    return Line(tuple(c for c in cells if c.text))


def fold(text: str) -> str:
    """Lower-case and strip accents while keeping length, so match offsets map back to `text`."""
    if text.isascii():
        return text.lower()
    return "".join(map(_fold_char, text))


@functools.lru_cache(maxsize=4096)
def _fold_char(ch: str) -> str:
    base = unicodedata.normalize("NFD", ch)[0] if ch.isalpha() else ch
    low = base.lower()
    # Some lower-case forms grow (İ -> i̇): keep exactly one character per character.
    return low if len(low) == 1 else base


@dataclass
class DocView:
    """A document's lines flattened across pages, ready for rule-based extraction."""

    lines: list[Line]
    pages: list[int]
    dayfirst: bool = True

    @classmethod
    def of(cls, pages: list[Page]) -> DocView:
        lines = [line for page in pages for line in page.lines]
        numbers = [page.number for page in pages for _ in page.lines]
        view = cls(lines, numbers)
        view.dayfirst = _guess_dayfirst(view.text)
        return view

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    def flat(self, first_pages: int | None = None) -> str:
        """Prose view: lines joined by spaces, so sentences wrapped over lines read whole."""
        lines = self.lines
        if first_pages is not None:
            lines = [ln for ln, p in zip(self.lines, self.pages) if p <= first_pages]
        return " ".join(line.text for line in lines)


_NUMERIC_DATE = re.compile(r"(?<![\d.])(\d{1,2})[./-](\d{1,2})[./-](\d{2,4})(?![\d])")


# Places and company forms weigh more than currencies: a UK firm may well bill in dollars.
_US_MARKERS = [(re.compile(r"\$|\bUSD\b"), 1),
               (re.compile(r"\bInc\.|\bLLC\b|\bCorp\.|United States|\bU\.S\.A?\b|"
                           r",\s[A-Z]{2}\s\d{5}\b|\bEIN\b"), 2)]
_DAY_FIRST_MARKERS = [(re.compile(r"£|€|\bGBP\b|\bEUR\b|\bCHF\b"), 1),
                      (re.compile(r"United Kingdom|England|\bLtd\b|\bLimited\b|\bLIMITED\b|"
                                  r"\bLLP\b|\bplc\b|GmbH|S\.p\.A\.|S\.r\.l\.|SARL|\bSAS\b|"
                                  r"\bAG\b|\bVAT\b|\b[A-Z]{1,2}\d{1,2}[A-Z]?\s\d[A-Z]{2}\b"), 2)]


def _guess_dayfirst(text: str) -> bool:
    # A part above 12 settles the document's convention; otherwise the places, companies and
    # currencies it names tell whether it follows the US month-first habit.
    for m in _NUMERIC_DATE.finditer(text):
        first, second = int(m[1]), int(m[2])
        if first > 12 >= second:
            return True
        if second > 12 >= first:
            return False
    us = sum(weight * len(p.findall(text)) for p, weight in _US_MARKERS)
    other = sum(weight * len(p.findall(text)) for p, weight in _DAY_FIRST_MARKERS)
    return not us > other
