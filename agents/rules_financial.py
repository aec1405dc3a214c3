"""Offline rules for financial statements: company, period end, currency and key figures."""

from __future__ import annotations

import re
from dataclasses import replace

from agents.amounts import dominant_currency
from agents.dates import find_month_year, month_end
from agents.fields import FieldValue, empty_fields
from agents.labels import LabelIndex, parse_amount_value, parse_currency, parse_name
from agents.layout import Cell, DocView, fold
from agents.prose import after_phrases, company_name, date_at, legal_names, phrases, usual_case


def _labels(spec: str, strength: float = 1.0) -> list[tuple[str, float]]:
    return [(p.strip(), strength) for p in spec.split(",") if p.strip()]


LABELS = {
    "revenue": _labels(
        "revenue, revenues, total revenue, total revenues, net revenue, net sales, sales, "
        "turnover, ricavi, ricavi delle vendite, ricavi delle vendite e delle prestazioni, "
        "ricavi totali, totale ricavi, fatturato, chiffre d'affaires, chiffre d'affaires net, "
        "ventes, produits des activites ordinaires, umsatzerlose, umsatz, umsatzerloese, erlose"),
    "net_income": _labels(
        "net income, net profit, net profit for the year, profit for the year, profit for the "
        "period, net earnings, net loss, net income (loss), utile netto, utile dell'esercizio, "
        "utile (perdita) dell'esercizio, risultato netto, risultato dell'esercizio, "
        "utile d'esercizio, resultat net, benefice net, resultat de l'exercice, "
        "benefice ou perte, benefice (perte), resultat net de l'exercice, "
        "profit (loss) for the financial year, profit for the financial year, "
        "profit (loss) for the year, profit/(loss) for the year, net profit (loss), "
        "profit after tax, profit after taxation, utile (perdita) d'esercizio, "
        "jahresuberschuss/-fehlbetrag, jahresuberschuss (-fehlbetrag), gewinn/verlust, "
        "jahresuberschuss, jahresergebnis, nettogewinn, konzernergebnis, "
        "periodenergebnis")
    + _labels("result for the year, resultat de l'exercice", 0.8),
    "_net_loss": _labels(
        "net loss, loss for the year, loss for the period, perdita netta, perdita "
        "dell'esercizio, perte nette, perte de l'exercice, jahresfehlbetrag, nettoverlust"),
    "total_assets": _labels(
        "total assets, totale attivo, totale attivita, totale dell'attivo, total actif, "
        "total de l'actif, total bilan, bilanzsumme, summe aktiva, summe der aktiva, "
        "aktiva gesamt, gesamtvermogen"),
    "company": _labels(
        "company, company name, entity, reporting entity, societa, ragione sociale, "
        "denominazione, societe, denomination, raison sociale, gesellschaft, firma, "
        "unternehmen"),
    "currency": _labels("currency, valuta, divisa, devise, monnaie, wahrung"),
    "_note": _labels("note, notes, nota, note esplicative, anhang, erlauterung"),
}
_PERIOD = phrases(
    "period ended, period ending, year ended, year ending, fiscal year ended, "
    "financial year ended, for the year ended, balance sheet date, reporting date, "
    "esercizio chiuso al, periodo chiuso al, chiuso al, alla data del, exercice clos le, "
    "clos le, arrete au, bilanzstichtag, stichtag, geschaftsjahr endet am, "
    "period end, year end", 1.0, 30)
_PERIOD += phrases("as at, as of, at, al, au, zum, per", 0.8, 3)
_FISCAL_YEAR = re.compile(
    r"(?<!\w)(?:fiscal year|financial year|fy|esercizio|exercice|geschaftsjahr|bilancio|"
    r"jahresabschluss|annual report)\s*(20\d\d)(?!\d)"
)
_NOTE_HEADER = re.compile(
    r"notes?|nota|note esplicative|rif\.?|anhang|annexe|erlauterung|ref|anm\.?|anmerkung|"
    r"ziffer|tz\.?")
# "TEUR", "kEUR", "TUSD": thousands of a currency, written as one word.
_SCALED_CODE = re.compile(r"\b[TtKk](EUR|USD|CHF|GBP)\b")
_CODES = r"(?:eur|usd|gbp|chf|€|\$|£)"
_SCALE = [
    (re.compile(r"in (?:billions|miliardi|milliards|milliarden)|mrd\.? ?" + _CODES), 1e9),
    (re.compile(r"in (?:millions|milioni|millionen)|en millions|millions of|milioni di|"
                r"millions d|" + _CODES + r" ?(?:m|mln|mio|millions?)\b|mio\.? ?" + _CODES), 1e6),
    (re.compile(r"in (?:thousands?|migliaia|milliers|tausend)|en milliers|thousands of|"
                r"migliaia di|milliers d|" + _CODES + r" ?(?:thousands?|'?000|/ ?000)|"
                r"\b(?:teur|keur|tusd|kusd|tchf|kchf|tgbp|k€)\b|tsd\.? ?" + _CODES
                + r"|\(000s?\)|000s\b"), 1e3),
]


