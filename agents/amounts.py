"""Find and normalise monetary amounts (many number formats) and currencies (ISO 4217)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from agents.dates import find_dates

ISO_CODES = frozenset(
    [
        "EUR", "USD", "GBP", "CHF", "JPY", "CAD", "AUD", "NZD", "SEK", "NOK", "DKK", "ISK", "PLN", "CZK", "HUF", "RON",
        "BGN", "TRY", "CNY", "HKD", "SGD", "INR", "BRL", "MXN", "ZAR", "AED", "SAR", "QAR", "KWD", "RUB", "UAH", "KRW",
        "ILS", "THB", "MYR", "IDR", "PHP", "TWD", "ARS", "CLP", "COP", "EGP", "MAD", "NGN", "KES",
    ]
)
# Longest first, so "US$" wins over "$".
_SYMBOLS = {
    "US$": "USD", "C$": "CAD", "CA$": "CAD", "A$": "AUD", "AU$": "AUD", "NZ$": "NZD",
    "HK$": "HKD", "S$": "SGD", "R$": "BRL", "SFr.": "CHF", "Fr.": "CHF", "€": "EUR",
    "$": "USD", "£": "GBP", "¥": "JPY", "₹": "INR", "zł": "PLN", "₽": "RUB", "₩": "KRW",
    "₪": "ILS", "Kč": "CZK", "Ft": "HUF",
}
_WORDS = {
    "euro": "EUR", "euros": "EUR", "dollars": "USD", "dollari": "USD", "dollar": "USD",
    "sterling": "GBP", "sterline": "GBP", "pounds": "GBP", "franken": "CHF",
    "francs suisses": "CHF", "franchi svizzeri": "CHF", "swiss francs": "CHF", "yen": "JPY",
    "rs": "INR", "rupees": "INR", "rupee": "INR", "reais": "BRL",
}
_SYMBOL_ALT = "|".join(re.escape(s) for s in sorted(_SYMBOLS, key=len, reverse=True))
_CODE_ALT = "|".join(sorted(ISO_CODES))
_CURRENCY = re.compile(rf"(?:{_SYMBOL_ALT})|\b(?:{_CODE_ALT})\b")
_RUPEES = re.compile(r"Rs\.?\s?-?\d")
_CURRENCY_WORD = re.compile(r"\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b",
                            re.IGNORECASE)

# A number with optional grouping (, . ' ’ space NBSP) and decimals; grouping is checked later.
_NUMBER = re.compile(r"(\(?[-−]?)(\d(?:[\d.,'’\u00a0\u202f]|\s(?=\d{3}(?!\d)))*\d|\d)(\)?-?)")


@dataclass(frozen=True)
class Amount:
    """A number found in text with the currency written beside it and its span."""

    value: float
    currency: str | None
    start: int
    end: int
    percent: bool = False


def parse_number(token: str) -> float | None:
    """A float from one written number: 1,234.56 / 1.234,56 / 1 234,56 / 1'234.56 / (12.00)."""
    raw = token.strip()
    negative = raw.startswith(("-", "−", "(")) or raw.endswith("-")
    digits = raw.strip("()-−").strip()
    if not digits or not digits[0].isdigit() or not digits[-1].isdigit():
        return None
    marks = [(i, ch) for i, ch in enumerate(digits) if not ch.isdigit()]
    decimal_at = None
    dots_commas = [(i, ch) for i, ch in marks if ch in ".,"]
    if dots_commas:
        last_i, last_ch = dots_commas[-1]
        tail = len(digits) - last_i - 1
        same = [ch for _, ch in dots_commas if ch == last_ch]
        other_kinds = {ch for _, ch in marks} - {last_ch}
        if other_kinds & {".", ","} or (len(same) == 1 and tail != 3):
            decimal_at = last_i
        elif len(same) == 1 and tail == 3 and digits[:last_i] == "0":
            decimal_at = last_i  # 0.125 reads as a fraction, never as 0 thousands
    integer = digits[:decimal_at] if decimal_at is not None else digits
    fraction = digits[decimal_at + 1:] if decimal_at is not None else ""
    if fraction and not fraction.isdigit():
        return None
    groups = re.split(r"[.,'’ \u00a0\u202f]", integer)
    if len(groups) > 1:
        separators = {ch for ch in integer if not ch.isdigit()}
        if len(separators) > 1 or not (1 <= len(groups[0]) <= 3):
            return None
        if any(len(g) != 3 for g in groups[1:]):
            return None
    elif (len(integer) > 1 and integer.startswith("0")) or len(integer) > 12:
        return None  # codes and identifiers, not amounts
    value = float("".join(groups) + ("." + fraction if fraction else ""))
    return -value if negative else value


