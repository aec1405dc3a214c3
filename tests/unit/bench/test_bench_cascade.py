"""The cascade bench: e-invoices need no model, a page of doubtful fields does."""

from __future__ import annotations

from pathlib import Path

from bench.cascade import main, measure
from tests.unit.agents import agents_samples as samples

EINVOICES = Path(__file__).resolve().parents[3] / "bench" / "einvoices"


def test_e_invoices_need_no_model_and_a_doubtful_page_does(tmp_path, capsys) -> None:
    assert main([str(EINVOICES)]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[1:] == ["10", "10", "0", "0.0", "0.00"]  # the two purchase orders are refused, not counted
    pdf = tmp_path / "invoice.pdf"
    pdf.write_bytes(samples.invoice_it()[0])
    always = measure(pdf, threshold=1.0)
    assert always["doubtful"] and always["spent"] > 0 and always["full"] > 0
    assert measure(pdf, threshold=0.0)["spent"] == 0