def extract_financial(view: DocView) -> dict[str, FieldValue]:
    """All financial statement fields of docs/CONTRACTS.md, each with a confidence."""
    fields = empty_fields("financial_statement")
    index = LabelIndex(view.lines, view.pages, LABELS, skip_cell=_note_column_cells(view))
    scale = _scale(view.text)
    for name in ("revenue", "net_income", "total_assets"):
        found = index.best(name, _figure)
        if name == "net_income":
            loss = index.best("_net_loss", _figure)
            if loss and (found is None or loss.confidence > found.confidence):
                # A loss printed without a sign under a loss label is still a loss.
                found = replace(loss, value=-abs(loss.value))
        if found:
            # Figures stated "in thousands" are reported in full units.
            fields[name] = FieldValue(round(found.value * scale, 2), found.confidence)
    fields["period_end"] = _period_end(view)
    labelled = index.best("currency", parse_currency)
    if labelled:
        fields["currency"] = FieldValue(labelled.value, labelled.confidence)
    else:
        code, share = dominant_currency(view.text)
        scaled = _SCALED_CODE.search(view.text[:20000])
        if code:
            fields["currency"] = FieldValue(code, round(0.5 + 0.4 * share, 3))
        elif scaled:
            fields["currency"] = FieldValue(scaled.group(1).upper(), 0.8)
    fields["company"] = _company(view, index)
    if isinstance(fields["company"].value, str):
        fields["company"].value = usual_case(fields["company"].value, view.text)
    return fields


def _note_column_cells(view: DocView):
    """A predicate for cells under a "Note" column header: references, not figures."""
    columns: dict[int, list[tuple[float, float]]] = {}
    for line, page in zip(view.lines, view.pages):
        for cell in line.cells:
            if _NOTE_HEADER.fullmatch(fold(cell.text).strip(" .:")):
                # Note numbers are short and may sit left or right of the header's narrow box.
                pad = max(12.0, cell.x1 - cell.x0)
                columns.setdefault(page, []).append((cell.x0 - pad, cell.x1 + pad))

    def skip(li: int, cell: Cell) -> bool:
        if not re.fullmatch(r"\d{1,2}", cell.text.strip()):
            return False
        if any(x0 <= cell.center <= x1 for x0, x1 in columns.get(view.pages[li], [])):
            return True
        # Without a header, a one- or two-digit number followed by two figures is a note.
        cells = view.lines[li].cells
        after = cells[cells.index(cell) + 1:]
        return sum(1 for c in after if parse_amount_value(c.text) is not None) >= 2
    return skip


def _figure(text: str) -> float | None:
    if re.match(r"\s*(?:note|nota|anhang)\b", text, re.IGNORECASE):
        return None
    return parse_amount_value(text)


def _scale(text: str) -> float:
    head = fold(text[:20000])
    for pattern, factor in _SCALE:
        if pattern.search(head):
            return factor
    return 1.0


def _period_end(view: DocView) -> FieldValue:
    head = view.flat(3)
    found = after_phrases(head, _PERIOD, date_at(view.dayfirst), window=60)
    if found:
        return FieldValue(found[0], round(0.9 * found[1], 3))
    month_year = find_month_year(head[:3000])
    if month_year:
        return FieldValue(month_end(*month_year), 0.5)
    m = _FISCAL_YEAR.search(fold(head))
    if m:
        # A fiscal year named without a day most often ends on 31 December.
        return FieldValue(f"{m.group(1)}-12-31", 0.45)
    return FieldValue()


def _company(view: DocView, index: LabelIndex) -> FieldValue:
    labelled = index.best("company", parse_name, anchored=True)
    if labelled:
        return FieldValue(company_name(labelled.value) or labelled.value, labelled.confidence)
    names = legal_names(view, max_lines=15)
    if names:
        return FieldValue(names[0][0], 0.75)
    for line in view.lines[:5]:
        text = line.cells[0].text
        name = parse_name(text)
        if name and not re.search(r"balance|bilan|stato|conto|income|statement|report|"
                                  r"bericht|rapport|relazione|rechnung|esercizio|exercice",
                                  fold(text)):
            return FieldValue(name, 0.4)
    return FieldValue()
