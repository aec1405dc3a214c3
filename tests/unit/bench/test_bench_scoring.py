"""Checks each field-scoring rule of the extraction benchmark."""

from __future__ import annotations

import pytest

from bench.extraction_scoring import (
    line_items_score,
    normalize_text,
    parties_score,
    predicted_value,
    score_document,
    score_field,
)


@pytest.mark.parametrize("pred, ok", [
    ("2024-03-01", True),
    (" 2024-03-01 ", True),
    ("01/03/2024", False),
    ("2024-3-1", False),
    ("2024-03-02", False),
    (None, False),
    (20240301, False),
])
def test_dates_need_the_exact_iso_string(pred, ok):
    assert score_field("issue_date", pred, "2024-03-01").correct is ok


@pytest.mark.parametrize("pred, truth, ok", [
    (1220.0, 1220.0, True),
    (1220.009, 1220.0, True),          # within one cent
    (1220.02, 1220.0, True),           # more than a cent off, but within 0.5 %
    (0.04, 0.02, False),               # double, and more than a cent off
    (1004000, 1000000, True),          # 0.4 % off
    (1006000, 1000000, False),         # 0.6 % off
    (0.005, 0.0, True),
    (0.02, 0.0, False),
    ("1220.00", 1220.0, True),         # numeric strings are read as numbers
    ("1.220,00", 1220.0, False),       # locale-formatted strings are not
    (-55195000, -55195000.0, True),
    (55195000, -55195000.0, False),    # the sign matters for losses
    (True, 1.0, False),
    (float("nan"), 1.0, False),
    (None, 10.0, False),
])
def test_amount_tolerance(pred, truth, ok):
    assert score_field("total", pred, truth).correct is ok


def test_amount_rule_is_absolute_or_relative_whichever_is_looser():
    assert score_field("revenue", 100.4, 100.0).correct          # 0.4 % relative
    assert not score_field("revenue", 100.6, 100.0).correct
    assert score_field("tax", 1.01, 1.0).correct                  # one cent absolute
    assert not score_field("tax", 1.02, 1.0).correct


@pytest.mark.parametrize("pred, truth, ok", [
    ("Acme S.p.A.", "ACME SpA", True),
    ("  acme   spa ", "Acme S.p.A.", True),
    ("INV-2024-0042", "inv 2024 0042", True),
    ("INV-2024-0043", "INV-2024-0042", False),
    ("Müller GmbH", "MÜLLER GMBH", True),
    ("Muller GmbH", "Müller GmbH", False),   # accents are content, not punctuation
    ("eur", "EUR", True),
    ("...", "EUR", False),
    ("", "Acme", False),
    (["Acme"], "Acme", False),
])
def test_strings_ignore_case_space_and_punctuation(pred, truth, ok):
    assert score_field("issuer", pred, truth).correct is ok


def test_normalize_text_keeps_only_letters_and_digits():
    assert normalize_text("Société Générale S.A. – Paris") == "sociétégénéralesaparis"
    assert normalize_text("1'234.56") == "123456"


@pytest.mark.parametrize("pred, ok", [(24, True), (24.0, True), ("24", True), (2, False),
                                      (None, False), ("two years", False)])
def test_term_months_is_an_exact_integer(pred, ok):
    assert score_field("term_months", pred, 24).correct is ok


def test_parties_match_as_a_set_of_normalised_names():
    truth = ["Acme S.p.A.", "Beta GmbH"]
    exact = parties_score(["beta gmbh", "ACME SpA"], truth)
    assert exact.correct and exact.extra["parties[each]"] == (2, 2)
    missing = parties_score(["Acme S.p.A."], truth)
    assert not missing.correct and missing.extra["parties[each]"] == (1, 2)
    extra = parties_score(["Acme S.p.A.", "Beta GmbH", "Gamma Ltd"], truth)
    assert not extra.correct and extra.extra["parties[each]"] == (2, 3)
    nothing = parties_score(None, truth)
    assert not nothing.correct and nothing.extra["parties[each]"] == (0, 2)
    assert parties_score("Acme S.p.A.", ["Acme S.p.A."]).correct


def test_line_items_need_count_and_every_amount():
    truth = [{"amount": 1000.0}, {"amount": 220.0}, {"amount": 5.5}]
    same = line_items_score([{"amount": 5.5}, {"amount": 1000.0}, {"amount": 220.0}], truth)
    assert same.correct
    assert same.extra == {"line_items.count": (1, 1), "line_items.amount": (3, 3)}
    short = line_items_score([{"amount": 1000.0}, {"amount": 220.0}], truth)
    assert not short.correct
    assert short.extra == {"line_items.count": (0, 1), "line_items.amount": (2, 3)}
    wrong = line_items_score([{"amount": 1000.0}, {"amount": 230.0}, {"amount": 5.5}], truth)
    assert not wrong.correct and wrong.extra["line_items.amount"] == (2, 3)
    duplicate = line_items_score([{"amount": 5.5}, {"amount": 5.5}, {"amount": 5.5}], truth)
    assert not duplicate.correct and duplicate.extra["line_items.amount"] == (1, 3)
    missing = line_items_score(None, truth)
    assert not missing.correct and missing.extra["line_items.count"] == (0, 1)
    assert not line_items_score([{"description": "x"}] * 3, truth).correct


def test_null_truth_is_only_matched_by_null():
    assert score_field("due_date", None, None).correct
    assert not score_field("due_date", "2024-04-01", None).correct


def test_predicted_value_reads_the_result_shape():
    result = {"fields": {"total": {"value": 12.5, "confidence": 0.9}, "tax": 2.0}}
    assert predicted_value(result, "total") == 12.5
    assert predicted_value(result, "tax") == 2.0
    assert predicted_value(result, "issuer") is None
    assert predicted_value(None, "total") is None
    assert predicted_value({"fields": None}, "total") is None


def test_score_document_checks_classification_and_the_truth_type_fields():
    truth = {"document_type": "contract", "language": "en", "pages": 1,
             "fields": {"parties": ["A Ltd", "B Inc."], "effective_date": "2024-01-01",
                        "term_months": 12, "governing_law": "New York", "total_value": 1000.0,
                        "currency": "USD"}}
    result = {"document_type": "invoice", "fields": {
        "parties": {"value": ["a ltd", "b inc"]}, "effective_date": {"value": "2024-01-01"},
        "term_months": {"value": 12}, "governing_law": {"value": "new york"},
        "total_value": {"value": 1000}, "currency": {"value": "USD"}}}
    scored = score_document(result, truth)
    assert scored["classified"] is False and scored["predicted_type"] == "invoice"
    assert all(outcome.correct for outcome in scored["fields"].values())
    assert list(scored["fields"]) == list(truth["fields"])


def test_a_missing_result_scores_every_field_wrong():
    truth = {"document_type": "invoice", "language": "it", "pages": 1,
             "fields": {"issuer": "X", "invoice_number": "1", "issue_date": "2024-01-01",
                        "due_date": None, "currency": "EUR", "subtotal": 1.0, "tax": 0.0,
                        "total": 1.0, "line_items": [{"amount": 1.0}]}}
    scored = score_document(None, truth)
    assert not scored["classified"]
    assert not any(outcome.correct for outcome in scored["fields"].values())
    assert len(scored["fields"]) == 9
