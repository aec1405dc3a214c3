"""Find and normalise dates written in en, it, fr, de, nl, es and pt to ISO 8601."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from agents.layout import fold

# Month names and abbreviations, accent-folded; the languages agree wherever spellings collide.
_MONTH_NAMES = {
    1: "january jan gennaio genn gen janvier janv januar janner jaenner januari enero ene janeiro",
    2: "february feb febbraio febbr fevrier fevr fev februar februari febrero fevereiro",
    3: "march mar marzo mars marz maerz mrz maart mrt marco",
    4: "april apr aprile avril avr abril abr",
    5: "may maggio mag mai mei mayo maio",
    6: "june jun giugno giu juin juni junio junho",
    7: "july jul luglio lug juillet juil juli julio julho",
    8: "august aug agosto ago aout augustus",
    9: "september sept sep settembre sett set septembre septiembre setiembre setembro",
    10: "october oct ottobre ott octobre oktober okt octubre outubro",
    11: "november nov novembre noviembre novembro",
    12: "december dec dicembre dic decembre dezember dez diciembre dezembro",
}
MONTHS = {name: number for number, names in _MONTH_NAMES.items() for name in names.split()}
_MONTH_ALT = "|".join(sorted(MONTHS, key=len, reverse=True))

_ISO = re.compile(r"(?<![\d.,/-])(\d{4})([-/.])(\d{1,2})\2(\d{1,2})(?![\d/-]|[.,]\d)")
_NUMERIC = re.compile(r"(?<![\d.,/-])(\d{1,2})([./-])(\d{1,2})\2(\d{4}|\d{2})(?![\d/-]|[.,]\d)")
_DAY_MONTH_YEAR = re.compile(
    rf"(?<![\w])(\d{{1,2}})(?:st|nd|rd|th|er|°|º|\.)?[\s-]*(?:of\s+|de\s+)?({_MONTH_ALT})\.?"
    r"[\s,/-]*(?:de\s+)?(\d{4})(?!\d)"
)
_MONTH_DAY_YEAR = re.compile(
    rf"(?<![\w])({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\s*,?\s+(\d{{4}})(?!\d)"
)
_MONTH_YEAR = re.compile(rf"(?<![\w])({_MONTH_ALT})\.?\s+(\d{{4}})(?!\d)")


@dataclass(frozen=True)
class FoundDate:
    """A date found in text: ISO value and its character span."""

    iso: str
    start: int
    end: int


def _make(year: int, month: int, day: int) -> str | None:
    if year < 100:
        # Two-digit years on business documents are recent ones.
        year += 2000 if year < 70 else 1900
    try:
        return dt.date(year, month, day).isoformat()
    except ValueError:
        return None


def _numeric(a: int, b: int, year: int, dayfirst: bool) -> str | None:
    # Whichever part cannot be a month settles the order; otherwise the caller's convention.
    if a > 12 >= b:
        return _make(year, b, a)
    if b > 12 >= a:
        return _make(year, a, b)
    return _make(year, b, a) if dayfirst else _make(year, a, b)


def find_dates(text: str, dayfirst: bool = True) -> list[FoundDate]:
    """Every date in `text`, in order, without overlaps; ambiguous d/m order uses `dayfirst`."""
    folded = fold(text)
    found: list[FoundDate] = []
    taken: list[tuple[int, int]] = []

    def add(iso: str | None, match: re.Match) -> None:
        start, end = match.span()
        if iso and not any(s < end and start < e for s, e in taken):
            taken.append((start, end))
            found.append(FoundDate(iso, start, end))

    for m in _ISO.finditer(folded):
        add(_make(int(m[1]), int(m[3]), int(m[4])), m)
    for m in _DAY_MONTH_YEAR.finditer(folded):
        add(_make(int(m[3]), MONTHS[m[2]], int(m[1])), m)
    for m in _MONTH_DAY_YEAR.finditer(folded):
        add(_make(int(m[3]), MONTHS[m[1]], int(m[2])), m)
    for m in _NUMERIC.finditer(folded):
        add(_numeric(int(m[1]), int(m[3]), int(m[4]), dayfirst), m)
    return sorted(found, key=lambda f: f.start)


def parse_date(text: str, dayfirst: bool = True) -> str | None:
    """The first date in `text` as `YYYY-MM-DD`, or None."""
    found = find_dates(text, dayfirst)
    return found[0].iso if found else None


def find_month_year(text: str) -> tuple[int, int] | None:
    """A `Month YYYY` mention as (year, month), for period ends written without a day."""
    m = _MONTH_YEAR.search(fold(text))
    return (int(m[2]), MONTHS[m[1]]) if m else None


def month_end(year: int, month: int) -> str:
    """The last day of a month, ISO formatted."""
    first_next = dt.date(year + month // 12, month % 12 + 1, 1)
    return (first_next - dt.timedelta(days=1)).isoformat()


def add_days(iso: str, days: int) -> str:
    """An ISO date moved by a number of days."""
    return (dt.date.fromisoformat(iso) + dt.timedelta(days=days)).isoformat()


def is_iso_date(value: object) -> bool:
    """Whether a value is a real calendar date written exactly as `YYYY-MM-DD`."""
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return False
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return False
    return True
