"""The invoice's issuer (the seller), chosen by weighing evidence, never from the customer block.

Candidates come from seller labels ("From", "Seller", "Leverancier", ...), company names with a
legal form, and the letterhead's first line. Evidence adds to each: standing at the top of the
first page, owning a VAT/GST/company ID printed just below it, a legal footer line (share
capital, register, registered office), and an e-mail or web domain that spells the name.
A name printed in a bill-to/ship-to/customer block, or equal to one, is never the issuer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agents.fields import FieldValue
from agents.labels import LabelIndex, is_label_text, parse_name
from agents.layout import DocView, fold
from agents.prose import LEGAL_FORM, company_name

_TITLE_WORDS = re.compile(
    r"\s*(?:tax |vat |retail |commercial |pro[- ]forma )?(?:invoice|fattura|facture|rechnung|"
    r"factuur|factura|fatura|receipt|recibo|bill)s?\b.*$", re.IGNORECASE)
_LEADING_TITLE = re.compile(r"^(?:tax )?(?:invoice|fattura|facture|rechnung|factuur|factura|"
                            r"fatura|receipt|payment receipt|recibo)\b", re.IGNORECASE)
_ID_LABEL = re.compile(
    r"(?<!\w)(?:vat|tva|btw|iva|ust|gst|gstin|cin|tin|nif|cif|cnpj|siret|siren|kvk|hrb|"
    r"partita iva|p\.\s?iva|ustid|ust-id|vat in|company (?:no|number)|ein|abn)(?!\w)")
_FOOTER_WORDS = re.compile(
    r"capital|rcs|registered office|regd\.? office|registergericht|handelsregister|"
    r"amtsgericht|kvk|siege social|sede legale|registro|company (?:no|number)|\bcin\b|"
    r"vorstand|geschaftsfuhr")
_DOMAIN = re.compile(r"(?:@|www\.|https?://)([a-z0-9-]+(?:\.[a-z0-9-]+)*)\.[a-z]{2,}", re.I)
_GENERIC_DOMAINS = {"gmail", "yahoo", "hotmail", "outlook", "live", "gmx", "web", "icloud",
                    "libero", "orange", "free"}
_NOTE = re.compile(r"^[(\[]|^(?:not|please|page|tel|phone|fax|email|e-mail)\b", re.IGNORECASE)


@dataclass
class _Candidate:
    name: str
    line: int
    score: float


def find_issuer(view: DocView, index: LabelIndex,
                customer_cells: set[tuple[int, int]]) -> FieldValue:
    """The seller's name with a confidence from the evidence found for it, or an empty value."""
    customer_names = {_key(view.lines[li].cells[ci].text) for li, ci in customer_cells}
    customer_domains = _domains(" ".join(view.lines[li].cells[ci].text
                                         for li, ci in customer_cells))
    candidates = _labelled(view, index) + _legal(view, customer_cells) + _letterhead(
        view, index, customer_cells)
    domains = _domains(view.text) - customer_domains
    page_start: dict[int, int] = {}
    for li, page in enumerate(view.pages):
        page_start.setdefault(page, li)
    best: _Candidate | None = None
    for cand in candidates:
        key = _key(cand.name)
        # A heading or a column's label ("Käufer", "Nummer") is never the seller's name.
        if not key or key in customer_names or is_label_text(cand.name, index.labels):
            continue
        position = cand.line - page_start.get(view.pages[cand.line], 0)
        score = cand.score + _evidence(view, cand, domains, position)
        if best is None or score > best.score:
            best = _Candidate(cand.name, cand.line, score)
    if best is None:
        return FieldValue()
    return FieldValue(best.name, round(min(0.97, best.score), 3), line=best.line)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", fold(LEGAL_FORM.sub("", name)))


def _domains(text: str) -> set[str]:
    found = set()
    for m in _DOMAIN.finditer(text):
        for part in m.group(1).lower().split("."):
            if len(part) >= 3 and part not in _GENERIC_DOMAINS and part not in ("www", "com"):
                found.add(part.replace("-", ""))
    return found


