"""Submitting documents: every file checked before anything is written; duplicates offered."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app import inputs, submitting
from schema import db, queue
from schema.settings import Settings
from tests.e2e.app_harness import make_pdf
from tests.unit.agents.agents_samples import no_pages_pdf


@pytest.fixture
def pool(db_dsn):
    with db.make_pool(db_dsn, max_size=2) as pool:
        yield pool


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path, max_upload_mb=1)


def _submit(pool, settings, uploads, **options):
    return asyncio.run(submitting.submit(pool, settings, uploads, submitting.SubmitOptions(agent="docs", **options),
                                         submitted_by="alice"))


def test_bad_files_leave_no_trace_and_good_ones_become_tasks(pool, settings, conn):
    queue.configure_agent(conn, "docs")
    uploads = [submitting.Upload("good.pdf", make_pdf("good", pages=2)), submitting.Upload("empty.pdf", b""),
               submitting.Upload("notes.txt", b"hello"), submitting.Upload("huge.pdf", b"%PDF-" + b"0" * 1_000_001),
               submitting.Upload("cut.pdf", make_pdf("cut")[:200])]
    results = {r.name: r for r in _submit(pool, settings, uploads, customer="Acme")}
    assert results["good.pdf"].outcome == "created" and results["good.pdf"].pages == 2
    assert "empty" in results["empty.pdf"].error
    assert "not a PDF" in results["notes.txt"].error
    assert "over the 1 MB limit" in results["huge.pdf"].error
    assert "damaged" in results["cut.pdf"].error
    stored = [p for p in Path(settings.files_path).rglob("*") if p.is_file()]
    assert [p.name for p in stored] == ["good.pdf"]
    task = queue.get_task(conn, results["good.pdf"].task_id)
    assert (task.submitted_by, task.customer, task.document_uri) == ("alice", "Acme", str(stored[0].resolve()))


def test_a_known_document_is_offered_not_rerun(pool, settings, conn):
    queue.configure_agent(conn, "docs")
    data = make_pdf("twice")
    [first, copy] = _submit(pool, settings, [submitting.Upload("a.pdf", data), submitting.Upload("b.pdf", data)])
    assert first.outcome == "created" and copy.outcome == "duplicate"
    assert copy.duplicate_of["id"] == first.task_id
    [again] = _submit(pool, settings, [submitting.Upload("a.pdf", data)])
    assert again.outcome == "duplicate" and again.task_id is None
    [rerun] = _submit(pool, settings, [submitting.Upload("a.pdf", data)], rerun_duplicates=True,
                      parent_id=first.task_id)
    assert rerun.outcome == "created" and queue.get_task(conn, rerun.task_id).parent_id == first.task_id


def test_a_rerun_without_a_named_parent_links_to_the_task_it_repeats(pool, settings, conn):
    queue.configure_agent(conn, "docs")
    data = make_pdf("rerun link")
    [first] = _submit(pool, settings, [submitting.Upload("a.pdf", data)])
    [rerun] = _submit(pool, settings, [submitting.Upload("a.pdf", data)], rerun_duplicates=True)
    assert queue.get_task(conn, rerun.task_id).parent_id == first.task_id
    assert queue.get_task(conn, first.task_id).priority == 5  # the one default, as the upload page's


def test_upload_messages_read_as_a_person_expects(pool, settings, conn, tmp_path):
    queue.configure_agent(conn, "docs")
    long_name = "Quarterly statement " + "x" * 200 + ".PDF"
    uploads = [submitting.Upload("one.pdf", make_pdf("one", pages=1)),
               submitting.Upload("empty-pages.pdf", no_pages_pdf()),
               submitting.Upload(long_name, make_pdf("long name")),
               # Only the first bytes past the limit are read; the full size is what the message says.
               submitting.Upload("over.pdf", b"%PDF-" + b"0" * 1_000_001, size=1_000_001),
               submitting.Upload("way-over.pdf", b"%PDF-" + b"0" * 1_000_001, size=52_400_000)]
    results = {r.name: r for r in _submit(pool, settings, uploads)}
    assert results["empty-pages.pdf"].error == "empty-pages.pdf: the PDF has no pages"
    assert results["over.pdf"].error == "over.pdf: 1.1 MB is over the 1 MB limit"  # never "1.0 MB over 1 MB"
    assert results["way-over.pdf"].error == "way-over.pdf: 52.4 MB is over the 1 MB limit"
    stored = queue.get_task(conn, results[long_name].task_id).document_uri
    assert stored.endswith(".pdf") and len(Path(stored).name) <= 120
    assert queue.get_task(conn, results[long_name].task_id).document_name == long_name


def test_megabytes_round_sensibly():
    from app.documents import megabytes

    assert [megabytes(n) for n in (50_000_000, 52_400_000, 1_500_000)] == ["50", "52.4", "1.5"]
    assert megabytes(50_000_001, up=True) == "50.1"


def test_from_after_to_is_rejected_with_a_message():
    with pytest.raises(ValueError, match="after"):
        inputs.make_filter("2024-03-05", "2024-03-01")
    assert inputs.make_filter("2024-03-01", "2024-03-01").date_from is not None  # one whole day is fine


def test_an_unknown_agent_rejects_every_file(pool, settings):
    results = _submit(pool, settings, [submitting.Upload("a.pdf", make_pdf("x"))])
    assert results[0].outcome == "rejected" and "unknown agent" in results[0].error


def test_samples_are_enqueued_once(pool, conn, tmp_path):
    settings = Settings(data_dir=tmp_path, default_agent="docs")
    queue.configure_agent(conn, "docs")
    first = asyncio.run(submitting.submit_samples(pool, settings))
    second = asyncio.run(submitting.submit_samples(pool, settings))
    assert len(first) >= 6 and all(r.outcome == "created" for r in first)
    assert all(r.outcome == "duplicate" for r in second)
    customers = {queue.get_task(conn, r.task_id).customer for r in first}
    assert None not in customers and len(customers) >= 2


def test_filters_from_loose_input():
    flt = inputs.make_filter("2024-03-01", "2024-03-31", ["failed"], ["a", ""], [])
    assert flt.date_to.isoformat() == "2024-04-01T00:00:00+00:00" and flt.agents == ("a",)
    with pytest.raises(ValueError):
        inputs.make_filter(statuses=["done"])
    with pytest.raises(ValueError):
        inputs.make_filter(date_from="yesterday")


def test_adaptive_limits_name_the_agents_an_endpoint_rate_limited(db_dsn, conn):
    import asyncio

    from app import services
    from schema import db, queue
    from tests.factories import make_agent, make_task

    make_agent(conn, "calm", max_tpm=40_000)
    make_agent(conn, "limited", max_tpm=40_000, max_concurrent_tasks=8)
    make_task(conn, "limited")
    [claim] = queue.claim(conn, agent="limited", worker_id="w")
    queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {}, "pages": 1,
                                                  "input_tokens": 900, "output_tokens": 100,
                                                  "rate_limited": 1, "retry_after_seconds": 2})
    pool = db.make_pool(db_dsn, max_size=2)
    try:
        lines = asyncio.run(services.adaptive_limits(pool))
    finally:
        pool.close()
    assert lines == ["limited: 1,000 of 40,000 TPM, 5 of 8 at once after 1 rate limits"]


def test_a_scan_for_an_agent_on_databricks_is_refused_at_upload_with_the_reason(pool, settings, conn):
    from bench.realworld.scan import scan_pdf
    from tests.unit.agents import agents_samples

    queue.configure_agent(conn, "docs", executor="databricks", settings={"job_id": 7})
    scanned = scan_pdf(agents_samples.invoice_en()[0], dpi=72, angle=0.0)
    [scan, text] = _submit(pool, settings, [submitting.Upload("scan.pdf", scanned),
                                             submitting.Upload("text.pdf", make_pdf("with a text layer"))])
    # Whatever this machine has, the job's serverless compute has no Tesseract.
    assert scan.outcome == "rejected" and "Databricks serverless job" in scan.error and "Tesseract" in scan.error
    assert text.outcome == "created"


def test_a_scan_is_stored_with_its_ocr_work_and_a_text_pdf_without(pool, settings, conn):
    from bench.realworld.scan import scan_pdf
    from tests.unit.agents import agents_samples

    queue.configure_agent(conn, "docs")
    [scan, text] = _submit(pool, settings, [
        submitting.Upload("scan.pdf", scan_pdf(agents_samples.invoice_en()[0], dpi=150, angle=0.0)),
        submitting.Upload("text.pdf", make_pdf("with a text layer"))])
    assert scan.outcome == text.outcome == "created" and scan.scanned and not text.scanned
    assert scan.ocr_work is not None and scan.ocr_work > 0.2 and text.ocr_work is None
    stored = {r["id"]: r for r in conn.execute("SELECT id, scanned, ocr_work FROM tasks").fetchall()}
    assert stored[scan.task_id]["scanned"] and stored[scan.task_id]["ocr_work"] == pytest.approx(scan.ocr_work, rel=1e-4)
    assert stored[text.task_id]["ocr_work"] is None


def test_e_invoices_are_accepted_as_xml_and_p7m_and_other_xml_is_refused(pool, settings, conn):
    from tests.unit.agents import einvoice_samples as einvoices

    queue.configure_agent(conn, "docs")
    uploads = [submitting.Upload("fattura.xml", einvoices.fatturapa_xml()),
               submitting.Upload("fattura.xml.p7m", einvoices.sign_p7m(einvoices.fatturapa_xml(), "base64")),
               submitting.Upload("ubl.xml", einvoices.ubl_xml()),
               submitting.Upload("facturx.pdf", einvoices.facturx_pdf()),
               submitting.Upload("order.xml", einvoices.NOT_AN_INVOICE_XML),
               submitting.Upload("evil.xml", einvoices.XXE_XML),
               submitting.Upload("junk.p7m", b"MIIBjunkjunkjunkjunkjunk!")]
    results = {r.name: r for r in _submit(pool, settings, uploads)}
    for name, standard in [("fattura.xml", "FatturaPA"), ("fattura.xml.p7m", "FatturaPA"), ("ubl.xml", "UBL")]:
        result = results[name]
        assert (result.outcome, result.pages, result.einvoice) == ("created", 0, standard), name
        task = queue.get_task(conn, result.task_id)
        assert task.document_uri.endswith(name) and task.estimated_tokens == 1
    facturx = results["facturx.pdf"]
    assert (facturx.outcome, facturx.pages, facturx.einvoice) == ("created", 1, "Factur-X")
    assert "not an e-invoice" in results["order.xml"].error and "Order" in results["order.xml"].error
    assert "DTD or entities" in results["evil.xml"].error
    assert "signed (.p7m)" in results["junk.p7m"].error
    assert all(results[n].outcome == "rejected" for n in ("order.xml", "evil.xml", "junk.p7m"))
