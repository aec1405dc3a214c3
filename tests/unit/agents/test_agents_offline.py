"""The offline extractor on generated PDFs and on text layouts it has never seen."""

import pytest

from agents.classify import classify
from agents.fields import FIELD_SPECS, Usage
from agents.layout import DocView, Page, lines_from_text
from agents.offline import OfflineExtractor
from agents.pdf import parse_pdf
from agents.prompt import estimate_json
from agents.rules_contract import extract_contract
from agents.rules_financial import extract_financial
from agents.rules_invoice import extract_invoice
from agents.tracing import Tracer
from tests.unit.agents import agents_samples as samples

SAMPLES = ["invoice_it", "invoice_en", "invoice_de", "contract_en", "contract_it",
           "contract_fr", "financial_en", "financial_it"]


def _extract(name: str):
    data, expected = getattr(samples, name)()
    doc = parse_pdf(data, f"{name}.pdf")
    usage = Usage()
    extraction = OfflineExtractor().extract(doc, classify(doc.text), usage, Tracer())
    return doc, extraction, expected, usage


@pytest.mark.parametrize("name", SAMPLES)
def test_offline_extracts_every_stated_field(name: str) -> None:
    doc, extraction, expected, _ = _extract(name)
    assert extraction.document_type == expected["document_type"]
    assert set(extraction.fields) == set(FIELD_SPECS[expected["document_type"]])
    for field, value in expected.items():
        if field == "document_type":
            continue
        found = extraction.fields[field]
        assert found.value == value, field
        assert 0.3 <= found.confidence <= 1.0, field
    assert 0.5 < extraction.confidence <= 1.0
    result = extraction.result(doc.page_count)
    assert result["extractor"] == "offline" and result["model"] is None
    assert result["pages"] == doc.page_count


@pytest.mark.parametrize("name", ["invoice_de", "contract_en"])
def test_offline_token_estimate_covers_prompt_and_answer(name: str, monkeypatch) -> None:
    monkeypatch.delenv("QUIRE_LLM_PRICE_INPUT_PER_MTOK", raising=False)
    monkeypatch.delenv("QUIRE_LLM_PRICE_OUTPUT_PER_MTOK", raising=False)
    doc, extraction, _, usage = _extract(name)
    answer = {"document_type": extraction.document_type,
              "fields": {n: fv.as_dict() for n, fv in extraction.fields.items()}}
    assert usage.output_tokens == estimate_json(answer)
    # The prompt alone is a few hundred tokens; the document text comes on top.
    assert usage.input_tokens > 300 + len(doc.text) / 8
    # Without a configured price the usage is unpriced: no cost is reported, not $0.
    assert usage.unpriced and usage.reported_cost_usd is None and usage.estimated


def test_offline_cost_uses_configured_prices(monkeypatch) -> None:
    monkeypatch.setenv("QUIRE_LLM_PRICE_INPUT_PER_MTOK", "2.5")
    monkeypatch.setenv("QUIRE_LLM_PRICE_OUTPUT_PER_MTOK", "10")
    _, _, _, usage = _extract("invoice_en")
    expected = usage.input_tokens * 2.5 / 1e6 + usage.output_tokens * 10 / 1e6
    assert usage.llm_cost_usd == pytest.approx(expected)
    assert usage.llm_cost_usd > 0


def _view(text: str) -> DocView:
    return DocView.of([Page(1, lines_from_text(text))])


FRENCH_INVOICE = """SARL Boulangerie Dupont
12 rue de la Paix, 75002 Paris
SIRET 123 456 789 00012     N° TVA FR12345678901

FACTURE N° F-2024-077
Date de facture : 12/02/2024
Échéance : 13 mars 2024

Client :                          Café Central SAS

Désignation            Qté     Prix unitaire      Montant HT
Croissants (lot)        40        1,20 €            48,00 €
Baguettes               25        1,10 €            27,50 €

Total HT                                            75,50 €
TVA 5,5 %                                            4,15 €
Total TTC                                           79,65 €
"""

INLINE_INVOICE = """ACME Widgets LLC - 1 Main St, Springfield
Tax Invoice #: 2024-1187    Date: 2 Jan 2024    Terms: Net 30
Sold To: Globex Corporation
Widget A   5   20.00   100.00
Widget B   2   35.50    71.00
Subtotal: 171.00
GST 10%: 17.10
Total Due: AUD 188.10
"""


