"""Native-language invoice vocabulary and billable items for the bench corpus."""

from __future__ import annotations

import random

# Each key maps to interchangeable wordings; a document picks one per key so that label
# vocabulary varies across the corpus like it does across real suppliers.
LABELS = {
    "en": {
        "title": ["INVOICE", "Invoice", "TAX INVOICE", "Commercial Invoice"],
        "number": ["Invoice No.", "Invoice #", "Invoice number", "Number"],
        "issue_date": ["Invoice date", "Date", "Date of issue", "Issue date"],
        "due_date": ["Due date", "Payment due", "Due"],
        "bill_to": ["Bill to", "Invoice to", "Customer", "Sold to"],
        "seller": ["From", "Supplier", "Seller"],
        "code": ["Item", "SKU", "Code"],
        "description": ["Description", "Item description", "Details"],
        "qty": ["Qty", "Quantity", "Units"],
        "unit_price": ["Unit price", "Rate", "Price"],
        "amount": ["Amount", "Line total", "Total"],
        "vat_col": ["VAT %", "Tax %"],
        "subtotal": ["Subtotal", "Net amount", "Total excl. VAT"],
        "tax": ["VAT {rate}%", "VAT ({rate}%)", "Tax {rate}%"],
        "tax_us": ["Sales tax ({rate}%)", "Sales Tax {rate}%", "Tax ({rate}%)"],
        "total": ["Total", "Total due", "Amount due", "TOTAL"],
        "customer_no": ["Customer No.", "Account no.", "Client ID"],
        "order_ref": ["PO number", "Your ref.", "Order ref."],
        "order_date": ["Order date", "PO date"],
        "delivery_date": ["Delivery date", "Date of supply", "Shipped"],
        "bank": ["Bank details", "Remittance"],
    },
    "it": {
        "title": ["FATTURA", "Fattura", "Fattura n.", "FATTURA DI VENDITA"],
        "number": ["Fattura n.", "Numero fattura", "N. documento", "Numero"],
        "issue_date": ["Data fattura", "Data", "Data emissione", "Data documento"],
        "due_date": ["Scadenza", "Data scadenza", "Scadenza pagamento"],
        "bill_to": ["Spett.le", "Cliente", "Destinatario", "Intestatario"],
        "seller": ["Cedente", "Fornitore", "Mittente"],
        "code": ["Cod.", "Codice", "Art."],
        "description": ["Descrizione", "Descrizione articolo", "Oggetto"],
        "qty": ["Q.tà", "Quantità", "Qtà"],
        "unit_price": ["Prezzo unitario", "Prezzo", "P. unit."],
        "amount": ["Importo", "Totale riga", "Imponibile"],
        "vat_col": ["IVA %", "Aliq."],
        "subtotal": ["Imponibile", "Totale imponibile", "Totale merce"],
        "tax": ["IVA {rate}%", "IVA ({rate}%)", "Imposta {rate}%"],
        "total": ["Totale", "Totale fattura", "Totale documento", "TOTALE DA PAGARE"],
        "customer_no": ["Cod. cliente", "Codice cliente"],
        "order_ref": ["Rif. ordine", "Vs. ordine n.", "Rif."],
        "order_date": ["Data ordine", "Data conferma"],
        "delivery_date": ["Data consegna", "DDT del"],
        "bank": ["Coordinate bancarie", "Pagamento su"],
    },
    "fr": {
        "title": ["FACTURE", "Facture", "Facture n°"],
        "number": ["Facture n°", "Numéro de facture", "N° de facture", "Numéro"],
        "issue_date": ["Date de facture", "Date", "Date d'émission", "Émise le"],
        "due_date": ["Échéance", "Date d'échéance", "À régler avant le"],
        "bill_to": ["Client", "Facturé à", "Destinataire", "Adresse de facturation"],
        "seller": ["Émetteur", "Fournisseur", "Vendeur"],
        "code": ["Réf.", "Code", "Article"],
        "description": ["Désignation", "Description", "Libellé"],
        "qty": ["Qté", "Quantité"],
        "unit_price": ["Prix unitaire HT", "P.U. HT", "Prix unit."],
        "amount": ["Montant HT", "Total HT", "Montant"],
        "vat_col": ["TVA %", "Taux TVA"],
        "subtotal": ["Total HT", "Montant HT", "Sous-total HT"],
        "tax": ["TVA {rate} %", "TVA ({rate} %)", "Montant TVA {rate} %"],
        "total": ["Total TTC", "Net à payer", "Montant TTC", "TOTAL TTC"],
        "customer_no": ["N° client", "Code client"],
        "order_ref": ["Réf. commande", "Bon de commande", "Votre réf."],
        "order_date": ["Date de commande", "Commande du"],
        "delivery_date": ["Date de livraison", "Livré le"],
        "bank": ["Coordonnées bancaires", "Règlement par virement"],
    },
    "de": {
        "title": ["RECHNUNG", "Rechnung", "Rechnung Nr."],
        "number": ["Rechnungsnummer", "Rechnung Nr.", "Rechnungs-Nr.", "Beleg-Nr."],
        "issue_date": ["Rechnungsdatum", "Datum", "Belegdatum"],
        "due_date": ["Fälligkeitsdatum", "Fällig am", "Zahlbar bis", "Zahlungsziel"],
        "bill_to": ["Rechnungsempfänger", "Kunde", "Empfänger", "An"],
        "seller": ["Absender", "Lieferant", "Rechnungssteller"],
        "code": ["Art.-Nr.", "Pos.", "Artikel"],
        "description": ["Bezeichnung", "Beschreibung", "Leistung"],
        "qty": ["Menge", "Anz.", "Anzahl"],
        "unit_price": ["Einzelpreis", "E-Preis", "Preis/Einheit"],
        "amount": ["Gesamtpreis", "Betrag", "Summe"],
        "vat_col": ["MwSt. %", "USt %"],
        "subtotal": ["Zwischensumme", "Nettobetrag", "Summe netto", "Warenwert netto"],
        "tax": ["MwSt. {rate} %", "zzgl. {rate} % MwSt.", "USt. {rate} %", "MWST {rate}%"],
        "total": ["Gesamtbetrag", "Rechnungsbetrag", "Endbetrag", "Total"],
        "customer_no": ["Kundennummer", "Kunden-Nr.", "Debitor"],
        "order_ref": ["Bestellnummer", "Ihre Bestellung", "Auftrags-Nr."],
        "order_date": ["Bestelldatum", "Auftrag vom"],
        "delivery_date": ["Lieferdatum", "Leistungsdatum", "Liefertermin"],
        "bank": ["Bankverbindung", "Zahlung an"],
    },
}

