"""Offline rules for invoices: labelled header fields, totals with cross-checks, line items."""

from __future__ import annotations

import re

from agents.amounts import dominant_currency
from agents.arithmetic import is_tax_id, parse_invoice_amount, resolve_totals
from agents.dates import add_days, find_dates
from agents.fields import FieldValue, empty_fields
from agents.issuer import find_issuer
from agents.labels import (
    LabelIndex,
    date_parser,
    parse_currency,
    parse_identifier,
)
from agents.layout import DocView, fold
from agents.line_items import find_headerless_items, find_tables
from agents.prose import usual_case


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
        "n° documento, documento n., doc. n., factuurnummer, factuur nr, factuurnr, "
        "factuur nummer, numero de factura, n.º de factura, factura n.º, factura n°, factura no, "
        "factura num, num. factura, numero da fatura, fatura n.º, fatura num, fatura no, "
        "nota fiscal, invoice id, invoice num, tax invoice no, fatura com impostos num, "
        "factura num., fatura num., bill number, receipt no, "
        "receipt number, booking id")
    + _labels("document no, numero documento, belegnummer, number, numero, nummer", 0.75)
    + _labels("invoice, fattura, facture, rechnung, factuur, factura, fatura", 0.7),
    "issue_date": _labels(
        "invoice date, date of invoice, date of issue, issue date, issued on, billing date, "
        "data fattura, data della fattura, data emissione, data di emissione, data documento, "
        "date de facture, date de facturation, date de la facture, date d'emission, "
        "rechnungsdatum, ausstellungsdatum, belegdatum, emise le, emis le, date d'emission, "
        "issued, data di emissione della fattura, factuurdatum, datum factuur, "
        "fecha de factura, fecha de emision, fecha factura, data da fatura, data de emissao, "
        "data da emissao, invoice dated, bill date, date of exposure")
    + _labels("date, data, datum, dated, del, du, vom", 0.75),
    "due_date": _labels(
        "due date, payment due, due by, due on, pay by, payable by, date due, scadenza, "
        "data scadenza, data di scadenza, scadenza pagamento, da pagare entro, echeance, "
        "date d'echeance, date limite de paiement, a payer avant le, payable avant le, "
        "fallig am, falligkeitsdatum, falligkeit, zahlbar bis, a regler avant le, "
        "a regler le, regler avant le, date limite, paiement avant le, echeance le, "
        "au plus tard le, no later than, entro e non oltre il, spatestens am, spatestens bis, "
        "payable on, payment date, vervaldatum, uiterste betaaldatum, te betalen voor, "
        "fecha de vencimiento, vencimiento, data de vencimento, vencimento")
    + _labels("due, fallig, zahlungsziel, payment terms, termini di pagamento, "
              "condizioni di pagamento, conditions de paiement, zahlungsbedingungen", 0.8),
    "total": _labels(
        "total due, amount due, balance due, grand total, total amount, invoice total, "
        "total payable, amount payable, total to pay, total incl. vat, total including vat, "
        "totale fattura, totale documento, totale da pagare, netto a pagare, totale dovuto, "
        "importo totale, totale complessivo, total ttc, net a payer, montant ttc, total a payer, "
        "montant total, gesamtbetrag, rechnungsbetrag, endbetrag, zu zahlender betrag, "
        "zahlbetrag, gesamtsumme, bruttobetrag, summe brutto, gesamt brutto, "
        "totaal incl. btw, totaal te betalen, te betalen, totaalbedrag, factuurbedrag, "
        "total a pagar, importe total, total factura, valor total, total a pagar, "
        "valor a pagar, somme a payer, montant a payer, total with tax, total amount due, "
        "total for this invoice, total invoice amount, amount to pay, total payable, "
        "net payable, total incl. gst, total incl gst, montant ttc, total ttc, "
        "total com imposto, total com impostos, total com iva, total con iva")
    + _labels("total, totale, gesamt, summe, importo, montant, totaal, importe", 0.85)
    + _labels("betrag", 0.6),
    "subtotal": _labels(
        "subtotal, sub-total, sub total, net amount, net total, total net, total excl. vat, "
        "total excluding vat, total before tax, amount before tax, imponibile, "
        "totale imponibile, subtotale, totale netto, importo netto, totale merce, "
        "total ht, montant ht, warenwert netto, warenwert, "
        "sous-total, sous total, total hors taxes, nettobetrag, zwischensumme, summe netto, "
        "gesamt netto, nettosumme, totaal excl. btw, subtotaal, excl. btw, "
        "base imponible, subtotal sin iva, importe neto, valor sem impostos, total sem imposto, "
        "total before gst, taxable value, taxable amount, amount before gst, sem imposto, "
        "total sem imposto, sin iva")
    + _labels("netto, net", 0.65),
    "tax": _labels(
        "vat, vat amount, tax, tax amount, sales tax, gst, iva, totale iva, importo iva, "
        "imposta, tva, montant tva, total tva, mwst, mwst., mehrwertsteuer, ust, ust., "
        "umsatzsteuer, btw, btw-bedrag, totaal btw, iva 21%, cuota iva, cuota de iva, "
        "total iva, impostos, imposto, total gst, gst amount, igst, cgst + sgst, "
        "total tax, vat total, total vat, montant tva")
    + _labels("steuer", 0.7),
    "discount": _labels(
        "discount, less discount, promotional discount, rabatt, nachlass, sconto, remise, "
        "korting, descuento, desconto"),
    "shipping": _labels(
        "shipping, shipping & handling, shipping and handling, delivery charges, postage, "
        "spedizione, spese di trasporto, versandkosten, versand, frais de port, "
        "frais de livraison, verzendkosten, envio, gastos de envio, frete"),
    "currency": _labels("currency, valuta, divisa, devise, monnaie, wahrung, munt, moneda, moeda"),
    "issuer": _labels(
        "from, seller, supplier, vendor, issued by, bill from, fornitore, cedente, "
        "cedente/prestatore, emittente, venditore, fournisseur, vendeur, emetteur, "
        "prestataire, lieferant, verkaufer, rechnungssteller, leistungserbringer, absender, "
        "sold by, service provider, provider, leverancier, verkoper, afzender, proveedor, "
        "emisor, vendedor, fornecedor, emitente, prestador, payee, merchant, "
        "seller name, supplier name, vendor name"),
    "_customer": _labels(
        "bill to, billed to, sold to, ship to, invoice to, customer, client, cliente, "
        "destinatario, committente, cessionario, cessionario/committente, spett.le, spettabile, "
        "facture a, facturer a, facture pour, facturé à, adresse de facturation, destinataire, "
        "kunde, rechnungsempfanger, empfanger, intestatario, intestato a, customer name, "
        "billing address, shipping address, bill to address, deliver to, delivery address, "
        "klant, afnemer, factuuradres, factuur aan, facturar a, "
        "tomador, adquirente, guest name, buyer, purchaser, attn, kaufer, auftraggeber, "
        "leistungsempfanger, rechnungsadresse, lieferadresse, lieferanschrift, acheteur, "
        "adresse de livraison, livre a, acquirente, koper, comprador, invoice address, "
        "besteller, indirizzo di fatturazione, adres klant"),
    # Other dates and numbers that sit beside the invoice's own and must not feed them.
    "_other": _labels(
        "order date, date of order, date of supply, delivery date, ship date, data ordine, "
        "ddt del, data ddt, data consegna, commande du, date de commande, date de livraison, "
        "bestelldatum, lieferdatum, liefertermin, leistungsdatum, gg data fattura, "
        "gg d.f., giorni data fattura, days from invoice date, days after invoice date, "
        "days of invoice date, jours date de facture, tage nach rechnungsdatum, "
        "tage ab rechnungsdatum, a partir du, prelevement a partir du, date de prelevement, "
        "leverdatum, taxable date, fecha de operacion, check in, check out, "
        "date de livraison, date de debut de prestation, date de fin de prestation, "
        "date de facture associee, n° de facture associee"),
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
            fields[name] = FieldValue(candidate.value, candidate.confidence,
                                      line=candidate.line)

    put("invoice_number", _invoice_number(index))
    put("issue_date", index.best("issue_date", dates))
    put("due_date", index.best("due_date", dates))
    readings = {name: sorted(index.candidates(name, parse_invoice_amount),
                             key=lambda c: (-c.confidence, -c.line))
                for name in ("subtotal", "tax", "total", "discount", "shipping")}
    failed = resolve_totals(fields, readings)
    for name in ("subtotal", "tax", "total"):
        # The line of the reading chosen: where the value's evidence is looked for first.
        fields[name].line = next((c.line for c in readings[name]
                                  if c.value == fields[name].value), None)
    put("currency", index.best("currency", parse_currency))
    _fill_dates(view, fields)
    if fields["currency"].value is None:
        code, share = dominant_currency(view.text)
        if code:
            fields["currency"] = FieldValue(code, round(0.5 + 0.4 * share, 3))
    fields["issuer"] = _issuer(view, index)
    if isinstance(fields["issuer"].value, str):
        fields["issuer"].value = usual_case(fields["issuer"].value, view.text)
    _line_items(view, tables, fields)
    _count_rivals(fields, {
        "invoice_number": [c for c in index.candidates("invoice_number", _number_near)
                           if not is_tax_id(c.value)],
        "issue_date": index.candidates("issue_date", dates),
        "total": readings["total"]})
    if failed:
        # A failed check casts doubt on what the document says overall, not only on the sums.
        for name in ("invoice_number", "issue_date", "issuer"):
            fields[name].confidence = round(fields[name].confidence * 0.85, 3)
    return fields