def test_unseen_french_layout() -> None:
    fields = extract_invoice(_view(FRENCH_INVOICE))
    values = {k: v.value for k, v in fields.items()}
    assert values["issuer"] == "SARL Boulangerie Dupont"
    assert values["invoice_number"] == "F-2024-077"
    assert values["issue_date"] == "2024-02-12"
    assert values["due_date"] == "2024-03-13"
    assert (values["subtotal"], values["tax"], values["total"]) == (75.5, 4.15, 79.65)
    assert values["currency"] == "EUR"
    assert [i["amount"] for i in values["line_items"]] == [48.0, 27.5]


def test_inline_labels_headerless_items_and_payment_terms() -> None:
    fields = extract_invoice(_view(INLINE_INVOICE))
    values = {k: v.value for k, v in fields.items()}
    assert values["issuer"] == "ACME Widgets LLC"
    assert values["invoice_number"] == "2024-1187"
    assert values["issue_date"] == "2024-01-02"
    # "Net 30" from the issue date, with a modest confidence since it is computed.
    assert values["due_date"] == "2024-02-01" and fields["due_date"].confidence == 0.5
    assert values["currency"] == "AUD"
    assert values["total"] == 188.1 and fields["total"].confidence >= 0.95
    assert [(i["description"], i["quantity"]) for i in values["line_items"]] == [
        ("Widget A", 5.0), ("Widget B", 2.0)]


def test_german_contract_in_prose() -> None:
    text = ("DIENSTLEISTUNGSVERTRAG\n"
            "zwischen der Nordlicht Software GmbH, Kiel, nachfolgend „Auftragnehmer“, und der "
            "Südwind Handels AG, München, nachfolgend „Auftraggeber“.\n"
            "§ 1 Vertragsbeginn: Der Vertrag beginnt am 1. Oktober 2024.\n"
            "§ 2 Laufzeit: Die Laufzeit beträgt zwölf Monate.\n"
            "§ 3 Vergütung: Die Gesamtvergütung beträgt 60.000,00 EUR zzgl. MwSt.\n"
            "§ 4 Dieser Vertrag unterliegt deutschem Recht. Gerichtsstand ist München.\n")
    values = {k: v.value for k, v in extract_contract(_view(text)).items()}
    assert values == {"parties": ["Nordlicht Software GmbH", "Südwind Handels AG"],
                      "effective_date": "2024-10-01", "term_months": 12,
                      "governing_law": "Germany", "total_value": 60000.0, "currency": "EUR"}


def test_notice_periods_are_not_the_term() -> None:
    text = ("Agreement between Foo Ltd and Bar Inc. Either party may terminate on three (3) "
            "months' notice. The initial term is 2 years.")
    assert extract_contract(_view(text))["term_months"].value == 24


def test_german_statement_in_thousands_with_a_loss() -> None:
    text = """Alpenblick Hotel AG
Jahresabschluss zum 31. Dezember 2023 (in TEUR)
Bilanz                          2023        2022
Summe Aktiva                  12.400      11.950
Umsatzerlöse                   8.750       8.100
Jahresfehlbetrag                 320         150
"""
    values = {k: v.value for k, v in extract_financial(_view(text)).items()}
    assert values == {"company": "Alpenblick Hotel AG", "period_end": "2023-12-31",
                      "currency": "EUR", "revenue": 8750000.0, "net_income": -320000.0,
                      "total_assets": 12400000.0}


def test_missing_fields_are_null_with_zero_confidence() -> None:
    fields = extract_invoice(_view("Invoice\nINV-1\nThank you for your business."))
    assert fields["total"].value is None and fields["total"].confidence == 0
    assert fields["line_items"].as_dict() == {"value": None, "confidence": 0.0}


def test_other_documents_have_no_fields() -> None:
    data = samples._pdf()
    data.multi_cell(0, 5, "Meeting notes. We talked about the weather and the garden party.")
    doc = parse_pdf(bytes(data.output()), "notes.pdf")
    extraction = OfflineExtractor().extract(doc, classify(doc.text), Usage(), Tracer())
    assert extraction.document_type == "other"
    assert extraction.fields == {}
    # Nothing found is nothing to be sure of: the document goes to a person.
    assert extraction.confidence == 0.0
    assert extraction.needs_review is True


def _pages_view(*texts: str) -> DocView:
    return DocView.of([Page(n, lines_from_text(t)) for n, t in enumerate(texts, start=1)])


