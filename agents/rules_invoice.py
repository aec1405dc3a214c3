"""Offline rules for invoices: labelled header fields, totals with cross-checks, line items."""

from __future__ import annotations

import re

from agents.amounts import dominant_currency
from agents.dates import add_days, find_dates
from agents.fields import FieldValue, empty_fields
from agents.labels import (
    LabelIndex, date_parser, parse_amount_value, parse_currency, parse_identifier, parse_name,
)
from agents.layout import DocView, fold
from agents.line_items import find_headerless_items, find_tables
from agents.prose import company_name, legal_names, usual_case


def _labels(spec: str, strength: float = 1.0) -> list[tuple[str, float]]:
    return [(p.strip(), strength) for p in spec.split(",") if p.strip()]


LABELS = {
    "invoice_number": _labels(
        "invoice number, invoice no, invoice nr, invoice #, invoice n°, invoice n., inv no, "
        "inv. no, inv #, bill no, numero fattura, numero della fattura, n. fattura, nr. fattura, "
        "fattura n, fattura n., fattura nr, fattura numero, n° fattura, facture n°, facture no, "
        "facture n, numero de facture, n° de facture, no de facture, n° facture, "
        "rechnungsnummer, rechnung nr, rechnungs-nr, rechnung-nr, rechnungsnr, re-nr, "
        "beleg-nr, beleg nr, document number, doc. no, n° document, n. documento, "
        "n° documento, documento n., doc. n.")
    + _labels("document no, numero documento, belegnummer, number, numero, nummer", 0.75)
    + _labels("invoice, fattura, facture, rechnung", 0.7),
    "issue_date": _labels(
        "invoice date, date of invoice, date of issue, issue date, issued on, billing date, "
        "data fattura, data della fattura, data emissione, data di emissione, data documento, "
        "date de facture, date de facturation, date de la facture, date d'emission, "
        "rechnungsdatum, ausstellungsdatum, belegdatum, emise le, emis le, date d'emission, "
        "issued, data di emissione della fattura")
    + _labels("date, data, datum, dated, del, du, vom", 0.75),
    "due_date": _labels(
        "due date, payment due, due by, due on, pay by, payable by, date due, scadenza, "
        "data scadenza, data di scadenza, scadenza pagamento, da pagare entro, echeance, "
        "date d'echeance, date limite de paiement, a payer avant le, payable avant le, "
        "fallig am, falligkeitsdatum, falligkeit, zahlbar bis, a regler avant le, "
        "a regler le, regler avant le, date limite, paiement avant le, echeance le, "
        "au plus tard le, no later than, entro e non oltre il, spatestens am, spatestens bis, "
        "payable on, payment date")
    + _labels("due, fallig, zahlungsziel, payment terms, termini di pagamento, "
              "condizioni di pagamento, conditions de paiement, zahlungsbedingungen", 0.8),
    "total": _labels(
        "total due, amount due, balance due, grand total, total amount, invoice total, "
        "total payable, amount payable, total to pay, total incl. vat, total including vat, "
        "totale fattura, totale documento, totale da pagare, netto a pagare, totale dovuto, "
        "importo totale, totale complessivo, total ttc, net a payer, montant ttc, total a payer, "
        "montant total, gesamtbetrag, rechnungsbetrag, endbetrag, zu zahlender betrag, "
        "zahlbetrag, gesamtsumme, bruttobetrag, summe brutto, gesamt brutto")
    + _labels("total, totale, gesamt, summe, importo, montant", 0.85)
    + _labels("betrag", 0.6),
    "subtotal": _labels(
        "subtotal, sub-total, sub total, net amount, net total, total net, total excl. vat, "
        "total excluding vat, total before tax, amount before tax, imponibile, "
        "totale imponibile, subtotale, totale netto, importo netto, totale merce, "
        "total ht, montant ht, warenwert netto, warenwert, "
        "sous-total, sous total, total hors taxes, nettobetrag, zwischensumme, summe netto, "
        "gesamt netto, nettosumme")
    + _labels("netto, net", 0.65),
    "tax": _labels(
        "vat, vat amount, tax, tax amount, sales tax, gst, iva, totale iva, importo iva, "
        "imposta, tva, montant tva, total tva, mwst, mwst., mehrwertsteuer, ust, ust., "
        "umsatzsteuer")
    + _labels("steuer", 0.7),
    "currency": _labels("currency, valuta, divisa, devise, monnaie, wahrung"),
    "issuer": _labels(
        "from, seller, supplier, vendor, issued by, bill from, fornitore, cedente, "
        "cedente/prestatore, emittente, venditore, fournisseur, vendeur, emetteur, "
        "prestataire, lieferant, verkaufer, rechnungssteller, leistungserbringer, absender"),
    "_customer": _labels(
        "bill to, billed to, sold to, ship to, invoice to, customer, client, cliente, "
        "destinatario, committente, cessionario, cessionario/committente, spett.le, spettabile, "
        "facture a, facturer a, facture pour, facturé à, adresse de facturation, destinataire, "
        "kunde, rechnungsempfanger, empfanger, intestatario, intestato a, customer name"),
    # Other dates and numbers that sit beside the invoice's own and must not feed them.
    "_other": _labels(
        "order date, date of order, date of supply, delivery date, ship date, data ordine, "
        "ddt del, data ddt, data consegna, commande du, date de commande, date de livraison, "
        "bestelldatum, lieferdatum, liefertermin, leistungsdatum, gg data fattura, "
        "gg d.f., giorni data fattura, days from invoice date, days after invoice date, "
        "days of invoice date, jours date de facture, tage nach rechnungsdatum, "
        "tage ab rechnungsdatum"),
}
_TITLE_WORDS = re.compile(r"^(?:tax )?(?:invoice|fattura|facture|rechnung)\b", re.IGNORECASE)
_PAYMENT_WORDS = re.compile(
    r"pay|paga|bezahl|uberweis|zahlbar|zahlung|regler|reglement|payer|paiement|versement|"
    r"bonifico|virement")