PAYMENT_SENTENCES = {
    "en": ["Please pay {total} by {due} quoting the invoice number.",
           "Payment terms: {days} days net. Amount payable by {due}.",
           "Kindly remit {total} to the account below no later than {due}."],
    "it": ["Pagamento a mezzo bonifico bancario entro il {due}.",
           "Si prega di effettuare il pagamento di {total} entro il {due}.",
           "Termini di pagamento: {days} gg data fattura ({due})."],
    "fr": ["Paiement par virement à {days} jours, au plus tard le {due}.",
           "Merci de régler la somme de {total} avant le {due}.",
           "Conditions de paiement : {days} jours net, échéance le {due}."],
    "de": ["Bitte überweisen Sie den Betrag von {total} bis zum {due}.",
           "Zahlbar innerhalb von {days} Tagen ohne Abzug bis {due}.",
           "Zahlungsbedingungen: {days} Tage netto, fällig am {due}."],
}

ON_RECEIPT = {
    "en": ["Payment due upon receipt.", "Payable on receipt of this invoice."],
    "it": ["Pagamento a vista.", "Pagamento alla consegna."],
    "fr": ["Paiement à réception de facture.", "Payable comptant à réception."],
    "de": ["Zahlbar sofort nach Erhalt der Rechnung.", "Sofort fällig, ohne Abzug."],
}

CLOSING = {
    "en": ["Thank you for your business.", "Late payments may incur statutory interest.",
           "Questions about this invoice? Contact accounts@ quoting your customer number."],
    "it": ["Grazie per averci scelto.", "Operazione soggetta a IVA ai sensi del DPR 633/72.",
           "In caso di ritardato pagamento saranno applicati gli interessi di mora."],
    "fr": ["Merci de votre confiance.", "Pas d'escompte pour paiement anticipé.",
           "Indemnité forfaitaire pour frais de recouvrement en cas de retard : 40 euros."],
    "de": ["Vielen Dank für Ihren Auftrag.", "Es gelten unsere Allgemeinen Geschäftsbedingungen.",
           "Leistungszeitraum entspricht dem Lieferdatum, sofern nicht anders angegeben."],
}

