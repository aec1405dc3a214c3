"""Where an extracted value stands on the page: its page, its box and the text it was read from.

The rules read values from cells; this module finds the span of a cell that holds the value
(the printed form of a date, an amount, a code or a name) and turns the characters' boxes into
the `evidence` object of docs/CONTRACTS.md. It also counts how many places on the pages state
the same value, one of the signals the confidence model weighs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agents.amounts import currency_spans, find_amounts
from agents.dates import find_dates
from agents.layout import Cell, DocView, fold

# How many lines after the rules' line the value may stand (a label above its value).
_BELOW = 3
_AMOUNT_TOLERANCE = 0.005
_FIGURE = re.compile(r"(?<![\d.,])\d[\d.,' ]*[.,]\d\d(?!\d)")


@dataclass(frozen=True)
class Spot:
    """One place in the document where a value is printed."""

    line: int
    cell: int
    start: int
    end: int


def spans(kind: str, value: Any, text: str, dayfirst: bool = True) -> list[tuple[int, int]]:
    """Character spans of `text` that state `value` of a field of `kind`."""
    if value is None or value == "" or value == []:
        return []
    if kind == "date":
        return [(d.start, d.end) for d in find_dates(text, dayfirst) if d.iso == value]
    if kind == "amount":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return []
        found = [(a.start, a.end) for a in find_amounts(text)
                 if abs(abs(a.value) - abs(value)) <= _AMOUNT_TOLERANCE]
        if not found:
            # OCR misreads separators ("1.464.00"): the same digits still show where it stood.
            digits = f"{abs(value):.2f}".replace(".", "")
            found = [m.span() for m in _FIGURE.finditer(text)
                     if re.sub(r"\D", "", m.group(0)) == digits]
        return found
    if kind == "currency":
        return [(start, end) for code, start, end in currency_spans(text) if code == value]
    if kind == "text" and isinstance(value, str):
        needle = fold(value.strip())
        haystack = fold(text)
        found = []
        at = haystack.find(needle) if needle else -1
        while at >= 0:
            # A value starts and ends on word boundaries ("12" is not inside "2012").
            before = haystack[at - 1:at]
            after = haystack[at + len(needle):at + len(needle) + 1]
            if not (before.isalnum() and needle[0].isalnum()) and not (
                    after.isalnum() and needle[-1].isalnum()):
                found.append((at, at + len(needle)))
            at = haystack.find(needle, at + 1)
        return found
    return []


def spots(view: DocView, kind: str, value: Any) -> Iterator[Spot]:
    """Every cell span in the document that states the value, in reading order."""
    for li, line in enumerate(view.lines):
        for ci, cell in enumerate(line.cells):
            for start, end in spans(kind, value, cell.text, view.dayfirst):
                yield Spot(li, ci, start, end)


def find_spot(view: DocView, kind: str, value: Any, near: int | None = None,
              last: bool = False) -> tuple[Spot | None, int]:
    """The place the value was most likely read from, and how many places state it.

    `near` is the line where the rules found the value's label: the value stands on it or
    just below. Without it, the first place (or the last, for totals) is taken.
    """
    found = list(spots(view, kind, value))
    if not found:
        return None, 0
    if near is not None:
        close = [s for s in found if near <= s.line <= near + _BELOW]
        if close:
            return min(close, key=lambda s: (s.line - near, s.cell)), len(found)
    return (found[-1] if last else found[0]), len(found)


def evidence_of(view: DocView, spot: Spot | None) -> dict[str, Any] | None:
    """The evidence object for a spot: page, bbox (points from top-left, or null) and text."""
    if spot is None:
        return None
    cell: Cell = view.lines[spot.line].cells[spot.cell]
    box = cell.span_box(spot.start, spot.end)
    return {
        "page": view.pages[spot.line],
        "bbox": [round(v, 1) for v in box] if box else None,
        "text": cell.text[spot.start:spot.end],
    }