def _company(text: str) -> str | None:
    """A seller name read from a labelled cell: a legal name, or a short name-like text."""
    if _NOTE.match(text.strip()):
        return None
    legal = company_name(text)
    if legal:
        return legal
    name = parse_name(text)
    if not name or len(name) > 60 or re.search(r"\d{3,}|@|:|www\.|https?:|\.[a-z]{2,3}$", name):
        return None
    return name


def _labelled(view: DocView, index: LabelIndex) -> list[_Candidate]:
    found = []
    for hit in index.hits:
        if hit.field != "issuer":
            continue
        line = view.lines[hit.line]
        cell = line.cells[hit.cell]
        rest = cell.text[hit.end:]
        # "Seller: Acme Ltd" names the seller; "SELLER TRADE NAME" is a phrase, not a label.
        if rest.strip() and not re.match(r"\s*[:\-–]", rest):
            continue
        if rest.strip():
            name = _company(rest.lstrip(" :-–"))
            if name:
                found.append(_Candidate(name, hit.line, 0.8 * hit.strength))
                continue
        # The name to the right, or on one of the next lines under the label.
        right = None
        for ci in range(hit.cell + 1, len(line.cells)):
            if index.has_label(hit.line, ci):
                break  # "Verkäufer  Käufer": the next block's heading, not a name
            right = _company(line.cells[ci].text)
            if right:
                break
        if right:
            found.append(_Candidate(right, hit.line, 0.78 * hit.strength))
            continue
        for li in range(hit.line + 1, min(len(view.lines), hit.line + 4)):
            if view.pages[li] != view.pages[hit.line]:
                break
            under = [c for ci, c in enumerate(view.lines[li].cells)
                     if (c.overlaps(cell) > 0 or abs(c.x0 - cell.x0) < 30)
                     and not index.has_label(li, ci)]
            names = [n for n in (_company(c.text) for c in under) if n]
            if names:
                found.append(_Candidate(names[0], li, 0.78 * hit.strength))
                break
    return found


def _legal(view: DocView, customer_cells: set[tuple[int, int]]) -> list[_Candidate]:
    found = []
    first_page = view.pages[0] if view.pages else 1
    for li, (line, page) in enumerate(zip(view.lines, view.pages)):
        if page != first_page:
            break
        for ci, cell in enumerate(line.cells):
            if (li, ci) in customer_cells:
                continue
            name = company_name(cell.text)
            if name:
                found.append(_Candidate(name, li, 0.6))
    return found


def _letterhead(view: DocView, index: LabelIndex,
                customer_cells: set[tuple[int, int]]) -> list[_Candidate]:
    for li, line in enumerate(view.lines[:8]):
        cell = line.cells[0]
        if (li, 0) in customer_cells or index.has_label(li, 0) or _LEADING_TITLE.match(cell.text):
            continue
        # "Amazon Web Services Invoice": the name before the document's title word.
        text = _TITLE_WORDS.sub("", cell.text).strip(" :-–|")
        name = _company(text)
        if name and len(text) <= 60:
            return [_Candidate(name, li, 0.4)]
    return []


def _evidence(view: DocView, cand: _Candidate, domains: set[str], position: int) -> float:
    bonus = 0.0
    if position < 6:
        bonus += 0.12  # letterhead
    nearby = " ".join(fold(view.lines[li].text)
                      for li in range(cand.line, min(len(view.lines), cand.line + 6)))
    if _ID_LABEL.search(nearby):
        bonus += 0.06  # the VAT/GST/company ID printed under the name
    if _FOOTER_WORDS.search(fold(view.lines[cand.line].text)):
        bonus += 0.08  # the legal footer line names the seller
    words = [w for w in re.findall(r"[a-z0-9]+", fold(LEGAL_FORM.sub("", cand.name))) if len(w) >= 3]
    joined = "".join(words)
    if domains and (joined in domains or any(len(w) >= 4 and w in domains for w in words)
                    or any(d.startswith(joined) for d in domains if joined)):
        bonus += 0.1  # the e-mail or web domain spells the name
    return bonus
