"""The content of the sample documents: five invoices, two contracts, one financial statement."""

from __future__ import annotations

EN = {"title": "INVOICE", "number": "Invoice number:", "date": "Invoice date:", "due": "Due date:",
      "customer": "Bill to:", "columns": ("Description", "Qty", "Unit price", "Amount"),
      "subtotal": "Subtotal", "tax": "VAT", "total": "Total due"}
IT = {"title": "FATTURA", "number": "Fattura n.:", "date": "Data fattura:", "due": "Scadenza:",
      "customer": "Cliente:", "columns": ("Descrizione", "Q.ta", "Prezzo unitario", "Importo"),
      "subtotal": "Imponibile", "tax": "IVA 22%", "total": "Totale fattura"}
DE = {"title": "RECHNUNG", "number": "Rechnungsnummer:", "date": "Rechnungsdatum:", "due": "Fällig am:",
      "customer": "Kunde:", "columns": ("Beschreibung", "Menge", "Einzelpreis", "Betrag"),
      "subtotal": "Zwischensumme", "tax": "MwSt. 19%", "total": "Gesamtbetrag"}

INVOICES = [
    {"file": "invoice_harborline_INV-2024-0117.pdf", "customer": "Northwind Audit", "labels": EN, "style": "us",
     "issuer": "Harborline Data Services Inc.", "currency": "USD", "tax_rate": 0.0,
     "issuer_address": "410 Market Street, Suite 900, San Francisco, CA 94105 - Tax ID 94-3381207",
     "number": "INV-2024-0117", "date": "2024-03-04", "due": "2024-04-03",
     "bill_to": "Northwind Audit LLP, 88 Pine Street, New York, NY 10005",
     "lines": [("Managed data pipeline - March 2024", 1, 4800.0), ("Additional storage (TB-month)", 12, 23.5),
               ("Priority support hours", 6, 145.0)],
     "terms": "Payment by wire transfer within 30 days. Late payments accrue 1% interest per month.",
     "footer": "Harborline Data Services Inc. - billing@harborline.example"},
    {"file": "fattura_officine_rinaldi_2024-0042.pdf", "customer": "Borealis Finance", "labels": IT, "style": "eu",
     "issuer": "Officine Rinaldi S.r.l.", "currency": "EUR", "tax_rate": 0.22,
     "issuer_address": "Via dei Mille 14, 20129 Milano (MI) - P. IVA 08412390961",
     "number": "2024/0042", "date": "12/03/2024", "due": "11/04/2024",
     "bill_to": "Borealis Finance S.p.A., Corso Vittorio Emanuele II 21, 10121 Torino",
     "lines": [("Manutenzione impianto di climatizzazione", 1, 1350.0), ("Filtri HEPA sostitutivi", 8, 42.5),
               ("Intervento tecnico straordinario (ore)", 3, 65.0)],
     "terms": "Pagamento a mezzo bonifico bancario entro 30 giorni data fattura. IBAN IT60 X054 2811 1010 0000 0123 456.",
     "footer": "Officine Rinaldi S.r.l. - amministrazione@rinaldi.example"},
    {"file": "rechnung_kessler_RE-2024-318.pdf", "customer": "Northwind Audit", "labels": DE, "style": "eu",
     "issuer": "Kessler Logistik GmbH", "currency": "EUR", "tax_rate": 0.19,
     "issuer_address": "Hafenstraße 7, 20457 Hamburg - USt-IdNr. DE281934570",
     "number": "RE-2024-318", "date": "05.02.2024", "due": "06.03.2024",
     "bill_to": "Northwind Audit GmbH, Neue Mainzer Straße 52, 60311 Frankfurt am Main",
     "lines": [("Seefracht Hamburg - Rotterdam (Container 40ft)", 2, 1890.0), ("Zollabfertigung", 2, 145.0),
               ("Lagerung (Palettenplatz/Woche)", 24, 6.8)],
     "terms": "Zahlbar innerhalb von 30 Tagen ohne Abzug. Es gelten unsere Allgemeinen Geschäftsbedingungen.",
     "footer": "Kessler Logistik GmbH - Amtsgericht Hamburg HRB 118233"},
    {"file": "invoice_helios_cloud_HC-88231.pdf", "customer": "Meridian Partners", "labels": EN, "style": "us",
     "issuer": "Helios Cloud Ltd", "currency": "GBP", "tax_rate": 0.20,
     "issuer_address": "3 Finsbury Avenue, London EC2M 2PA - VAT Reg No GB 318 2294 51",
     "number": "HC-88231", "date": "2024-01-31", "due": "2024-02-29",
     "bill_to": "Meridian Partners LLP, 25 Canada Square, London E14 5LQ",
     "lines": [(f"Compute cluster node-{n:02d} (720 h)", 1, 612.0 + 9 * n) for n in range(1, 31)]
     + [("Egress bandwidth (TB)", 14, 61.0), ("Support plan - Business", 1, 950.0)],
     "terms": "Payment due within 29 days. Please quote the invoice number with your remittance.",
     "footer": "Helios Cloud Ltd - registered in England and Wales no. 10493822"},
    {"file": "invoice_orbit_freight_5521.pdf", "customer": "Borealis Finance", "labels": EN, "style": "us",
     "issuer": "Orbit Freight B.V.", "currency": "EUR", "tax_rate": 0.21,
     "issuer_address": "Wilhelminakade 91, 3072 AP Rotterdam - VAT NL859301742B01",
     "number": "5521", "date": "2024-04-18", "due": "2024-05-18",
     "bill_to": "Borealis Finance S.p.A., Corso Vittorio Emanuele II 21, 10121 Torino, Italy",
     "lines": [("Road freight Rotterdam - Torino (FTL)", 3, 2140.0), ("Fuel surcharge", 3, 186.0),
               ("Insurance cover (per shipment)", 3, 95.0)],
     "terms": "Payment within 30 days by SEPA transfer to IBAN NL91 ABNA 0417 1643 00.",
     "footer": "Orbit Freight B.V. - KvK 24411873"},
]

