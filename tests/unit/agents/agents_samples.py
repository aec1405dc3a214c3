"""Sample documents generated on the fly with fpdf2, each with the values it states."""

from __future__ import annotations

from pathlib import Path

from fpdf import FPDF


def _pdf() -> FPDF:
    pdf = FPDF()
    # Core fonts in Windows-1252 give the euro sign without shipping a font file.
    pdf.core_fonts_encoding = "cp1252"
    pdf.set_auto_page_break(True, margin=15)
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    return pdf


def _row(pdf: FPDF, cells: list[tuple[str, float, str]], border: int = 0) -> None:
    for text, width, align in cells:
        pdf.cell(width, 7, text, border=border, align=align)
    pdf.ln(7)


def _prose(pdf: FPDF, text: str) -> None:
    pdf.multi_cell(0, 5, text)
    pdf.ln(2)


def invoice_it() -> tuple[bytes, dict]:
    """An Italian invoice: label/value cells, a two-column header, a table, IVA."""
    pdf = _pdf()
    pdf.set_font("Helvetica", "B", 14)
    _row(pdf, [("Rossi Forniture S.r.l.", 110, "L"), ("FATTURA", 80, "R")])
    pdf.set_font("Helvetica", size=10)
    _row(pdf, [("Via Garibaldi 12, 20121 Milano", 110, "L"), ("Spett.le", 80, "L")])
    _row(pdf, [("P.IVA IT01234567890", 110, "L"), ("Bianchi Costruzioni S.p.A.", 80, "L")])
    _row(pdf, [("", 110, "L"), ("Corso Italia 5, Torino", 80, "L")])
    pdf.ln(4)
    _row(pdf, [("Fattura n.:", 35, "L"), ("FT-2024/0042", 60, "L")])
    _row(pdf, [("Data:", 35, "L"), ("1 marzo 2024", 60, "L")])
    _row(pdf, [("Scadenza:", 35, "L"), ("31/03/2024", 60, "L")])
    pdf.ln(4)
    _row(pdf, [("Descrizione", 80, "L"), ("Qtà", 20, "R"), ("Prezzo unitario", 40, "R"),
               ("Importo", 40, "R")], border=1)
    _row(pdf, [("Consulenza tecnica", 80, "L"), ("2", 20, "R"), ("500,00 €", 40, "R"),
               ("1.000,00 €", 40, "R")], border=1)
    _row(pdf, [("Licenza software annuale", 80, "L"), ("1", 20, "R"), ("200,00 €", 40, "R"),
               ("200,00 €", 40, "R")], border=1)
    pdf.ln(3)
    _row(pdf, [("Imponibile", 140, "R"), ("1.200,00 €", 40, "R")])
    _row(pdf, [("IVA 22%", 140, "R"), ("264,00 €", 40, "R")])
    _row(pdf, [("Totale fattura", 140, "R"), ("1.464,00 €", 40, "R")])
    pdf.ln(4)
    _prose(pdf, "Pagamento tramite bonifico bancario. IBAN IT60X0542811101000000123456.")
    expected = {
        "document_type": "invoice",
        "issuer": "Rossi Forniture S.r.l.", "invoice_number": "FT-2024/0042",
        "issue_date": "2024-03-01", "due_date": "2024-03-31", "currency": "EUR",
        "subtotal": 1200.0, "tax": 264.0, "total": 1464.0,
        "line_items": [
            {"description": "Consulenza tecnica", "quantity": 2.0, "unit_price": 500.0,
             "amount": 1000.0},
            {"description": "Licenza software annuale", "quantity": 1.0, "unit_price": 200.0,
             "amount": 200.0},
        ],
    }
    return bytes(pdf.output()), expected