def _count_rivals(fields: dict[str, FieldValue], candidates: dict[str, list]) -> None:
    """How many other values were read for each field at least 70% as confidently as the best."""
    for name, found in candidates.items():
        if not found or fields[name].value is None:
            continue
        top = max(c.confidence for c in found)
        fields[name].rivals = len({c.value for c in found if c.confidence >= 0.7 * top}
                                  - {fields[name].value})


def _number_near(text: str) -> str | None:
    # The number follows its label closely ("Invoice No: 12", "Fattura n. 12 del"); a digit
    # further on belongs to a sentence that merely mentions the invoice ("... period July 1").
    found = parse_identifier(text)
    if found is None or text.find(found) > 14:
        return None
    return found


def _invoice_number(index: LabelIndex):
    """The best labelled identifier that is not a VAT, GST or company ID."""
    for cand in index.candidates("invoice_number", _number_near):
        if not is_tax_id(cand.value):
            return cand
    return None


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
                near[0] for m in _DEADLINE.finditer(fold(sentence))
                if (near := find_dates(sentence[m.end():m.end() + 40], view.dayfirst))
                and near[0].start <= 3
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
    return find_issuer(view, index, _customer_cells(view, index))


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
            if any(index.has_field(li, ci, "issuer") for ci in range(len(view.lines[li].cells))):
                break  # the seller's own block starts: the customer's has ended
            for ci, cell in enumerate(view.lines[li].cells):
                if cell.overlaps(label_cell) > 0 or cell.x0 >= label_cell.x0 - 1:
                    cells.add((li, ci))
    return cells


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.011, 0.001 * abs(b))


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