_DEADLINE = re.compile(
    r"(?<!\w)(?:by|before|until|no later than|on or before|entro(?: e non oltre)?(?: il)?|"
    r"bis(?: zum| spatestens)?|spatestens(?: am| bis)?|avant le|au plus tard le|d'ici le)\s*")
_PAYMENT_DAYS = re.compile(
    r"(?:net|netto|entro|within|sous|innerhalb von|a)\s*(\d{1,3})\s*"
    r"(?:days|giorni|gg|jours|tage|tagen)"
    r"|\bnet\s*(\d{1,3})\b",
    re.IGNORECASE,
)


def extract_invoice(view: DocView) -> dict[str, FieldValue]:
    """All invoice fields of docs/CONTRACTS.md, each with a confidence."""
    fields = empty_fields("invoice")
    tables = find_tables(view.lines, view.pages)
    # Column names in headers (repeated on each page) are not labels of the invoice's fields.
    header_lines = {li for table in tables for li in table.header_lines}
    header_lines |= {li for table in tables
                     for li in range(min(table.header_lines), table.last_item_line + 1)}
    index = LabelIndex(view.lines, view.pages, LABELS, header_lines)
    dates = date_parser(view.dayfirst)

    def put(name: str, candidate) -> None:
        if candidate is not None:
            fields[name] = FieldValue(candidate.value, candidate.confidence)

    put("invoice_number", index.best("invoice_number", parse_identifier))
    put("issue_date", index.best("issue_date", dates))
    put("due_date", index.best("due_date", dates))
    put("subtotal", index.best("subtotal", parse_amount_value, prefer_last=True))
    put("tax", index.best("tax", parse_amount_value, prefer_last=True))
    put("total", index.best("total", parse_amount_value, prefer_last=True))
    put("currency", index.best("currency", parse_currency))
    _fill_dates(view, fields)
    if fields["currency"].value is None:
        code, share = dominant_currency(view.text)
        if code:
            fields["currency"] = FieldValue(code, round(0.5 + 0.4 * share, 3))
    fields["issuer"] = _issuer(view, index)
    if isinstance(fields["issuer"].value, str):
        fields["issuer"].value = usual_case(fields["issuer"].value, view.text)
    _cross_check_totals(fields)
    _line_items(view, tables, fields)
    return fields


def _fill_dates(view: DocView, fields: dict[str, FieldValue]) -> None:
    if fields["issue_date"].value is None:
        # The first date on an invoice is nearly always its issue date.
        found = [d.iso for d in find_dates(view.text, view.dayfirst)
                 if d.iso != fields["due_date"].value]
        if found:
            fields["issue_date"] = FieldValue(found[0], 0.45)
    if fields["due_date"].value is None:
        # "Please pay EUR 1,220.00 by 21 December 2021": a payment sentence with a deadline.
        for sentence in re.split(r"(?<=[.!?])\s+|\n", view.text):
            if not _PAYMENT_WORDS.search(fold(sentence)):
                continue
            deadlines = [
                found[0] for m in _DEADLINE.finditer(fold(sentence))
                if (found := find_dates(sentence[m.end():m.end() + 40], view.dayfirst))
                and found[0].start <= 3
            ]
            if deadlines:
                fields["due_date"] = FieldValue(deadlines[0].iso, 0.7)
                break
    if fields["due_date"].value is None and fields["issue_date"].value:
        m = _PAYMENT_DAYS.search(view.text)
        if m:
            days = int(m[1] or m[2])
            fields["due_date"] = FieldValue(add_days(fields["issue_date"].value, days), 0.5)