def invoice_en() -> tuple[bytes, dict]:
    """An English invoice: values under their labels, US dates, dollars, Amount Due."""
    pdf = _pdf()
    pdf.set_font("Helvetica", "B", 16)
    _row(pdf, [("INVOICE", 190, "L")])
    pdf.set_font("Helvetica", size=10)
    _row(pdf, [("Northwind Traders Inc.", 190, "L")])
    _row(pdf, [("400 Market Street, San Francisco, CA", 190, "L")])
    pdf.ln(3)
    _row(pdf, [("Invoice Number", 60, "L"), ("Invoice Date", 60, "L"), ("Due Date", 60, "L")])
    _row(pdf, [("INV-88231", 60, "L"), ("03/15/2024", 60, "L"), ("April 14, 2024", 60, "L")])
    pdf.ln(3)
    _row(pdf, [("Bill To:", 190, "L")])
    _row(pdf, [("Contoso Ltd", 190, "L")])
    pdf.ln(3)
    _row(pdf, [("Item", 90, "L"), ("Qty", 20, "R"), ("Rate", 40, "R"), ("Amount", 40, "R")],
         border=1)
    for desc, q, rate, amount in [("Cloud hosting (March)", "3", "$1,250.00", "$3,750.00"),
                                  ("Support plan", "1", "$499.50", "$499.50"),
                                  ("Data migration", "10", "$120.00", "$1,200.00")]:
        _row(pdf, [(desc, 90, "L"), (q, 20, "R"), (rate, 40, "R"), (amount, 40, "R")], border=1)
    pdf.ln(3)
    _row(pdf, [("Subtotal", 150, "R"), ("$5,449.50", 40, "R")])
    _row(pdf, [("Sales Tax (8.5%)", 150, "R"), ("$463.21", 40, "R")])
    _row(pdf, [("Amount Due", 150, "R"), ("$5,912.71", 40, "R")])
    expected = {
        "document_type": "invoice",
        "issuer": "Northwind Traders Inc.", "invoice_number": "INV-88231",
        "issue_date": "2024-03-15", "due_date": "2024-04-14", "currency": "USD",
        "subtotal": 5449.5, "tax": 463.21, "total": 5912.71,
        "line_items": [
            {"description": "Cloud hosting (March)", "quantity": 3.0, "unit_price": 1250.0,
             "amount": 3750.0},
            {"description": "Support plan", "quantity": 1.0, "unit_price": 499.5, "amount": 499.5},
            {"description": "Data migration", "quantity": 10.0, "unit_price": 120.0,
             "amount": 1200.0},
        ],
    }
    return bytes(pdf.output()), expected


def invoice_de() -> tuple[bytes, dict]:
    """A German invoice: inline 'Label: value' lines, German month names, Gesamtbetrag."""
    pdf = _pdf()
    _row(pdf, [("Müller & Schmidt GmbH, Hauptstraße 7, 10115 Berlin", 190, "L")])
    pdf.ln(2)
    pdf.set_font("Helvetica", "B", 14)
    _row(pdf, [("Rechnung", 190, "L")])
    pdf.set_font("Helvetica", size=10)
    _row(pdf, [("Rechnungsnummer: RE-2024-117", 190, "L")])
    _row(pdf, [("Rechnungsdatum: 5. Februar 2024", 190, "L")])
    _row(pdf, [("Zahlbar bis: 6. März 2024", 190, "L")])
    pdf.ln(3)
    _row(pdf, [("Pos.", 15, "L"), ("Bezeichnung", 85, "L"), ("Menge", 20, "R"),
               ("Einzelpreis", 35, "R"), ("Gesamtpreis", 35, "R")], border=1)
    _row(pdf, [("1", 15, "L"), ("Wartungsvertrag Server", 85, "L"), ("12", 20, "R"),
               ("150,00 €", 35, "R"), ("1.800,00 €", 35, "R")], border=1)
    pdf.ln(3)
    _row(pdf, [("Nettobetrag", 155, "R"), ("1.800,00 €", 35, "R")])
    _row(pdf, [("MwSt. 19%", 155, "R"), ("342,00 €", 35, "R")])
    _row(pdf, [("Gesamtbetrag", 155, "R"), ("2.142,00 €", 35, "R")])
    expected = {
        "document_type": "invoice",
        "issuer": "Müller & Schmidt GmbH", "invoice_number": "RE-2024-117",
        "issue_date": "2024-02-05", "due_date": "2024-03-06", "currency": "EUR",
        "subtotal": 1800.0, "tax": 342.0, "total": 2142.0,
    }
    return bytes(pdf.output()), expected


def contract_en() -> tuple[bytes, dict]:
    """An English services agreement over two pages."""
    pdf = _pdf()
    pdf.set_font("Helvetica", "B", 14)
    _row(pdf, [("MASTER SERVICES AGREEMENT", 190, "C")])
    pdf.set_font("Helvetica", size=10)
    _prose(pdf, "This Master Services Agreement (the \"Agreement\") is made by and between "
                "Orbital Analytics Ltd, a company registered in England and Wales with number "
                "0912345 (the \"Supplier\"), and Helvetia Bank AG, with registered office in "
                "Zurich (the \"Customer\").")
    _prose(pdf, "WHEREAS the Customer wishes to obtain data analysis services and the Supplier "
                "is willing to provide them, the parties agree as follows.")
    _prose(pdf, "1. Effective Date. This Agreement shall become effective on 1 April 2024 "
                "(the \"Effective Date\").")
    _prose(pdf, "2. Term. The term of this Agreement is twenty-four (24) months from the "
                "Effective Date. Either party may terminate this Agreement upon three (3) "
                "months' written notice.")
    _prose(pdf, "3. Fees. The total contract value is GBP 240,000.00, payable in monthly "
                "instalments of GBP 10,000.00.")
    pdf.add_page()
    _prose(pdf, "4. Confidentiality. Each party shall keep the other party's information "
                "confidential during the term and for five years after termination.")
    _prose(pdf, "5. Governing Law. This Agreement shall be governed by and construed in "
                "accordance with the laws of England and Wales.")
    _prose(pdf, "IN WITNESS WHEREOF the parties have signed this Agreement.")
    expected = {
        "document_type": "contract",
        "parties": ["Orbital Analytics Ltd", "Helvetia Bank AG"],
        "effective_date": "2024-04-01", "term_months": 24,
        "governing_law": "England and Wales", "total_value": 240000.0, "currency": "GBP",
    }
    return bytes(pdf.output()), expected


