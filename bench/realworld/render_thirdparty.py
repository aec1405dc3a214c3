"""Renders the corpus's third-party invoices with InvoiceGenerator and PyInvoice templates.

Not part of the project's dependencies: run it in a scratch virtualenv that has them,
    python -m venv /tmp/gen && /tmp/gen/bin/pip install InvoiceGenerator==1.2.0 PyInvoice==0.1.7
    /tmp/gen/bin/python bench/realworld/render_thirdparty.py bench/realworld
The layouts and wording are the packages' own; only the Dutch, Spanish, German, French and
Italian message catalogs (InvoiceGenerator ships English, Czech and Brazilian Portuguese) are
written here.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

# InvoiceGenerator's msgids in Dutch, Spanish, German, French and Italian (its catalog format).
_CATALOG = {
    'Invoice num.: %s': ('Factuurnummer: %s', 'Factura n.º: %s', 'Rechnungsnummer: %s', 'Facture n° : %s', 'Fattura n.: %s'),
    'Customer': ('Klant', 'Cliente', 'Kunde', 'Client', 'Cliente'),
    'Provider': ('Leverancier', 'Proveedor', 'Lieferant', 'Fournisseur', 'Fornitore'),
    'Payment information': ('Betaalgegevens', 'Datos de pago', 'Zahlungsinformationen', 'Informations de paiement', 'Dati di pagamento'),
    'Account n.': ('Rekeningnummer', 'Cuenta n.º', 'Kontonummer', 'Numéro de compte', 'Conto n.'),
    'Variable symbol': ('Betalingskenmerk', 'Referencia', 'Verwendungszweck', 'Référence', 'Causale'),
    'List of items': ('Overzicht', 'Conceptos', 'Positionen', 'Détail', 'Dettaglio'),
    'Description': ('Omschrijving', 'Descripción', 'Beschreibung', 'Désignation', 'Descrizione'),
    'Units': ('Aantal', 'Cantidad', 'Menge', 'Quantité', 'Quantità'),
    'Price per one': ('Prijs per stuk', 'Precio unitario', 'Einzelpreis', 'Prix unitaire', 'Prezzo unitario'),
    'Total price': ('Totaal excl. btw', 'Importe', 'Gesamtpreis netto', 'Total HT', 'Imponibile'),
    'Tax': ('Btw', 'IVA', 'MwSt.', 'TVA', 'IVA'),
    'Total price with tax': ('Totaal incl. btw', 'Importe con IVA', 'Gesamtpreis brutto', 'Total TTC', 'Totale con IVA'),
    'Total': ('Totaal', 'Total', 'Summe', 'Total', 'Totale'),
    'Breakdown VAT': ('Btw-specificatie', 'Desglose del IVA', 'Aufschlüsselung MwSt.', 'Détail TVA', 'Riepilogo IVA'),
    'VAT rate': ('Btw-tarief', 'Tipo de IVA', 'Steuersatz', 'Taux TVA', 'Aliquota IVA'),
    'Without VAT': ('Excl. btw', 'Base imponible', 'Netto', 'HT', 'Imponibile'),
    'With VAT': ('Incl. btw', 'Con IVA', 'Brutto', 'TTC', 'Totale'),
    'Total with tax': ('Te betalen', 'Total a pagar', 'Zu zahlender Betrag', 'Net à payer', 'Totale da pagare'),
    'Creator': ('Opgesteld door', 'Emitida por', 'Erstellt von', 'Établie par', 'Emessa da'),
    'Date of exposure taxable invoice': ('Factuurdatum', 'Fecha de factura', 'Rechnungsdatum', 'Date de facture', 'Data fattura'),
    'Taxable invoice num.: %s': ('Factuurnummer: %s', 'Factura n.º: %s', 'Rechnungsnummer: %s', 'Facture n° : %s', 'Fattura n.: %s'),
    'Due date': ('Vervaldatum', 'Fecha de vencimiento', 'Fällig am', 'Échéance', 'Scadenza'),
    'Taxable date': ('Leverdatum', 'Fecha de operación', 'Leistungsdatum', 'Date de livraison', 'Data consegna'),
    'Paytype': ('Betaalwijze', 'Forma de pago', 'Zahlungsart', 'Mode de paiement', 'Modalità di pagamento'),
    'Date of exposure': ('Factuurdatum', 'Fecha de factura', 'Rechnungsdatum', 'Date de facture', 'Data fattura'),
    'Page %(page_number)d of %(page_count)d': ('Pagina %(page_number)d van %(page_count)d', 'Página %(page_number)d de %(page_count)d', 'Seite %(page_number)d von %(page_count)d', 'Page %(page_number)d sur %(page_count)d', 'Pagina %(page_number)d di %(page_count)d'),
    'Vat in: %s': ('Btw-nummer: %s', 'NIF: %s', 'USt-IdNr.: %s', 'N° TVA : %s', 'P. IVA: %s'),
    'IR: %s': ('KvK: %s', 'CIF: %s', 'HRB: %s', 'SIRET : %s', 'REA: %s'),
}


_LANGUAGES = ("nl", "es", "de", "fr", "it")


def _install_catalogs() -> None:
    import InvoiceGenerator
    from babel.messages.catalog import Catalog
    from babel.messages.mofile import write_mo

    root = Path(InvoiceGenerator.__file__).parent / "locale"
    for index, lang in enumerate(_LANGUAGES):
        catalog = Catalog(locale=lang)
        for msgid, translations in _CATALOG.items():
            catalog.add(msgid, translations[index])
        target = root / lang / "LC_MESSAGES"
        target.mkdir(parents=True, exist_ok=True)
        with open(target / "messages.mo", "wb") as fh:
            write_mo(fh, catalog)


def _invoice_generator(out: Path, name: str, lang: str, spec: dict) -> dict:
    os.environ["INVOICE_LANG"] = lang
    from InvoiceGenerator.api import Client, Creator, Invoice, Item, Provider
    from InvoiceGenerator.pdf import SimpleInvoice

    provider = Provider(spec["issuer"], address=spec["address"], city=spec["city"],
                        zip_code=spec["zip"], vat_id=spec["vat_id"], ir=spec.get("ir", ""),
                        bank_account=spec["account"], email=spec["email"],
                        country=spec["country"])
    client = Client(spec["client"], address=spec["client_address"], city=spec["client_city"],
                    zip_code=spec["client_zip"], vat_id=spec.get("client_vat", ""),
                    country=spec["country"])
    invoice = Invoice(client, provider, Creator(spec["creator"]))
    invoice.number = spec["number"]
    invoice.date = spec["date"]
    invoice.payback = spec["due"]
    invoice.taxable_date = spec["date"]
    invoice.currency_locale = spec["locale"]
    invoice.currency = spec["symbol"]
    invoice.use_tax = True
    invoice.paytype = spec.get("paytype", "")
    for count, price, description, tax in spec["items"]:
        invoice.add_item(Item(count, Decimal(price), description=description, tax=Decimal(tax)))
    SimpleInvoice(invoice).gen(str(out / f"{name}.pdf"))
    return {"issuer": spec["issuer"], "invoice_number": spec["number"],
            "issue_date": spec["date"].isoformat(),
            "total": round(float(invoice.price_tax), 2),
            "currency": spec["currency"]}


def _pyinvoice(out: Path, name: str, spec: dict) -> dict:
    from pyinvoice.models import ClientInfo, InvoiceInfo, Item, ServiceProviderInfo
    from pyinvoice.templates import SimpleInvoice

    doc = SimpleInvoice(str(out / f"{name}.pdf"))
    doc.invoice_info = InvoiceInfo(spec["number"], spec["date"], spec["due"])
    doc.service_provider_info = ServiceProviderInfo(
        name=spec["issuer"], street=spec["street"], city=spec["city"], state=spec["state"],
        country=spec["country"], post_code=spec["zip"], vat_tax_number=spec["vat"])
    doc.client_info = ClientInfo(name=spec["client"], street=spec["client_street"],
                                 city=spec["client_city"], country=spec["country"],
                                 post_code=spec["client_zip"], email=spec["client_email"],
                                 client_id=spec["client_id"])
    subtotal = Decimal(0)
    for item_name, description, units, price in spec["items"]:
        doc.add_item(Item(item_name, description, units, price))
        subtotal += Decimal(units) * Decimal(price)
    doc.set_item_tax_rate(spec["tax_rate"])
    doc.set_bottom_tip(spec["tip"])
    doc.finish()
    total = (subtotal * (1 + Decimal(spec["tax_rate"]) / 100)).quantize(Decimal("0.01"))
    return {"issuer": spec["issuer"], "invoice_number": str(spec["number"]),
            "issue_date": spec["date"].date().isoformat(), "total": float(total),
            "currency": spec["currency"]}


IG_SPECS = {
    "ig_nl_webshop": ("nl", dict(
        issuer="Brouwer & Zonen B.V.", address="Keizersgracht 221", city="Amsterdam",
        zip="1016 DV", vat_id="NL854321987B01", ir="34123456", account="NL91 ABNA 0417 1643 00",
        email="facturen@brouwerzonen.nl", country="Nederland", client="Jansen Installatietechniek",
        client_address="Stationsweg 12", client_city="Utrecht", client_zip="3511 ED",
        client_vat="NL001234567B02", creator="P. de Vries", number="2024-0387",
        date=dt.date(2024, 3, 14), due=dt.date(2024, 4, 13), locale="nl_NL.UTF-8", symbol="€",
        currency="EUR", paytype="Overboeking",
        items=[(2, "149.50", "Thermostaatkraan chroom", 21), (1, "89.00", "Montage", 21),
               (5, "12.40", "Koppelstuk 15 mm", 21)])),
    "ig_nl_consultancy": ("nl", dict(
        issuer="Vermeulen Advies", address="Oudegracht 14", city="Utrecht", zip="3511 AP",
        vat_id="NL001987654B55", account="NL20 INGB 0001 2345 67", email="info@vermeulenadvies.nl",
        country="Nederland", client="Stichting Groen Wonen", client_address="Laan van Meerdervoort 5",
        client_city="Den Haag", client_zip="2517 AA", creator="M. Vermeulen",
        number="F24117", date=dt.date(2024, 11, 5), due=dt.date(2024, 12, 5),
        locale="nl_NL.UTF-8", symbol="€", currency="EUR",
        items=[(12, "95.00", "Advies duurzaamheid (uren)", 21), (1, "250.00", "Rapportage", 21)])),
    "ig_es_taller": ("es", dict(
        issuer="Talleres Ruiz S.L.", address="Calle Mayor 45", city="Zaragoza", zip="50001",
        vat_id="ESB50123456", account="ES91 2100 0418 4502 0005 1332", email="admin@talleresruiz.es",
        country="España", client="Distribuciones Alba S.A.", client_address="Av. Goya 10",
        client_city="Zaragoza", client_zip="50006", creator="Lucía Ruiz", number="A-2023/1142",
        date=dt.date(2023, 9, 28), due=dt.date(2023, 10, 28), locale="es_ES.UTF-8", symbol="€",
        currency="EUR", items=[(3, "48.20", "Revisión de frenos", 21),
                                (1, "320.00", "Sustitución de embrague", 21)])),
    "ig_ptbr_servicos": ("pt_BR", dict(
        issuer="Oliveira Tecnologia Ltda.", address="Rua Augusta 1500", city="São Paulo",
        zip="01304-001", vat_id="12.345.678/0001-90", account="0001 12345-6",
        email="financeiro@oliveiratec.com.br", country="Brasil", client="Mercado Bom Preço",
        client_address="Av. Paulista 900", client_city="São Paulo", client_zip="01310-100",
        creator="Ana Oliveira", number="NF-00921", date=dt.date(2024, 6, 3),
        due=dt.date(2024, 7, 3), locale="pt_BR.UTF-8", symbol="R$", currency="BRL",
        items=[(1, "1800.00", "Manutenção de sistema", 5), (4, "150.00", "Suporte técnico", 5)])),
    "ig_en_gb_vat": ("en", dict(
        issuer="Hartley Print Ltd", address="14 Mill Lane", city="Leeds", zip="LS1 4AB",
        vat_id="GB 123 4567 89", ir="08123456", account="20-45-77 43158265",
        email="accounts@hartleyprint.co.uk", country="United Kingdom", client="The Corner Café",
        client_address="2 High Street", client_city="York", client_zip="YO1 7HY",
        creator="J. Hartley", number="HP-1093", date=dt.date(2024, 2, 19),
        due=dt.date(2024, 3, 20), locale="en_GB.UTF-8", symbol="£", currency="GBP",
        items=[(500, "0.18", "Flyers A5 colour", 20), (2, "35.00", "Poster A2", 20)])),
    "ig_de_handwerk": ("de", dict(
        issuer="Schreinerei Albrecht GmbH", address="Hauptstraße 17", city="Freiburg",
        zip="79098", vat_id="DE287654321", ir="HRB 701234", account="DE89 3704 0044 0532 0130 00",
        email="buero@schreinerei-albrecht.de", country="Deutschland", client="Praxis Dr. Weber",
        client_address="Kaiser-Joseph-Straße 200", client_city="Freiburg", client_zip="79098",
        creator="K. Albrecht", number="RE-2024-0318", date=dt.date(2024, 5, 21),
        due=dt.date(2024, 6, 4), locale="de_DE.UTF-8", symbol="€", currency="EUR",
        paytype="Überweisung",
        items=[(1, "12480.00", "Empfangstheke Eiche massiv", 19),
               (16, "58.50", "Montage (Stunden)", 19), (1, "245.00", "Anfahrt", 19)])),
    "ig_de_software": ("de", dict(
        issuer="Nordlicht IT-Service UG", address="Speicherstadt 4", city="Hamburg",
        zip="20457", vat_id="DE312345678", account="DE02 2005 0550 1234 5678 90",
        email="rechnung@nordlicht-it.de", country="Deutschland", client="Hafenbäckerei Janssen",
        client_address="Elbchaussee 31", client_city="Hamburg", client_zip="22765",
        creator="T. Brandt", number="2024/1187", date=dt.date(2024, 12, 2),
        due=dt.date(2024, 12, 16), locale="de_DE.UTF-8", symbol="€", currency="EUR",
        items=[(3, "79.00", "Wartungsvertrag (Monate)", 19), (1, "1450.00", "Kassensystem", 19)])),
    "ig_fr_artisan": ("fr", dict(
        issuer="Menuiserie Lefèvre SARL", address="12 rue des Tanneurs", city="Lyon",
        zip="69002", vat_id="FR40123456789", ir="123 456 789 00012",
        account="FR76 3000 6000 0112 3456 7890 189", email="contact@menuiserie-lefevre.fr",
        country="France", client="Boulangerie Martin", client_address="4 place Bellecour",
        client_city="Lyon", client_zip="69002", creator="Julien Lefèvre", number="F2024-0457",
        date=dt.date(2024, 4, 9), due=dt.date(2024, 5, 9), locale="fr_FR.UTF-8", symbol="€",
        currency="EUR", paytype="Virement",
        items=[(2, "1840.00", "Vitrine réfrigérée, pose comprise", 20),
               (6, "42.00", "Étagères chêne", 20)])),
    "ig_fr_conseil": ("fr", dict(
        issuer="Atelier Numérique Dubois", address="3 quai de la Fosse", city="Nantes",
        zip="44000", vat_id="FR77987654321", account="FR14 2004 1010 0505 0001 3M02 606",
        email="facturation@atelier-dubois.fr", country="France", client="Association Loire Vive",
        client_address="8 rue Crébillon", client_city="Nantes", client_zip="44000",
        creator="C. Dubois", number="2023-118", date=dt.date(2023, 11, 30),
        due=dt.date(2023, 12, 30), locale="fr_FR.UTF-8", symbol="€", currency="EUR",
        items=[(5, "450.00", "Journées de conseil", 20), (1, "90.00", "Frais de déplacement", 20)])),
    "ig_it_impianti": ("it", dict(
        issuer="Impianti Bianchi S.r.l.", address="Via Garibaldi 8", city="Torino",
        zip="10122", vat_id="IT01234567890", ir="TO-1098765",
        account="IT60 X054 2811 1010 0000 0123 456", email="amministrazione@impiantibianchi.it",
        country="Italia", client="Condominio Le Magnolie", client_address="Corso Francia 120",
        client_city="Torino", client_zip="10143", creator="Marco Bianchi", number="2024/087",
        date=dt.date(2024, 2, 27), due=dt.date(2024, 3, 28), locale="it_IT.UTF-8", symbol="€",
        currency="EUR", paytype="Bonifico bancario",
        items=[(1, "3200.00", "Caldaia a condensazione", 22),
               (8, "38.00", "Manodopera (ore)", 22)])),
    "ig_it_studio": ("it", dict(
        issuer="Studio Grafico Conti", address="Via dei Mille 22", city="Bologna", zip="40121",
        vat_id="IT09876543210", account="IT02 L123 4512 3451 2345 6789 012",
        email="info@studioconti.it", country="Italia", client="Trattoria Da Gino",
        client_address="Via Zamboni 3", client_city="Bologna", client_zip="40126",
        creator="Elena Conti", number="FT-19", date=dt.date(2024, 10, 15),
        due=dt.date(2024, 11, 14), locale="it_IT.UTF-8", symbol="€", currency="EUR",
        items=[(1, "600.00", "Logo e immagine coordinata", 22), (200, "0.35", "Menu stampati", 22)])),
}
PI_SPECS = {
    "pyinvoice_en_us_sales_tax": dict(
        issuer="Blue Ridge Software LLC", street="410 Market Street", city="Asheville",
        state="NC", country="United States", zip="28801", vat="EIN 56-1234567",
        client="Pine Valley Dental", client_street="88 Oak Ave", client_city="Boone",
        client_zip="28607", client_email="office@pinevalleydental.com", client_id="C-2041",
        number=100482, date=dt.datetime(2024, 8, 12, 10, 30), due=dt.datetime(2024, 9, 11),
        items=[("Scheduling", "Appointment scheduling licence, annual", 1, "1200.00"),
               ("Setup", "Onboarding and data import", 3, "85.00")],
        tax_rate=7, currency=None, tip="Sales tax 7% (NC). Thank you for your business."),
    "pyinvoice_en_in_gst": dict(
        issuer="Sharma Digital Services Pvt Ltd", street="12 MG Road", city="Bengaluru",
        state="Karnataka", country="India", zip="560001", vat="GSTIN 29ABCDE1234F1Z5",
        client="Kaveri Textiles", client_street="5 Residency Road", client_city="Bengaluru",
        client_zip="560025", client_email="accounts@kaveritextiles.in", client_id="KT-77",
        number=2425031, date=dt.datetime(2024, 7, 1, 9, 0), due=dt.datetime(2024, 7, 16),
        items=[("Hosting", "Cloud hosting, quarterly", 1, "15000.00"),
               ("SEO", "Search optimisation", 2, "4500.00")],
        tax_rate=18, currency=None, tip="Tax invoice. GST 18% (CGST 9% + SGST 9%)."),
}


def main(folder: str) -> None:
    out = Path(folder) / "thirdparty"
    out.mkdir(parents=True, exist_ok=True)
    _install_catalogs()
    for name in IG_SPECS:
        # InvoiceGenerator binds its language at import: one process per invoice.
        subprocess.run([sys.executable, __file__, folder, name], check=True)
    for name, spec in PI_SPECS.items():
        truth = _pyinvoice(out, name, spec)
        _write_truth(out / f"{name}.json", truth)


def _write_truth(path: Path, fields: dict) -> None:
    truth = {"document_type": "invoice", "fields": fields}
    path.write_text(json.dumps(truth, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def render_one(folder: str, name: str) -> None:
    out = Path(folder) / "thirdparty"
    lang, spec = IG_SPECS[name]
    os.environ["INVOICE_LANG"] = lang
    _write_truth(out / f"{name}.json", _invoice_generator(out, name, lang, spec))


if __name__ == "__main__":
    if len(sys.argv) > 2:
        render_one(sys.argv[1], sys.argv[2])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "bench/realworld")
