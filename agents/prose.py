"""Rules for running text: values after key phrases, company names by legal form, name cleanup."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.amounts import money_values
from agents.dates import find_dates
from agents.labels import parse_amount_value
from agents.layout import DocView, fold

# Company legal forms across the four languages' markets (case matters: "SA" yes, "sa" no).
LEGAL_FORM = re.compile(
    r"(?<![\w.])(?:S\.p\.A\.|SpA|S\.r\.l\.s?|Srl|S\.n\.c\.|S\.a\.s\.|S\.c\.a\.r\.l\.|Ltd\.?|"
    r"Limited|LLC|L\.L\.C\.|Inc\.?|Corp\.?|Corporation|PLC|plc|LLP|GmbH(?: & Co\. KG)?|AG|KG|"
    r"OHG|UG|e\.K\.|S\.A\.S\.|SAS|S\.A\.R\.L\.|SARL|S\.A\.|SA|EURL|SNC|B\.V\.|BV|N\.V\.|NV|"
    r"S\.L\.U?\.?|SLU|S\.A\.U\.|Sagl|SE|Co\.|SASU|Ltda\.?|Lda\.?|V\.O\.F\.|VOF|ApS|s\.r\.o\.|"
    r"Private Limited|Pvt\.? Ltd\.?)(?![\w])"
)
_NAME_END = re.compile(
    r",|\(|;|\s[\"“«]|\s(?:hereinafter|hereafter|a company|a corporation|with (?:its )?registered|"
    r"registered|having|represented|incorporated|organized|whose|con sede|in persona|"
    r"rappresentat[ao]|domiciliat[ao]|nat[ao] a|codice fiscale|partita iva|p\.\s?iva|"
    r"di seguito|d'ora innanzi|avec si[eè]ge|dont le si[eè]ge|repr[ée]sent[ée]e?|ci-apr[eè]s|"
    r"immatricul[ée]e|soci[ée]t[ée] (?:anonyme|par actions)|mit sitz|vertreten|nachfolgend|"
    r"im folgenden|eingetragen|located|based)\b",
    re.IGNORECASE,
)
_LEADING_ARTICLE = re.compile(
    r"^(?:the company|the firm|the|la societ[àa]|la soci[ée]t[ée]|die firma|die gesellschaft|"
    r"il signor|la signora|sig\.(?:ra)?|m\.|mme|herr|frau|mr\.?|ms\.?|mrs\.?|la|il|le|les|l'|"
    r"der|die|das|and|e|et|und|between|tra|fra|entre|zwischen)\s+",
    re.IGNORECASE,
)


_BREAKS = (":", "  ", "\n", " - ", " | ", ",", "(", ")", ";", '"', "“", "”", "«", "»")


@dataclass(frozen=True)
class Phrase:
    """A key phrase, how much its presence says, and how far after it the value may start."""

    text: str
    strength: float = 1.0
    reach: int = 40


def phrases(spec: str, strength: float = 1.0, reach: int = 40) -> list[Phrase]:
    """Phrases from a comma-separated list sharing one strength and reach."""
    return [Phrase(p.strip(), strength, reach) for p in spec.split(",") if p.strip()]


def after_phrases(text: str, table: list[Phrase], parser: Callable[[str], tuple[Any, int] | None],
                  window: int = 120) -> tuple[Any, float, int] | None:
    """The value found after the strongest, then earliest, phrase: (value, strength, position).

    `parser` returns (value, offset of the value in the text it was given) or None.
    """
    folded = fold(text)
    best = None
    for phrase in sorted(table, key=lambda p: -len(p.text)):
        pattern = re.compile(rf"(?<!\w){re.escape(fold(phrase.text))}(?!\w)")
        for m in pattern.finditer(folded):
            snippet = text[m.end():m.end() + window]
            parsed = parser(snippet)
            if parsed is None:
                continue
            found, offset = parsed
            if offset > phrase.reach:
                continue
            if best is None or phrase.strength > best[1] or (
                    phrase.strength == best[1] and m.start() < best[2]):
                best = (found, phrase.strength, m.start())
            break
    return best


def date_at(dayfirst: bool) -> Callable[[str], tuple[str, int] | None]:
    """A prose parser for the first date and where it starts."""
    def parse(text: str) -> tuple[str, int] | None:
        found = find_dates(text, dayfirst)
        return (found[0].iso, found[0].start) if found else None
    return parse


def amount_at(text: str) -> tuple[float | None, int] | None:
    """A prose parser for the first non-percentage amount (scaled by 'million' etc.)."""
    values = money_values(text)
    if not values:
        return None
    return parse_amount_value(text[values[0].start:]), values[0].start


def company_name(text: str) -> str | None:
    """The company name with a legal form in `text`: "Acme S.p.A.", or "SARL Dupont" style."""
    m = LEGAL_FORM.search(text)
    if not m:
        return None
    head = text[:m.end()]
    # Names hold no clause punctuation, so the nearest break around the legal form bounds it.
    start = 0
    for sep in _BREAKS:
        at = head.rfind(sep, 0, m.start())
        if at >= 0:
            start = max(start, at + len(sep))
    if not text[start:m.start()].strip():
        # The legal form comes first ("SARL Boulangerie Dupont"): the name runs to the next break.
        tail = text[m.end():]
        stop = min([i for i in (tail.find(sep) for sep in _BREAKS) if i >= 0] or [len(tail)])
        name = clean_name(text[start:m.end() + stop])
    else:
        name = clean_name(head[start:].strip(" :-|"))
    words = name.split()
    if len(words) < 2 or len(words) > 10 or not re.search(r"[^\W\d_]{2}", LEGAL_FORM.sub("", name)):
        return None
    return name


def clean_name(text: str) -> str:
    """A party or company name without leading articles and trailing clauses."""
    text = re.sub(r"\s+", " ", text).strip(" ,;:-–\"“”'«»")
    for _ in range(2):
        text = _LEADING_ARTICLE.sub("", text).strip()
    return text


def cut_name(text: str) -> str | None:
    """The name at the start of `text`, cut before the clause that describes it."""
    text = text.strip(" ,:;-–\"“”'«»")
    label = re.match(r"^[^\W\d][\w\s'’.-]{0,30}?\s*:\s+", text)
    if label:
        text = text[label.end():]  # "les soussignés : Name", "Party A: Name"
    legal = company_name(text[:160])
    if legal and text.startswith(legal.split()[0]):
        return legal
    m = _NAME_END.search(text[:160])
    name = clean_name(text[:m.start()] if m else text[:80])
    if not re.search(r"[^\W\d_]{2}", name) or len(name.split()) > 8:
        return None
    return name


def legal_names(view: DocView, max_lines: int = 40,
                first_page_only: bool = True) -> list[tuple[str, int]]:
    """Company names with legal forms in the first lines, with their line numbers."""
    found = []
    for li, (line, page) in enumerate(zip(view.lines[:max_lines], view.pages[:max_lines])):
        if first_page_only and page != view.pages[0]:
            break
        for cell in line.cells:
            name = company_name(cell.text)
            if name:
                found.append((name, li))
    return found


def usual_case(name: str, text: str) -> str:
    """An all-capitals name as the document writes it elsewhere in mixed case, if it does."""
    letters = [ch for ch in name if ch.isalpha()]
    if not letters or not all(ch.isupper() for ch in letters):
        return name
    pattern = re.compile(r"(?<!\w)" + re.escape(name) + r"(?!\w)", re.IGNORECASE)
    for m in pattern.finditer(text):
        if m.group(0) != name:
            return m.group(0)
    return name