CONTRACTS = [
    {"file": "contract_master_services_meridian.pdf", "customer": "Meridian Partners",
     "heading": "MASTER SERVICES AGREEMENT", "subheading": "Agreement no. MSA-2024-019",
     "title": "Master Services Agreement",
     "preamble": "This Master Services Agreement (the \"Agreement\") is entered into as of 1 February 2024 "
                 "(the \"Effective Date\") by and between Meridian Partners LLP, a limited liability partnership "
                 "registered in England and Wales (\"Client\"), and Quantis Analytics Limited, a company "
                 "registered in England and Wales (\"Provider\").",
     "clauses": [
         ("Services", "Provider shall deliver the document review and data extraction services described in each "
                      "Statement of Work. Each Statement of Work forms part of this Agreement."),
         ("Term", "This Agreement commences on the Effective Date and continues for a term of 24 months, "
                  "unless terminated earlier in accordance with clause 7."),
         ("Fees", "Client shall pay Provider fees not exceeding GBP 480,000.00 in aggregate over the term, "
                  "invoiced monthly in arrears and payable within 30 days of receipt of a valid invoice."),
         ("Service levels", "Provider shall process 95% of documents within two business days of submission. "
                            "Service credits apply as set out in Schedule 2."),
         ("Confidentiality", "Each party shall keep the other party's confidential information secret and use it "
                             "only for the purposes of this Agreement, during the term and for five years after."),
         ("Data protection", "Provider acts as processor of personal data on Client's documented instructions and "
                             "shall implement appropriate technical and organisational measures."),
         ("Termination", "Either party may terminate this Agreement on 90 days' written notice, or immediately on "
                         "material breach not remedied within 30 days of notice."),
         ("Liability", "Neither party's aggregate liability shall exceed the fees paid in the twelve months before "
                       "the claim, save for liability that cannot be limited by law."),
         ("Governing law", "This Agreement and any dispute arising from it are governed by the laws of England and "
                           "Wales, and the courts of London have exclusive jurisdiction."),
     ] + [(f"Schedule {n}", "Intentionally detailed operational provisions: onboarding, reporting cadence, "
                            "escalation contacts, change control and acceptance criteria for deliverables. " * 3)
          for n in (1, 2, 3)],
     "signatories": ["For Meridian Partners LLP", "For Quantis Analytics Limited"],
     "footer": "MSA-2024-019 - Confidential"},
    {"file": "contratto_fornitura_borealis.pdf", "customer": "Borealis Finance",
     "heading": "CONTRATTO DI FORNITURA", "subheading": "Rep. n. 2024/118",
     "title": "Contratto di fornitura di servizi",
     "preamble": "Il presente contratto è stipulato in data 15 gennaio 2024 tra Borealis Finance S.p.A., con sede "
                 "in Torino, Corso Vittorio Emanuele II 21 (il \"Committente\") e Officine Rinaldi S.r.l., con sede "
                 "in Milano, Via dei Mille 14 (il \"Fornitore\").",
     "clauses": [
         ("Oggetto", "Il Fornitore si impegna a prestare i servizi di manutenzione ordinaria e straordinaria degli "
                     "impianti tecnici presso le sedi del Committente."),
         ("Durata", "Il contratto ha durata di 36 mesi dalla data di sottoscrizione e si rinnova tacitamente "
                    "salvo disdetta con preavviso di tre mesi."),
         ("Corrispettivo", "Il corrispettivo complessivo è pari a EUR 126.000,00 oltre IVA, da fatturarsi in rate "
                           "trimestrali posticipate."),
         ("Penali", "In caso di ritardo negli interventi superiore a 48 ore si applica una penale pari allo 0,5% "
                    "del canone trimestrale per ogni giorno di ritardo."),
         ("Riservatezza", "Le parti si impegnano a mantenere riservate le informazioni scambiate in esecuzione "
                          "del presente contratto."),
         ("Legge applicabile e foro competente", "Il presente contratto è regolato dalla legge italiana. Per ogni "
                                                 "controversia è competente in via esclusiva il Foro di Torino."),
     ],
     "signatories": ["Borealis Finance S.p.A.", "Officine Rinaldi S.r.l."],
     "footer": "Contratto di fornitura - Rep. n. 2024/118"},
]