def contract_it() -> tuple[bytes, dict]:
    """An Italian supply contract."""
    pdf = _pdf()
    pdf.set_font("Helvetica", "B", 14)
    _row(pdf, [("CONTRATTO DI FORNITURA", 190, "C")])
    pdf.set_font("Helvetica", size=10)
    _prose(pdf, "Il presente contratto è stipulato tra Alfa Servizi S.r.l., con sede in Roma, "
                "Via Appia 10, di seguito denominata \"Fornitore\", e Beta Industrie S.p.A., "
                "con sede in Bologna, di seguito denominata \"Cliente\".")
    _prose(pdf, "Premesso che il Cliente intende affidare al Fornitore la manutenzione degli "
                "impianti, le parti convengono quanto segue.")
    _prose(pdf, "Art. 1 - Decorrenza. Il contratto ha efficacia con decorrenza dal "
                "1° luglio 2024.")
    _prose(pdf, "Art. 2 - Durata. Il contratto ha una durata di 36 mesi, rinnovabile. "
                "Il recesso richiede un preavviso di 6 mesi.")
    _prose(pdf, "Art. 3 - Corrispettivo. Il corrispettivo complessivo è pari a "
                "€ 150.000,00 oltre IVA.")
    _prose(pdf, "Art. 4 - Legge applicabile. Il presente contratto è regolato dalla legge "
                "italiana. Foro competente: Roma.")
    expected = {
        "document_type": "contract",
        "parties": ["Alfa Servizi S.r.l.", "Beta Industrie S.p.A."],
        "effective_date": "2024-07-01", "term_months": 36, "governing_law": "Italy",
        "total_value": 150000.0, "currency": "EUR",
    }
    return bytes(pdf.output()), expected


def contract_fr() -> tuple[bytes, dict]:
    """A French service contract."""
    pdf = _pdf()
    pdf.set_font("Helvetica", "B", 14)
    _row(pdf, [("CONTRAT DE PRESTATION DE SERVICES", 190, "C")])
    pdf.set_font("Helvetica", size=10)
    _prose(pdf, "Entre les soussignés : Lumière Conseil SARL, dont le siège est à Lyon, "
                "ci-après « le Prestataire », et Banque du Rhône S.A., ci-après « le Client ».")
    _prose(pdf, "Article 1 - Date d'effet. Le présent contrat prend effet le 15 janvier 2025.")
    _prose(pdf, "Article 2 - Durée. Le contrat est conclu pour une durée de deux ans.")
    _prose(pdf, "Article 3 - Prix. Le montant total des prestations s'élève à 84 000,00 EUR.")
    _prose(pdf, "Article 4 - Droit applicable. Le présent contrat est soumis au droit français.")
    expected = {
        "document_type": "contract",
        "parties": ["Lumière Conseil SARL", "Banque du Rhône S.A."],
        "effective_date": "2025-01-15", "term_months": 24, "governing_law": "France",
        "total_value": 84000.0, "currency": "EUR",
    }
    return bytes(pdf.output()), expected