def _issuer(view: DocView, index: LabelIndex) -> FieldValue:
    labelled = index.best("issuer", parse_name, anchored=True)
    if labelled:
        name = company_name(labelled.value) or labelled.value
        return FieldValue(name, labelled.confidence)
    customer_cells = _customer_cells(view, index)
    for name, li in legal_names(view):
        cells = [ci for ci, c in enumerate(view.lines[li].cells) if name in c.text]
        if not any((li, ci) in customer_cells for ci in cells):
            return FieldValue(name, 0.75)
    # Letterheads put the issuer's name first: take the first line that reads like a name.
    for li, line in enumerate(view.lines[:8]):
        cell = line.cells[0]
        if (li, 0) in customer_cells or index.has_label(li, 0) or _TITLE_WORDS.match(cell.text):
            continue
        if parse_name(cell.text) and not find_dates(cell.text) and len(cell.text) <= 60:
            return FieldValue(cell.text, 0.4)
    return FieldValue()


def _customer_cells(view: DocView, index: LabelIndex) -> set[tuple[int, int]]:
    cells = set()
    for hit in index.hits:
        if hit.field != "_customer":
            continue
        label_cell = view.lines[hit.line].cells[hit.cell]
        cells.add((hit.line, hit.cell))
        # The customer's name may follow on the label's own row.
        for ci in range(hit.cell + 1, len(view.lines[hit.line].cells)):
            if index.has_label(hit.line, ci):
                break
            cells.add((hit.line, ci))
        for li in range(hit.line + 1, min(len(view.lines), hit.line + 6)):
            for ci, cell in enumerate(view.lines[li].cells):
                if cell.overlaps(label_cell) > 0 or cell.x0 >= label_cell.x0 - 1:
                    cells.add((li, ci))
    return cells


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.011, 0.001 * abs(b))


def _cross_check_totals(fields: dict[str, FieldValue]) -> None:
    sub, tax, total = (fields[n] for n in ("subtotal", "tax", "total"))
    if sub.value is not None and tax.value is not None and total.value is not None:
        if _close(sub.value + tax.value, total.value):
            for fv in (sub, tax, total):
                fv.confidence = max(fv.confidence, 0.97)
        else:
            for fv in (sub, tax, total):
                fv.confidence = round(fv.confidence * 0.7, 3)
    elif total.value is None and sub.value is not None and tax.value is not None:
        fields["total"] = FieldValue(round(sub.value + tax.value, 2), 0.6)
    elif sub.value is None and total.value is not None and tax.value is not None:
        fields["subtotal"] = FieldValue(round(total.value - tax.value, 2), 0.55)
    elif sub.value is not None and total.value is not None and tax.value is None:
        if total.value >= sub.value:
            fields["tax"] = FieldValue(round(total.value - sub.value, 2), 0.55)


def _line_items(view: DocView, tables, fields: dict[str, FieldValue]) -> None:
    items = [item for table in tables for item in table.items]
    if items:
        rows = len(items)
        consistent = sum(t.consistent_rows for t in tables)
        confidence = 0.7 + 0.15 * consistent / rows
    else:
        items = find_headerless_items(view.lines, view.pages)
        confidence = 0.6
    if not items:
        return
    amounts = sum(item["amount"] for item in items)
    targets = [fields[n].value for n in ("subtotal", "total") if fields[n].value is not None]
    if any(_close(amounts, t) for t in targets):
        confidence = min(0.97, confidence + 0.15)
        # Items that add up to the stated subtotal also confirm that subtotal.
        if fields["subtotal"].value is not None and _close(amounts, fields["subtotal"].value):
            fields["subtotal"].confidence = max(fields["subtotal"].confidence, 0.95)
    elif targets:
        confidence *= 0.8
    if fields["subtotal"].value is None and fields["total"].value is None:
        fields["subtotal"] = FieldValue(round(amounts, 2), 0.5)
    fields["line_items"] = FieldValue(items, round(confidence, 3))
    if fold(str(fields["issuer"].value or "")) in {fold(i["description"] or "") for i in items}:
        fields["issuer"] = FieldValue()