# (description, unit price range, fractional quantities allowed)
ITEMS = {
    "en": [
        ("Consulting services", (90, 250), True),
        ("Software licence, annual", (300, 4800), False),
        ("Ergonomic office chair", (120, 480), False),
        ("Laptop docking station", (90, 260), False),
        ("On-site support (hours)", (60, 140), True),
        ("Cloud hosting, monthly plan", (40, 900), False),
        ("Printer toner cartridge, black", (25, 95), False),
        ("Project management", (80, 180), True),
        ("Shipping and handling", (8, 60), False),
        ("Training workshop, full day", (600, 2400), False),
        ("Steel brackets 40mm (box of 100)", (12, 45), False),
        ("Annual maintenance contract", (500, 6000), False),
    ],
    "it": [
        ("Consulenza tecnica", (70, 200), True),
        ("Licenza software annuale", (250, 4000), False),
        ("Sedia ergonomica da ufficio", (110, 450), False),
        ("Assistenza on-site (ore)", (50, 120), True),
        ("Canone manutenzione impianto", (300, 3500), False),
        ("Trasporto e imballo", (10, 80), False),
        ("Cartucce toner nero", (20, 90), False),
        ("Formazione del personale", (500, 2000), False),
        ("Viti inox M6 (conf. 200 pz)", (8, 35), False),
        ("Noleggio attrezzatura", (60, 700), True),
        ("Servizio di pulizia uffici", (150, 1200), False),
        ("Sviluppo software su misura", (300, 900), True),
    ],
    "fr": [
        ("Prestation de conseil", (80, 220), True),
        ("Licence logicielle annuelle", (300, 4500), False),
        ("Fauteuil de bureau ergonomique", (120, 460), False),
        ("Assistance sur site (heures)", (55, 130), True),
        ("Contrat de maintenance", (400, 5000), False),
        ("Frais de port", (9, 70), False),
        ("Cartouche d'encre noire", (22, 90), False),
        ("Formation du personnel", (550, 2200), False),
        ("Location de matériel", (70, 800), True),
        ("Nettoyage des locaux", (180, 1300), False),
        ("Développement spécifique", (350, 950), True),
        ("Visserie inox (lot de 200)", (9, 40), False),
    ],
    "de": [
        ("Beratungsleistung", (90, 240), True),
        ("Softwarelizenz, jährlich", (300, 5000), False),
        ("Bürostuhl ergonomisch", (130, 490), False),
        ("Vor-Ort-Service (Stunden)", (65, 150), True),
        ("Wartungsvertrag Anlage", (450, 5500), False),
        ("Versandkosten", (7, 55), False),
        ("Tonerkartusche schwarz", (24, 95), False),
        ("Mitarbeiterschulung", (650, 2500), False),
        ("Edelstahlschrauben M6 (200 Stk.)", (9, 38), False),
        ("Mietgerät", (70, 850), True),
        ("Gebäudereinigung", (200, 1400), False),
        ("Softwareentwicklung", (400, 1000), True),
    ],
}

def pick_labels(rng: random.Random, lang: str) -> dict[str, str]:
    """One wording per label key, fixed for the whole document."""
    return {key: rng.choice(options) for key, options in LABELS[lang].items()}


def invoice_number(rng: random.Random, year: int, country: str) -> str:
    n = rng.randint(1, 9999)
    patterns = {
        "IT": [f"{n}/{year}", f"FT-{year}-{n:05d}", f"{year}/{n:04d}/A"],
        "DE": [f"RE-{year}-{n:05d}", f"R{year % 100:02d}{n:05d}", f"{year}-{n:04d}"],
        "CH": [f"RG-{year}-{n:04d}", f"{year % 100:02d}.{n:05d}"],
        "FR": [f"FA{year}-{n:04d}", f"F-{year}-{n:05d}", f"{year}{n:06d}"],
        "GB": [f"INV-{year}-{n:04d}", f"INV{n:06d}", f"SI-{n:05d}"],
        "US": [f"INV-{n:05d}", f"{year}-{n:04d}", f"A{n:06d}"],
    }
    return rng.choice(patterns[country])


def amount_like_reference(rng: random.Random, fmt_num) -> str:
    """A purchase-order or document reference formatted like an amount, to tempt parsers."""
    value = rng.randint(1000, 99999) + rng.choice([0, 0.5, 0.25, 0.4])
    return rng.choice(["PO ", "", "Ref. ", "No. "]) + fmt_num(value)
