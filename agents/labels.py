"""Find labelled values by proximity: after the label, in the next cell, or in the cell below."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.amounts import ISO_CODES, currency_code, money_values
from agents.dates import find_dates
from agents.layout import Cell, Line, fold

Parser = Callable[[str], Any]

# Labels of identifiers and codes that contain words of other labels ("VAT number" holds
# "VAT"): matching them too lets the longest-match rule keep them from feeding other fields.
IGNORED_LABELS = [
    "vat number", "vat no", "vat id", "vat reg no", "vat registration number", "vat reg",
    "tax id", "tax number", "tax code", "partita iva", "p. iva", "p.iva", "codice fiscale",
    "c.f.", "n° tva", "numero de tva", "tva intracommunautaire", "n° tva intracom", "siret",
    "siren", "ust-idnr", "ust-id", "ust-id-nr", "ust.-idnr.", "ust-identifikationsnummer",
    "steuernummer", "steuer-nr", "iban", "bic", "swift", "order number", "order no",
    "po number", "purchase order", "customer number", "customer no", "client no",
    "kundennummer", "codice cliente", "numero client", "tel", "phone", "fax", "page", "pagina",
    "seite", "btw-nummer", "btw nummer", "btw-id", "btw nr", "btw-nr", "kvk", "kvk-nummer",
    "nif", "cif", "nif/cif", "cnpj", "cpf", "gstin", "gst no", "gst number", "gstin/uin", "pan",
    "cin", "tin", "vat/tin", "service tax #", "service tax no", "ein", "abn", "ustid",
    "ust-id", "ustidnr", "uid", "vat in", "vat reg. no", "company number", "company no",
    "registration number", "rcs", "hrb", "iban", "account number", "account no",
    "rekeningnummer", "order id", "order no.", "klantnummer", "client id", "id.client",
    "numero de ligne", "contract no", "kundennr", "numero de client",
    "n° de client", "n° bon de commande", "n° bon de livraison", "n° de facture associee",
    "n° contrat", "n° bon de vente", "n° bon de reception", "variable symbol",
]
# Words that head columns and blocks of invoices in the supported languages. A value made only
# of label words (with the field labels of a vocabulary) is a heading, never a value.
HEADING_WORDS = frozenset(fold(w) for w in [
    "number", "nummer", "numero", "numéro", "nr", "no", "n°", "num", "pos", "position", "item", "items", "article",
    "artikel", "articolo", "description", "beschreibung", "bezeichnung", "descrizione", "désignation", "designation",
    "omschrijving", "descripción", "descripcion", "qty", "quantity", "menge", "anzahl", "quantité", "quantite",
    "quantità", "quantita", "aantal", "cantidad", "unit", "units", "einheit", "unité", "unite", "unità", "unita",
    "eenheid", "unidad", "price", "preis", "prix", "prezzo", "prijs", "precio", "unit", "price", "einzelpreis", "prix",
    "unitaire", "prezzo", "unitario", "stuksprijs", "precio", "unitario", "amount", "betrag", "montant", "importo",
    "bedrag", "importe", "total", "totale", "totaal", "gesamt", "summe", "sum", "subtotal", "date", "datum", "data",
    "fecha", "page", "seite", "pagina", "página", "invoice", "rechnung", "facture", "fattura", "factuur", "factura",
    "fatura", "receipt", "quittung", "ricevuta", "reçu", "recu", "bill", "to", "ship", "to", "sold", "to", "buyer",
    "käufer", "kaeufer", "seller", "verkäufer", "verkaeufer", "customer", "kunde", "client", "cliente", "klant",
    "destinatario", "destinataire", "empfänger", "empfaenger", "rechnungsempfänger", "leistungsempfänger", "supplier",
    "lieferant", "fournisseur", "fornitore", "leverancier", "proveedor", "vendor", "vendeur", "venditore", "from",
    "von", "de", "da", "van", "to", "an", "à", "a", "al", "aan", "vat", "mwst", "ust", "tva", "iva", "btw", "tax",
    "steuer", "netto", "brutto", "net", "gross", "ht", "ttc", "details", "reference", "referenz", "référence",
    "riferimento", "referentie", "referencia", "ref", "code", "id", "tel", "phone", "fax", "email", "e-mail", "iban",
    "bic", "swift", "address", "adresse", "indirizzo", "adres", "dirección", "direccion", "name",
])


def is_label_text(text: str, labels: dict[str, list[tuple[str, float]]] | None = None) -> bool:
    """Whether `text` is only a label or heading ("Nummer", "Käufer", "Invoice No."), not a value."""
    folded = fold(text)
    words = re.findall(r"[^\W\d_]+|\d+", folded)
    if not words or any(w.isdigit() for w in words):
        return False
    phrases = {fold(p) for items in (labels or {}).values() for p, _ in items}
    phrases |= {fold(p) for p in IGNORED_LABELS}
    if " ".join(words) in phrases:
        return True
    return all(w in HEADING_WORDS or w in phrases for w in words)


_NUMBER_PREFIX = re.compile(r"^(?:n[°ºo]\.?|nr\.?|no\.?|num\.?|number|numero|nummer|#)\s*[:.]?\s*",
                            re.IGNORECASE)
_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9/\-_.#]{0,39}")
_LEADING_PUNCT = re.compile(r"^[\s:.#°º\-–=|)]*")
_SCALES = [
    (re.compile(r"^\s*(?:billions?|bn|miliardi|milliards?|mrd\.?)(?!\w)", re.I), 1e9),
    (re.compile(r"^\s*(?:millions?|mln\.?|mio\.?|milioni|m)(?!\w)", re.I), 1e6),
    (re.compile(r"^\s*(?:thousands?|migliaia|milliers|tsd\.?|k)(?!\w)", re.I), 1e3),
]


@dataclass(frozen=True)
class Hit:
    """A label found in a cell."""

    field: str
    strength: float
    line: int
    cell: int
    start: int
    end: int


@dataclass(frozen=True)
class Candidate:
    """A value read near a label, with its confidence and where the label was."""

    value: Any
    confidence: float
    line: int
    field: str


def _compile(labels: dict[str, list[tuple[str, float]]]):
    entries = [(phrase, name, strength)
               for name, items in labels.items() for phrase, strength in items]
    entries += [(phrase, "_ignored", 0.0) for phrase in IGNORED_LABELS]
    # Longest phrases first so "total ht" claims its words before "total" can.
    entries.sort(key=lambda e: len(e[0]), reverse=True)
    return [(re.compile(rf"(?<!\w){re.escape(fold(p))}(?!\w)"), n, s) for p, n, s in entries]


class LabelIndex:
    """All label hits of one vocabulary over a document's lines, with value lookups around them."""

    def __init__(self, lines: list[Line], pages: list[int],
                 labels: dict[str, list[tuple[str, float]]],
                 skip_lines: set[int] | frozenset[int] = frozenset(),
                 skip_cell: Callable[[int, Cell], bool] | None = None):
        self.lines = lines
        self.labels = labels
        self._skip_cell = skip_cell or (lambda li, cell: False)
        self.pages = pages
        self._patterns = _compile(labels)
        self.hits: list[Hit] = []
        self._by_cell: dict[tuple[int, int], list[Hit]] = {}
        for li, line in enumerate(lines):
            if li in skip_lines:
                continue
            for ci, cell in enumerate(line.cells):
                for hit in self._cell_hits(fold(cell.text), li, ci):
                    self._by_cell.setdefault((li, ci), []).append(hit)
                    if hit.field != "_ignored":
                        self.hits.append(hit)

    def _cell_hits(self, text: str, li: int, ci: int) -> list[Hit]:
        taken: list[tuple[int, int]] = []
        hits = []
        for pattern, name, strength in self._patterns:
            for m in pattern.finditer(text):
                if not any(s < m.end() and m.start() < e for s, e in taken):
                    taken.append(m.span())
                    hits.append(Hit(name, strength, li, ci, m.start(), m.end()))
        return sorted(hits, key=lambda h: h.start)

    def has_label(self, li: int, ci: int) -> bool:
        return (li, ci) in self._by_cell

    def has_field(self, li: int, ci: int, field: str) -> bool:
        """Whether the cell holds a label of `field`."""
        return any(hit.field == field for hit in self._by_cell.get((li, ci), ()))

    def candidates(self, field: str, parser: Parser, anchored: bool = False) -> list[Candidate]:
        """Values `parser` accepts near each label of `field`, best first.

        `anchored` keeps only labels that start their cell, for label words that are also
        common in prose ("company", "from").
        """
        found = []
        for hit in self.hits:
            if hit.field != field or (anchored and not self._at_start(hit)):
                continue
            for value, base in self._values_near(hit, parser):
                confidence = base * hit.strength * self._exactness(hit)
                found.append(Candidate(value, round(confidence, 3), hit.line, field))
                break
        return sorted(found, key=lambda c: -c.confidence)

    def best(self, field: str, parser: Parser, prefer_last: bool = False,
             anchored: bool = False) -> Candidate | None:
        """The most confident candidate; ties go to the first (or last) in reading order."""
        found = self.candidates(field, parser, anchored)
        if not found:
            return None
        top = max(c.confidence for c in found)
        tied = sorted((c for c in found if c.confidence == top), key=lambda c: c.line)
        return tied[-1] if prefer_last else tied[0]

    def _at_start(self, hit: Hit) -> bool:
        text = self.lines[hit.line].cells[hit.cell].text
        return hit.start == 0 or not fold(text[:hit.start]).strip(" -•*|")

    def _exactness(self, hit: Hit) -> float:
        # "Total actif immobilisé" holds the label "total actif" but names another line: a cell
        # with words beyond its label is a weaker match than one that is just the label.
        text = fold(self.lines[hit.line].cells[hit.cell].text)
        rest = text[:hit.start] + " " + text[hit.end:]
        words = [w for w in re.findall(r"[^\W\d_]{3,}", rest) if not _is_value_word(w)]
        return 1.0 if not words else 0.8

    def _values_near(self, hit: Hit, parser: Parser):
        line = self.lines[hit.line]
        cell = line.cells[hit.cell]
        same_cell = self._by_cell[(hit.line, hit.cell)]
        following = [h.start for h in same_cell
                     if h.start >= hit.end and h.field not in ("_ignored", "_other")]
        stop = min(following) if following else len(cell.text)
        remainder = _LEADING_PUNCT.sub("", cell.text[hit.end:stop])
        at_start = self._at_start(hit)
        if remainder:
            value = parser(remainder)
            if value is not None:
                yield value, 0.95 if at_start else 0.85
                return
        # To the right on the same row, over cells that hold no label of their own.
        for step, ci in enumerate(range(hit.cell + 1, min(len(line.cells), hit.cell + 4))):
            if self.has_label(hit.line, ci):
                break
            if self._skip_cell(hit.line, line.cells[ci]):
                continue
            value = parser(line.cells[ci].text)
            if value is not None:
                yield value, 0.9 - 0.05 * step
                return
        # Below, in the cell that sits under the label, on the same page.
        for step, li in enumerate(range(hit.line + 1, min(len(self.lines), hit.line + 3))):
            if self.pages[li] != self.pages[hit.line]:
                break
            below = _cell_under(self.lines[li], cell)
            if below is None or self.has_label(li, below):
                continue
            if self._skip_cell(li, self.lines[li].cells[below]):
                continue
            value = parser(self.lines[li].cells[below].text)
            if value is not None:
                yield value, 0.8 - 0.05 * step
                return