def test_wrapped_header_code_column_and_rate_column() -> None:
    text = """Rossi S.r.l.
Fattura n. 7   Data: 03/02/2024
Art.      Descrizione                   Quantit   P. unit.   Aliq.   Importo
                                        à
2345.81   Cartucce toner nero           10        78,00      22      780,00
3654.43   Assistenza on-site (ore)      5,75      104,74     22      602,26
Imponibile                                                           1.382,26
"""
    items = extract_invoice(_view(text))["line_items"].value
    assert items == [
        {"description": "Cartucce toner nero", "quantity": 10.0, "unit_price": 78.0,
         "amount": 780.0},
        {"description": "Assistenza on-site (ore)", "quantity": 5.75, "unit_price": 104.74,
         "amount": 602.26},
    ]


def test_table_continues_over_a_page_break_under_a_running_header() -> None:
    first = """Acme Ltd
Invoice No: A-1   Date: 1 May 2024
Description          Qty     Unit price     Amount
Widget               2       10.00          20.00
Gadget               1       30.00          30.00
Acme Ltd - registered in England No. 123 456 - capital 10,000.00
1 / 2
"""
    second = """Acme Ltd   Invoice A-1
Bolt                 10      1.50           15.00
Nut                  4       0.25           1.00
Subtotal                                    66.00
"""
    fields = extract_invoice(_pages_view(first, second))
    assert [i["description"] for i in fields["line_items"].value] == ["Widget", "Gadget", "Bolt", "Nut"]
    assert fields["subtotal"].value == 66.0 and fields["subtotal"].confidence >= 0.95


def test_monospaced_rows_and_descriptions_wrapped_around_their_figures() -> None:
    text = """Qty Description                Unit price    Amount
50 On-site support (hours)       114.00        5,700.00
Steel brackets (100) -
2                                 20.00           40.00
January
3 Consulting                      10.00           30.00
Total                                           5,770.00
"""
    items = extract_invoice(_view(text))["line_items"].value
    assert [(i["description"], i["quantity"]) for i in items] == [
        ("On-site support (hours)", 50.0),
        ("Steel brackets (100) - January", 2.0),
        ("Consulting", 3.0),
    ]


def test_contract_with_numbered_parties_defined_dates_and_distracting_amounts() -> None:
    text = """SUPPLY AGREEMENT
This Agreement is made on 09/03/2025 by and between:
(1) Jones & Evans LLP, a company organised under the laws of United Kingdom (the "Supplier")
and
(2) Software Pryce LLP, a company organised under the laws of United Kingdom (the "Client")
and (3) Granite Holdings Ltd ("Guarantor").
1. Commencement. This Agreement shall take effect on 10/03/2025 (the "Effective Date").
2. Term. This Agreement continues for a period of four (4) years. Either party may terminate
it on three (3) months' notice.
3. Liability. The aggregate liability of each party shall not exceed GBP 5,000,000.00.
4. Fees. The total value of this Agreement is USD 1,364,000.00 for the whole term.
5. This Agreement is governed by English law.
Signed for and on behalf of Jones & Evans LLP      Signed for and on behalf of Software Pryce LLP
"""
    values = {k: v.value for k, v in extract_contract(_view(text)).items()}
    assert values == {
        "parties": ["Jones & Evans LLP", "Software Pryce LLP", "Granite Holdings Ltd"],
        "effective_date": "2025-03-10", "term_months": 48, "governing_law": "England and Wales",
        "total_value": 1364000.0, "currency": "USD"}


def test_statement_note_column_and_exact_total_labels() -> None:
    text = """Transports Thomas SAS
Bilan au 31 décembre 2019 (kEUR)
                                 Note    2019       2018
Chiffre d'affaires net           17      145 723    162 856
Total actif immobilisé                   131 532    61 991
Total de l'actif                 4       180 701    148 736
Bénéfice ou perte                        18 949     29 687
"""
    values = {k: v.value for k, v in extract_financial(_view(text)).items()}
    assert values["revenue"] == 145723000.0
    assert values["total_assets"] == 180701000.0
    assert values["net_income"] == 18949000.0
    assert values["currency"] == "EUR" and values["period_end"] == "2019-12-31"


def test_uk_document_in_dollars_reads_dates_day_first() -> None:
    text = """WILLIAMS SOFTWARE LIMITED
185 Victoria Road, Birmingham B2 4QA
Issue date: 02/05/2024    Due: 01/06/2024
Total due   USD 1,000.00
Williams Software Limited - registered in England and Wales
"""
    fields = extract_invoice(_view(text))
    assert fields["issue_date"].value == "2024-05-02"
    assert fields["due_date"].value == "2024-06-01"
    assert fields["issuer"].value == "Williams Software Limited"