STATEMENTS = [
    {"file": "financial_statement_halcyon_fy2023.pdf", "customer": "Northwind Audit",
     "company": "Halcyon Retail Group plc", "address": "1 Kingsway, London WC2B 6AN",
     "title": "Consolidated financial statements - year ended 31 December 2023",
     "intro": "Amounts in thousands of pounds sterling (GBP '000). Period end: 31 December 2023. "
              "Comparative figures for the year ended 31 December 2022.",
     "sections": [
         ("Income statement", [("Revenue", 1842300, 1710950), ("Cost of sales", -1190410, -1121760),
                               ("Gross profit", 651890, 589190), ("Operating expenses", -472115, -441003),
                               ("Operating profit", 179775, 148187), ("Net finance costs", -21440, -19872),
                               ("Income tax", -39580, -31750), ("Net income", 118755, 96565)]),
         ("Balance sheet", [("Non-current assets", 1120400, 1064210), ("Current assets", 684950, 641880),
                            ("Total assets", 1805350, 1706090), ("Total liabilities", -1012640, -987455),
                            ("Total equity", 792710, 718635)]),
     ],
     "notes": "These statements were approved by the Board on 14 March 2024. The full annual report, including "
              "the notes to the financial statements and the auditor's report, is available on request.",
     "footer": "Halcyon Retail Group plc - Annual Report 2023"},
]