def _is_value_word(word: str) -> bool:
    # Currency codes and names next to a label are part of its value, not another label.
    return word.upper() in ISO_CODES or word in ("euro", "euros", "dollars", "incl", "excl")


def _cell_under(line: Line, cell) -> int | None:
    best, best_overlap = None, 0.0
    for ci, other in enumerate(line.cells):
        overlap = other.overlaps(cell)
        if overlap > best_overlap:
            best, best_overlap = ci, overlap
    return best


# Value parsers: each takes the text where a value may be and returns it normalised, or None.

def date_parser(dayfirst: bool) -> Parser:
    """A parser for the first date near the start of the text."""
    def parse(text: str) -> str | None:
        found = find_dates(text[:60], dayfirst)
        return found[0].iso if found and found[0].start <= 25 else None
    return parse


def parse_amount_value(text: str) -> float | None:
    """The first amount that is not a percentage, scaled by a following 'million' or 'k'."""
    values = money_values(text[:160])
    if not values:
        return None
    first = values[0]
    for pattern, factor in _SCALES:
        if pattern.match(text[first.end:first.end + 12]):
            return first.value * factor
    return first.value


def parse_identifier(text: str) -> str | None:
    """A document number: the first token with a digit, after a 'No.'/'n°'/'#' prefix."""
    text = _NUMBER_PREFIX.sub("", text.strip())
    for m in _IDENTIFIER.finditer(text[:60]):
        token = m.group(0).rstrip(".-/")
        if any(ch.isdigit() for ch in token) and not find_dates(token):
            return token
    return None


def parse_name(text: str) -> str | None:
    """A name: the text itself when it has letters and is not a date or an amount."""
    text = text.strip(" :,;-–")
    if not re.search(r"[^\W\d_]{2}", text) or len(text) > 120:
        return None
    if " " not in text and len(text) <= 3:
        return None  # "AN", "TO", "DE": a header word beside the label, not a name
    return text


def parse_currency(text: str) -> str | None:
    """An ISO 4217 code from a symbol, code or currency name."""
    return currency_code(text[:40])