def financial_en() -> tuple[bytes, dict]:
    """An English statement of financial position and income statement, in thousands."""
    pdf = _pdf()
    pdf.set_font("Helvetica", "B", 14)
    _row(pdf, [("Greenfield Energy plc", 190, "L")])
    pdf.set_font("Helvetica", size=10)
    _row(pdf, [("Annual report - consolidated financial statements", 190, "L")])
    _row(pdf, [("for the year ended 31 December 2023 (in thousands of GBP)", 190, "L")])
    pdf.ln(3)
    _row(pdf, [("Income statement", 110, "L"), ("2023", 40, "R"), ("2022", 40, "R")])
    _row(pdf, [("Revenue", 110, "L"), ("48,250", 40, "R"), ("41,900", 40, "R")])
    _row(pdf, [("Operating expenses", 110, "L"), ("(39,100)", 40, "R"), ("(35,200)", 40, "R")])
    _row(pdf, [("Net income", 110, "L"), ("6,420", 40, "R"), ("5,010", 40, "R")])
    pdf.ln(3)
    _row(pdf, [("Balance sheet", 110, "L"), ("2023", 40, "R"), ("2022", 40, "R")])
    _row(pdf, [("Non-current assets", 110, "L"), ("90,000", 40, "R"), ("85,000", 40, "R")])
    _row(pdf, [("Current assets", 110, "L"), ("30,500", 40, "R"), ("27,800", 40, "R")])
    _row(pdf, [("Total assets", 110, "L"), ("120,500", 40, "R"), ("112,800", 40, "R")])
    _row(pdf, [("Total equity", 110, "L"), ("70,000", 40, "R"), ("64,000", 40, "R")])
    expected = {
        "document_type": "financial_statement",
        "company": "Greenfield Energy plc", "period_end": "2023-12-31", "currency": "GBP",
        "revenue": 48250000.0, "net_income": 6420000.0, "total_assets": 120500000.0,
    }
    return bytes(pdf.output()), expected


def financial_it() -> tuple[bytes, dict]:
    """An Italian balance sheet and income statement in euro units."""
    pdf = _pdf()
    pdf.set_font("Helvetica", "B", 14)
    _row(pdf, [("Gamma Alimentari S.p.A.", 190, "L")])
    pdf.set_font("Helvetica", size=10)
    _row(pdf, [("Bilancio dell'esercizio chiuso al 31/12/2023 - importi in euro", 190, "L")])
    pdf.ln(3)
    _row(pdf, [("Stato patrimoniale", 110, "L"), ("31/12/2023", 40, "R"), ("31/12/2022", 40, "R")])
    _row(pdf, [("Totale attivo", 110, "L"), ("5.432.100,00", 40, "R"), ("5.100.000,00", 40, "R")])
    _row(pdf, [("Patrimonio netto", 110, "L"), ("2.000.000,00", 40, "R"), ("1.900.000,00", 40, "R")])
    pdf.ln(3)
    _row(pdf, [("Conto economico", 110, "L"), ("2023", 40, "R"), ("2022", 40, "R")])
    _row(pdf, [("Ricavi delle vendite e delle prestazioni", 110, "L"), ("3.210.000,00", 40, "R"),
               ("2.980.000,00", 40, "R")])
    _row(pdf, [("Utile (perdita) dell'esercizio", 110, "L"), ("154.300,00", 40, "R"),
               ("120.000,00", 40, "R")])
    expected = {
        "document_type": "financial_statement",
        "company": "Gamma Alimentari S.p.A.", "period_end": "2023-12-31", "currency": "EUR",
        "revenue": 3210000.0, "net_income": 154300.0, "total_assets": 5432100.0,
    }
    return bytes(pdf.output()), expected


def long_contract(pages: int = 6) -> tuple[bytes, dict]:
    """A contract whose clauses fill several pages (for chunking)."""
    pdf = _pdf()
    _prose(pdf, "SERVICES AGREEMENT between Delta Logistics Ltd and Epsilon Retail Inc. "
                "This Agreement is effective as of 2 January 2024.")
    clause = ("The Supplier shall perform the services with due care and skill, in accordance "
              "with good industry practice and the service levels agreed by the parties. ")
    for page in range(pages - 1):
        pdf.add_page()
        _prose(pdf, f"Clause {page + 1}. " + clause * 12)
    _prose(pdf, "This Agreement is governed by the laws of the State of New York.")
    return bytes(pdf.output()), {"document_type": "contract", "pages": pages}


def encrypted_pdf() -> bytes:
    """A PDF that needs a user password to open."""
    pdf = _pdf()
    pdf.cell(0, 8, "Invoice INV-1 Total 100.00 EUR")
    pdf.set_encryption(owner_password="owner-secret", user_password="user-secret")
    return bytes(pdf.output())


def corrupt_pdf() -> bytes:
    """Bytes that start like a PDF and then are garbage."""
    return b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n" + bytes(range(256)) * 8 + b"\n%%EOF\n"


def text_as_pdf() -> bytes:
    """A plain text file someone renamed to .pdf."""
    return b"Invoice 42\nTotal: 100.00 EUR\nThis is not really a PDF.\n"


def write(directory: Path, name: str, data: bytes) -> Path:
    """Write sample bytes to a file and return its path."""
    path = directory / name
    path.write_bytes(data)
    return path


def no_pages_pdf() -> bytes:
    """A well-formed PDF (with a correct cross-reference table) whose page tree is empty."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def blank_pdf() -> bytes:
    """A one-page PDF with no text at all (what a scan without OCR looks like to us)."""
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 50)
    return bytes(pdf.output())