def currency_code(text: str) -> str | None:
    """The ISO 4217 code of the first currency symbol, code or name in `text`."""
    m = _CURRENCY.search(text)
    if m:
        token = m.group(0)
        return _SYMBOLS.get(token, token if token in ISO_CODES else None)
    w = _CURRENCY_WORD.search(text)
    return _WORDS[w.group(1).lower()] if w else None


def currency_spans(text: str) -> list[tuple[str, int, int]]:
    """Every currency symbol, code or name in `text` as (ISO code, start, end)."""
    found = []
    for m in _CURRENCY.finditer(text):
        code = _SYMBOLS.get(m.group(0), m.group(0) if m.group(0) in ISO_CODES else None)
        if code:
            found.append((code, m.start(), m.end()))
    for m in _CURRENCY_WORD.finditer(text):
        found.append((_WORDS[m.group(1).lower()], m.start(), m.end()))
    return sorted(found, key=lambda f: f[1])


def find_amounts(text: str) -> list[Amount]:
    """Numbers that can be amounts, with adjacent currency; dates and identifiers are skipped."""
    masked = list(text)
    for d in find_dates(text):
        masked[d.start:d.end] = " " * (d.end - d.start)
    view = "".join(masked)
    found = []
    for m in _NUMBER.finditer(view):
        start, end = m.span()
        before = view[max(0, start - 1):start]
        after = view[end:end + 1]
        if before and (before.isalnum() or before in "/_#") and not _currency_ends_at(view, start):
            continue
        if after and (after in "/_" or (after.isalpha() and not _currency_starts_at(view, end))):
            continue
        token = m.group(0)
        if m.group(1).strip() in ("-", "−") and start > 0 and view[start - 1].isalnum():
            continue  # a hyphen inside an identifier such as FT-2024
        value = parse_number(token)
        if value is None:
            continue
        percent = view[end:end + 2].lstrip().startswith("%")
        window = view[max(0, start - 5):start] + " " + view[end:end + 6]
        found.append(Amount(value, currency_code(window), start, end, percent))
    return found


def _currency_ends_at(text: str, index: int) -> bool:
    head = text[max(0, index - 4):index]
    return any(head.endswith(s) for s in _SYMBOLS) or head[-3:] in ISO_CODES


def _currency_starts_at(text: str, index: int) -> bool:
    tail = text[index:index + 4]
    return tail[:3] in ISO_CODES or any(tail.startswith(s) for s in _SYMBOLS)


def money_values(text: str) -> list[Amount]:
    """Amounts that are not percentages."""
    return [a for a in find_amounts(text) if not a.percent]


def dominant_currency(text: str) -> tuple[str | None, float]:
    """The currency written most often in `text` and the share of mentions it has."""
    counts: Counter[str] = Counter()
    for m in _CURRENCY.finditer(text):
        token = m.group(0)
        code = _SYMBOLS.get(token, token if token in ISO_CODES else None)
        if code:
            counts[code] += 1
    for w in _CURRENCY_WORD.finditer(text):
        counts[_WORDS[w.group(1).lower()]] += 1
    # "Rs" before a figure, even glued to the word before it by a PDF's spacing ("ofRs -40.00").
    rupees = len(_RUPEES.findall(text))
    if rupees > counts["INR"]:
        counts["INR"] = rupees  # the same mentions the word pattern may already have counted
    counts = +counts
    if not counts:
        return None, 0.0
    code, n = counts.most_common(1)[0]
    return code, n / sum(counts.values())
