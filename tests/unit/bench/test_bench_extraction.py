"""Checks the extraction benchmark runner against stand-in extractors with known behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.corpus import generate_corpus
from bench.extraction import format_table, load_cases, main, run_benchmark


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    generate_corpus(out, 8, 4, max_pages=3)
    (out / "stray.pdf").write_bytes(b"%PDF-1.4 no truth beside it")
    return out


def truth_of(path: str) -> dict:
    return json.loads(Path(path).with_suffix(".json").read_text(encoding="utf-8"))


def oracle(path: str, extractor: str = "offline") -> dict:
    """Returns the ground truth in the result shape: every field right."""
    truth = truth_of(path)
    return {"document_type": truth["document_type"], "extractor": extractor, "model": None,
            "pages": truth["pages"],
            "fields": {k: {"value": v, "confidence": 0.9} for k, v in truth["fields"].items()}}


def sloppy(path: str, extractor: str = "offline") -> dict:
    """Right type; dates in the wrong format, amounts 2 % high, names shouted, no line items."""
    result = oracle(path, extractor)
    for name, entry in result["fields"].items():
        value = entry["value"]
        if name.endswith("_date") or name == "period_end":
            entry["value"] = value and "/".join(reversed(value.split("-")))
        elif name in {"issuer", "company", "governing_law", "invoice_number", "currency"}:
            entry["value"] = value.upper().replace(" ", "  ") + "."
        elif name == "line_items":
            entry["value"] = None
        elif isinstance(value, float):
            entry["value"] = value * 1.02 + 1
    return result


def test_load_cases_pairs_pdfs_with_truth_and_honours_limit(folder):
    cases = load_cases(folder)
    assert len(cases) == 8
    assert all(pdf.with_suffix(".json").is_file() for pdf, _ in cases)
    assert [pdf.name for pdf, _ in load_cases(folder, limit=3)] == [p.name for p, _ in cases[:3]]


def test_perfect_extractor_scores_one_everywhere(folder):
    report = run_benchmark(folder, oracle)
    assert report["documents"] == 8 and report["errors"] == []
    assert report["classification"]["accuracy"] == 1.0
    assert report["overall"]["accuracy"] == 1.0
    assert set(report["fields"]) == {"invoice", "contract", "financial_statement"}
    for fields in report["fields"].values():
        assert all(cell["accuracy"] == 1.0 and cell["n"] > 0 for cell in fields.values())
    assert report["fields"]["invoice"]["total"]["n"] == 4
    assert report["fields"]["invoice"]["line_items.amount"]["n"] >= 4
    assert report["tokens"]["estimated_input"] > 100
    assert report["docs_per_s"] > 0


def test_sloppy_extractor_loses_exactly_the_broken_fields(folder):
    report = run_benchmark(folder, sloppy)
    inv, con, fs = (report["fields"][k] for k in ("invoice", "contract", "financial_statement"))
    for cell in (inv["issuer"], inv["invoice_number"], inv["currency"], con["governing_law"],
                 con["term_months"], con["parties"], fs["company"], fs["currency"]):
        assert cell["accuracy"] == 1.0
    for cell in (inv["issue_date"], inv["subtotal"], inv["total"], inv["line_items"],
                 con["effective_date"], con["total_value"], fs["period_end"], fs["revenue"],
                 fs["total_assets"]):
        assert cell["accuracy"] == 0.0
    assert inv["line_items.count"]["accuracy"] == 0.0
    assert report["classification"]["accuracy"] == 1.0
    assert 0 < report["overall"]["accuracy"] < 1
    assert report["failures"]["invoice.total"][0]["predicted"] != \
        report["failures"]["invoice.total"][0]["truth"]


def test_crashes_and_misclassification_are_counted(folder):
    def flaky(path: str, extractor: str = "offline") -> dict:
        if "contract" in path:
            raise RuntimeError("boom")
        result = oracle(path, extractor)
        result["document_type"] = "other"
        return result

    report = run_benchmark(folder, flaky)
    assert len(report["errors"]) == 2
    assert all("RuntimeError: boom" in e["error"] for e in report["errors"])
    assert report["classification"]["accuracy"] == 0.0
    assert report["per_type"]["contract"]["accuracy"] == 0.0
    assert report["per_type"]["invoice"]["accuracy"] == 1.0


def test_extractor_name_and_payload_wrapper_are_passed_through(folder):
    seen = []

    def wrapped(path: str, extractor: str = "offline") -> dict:
        seen.append(extractor)
        return {"status": "completed", "result": oracle(path, extractor), "input_tokens": 100,
                "output_tokens": 7}

    report = run_benchmark(folder, wrapped, extractor="llm", limit=2)
    assert seen == ["llm", "llm"]
    assert report["overall"]["accuracy"] == 1.0
    assert report["tokens"]["reported_input"] == 200 and report["tokens"]["reported_output"] == 14


def test_table_lists_every_type_field_and_summary(folder):
    table = format_table(run_benchmark(folder, sloppy), show_failures=1)
    for text in ("invoice", "contract", "financial_statement", "issue_date", "line_items.amount",
                 "parties[each]", "overall (all fields)", "classification", "docs/s",
                 "tokens", "sample failures"):
        assert text in table
    assert "100.0%" in table and "0.0%" in table


def test_cli_prints_json_and_table(folder, capsys):
    assert main([str(folder), "--json", "--limit", "4"], extract_fn=oracle) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["documents"] == 4 and report["overall"]["accuracy"] == 1.0
    assert main([str(folder), "--extractor", "offline"], extract_fn=sloppy) == 0
    out = capsys.readouterr().out
    assert "extractor=offline" in out and "classification" in out


def test_cli_rejects_a_folder_without_truth(tmp_path, capsys):
    assert main([str(tmp_path)], extract_fn=oracle) == 1
    assert "no PDF with a truth file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing")], extract_fn=oracle)


def test_nested_folders_are_scored_per_source_on_the_core_fields(tmp_path):
    for sub in ("real/packaged", "real/scans"):
        (tmp_path / sub).mkdir(parents=True)
    truth = {"document_type": "invoice",
             "fields": {"issuer": ["Acme Inc.", "Acme"], "invoice_number": "7",
                        "issue_date": "2024-01-02", "total": 10.0, "currency": "USD"}}
    for sub in ("real/packaged", "real/scans"):
        (tmp_path / sub / "a.pdf").write_bytes(b"%PDF-1.4")
        (tmp_path / sub / "a.json").write_text(json.dumps(truth), encoding="utf-8")

    def half_right(path: str, extractor: str = "offline") -> dict:
        right = "packaged" in path
        return {"document_type": "invoice", "fields": {
            "issuer": {"value": "ACME"}, "invoice_number": {"value": "7"},
            "issue_date": {"value": "2024-01-02" if right else None},
            "total": {"value": 10.0 if right else 1.0}, "currency": {"value": "USD"}}}

    report = run_benchmark([tmp_path / "real"], half_right)
    sources = report["sources"]
    assert set(sources) == {"real/packaged", "real/scans"}
    assert sources["real/packaged"]["core"]["accuracy"] == 1.0
    assert sources["real/scans"]["core"] == {"accuracy": 0.6, "correct": 3, "n": 5}
    assert sources["real/scans"]["fields"]["total"]["accuracy"] == 0.0
    # Only the fields the truth lists are scored: no subtotal, tax or line items here.
    assert set(report["fields"]["invoice"]) == set(truth["fields"])
    assert "real/scans" in format_table(report)
