"""Evidence for each field, labels never taken as values, and confidence that can be trusted."""

from __future__ import annotations

import pypdfium2 as pdfium
import pytest

from agents.classify import classify
from agents.confidence import REVIEW_THRESHOLD, document_confidence
from agents.fields import FieldValue, Usage
from agents.labels import is_label_text
from agents.layout import DocView, Page, lines_from_text
from agents.ocr import ocr_available
from agents.offline import OfflineExtractor
from agents.pdf import parse_pdf
from agents.rules_invoice import extract_invoice
from agents.tracing import Tracer
from bench.realworld.scan import scan_pdf
from tests.unit.agents import agents_samples as samples

needs_ocr = pytest.mark.skipif(not ocr_available(), reason="Tesseract is not installed")


def _extract(data: bytes, name: str = "doc.pdf"):
    document = parse_pdf(data, name)
    return document, OfflineExtractor().extract(document, classify(document.text), Usage(),
                                                Tracer())


def _text_in_box(data: bytes, page_number: int, bbox: list[float]) -> str:
    """The text layer's characters inside a box given from the page's top-left corner."""
    pdf = pdfium.PdfDocument(data)
    try:
        page = pdf[page_number - 1]
        height = page.get_size()[1]
        textpage = page.get_textpage()
        x0, top, x1, bottom = bbox
        text = textpage.get_text_bounded(left=x0, bottom=height - bottom, right=x1,
                                         top=height - top)
        textpage.close()
        page.close()
        return text
    finally:
        pdf.close()


def _squeeze(text: str) -> str:
    return "".join(text.split())


@pytest.mark.parametrize("sample", [samples.invoice_it, samples.invoice_en])
def test_each_box_encloses_exactly_the_text_the_value_was_read_from(sample) -> None:
    data, expected = sample()
    document, extraction = _extract(data)
    result = extraction.result(document.page_count)
    width, height = result["page_sizes"][0]
    assert (round(width), round(height)) == (210 * 72 / 25.4 // 1, 297 * 72 / 25.4 // 1) or (
        width > 500 and height > 800)  # A4 in points
    checked = 0
    for name in ("invoice_number", "issue_date", "total", "subtotal", "tax", "issuer"):
        field = result["fields"][name]
        assert field["value"] == expected[name], name
        evidence = field["evidence"]
        assert evidence is not None and evidence["page"] == 1, name
        x0, top, x1, bottom = evidence["bbox"]
        assert 0 <= x0 < x1 <= width and 0 <= top < bottom <= height, name
        # Re-read the page's own text layer inside the box: it is the evidence's text.
        assert _squeeze(_text_in_box(data, 1, evidence["bbox"])) == _squeeze(evidence["text"])
        checked += 1
    assert checked == 6
    assert result["fields"]["total"]["stage"] == "rules"


def test_the_box_of_a_total_is_on_the_totals_row_not_on_a_line_item() -> None:
    data, _ = samples.invoice_it()
    _, extraction = _extract(data)
    total = extraction.fields["total"].evidence
    subtotal = extraction.fields["subtotal"].evidence
    assert total["text"] == "1.464,00 €" or total["text"] == "1.464,00"
    assert total["bbox"][1] > subtotal["bbox"][1]  # below the subtotal on the page


@needs_ocr
def test_a_scan_yields_total_and_date_with_ocr_evidence_where_the_text_was() -> None:
    data, expected = samples.invoice_it()
    _, text_extraction = _extract(data)
    scanned = scan_pdf(data, dpi=150, angle=0.0, seed=3)
    document, extraction = _extract(scanned, "scan.pdf")
    assert document.ocr_pages == [1]
    for name in ("total", "issue_date"):
        field = extraction.fields[name]
        assert field.value == expected[name]
        assert field.stage == "ocr"
        scanned_box = field.evidence["bbox"]
        text_box = text_extraction.fields[name].evidence["bbox"]
        # Word boxes scaled back from pixels to points land on the printed value.
        assert all(abs(a - b) < 6 for a, b in zip(scanned_box, text_box)), (scanned_box,
                                                                           text_box)


def _view(text: str) -> DocView:
    return DocView.of([Page(1, lines_from_text(text))])


@pytest.mark.parametrize("word", ["Nummer", "Käufer", "Rechnungsnummer", "Total", "Numéro",
                                  "Fattura", "Factuur", "Bill to:", "Invoice No."])
def test_label_words_are_never_values(word) -> None:
    assert is_label_text(word, {"invoice_number": [("rechnungsnummer", 1.0)]})


