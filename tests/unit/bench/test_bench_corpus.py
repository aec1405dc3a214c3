"""Checks that the bench corpus is deterministic, self-consistent and faithful to its PDFs."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pypdfium2 as pdfium
import pytest

from bench.corpus import GENERATORS, generate_corpus, generate_document
from bench.corpus_contract import build_contract, render_contract
from bench.corpus_contract_text import GOVERNING_LAW
from bench.corpus_invoice import LAYOUTS, build_invoice
from bench.corpus_locale import (
    NUMBER_WORDS,
    SYMBOLS,
    all_date_renderings,
    all_number_renderings,
)
from bench.extraction_scoring import FIELDS_BY_TYPE

REPO = Path(__file__).resolve().parents[3]
SEED, COUNT, MAX_PAGES = 11, 27, 12
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
RAW_TEXT: dict[str, str] = {}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[tuple[Path, dict, str]]:
    """(pdf path, truth, squashed PDF text) for a small corpus covering every kind."""
    out = tmp_path_factory.mktemp("corpus")
    docs = []
    for pdf in generate_corpus(out, COUNT, SEED, MAX_PAGES):
        truth = json.loads(pdf.with_suffix(".json").read_text(encoding="utf-8"))
        raw = pdf_text(pdf.read_bytes())
        RAW_TEXT[pdf.name] = raw
        docs.append((pdf, truth, squash(raw)))
    return docs


def pdf_text(data: bytes) -> str:
    doc = pdfium.PdfDocument(data)
    return "\n".join(page.get_textpage().get_text_range() for page in doc)


def squash(text: str) -> str:
    """Drop all whitespace so that wrapped lines and no-break spaces do not matter."""
    return re.sub(r"\s+", "", text.replace("\xa0", " ").replace("\u202f", " "))


def appears(text: str, candidates) -> bool:
    return any(squash(c) in text for c in candidates if c)


def amount_candidates(value: float, scaled: bool = False) -> set[str]:
    out = all_number_renderings(Decimal(str(value)))
    if scaled and value % 1000 == 0:
        out |= all_number_renderings(Decimal(str(value)) / 1000, decimals=(0,))
    return out


def test_same_seed_gives_byte_identical_files(tmp_path):
    first = generate_corpus(tmp_path / "a", 6, 5, max_pages=4)
    second = generate_corpus(tmp_path / "b", 6, 5, max_pages=4)
    assert [p.name for p in first] == [p.name for p in second]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes()
        assert a.with_suffix(".json").read_bytes() == b.with_suffix(".json").read_bytes()
    other = generate_corpus(tmp_path / "c", 6, 6, max_pages=4)
    assert any(a.with_suffix(".json").read_bytes() != c.with_suffix(".json").read_bytes()
               for a, c in zip(first, other))


def test_truth_files_follow_the_contract_format(corpus):
    kinds = set()
    for _, truth, _ in corpus:
        assert list(truth) == ["document_type", "language", "pages", "fields"]
        kind = truth["document_type"]
        kinds.add(kind)
        assert truth["language"] in {"en", "it", "fr", "de"}
        assert list(truth["fields"]) == list(FIELDS_BY_TYPE[kind])
        for name, value in truth["fields"].items():
            if name.endswith("_date") or name == "period_end":
                assert value is None or ISO_DATE.match(value), (name, value)
                if value:
                    date.fromisoformat(value)
            if name == "currency":
                assert value in {"EUR", "USD", "GBP", "CHF"}
    assert kinds == set(GENERATORS)


def test_page_count_matches_pdf(corpus):
    for pdf, truth, _ in corpus:
        pages = len(pdfium.PdfDocument(str(pdf)))
        assert pages == truth["pages"], pdf.name
        assert 1 <= pages <= MAX_PAGES


def test_invoice_arithmetic_is_consistent(corpus):
    invoices = [truth["fields"] for _, truth, _ in corpus if truth["document_type"] == "invoice"]
    assert invoices
    for f in invoices:
        assert round(f["subtotal"] + f["tax"], 2) == f["total"]
        assert 1 <= len(f["line_items"]) <= 60
        assert round(sum(item["amount"] for item in f["line_items"]), 2) == f["subtotal"]
        for item in f["line_items"]:
            expected = (Decimal(str(item["quantity"])) * Decimal(str(item["unit_price"])))
            # Commercial rounding: half a cent rounds up.
            assert Decimal(str(item["amount"])) == expected.quantize(Decimal("0.01"),
                                                                     rounding=ROUND_HALF_UP)
        if f["due_date"]:
            assert f["due_date"] > f["issue_date"]


def test_invoice_truth_appears_in_pdf_text(corpus):
    for pdf, truth, text in corpus:
        if truth["document_type"] != "invoice":
            continue
        f, lang = truth["fields"], truth["language"]
        assert squash(f["issuer"]) in text, pdf.name
        assert squash(f["invoice_number"]) in text, pdf.name
        assert appears(text, all_date_renderings(date.fromisoformat(f["issue_date"]), lang))
        if f["due_date"]:
            assert appears(text, all_date_renderings(date.fromisoformat(f["due_date"]), lang))
        assert appears(text, [f["currency"], SYMBOLS[f["currency"]]]), pdf.name
        for key in ("subtotal", "tax", "total"):
            assert appears(text, amount_candidates(f[key])), (pdf.name, key)
        for item in f["line_items"]:
            assert squash(item["description"]) in text, (pdf.name, item)
            assert appears(text, amount_candidates(item["amount"])), (pdf.name, item)


TERM_RE = re.compile(r"\b(\d+|[^\W\d_]+(?:-[^\W\d_]+)*)\s*(?:\((\d+)\)\s*)?"
                     r"(months?|years?|mesi|mese|anni|anno|mois|ans?|monaten?|monat|jahren?"
                     r"|jahr)\b", re.IGNORECASE)


def term_values(text: str, lang: str) -> set[int]:
    """Every 'N months/years' phrase in the raw text, converted to months."""
    words = {w.casefold(): n for n, w in NUMBER_WORDS[lang].items()} | {"einem": 1}
    found = set()
    for number, digits, unit in TERM_RE.findall(text):
        n = int(digits or number) if (digits or number.isdigit()) else words.get(number.casefold())
        if n is None:
            continue
        years = unit.casefold().startswith(("year", "ann", "an", "jahr"))
        found.add(n * 12 if years else n)
    return found


def test_contract_truth_appears_in_pdf_text(corpus):
    contracts = [(p, t, x) for p, t, x in corpus if t["document_type"] == "contract"]
    assert contracts
    for pdf, truth, text in contracts:
        f, lang = truth["fields"], truth["language"]
        assert len(set(f["parties"])) == len(f["parties"]) >= 2
        for party in f["parties"]:
            assert squash(party) in text, (pdf.name, party)
        assert appears(text, all_date_renderings(date.fromisoformat(f["effective_date"]), lang))
        assert f["term_months"] in term_values(RAW_TEXT[pdf.name], lang), pdf.name
        sentences = [s for by_lang in [GOVERNING_LAW[f["governing_law"]]] for group in
                     by_lang.values() for s in group]
        assert appears(text, sentences), (pdf.name, f["governing_law"])
        assert appears(text, amount_candidates(f["total_value"])), pdf.name
        assert appears(text, [f["currency"], SYMBOLS[f["currency"]]]), pdf.name


def test_statement_truth_appears_in_pdf_text(corpus):
    statements = [(p, t, x) for p, t, x in corpus if t["document_type"] == "financial_statement"]
    assert statements
    for pdf, truth, text in statements:
        f, lang = truth["fields"], truth["language"]
        assert squash(f["company"]) in text
        assert appears(text, all_date_renderings(date.fromisoformat(f["period_end"]), lang))
        assert f["currency"] in text
        for key in ("revenue", "net_income", "total_assets"):
            assert appears(text, amount_candidates(f[key], scaled=True)), (pdf.name, key)
        assert f["total_assets"] > 0 and f["revenue"] > 0


def overlapping_chars(data: bytes) -> list[tuple[int, str]]:
    """Pairs of non-neighbouring glyphs whose boxes overlap: text drawn over other text."""
    found = []
    for number, page in enumerate(pdfium.PdfDocument(data)):
        textpage = page.get_textpage()
        grid: dict[tuple[int, int], list] = {}
        for i in range(textpage.count_chars()):
            left, bottom, right, top = textpage.get_charbox(i)
            if right - left < 0.3 or top - bottom < 0.3:
                continue
            for key in {(int(x // 20), int(y // 20)) for x in (left, right)
                        for y in (bottom, top)}:
                for j, (l2, b2, r2, t2) in grid.get(key, []):
                    w, h = min(right, r2) - max(left, l2), min(top, t2) - max(bottom, b2)
                    smaller = min((right - left) * (top - bottom), (r2 - l2) * (t2 - b2))
                    if i - j > 2 and w > 0 and h > 0 and w * h > 0.3 * smaller:
                        found.append((number, textpage.get_text_range(max(0, j - 8), i - j + 9)))
                grid.setdefault(key, []).append((i, (left, bottom, right, top)))
    return found


def test_no_text_is_drawn_over_other_text(corpus):
    for pdf, _, _ in corpus:
        assert overlapping_chars(pdf.read_bytes()) == [], pdf.name


def test_overlap_check_detects_overprinting():
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 20)
    pdf.cell(95, 10, "Rechnung Nr. RE-2021-09873")
    pdf.set_xy(60, 10)
    pdf.cell(90, 10, "Rechnungsnummer RE-2021-09873")
    assert overlapping_chars(bytes(pdf.output()))


def test_long_contract_keeps_key_clauses_and_page_count():
    spec = build_contract(random.Random("long-contract"), 200)
    data, pages = render_contract(spec, 30)
    assert pages == len(pdfium.PdfDocument(data)) >= 30
    text = squash(pdf_text(data))
    assert appears(text, [spec.law_sentence])
    assert appears(text, amount_candidates(float(spec.total_value)))
    assert all(squash(p.name) in text for p in spec.parties)


def test_max_pages_is_a_hard_limit(tmp_path):
    for pdf in generate_corpus(tmp_path, 9, 21, max_pages=1):
        truth = json.loads(pdf.with_suffix(".json").read_text(encoding="utf-8"))
        assert truth["pages"] == len(pdfium.PdfDocument(str(pdf))) == 1, pdf.name


def test_generators_vary_layout_language_and_formats():
    specs = [build_invoice(random.Random(f"variety:{i}")) for i in range(120)]
    assert {s.layout for s in specs} == set(LAYOUTS) and len(LAYOUTS) >= 4
    assert {s.locale.lang for s in specs} == {"en", "it", "fr", "de"}
    assert {s.currency for s in specs} == {"EUR", "USD", "GBP", "CHF"}
    assert {s.locale.number_style for s in specs} == {"comma_dot", "dot_comma", "space_comma",
                                                      "apos_dot"}
    assert {s.fmt.date_style for s in specs} >= {"iso", "dmy_slash", "mdy_slash", "dmy_dot",
                                                 "long", "long_us"}
    assert {s.style["borders"] for s in specs} >= {"ALL", "NONE"}
    assert {s.style["totals_side"] for s in specs} == {"L", "R"}
    assert any(s.due_date is None for s in specs)
    assert max(len(s.items) for s in specs) > 30


def test_generate_document_is_pure():
    a = generate_document("invoice", 3, 4, 5)
    b = generate_document("invoice", 3, 4, 5)
    assert a == b
    with pytest.raises(ValueError):
        generate_document("invoice", 3, 4, 0)


def test_cli_writes_requested_kinds(tmp_path):
    out = tmp_path / "cli"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "corpus.py"), str(out), "--count",
                          "3", "--seed", "9", "--max-pages", "2", "--kinds", "contract"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "wrote 3 documents" in run.stdout
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"000{i}_contract.{ext}" for i in range(3) for ext in ("json", "pdf")]
    bad = subprocess.run([sys.executable, str(REPO / "bench" / "corpus.py"), str(out), "--count",
                          "1", "--seed", "1", "--kinds", "memo"], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert bad.returncode == 2 and "memo" in bad.stderr
