"""The task detail's words for where exact values came from and for audit findings."""

from app.components.result_view import finding_text, source_text


def test_a_mismatch_reads_as_what_each_side_says():
    finding = {"kind": "xml_page_mismatch", "field": "total", "xml": 1440.0, "page": 1540.0}
    assert finding_text(finding) == "Total: the e-invoice XML states 1,440.00, the page shows 1,540.00"
    missing = {"kind": "xml_page_mismatch", "field": "invoice_number", "xml": "FA-1", "page": None}
    assert finding_text(missing).endswith("the page shows nothing")
    assert finding_text({"kind": "something_new"}) == "something new"


def test_the_source_names_the_standard_and_profile():
    source = {"kind": "e-invoice XML", "standard": "FatturaPA", "profile": "FPR12", "envelope": "CAdES (p7m)"}
    assert source_text(source) == "e-invoice XML · FatturaPA · FPR12 · CAdES (p7m)"
    assert source_text({"kind": "e-invoice XML", "standard": "UBL", "profile": None}) == "e-invoice XML · UBL"