@pytest.mark.parametrize("name", ["Acme GmbH", "Brouwer & Zonen B.V.", "Free", "Van Dijk Bouw"])
def test_names_are_not_labels(name) -> None:
    assert not is_label_text(name)


def test_the_buyer_heading_beside_the_seller_label_is_not_the_issuer() -> None:
    fields = extract_invoice(_view(
        "Verkäufer                 Käufer\n"
        "Holzbau Meier GmbH        Stadtwerke Lindau\n"
        "Seestraße 4               Bahnhofplatz 1\n"
        "Rechnungsnummer: 2024-118\n"
        "Rechnungsdatum: 03.04.2024\n"
        "Nettobetrag      1.000,00 EUR\n"
        "MwSt. 19%          190,00 EUR\n"
        "Gesamtbetrag     1.190,00 EUR\n"))
    assert fields["issuer"].value == "Holzbau Meier GmbH"
    assert fields["total"].value == 1190.0


def test_a_column_label_is_not_the_issuer() -> None:
    fields = extract_invoice(_view(
        "Nummer        Datum        Kunde\n"
        "RE-55         12.01.2024   K-9\n"
        "Rechnung\n"
        "Käufer: Stadtwerke Lindau\n"
        "Pos   Beschreibung    Menge    Betrag\n"
        "1     Beratung        2        400,00\n"
        "Gesamtbetrag  400,00 EUR\n"))
    assert fields["issuer"].value not in ("Nummer", "Datum", "Kunde", "Rechnung", "Käufer")
    assert fields["issuer"].value != "Stadtwerke Lindau"


def test_the_buyer_block_is_never_the_issuer() -> None:
    fields = extract_invoice(_view(
        "Rechnungsempfänger\n"
        "Bäckerei Huber GmbH\n"
        "Marktplatz 3, 80331 München\n"
        "\n"
        "Rechnungsnummer: 7781\n"
        "Rechnungsdatum: 02.05.2024\n"
        "Leistung: Wartung der Elektroanlage\n"
        "Gesamtbetrag 220,00 EUR\n"
        "Zahlbar innerhalb von 14 Tagen.\n"
        "Elektro Schmid GmbH · Amtsgericht München HRB 12345 · USt-IdNr. DE123456789\n"))
    assert fields["issuer"].value == "Elektro Schmid GmbH"


@pytest.mark.parametrize("printed, value", [
    ("18,310.63", 18310.63), ("18.310,63 €", 18310.63), ("EUR 18 310,63", 18310.63),
    ("CHF 18'310.63", 18310.63), ("1,234,567.89", 1234567.89)])
def test_totals_keep_their_thousands(printed, value) -> None:
    fields = extract_invoice(_view(f"Invoice No: 55\nTotal amount due    {printed}\n"))
    assert fields["total"].value == value


def test_a_total_that_disagrees_with_the_sums_is_not_confident() -> None:
    good = _view("Invoice No: 55\nSubtotal  200.00\nVAT  20.00\nTotal  220.00 EUR\n")
    bad = _view("Invoice No: 55\nSubtotal  200.00\nVAT  20.00\nTotal  440.00 EUR\n")
    from agents.confidence import calibrate

    confidences = []
    for view in (good, bad):
        fields = extract_invoice(view)
        calibrate(view, "invoice", fields, "rules", set())
        confidences.append(fields["total"].confidence)
    assert confidences[1] < confidences[0]
    assert confidences[1] < 0.9


def test_no_fields_or_a_missing_core_field_is_never_confident() -> None:
    assert document_confidence("other", {}, 1.0, False) == 0.0
    full = {n: FieldValue("x", 0.99) for n in ("issuer", "invoice_number", "issue_date",
                                               "total", "currency")}
    assert document_confidence("invoice", full, 1.0, False) > REVIEW_THRESHOLD
    missing = dict(full, total=FieldValue())
    assert document_confidence("invoice", missing, 1.0, False) == 0.0
    assert document_confidence("invoice", full, 1.0, True) < REVIEW_THRESHOLD


def test_a_long_document_without_fields_needs_review() -> None:
    pdf = samples._pdf()
    for _ in range(3):
        pdf.multi_cell(0, 5, "Chapter 1. Installing the unit. Unpack the box and read the "
                             "safety notes before connecting power. " * 20)
        pdf.add_page()
    document, extraction = _extract(bytes(pdf.output()), "manual.pdf")
    result = extraction.result(document.page_count)
    assert extraction.confidence == 0.0 and result["needs_review"] is True


def test_the_review_threshold_matches_the_apps_filter() -> None:
    from schema.stats_types import REVIEW_CONFIDENCE

    assert REVIEW_THRESHOLD == REVIEW_CONFIDENCE
