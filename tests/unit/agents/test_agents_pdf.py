"""Reading PDFs: text and pages from good files, clear non-retryable errors for bad ones."""

from pathlib import Path

import pytest

from agents.errors import DocumentError
from agents.ocr import ocr_available
from agents.pdf import load_bytes, parse_pdf, read_document
from tests.unit.agents import agents_samples as samples


def test_reads_pages_and_text_of_a_generated_invoice(tmp_path: Path) -> None:
    data, _ = samples.invoice_it()
    path = samples.write(tmp_path, "fattura.pdf", data)
    doc = read_document(str(path))
    assert doc.page_count == 1
    assert doc.name == "fattura.pdf"
    assert doc.size_bytes == len(data)
    assert len(doc.sha256) == 64
    assert "FT-2024/0042" in doc.text
    assert "1.464,00 €" in doc.text


def test_layout_keeps_table_columns_as_separate_cells() -> None:
    doc = parse_pdf(samples.invoice_it()[0], "f.pdf")
    header = next(line for line in doc.pages[0].lines if line.cells[0].text == "Descrizione")
    assert [c.text for c in header.cells] == ["Descrizione", "Qtà", "Prezzo unitario", "Importo"]
    assert all(a.x1 <= b.x0 for a, b in zip(header.cells, header.cells[1:]))


def test_multi_page_document_reports_every_page() -> None:
    doc = parse_pdf(samples.contract_en()[0], "c.pdf")
    assert doc.page_count == 2
    assert [p.number for p in doc.pages] == [1, 2]
    assert "governed by" in doc.pages[1].text


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (samples.encrypted_pdf(), "password-protected"),
        (samples.corrupt_pdf(), "corrupt"),
        (b"", "empty (0 bytes)"),
        (samples.text_as_pdf(), "plain text"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "PNG image"),
        (b"PK\x03\x04" + b"\x00" * 64, "ZIP archive"),
        (bytes(range(256)), "no %PDF- header"),
        (samples.no_pages_pdf(), "no pages"),
        # Without Tesseract a page with no text layer cannot be read, and the error says why.
        (samples.blank_pdf(), "no extractable text" if ocr_available() else "scanned image without text"),
    ],
    ids=["encrypted", "corrupt", "zero-bytes", "text-renamed", "png", "zip", "binary",
         "no-pages", "blank"],
)
def test_bad_documents_raise_non_retryable_document_errors(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError) as caught:
        parse_pdf(data, "/data/upload.pdf")
    assert message in str(caught.value)
    assert str(caught.value).startswith("upload.pdf:")
    assert caught.value.retryable is False


def test_owner_only_encryption_is_still_readable() -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.cell(0, 10, "Invoice INV-7 permissions only")
    pdf.set_encryption(owner_password="owner-only")
    doc = parse_pdf(bytes(pdf.output()), "perm.pdf")
    assert "INV-7" in doc.text


def test_missing_local_and_volume_paths_are_not_document_errors(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("DATABRICKS_HOST", raising=False)
    with pytest.raises(FileNotFoundError):
        load_bytes(str(tmp_path / "missing.pdf"))
    with pytest.raises(FileNotFoundError):
        load_bytes("/Volumes/main/quire/docs/missing.pdf")


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="directory"):
        load_bytes(str(tmp_path))


def test_file_scheme_prefix_is_accepted(tmp_path: Path) -> None:
    path = samples.write(tmp_path, "a.pdf", samples.invoice_en()[0])
    assert load_bytes(f"file://{path}") == path.read_bytes()
