"""Scanned, image-only PDFs: read through Tesseract, or refused clearly where it is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.classify import classify
from agents.errors import DocumentError
from agents.layout import DocView
from agents.ocr import ocr_available
from agents.pdf import parse_pdf
from agents.rules_invoice import extract_invoice
from bench.realworld.scan import scan_pdf
from tests.unit.agents import agents_samples as samples

SCANS = Path(__file__).resolve().parents[3] / "bench" / "realworld" / "scans"
needs_ocr = pytest.mark.skipif(not ocr_available(), reason="Tesseract is not installed")


def _has_text_layer(data: bytes) -> bool:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(data)
    try:
        page = pdf[0]
        textpage = page.get_textpage()
        count = textpage.count_chars()
        textpage.close()
        page.close()
        return count > 0
    finally:
        pdf.close()


@needs_ocr
def test_a_scan_of_a_generated_invoice_yields_its_total_and_dates():
    data, expected = samples.invoice_en()
    scanned = scan_pdf(data, dpi=150, angle=0.9, seed=7)
    assert not _has_text_layer(scanned)  # images only, as a scanner makes them
    document = parse_pdf(scanned, "scan.pdf")
    assert document.ocr_pages == [1]
    assert classify(document.text).document_type == "invoice"
    fields = extract_invoice(DocView.of(document.pages))
    assert fields["total"].value == expected["total"]
    assert fields["issue_date"].value == expected["issue_date"]
    assert fields["invoice_number"].value == expected["invoice_number"]


@needs_ocr
def test_a_scan_of_a_real_layout_yields_its_total_and_date():
    pdf = SCANS / "scan_pyinvoice_en_us_sales_tax.pdf"
    truth = json.loads(pdf.with_suffix(".json").read_text(encoding="utf-8"))["fields"]
    document = parse_pdf(pdf.read_bytes(), pdf.name)
    fields = extract_invoice(DocView.of(document.pages))
    assert fields["total"].value == pytest.approx(truth["total"], abs=0.01)
    assert fields["issue_date"].value == truth["issue_date"]


def test_without_tesseract_a_scan_is_refused_with_a_clear_reason(monkeypatch):
    monkeypatch.setenv("QUIRE_TESSERACT_CMD", "/nonexistent/tesseract")
    scanned = scan_pdf(samples.invoice_en()[0], dpi=72, angle=0.0)
    with pytest.raises(DocumentError, match=r"scanned image without text.*OCR is not installed"):
        parse_pdf(scanned, "scan.pdf")
    # A text PDF needs no OCR and is read as before.
    assert parse_pdf(samples.invoice_en()[0], "text.pdf").ocr_pages == []


def test_upload_refuses_a_scan_when_ocr_is_missing(monkeypatch):
    from app.documents import DocumentRejected, check_document

    scanned = scan_pdf(samples.invoice_en()[0], dpi=72, angle=0.0)
    monkeypatch.setenv("QUIRE_TESSERACT_CMD", "/nonexistent/tesseract")
    with pytest.raises(DocumentRejected, match="OCR is not installed"):
        check_document("scan.pdf", scanned, max_bytes=10_000_000)
    assert check_document("text.pdf", samples.invoice_en()[0], max_bytes=10_000_000).pages == 1
    monkeypatch.delenv("QUIRE_TESSERACT_CMD")
    if ocr_available():
        assert check_document("scan.pdf", scanned, max_bytes=10_000_000).pages == 1
