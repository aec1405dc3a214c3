"""Field schema validation of model answers and the overall confidence."""

import pytest

from agents.fields import FieldValue, validate_fields, validate_value


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [("text", " Acme ", "Acme"), ("text", 42, "42"), ("date", "2024-02-29", "2024-02-29"),
     ("amount", 12, 12.0), ("amount", 1.5, 1.5), ("integer", 24.0, 24), ("currency", "EUR", "EUR"),
     ("text_list", ["A", " B "], ["A", "B"]), ("text", None, None)],
)
def test_valid_values_are_normalised(kind, value, expected) -> None:
    assert validate_value(kind, value) == expected


@pytest.mark.parametrize(
    ("kind", "value"),
    [("date", "01/02/2024"), ("date", "2023-02-29"), ("amount", "1,200.00"), ("amount", True),
     ("integer", 2.5), ("currency", "€"), ("currency", "eur"), ("text_list", "A and B"),
     ("line_items", [{"description": "x", "amount": "12"}]), ("line_items", "none")],
)
def test_invalid_values_are_refused(kind, value) -> None:
    with pytest.raises(ValueError):
        validate_value(kind, value)


def test_validate_fields_reports_each_problem_and_keeps_good_fields() -> None:
    fields, problems = validate_fields("invoice", {
        "total": {"value": 10, "confidence": 0.9},
        "issue_date": {"value": "March 1", "confidence": 0.9},
        "tax": {"value": 2, "confidence": 7},
        "currency": "EUR",
        "unknown": {"value": 1},
    })
    assert fields["total"] == FieldValue(10.0, 0.9)
    assert fields["currency"].value == "EUR"
    assert fields["issue_date"].value is None
    assert len(problems) == 2
    assert any("issue_date" in p for p in problems) and any("tax" in p for p in problems)


