"""E-invoices read exactly: CII, UBL, ZUGFeRD 1, FatturaPA, embedded or uploaded, signed or not."""

import json
from pathlib import Path

import pytest

from agents.einvoice import NotAnInvoice, read_einvoice
from agents.errors import DocumentError
from agents.extract import extract_document
from agents.pdf import parse_document
from agents.runner import run
from agents.signed import unwrap_p7m
from agents.tracing import Tracer
from tests.unit.agents import einvoice_samples as samples
from tests.unit.agents.agents_fakes import FakeChatServer, completion

CASES = {
    "facturx.xml": (samples.cii_xml, "Factur-X", "EN 16931", samples.EXPECTED),
    "xrechnung-cii.xml": (lambda: samples.cii_xml(samples.XRECHNUNG_CII), "XRechnung CII", "XRechnung 3.0",
                          samples.EXPECTED),
    "ubl.xml": (samples.ubl_xml, "UBL", "EN 16931", samples.EXPECTED),
    "peppol.xml": (lambda: samples.ubl_xml(samples.PEPPOL), "UBL", "PEPPOL BIS Billing 3.0", samples.EXPECTED),
    "xrechnung-ubl.xml": (lambda: samples.ubl_xml(samples.XRECHNUNG_CII), "XRechnung UBL", "XRechnung 3.0",
                          samples.EXPECTED),
    "zugferd1.xml": (samples.zugferd1_xml, "ZUGFeRD 1", "COMFORT", samples.EXPECTED),
    "fattura.xml": (samples.fatturapa_xml, "FatturaPA", "FPR12", samples.FATTURAPA_EXPECTED),
    "fattura-no-total.xml": (lambda: samples.fatturapa_xml(total=False), "FatturaPA", "FPR12",
                             samples.FATTURAPA_EXPECTED),
    "facturx.pdf": (samples.facturx_pdf, "Factur-X", "EN 16931", samples.EXPECTED),
    "xrechnung.pdf": (lambda: samples.facturx_pdf(samples.cii_xml(samples.XRECHNUNG_CII)), "XRechnung CII",
                      "XRechnung 3.0", samples.EXPECTED),
    "zugferd2.pdf": (lambda: samples.attached_pdf(samples.cii_xml(), "zugferd-invoice.xml"), "ZUGFeRD 2",
                     "EN 16931", samples.EXPECTED),
    "zugferd1.pdf": (lambda: samples.attached_pdf(samples.zugferd1_xml()), "ZUGFeRD 1", "COMFORT",
                     samples.EXPECTED),
    "fattura.xml.p7m": (lambda: samples.sign_p7m(samples.fatturapa_xml()), "FatturaPA", "FPR12",
                        samples.FATTURAPA_EXPECTED),
    "fattura-base64.xml.p7m": (lambda: samples.sign_p7m(samples.fatturapa_xml(), "base64"), "FatturaPA",
                               "FPR12", samples.FATTURAPA_EXPECTED),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_e_invoice_yields_its_xml_fields_exactly(tmp_path, name) -> None:
    make, standard, profile, expected = CASES[name]
    path = tmp_path / name
    path.write_bytes(make())
    result = extract_document(str(path))
    assert result["document_type"] == "invoice"
    assert result["source"]["kind"] == "e-invoice XML"
    assert (result["source"]["standard"], result["source"]["profile"]) == (standard, profile)
    for field, value in expected.items():
        got = result["fields"][field]
        assert got["value"] == value, field
        assert got["stage"] == "xml" and got["confidence"] >= 0.99, field
    assert result["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert result["tokens_saved"] > 0
    assert result["needs_review"] is False and "findings" not in result
    assert result["pages"] == (1 if name.endswith(".pdf") else 0)
    if name.endswith(".p7m"):
        assert result["source"]["envelope"] == "CAdES (p7m)"


def test_a_planted_page_and_xml_mismatch_is_an_audit_finding(tmp_path) -> None:
    path = tmp_path / "planted.pdf"
    path.write_bytes(samples.planted_pdf())
    result = extract_document(str(path))
    findings = {f["field"]: f for f in result["findings"]}
    assert findings["total"] == {"kind": "xml_page_mismatch", "field": "total", "xml": 1440.0, "page": 1540.0}
    assert findings["invoice_number"]["xml"] == "FA-2024-0042"
    assert findings["invoice_number"]["page"] == "FA-2024-0043"
    assert "issue_date" not in findings  # the page and the XML agree there
    assert result["needs_review"] is True
    # The XML stays what the result reports: the finding says where the page differs.
    assert result["fields"]["total"]["value"] == 1440.0


def test_a_faithful_page_gives_no_finding() -> None:
    doc = parse_document(samples.facturx_pdf(), "facturx.pdf")
    from agents.cascade import CascadeExtractor, cross_check
    from agents.classify import classify
    from agents.fields import Usage
    from agents.layout import DocView
    from agents.offline import offline_fields

    view = DocView.of(doc.pages)
    page = offline_fields(view, "invoice")
    assert page["total"].value == 1440.0  # the rules do read the page: the check is not vacuous
    assert cross_check(doc.einvoice, view.text, page) == []
    extraction = CascadeExtractor(use_llm=False).extract(doc, classify(doc.text), Usage(), Tracer())
    assert extraction.needs_review is False


@pytest.mark.parametrize("encoding", ["der", "base64", "pem"])
def test_p7m_envelopes_are_unwrapped(encoding) -> None:
    content = samples.fatturapa_xml()
    assert unwrap_p7m(samples.sign_p7m(content, encoding)) == content


def test_a_p7m_signed_twice_is_unwrapped_to_the_document() -> None:
    content = samples.fatturapa_xml()
    twice = samples.sign_p7m(samples.sign_p7m(content))
    assert unwrap_p7m(twice) == content


def test_a_damaged_or_detached_p7m_is_a_document_error() -> None:
    with pytest.raises(DocumentError, match="signed"):
        unwrap_p7m(b"\x30\x03\x02\x01\x01", "x.p7m")
    with pytest.raises(DocumentError, match="neither DER nor base64"):
        unwrap_p7m(b"MI!!! not base64", "x.p7m")


def test_text_that_merely_starts_like_base64_is_not_taken_for_a_signature() -> None:
    with pytest.raises(DocumentError, match="not a PDF, the content looks like plain text"):
        parse_document(b"MINUTES of the meeting held on 3 March", "minutes.pdf")


def test_non_invoice_xml_is_refused_with_its_root_named() -> None:
    with pytest.raises(NotAnInvoice, match=r"not an e-invoice \(its root element is .*Order\)"):
        read_einvoice(samples.NOT_AN_INVOICE_XML, "order.xml")
    with pytest.raises(NotAnInvoice, match="not well-formed"):
        read_einvoice(b"<Invoice><unclosed></Invoice>", "broken.xml")


@pytest.mark.parametrize("data", [samples.XXE_XML, samples.BILLION_LAUGHS_XML], ids=["xxe", "billion-laughs"])
def test_xml_with_a_dtd_or_entities_is_refused(tmp_path, data) -> None:
    with pytest.raises(NotAnInvoice, match="DTD or entities"):
        read_einvoice(data, "evil.xml")
    path = tmp_path / "evil.xml"
    path.write_bytes(data)
    outcome = run(str(path), "offline", tracer=Tracer())
    assert outcome.payload["status"] == "failed" and outcome.payload["retryable"] is False
    assert "passwd" not in json.dumps(outcome.payload).replace("file:///etc/passwd", "")


def test_a_pdf_with_a_non_invoice_attachment_is_read_from_its_page() -> None:
    doc = parse_document(samples.attached_pdf(samples.NOT_AN_INVOICE_XML, "order.xml"), "page.pdf")
    assert doc.einvoice is None and doc.page_count == 1


def test_no_extractor_spends_tokens_on_an_e_invoice(tmp_path, monkeypatch) -> None:
    path = tmp_path / "facturx.pdf"
    path.write_bytes(samples.facturx_pdf())
    with FakeChatServer([(200, completion("{}"))]) as server:
        monkeypatch.setenv("QUIRE_LLM_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("QUIRE_LLM_MODEL", "fake-model")
        for extractor in ("llm", "cascade"):
            outcome = run(str(path), extractor, tracer=Tracer())
            assert outcome.payload["status"] == "completed", outcome.payload["error"]
            assert outcome.payload["input_tokens"] == 0 and outcome.payload["output_tokens"] == 0
            assert outcome.payload["result"]["extractor"] == extractor
        assert server.requests == []


def test_a_p7m_around_a_pdf_is_read_as_that_pdf() -> None:
    doc = parse_document(samples.sign_p7m(samples.facturx_pdf()), "facturx.pdf.p7m")
    assert doc.page_count == 1 and doc.einvoice.standard == "Factur-X"
    assert doc.einvoice.fields["total"] == 1440.0


CORPUS = Path(__file__).resolve().parents[3] / "bench" / "einvoices"


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.xml")), ids=lambda p: p.stem)
def test_the_libraries_own_fixtures_yield_their_stated_values(path) -> None:
    truth = json.loads(path.with_suffix(".json").read_text())
    if truth["document_type"] != "invoice":
        with pytest.raises(NotAnInvoice, match="not an e-invoice"):
            read_einvoice(path.read_bytes(), path.name)
        return
    einvoice = read_einvoice(path.read_bytes(), path.name)
    assert (einvoice.standard, einvoice.profile) == (truth["standard"], truth["profile"])
    stated = {k: v for k, v in einvoice.fields.items() if k != "line_items"}
    assert stated == truth["fields"]
    assert len(einvoice.fields.get("line_items") or []) == truth["line_items"]


def test_a_factur_x_pdf_made_by_its_library_yields_its_xml_exactly() -> None:
    pdf = CORPUS.parent / "realworld" / "packaged" / "facturx_en16931_fr.pdf"
    result = extract_document(str(pdf))
    truth = json.loads((CORPUS / "factur-x-en16931.json").read_text())["fields"]
    assert {k: result["fields"][k]["value"] for k in truth} == truth
    assert {result["fields"][k]["stage"] for k in truth} == {"xml"}
    assert result["source"]["file"] == "factur-x.xml" and result["needs_review"] is False


def test_a_p7m_with_an_indefinite_ber_length_is_unwrapped() -> None:
    # Some Italian signing tools write the outer SEQUENCE with an indefinite length (BER).
    der = samples.sign_p7m(samples.fatturapa_xml())
    length = der[1]
    body = der[2 + (length & 0x7F if length & 0x80 else 0):]
    assert unwrap_p7m(b"\x30\x80" + body + b"\x00\x00") == samples.fatturapa_xml()
