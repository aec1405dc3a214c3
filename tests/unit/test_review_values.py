"""What a reviewer may type: dates, amounts in the document's decimal style, ISO 4217 codes."""

import pytest

from app.review_values import decimal_style, field_order, kind_of, parse, show


@pytest.mark.parametrize(("text", "style", "value"), [
    ("1.234,56", "comma", 1234.56), ("1234,5", "comma", 1234.5), ("EUR 1.220,00", "comma", 1220.0),
    ("-12,00", "comma", -12.0), ("1,234.56", "dot", 1234.56), ("1234.56", "dot", 1234.56),
    ("$1,000", "dot", 1000.0), ("(5.00)", "dot", -5.0), ("0.5", "dot", 0.5), ("1 234,56", "comma", 1234.56),
])
def test_amounts_follow_the_documents_decimal_style(text, style, value):
    assert parse(text, "amount", style) == value


@pytest.mark.parametrize(("text", "style"), [
    ("1,234.56", "comma"), ("1.234,56", "dot"), ("12x", "dot"), ("1,23,4", "dot"), ("1.2.3", "comma"),
    ("abc", "dot"), ("12,34,56", "comma"),
])
def test_amounts_written_otherwise_are_refused_with_the_documents_example(text, style):
    with pytest.raises(ValueError, match="1.234,56" if style == "comma" else "1,234.56"):
        parse(text, "amount", style)


def test_dates_currencies_numbers_and_lists():
    assert parse("2024-03-01", "date") == "2024-03-01"
    assert parse("1.3.2024", "date") == "2024-03-01"
    for bad in ("2024-02-30", "31.02.2024", "March 1st", "01/13/2024x"):
        with pytest.raises(ValueError, match="not a date"):
            parse(bad, "date")
    assert parse("chf", "currency") == "CHF"
    for bad in ("EURO", "XXX1", "ABC"):
        with pytest.raises(ValueError, match="ISO 4217"):
            parse(bad, "currency")
    assert parse("24", "integer") == 24
    with pytest.raises(ValueError, match="whole number"):
        parse("2.5", "integer")
    assert parse("Acme SpA; Borealis GmbH", "list") == ["Acme SpA", "Borealis GmbH"]
    assert parse('[{"amount": 1}]', "list") == [{"amount": 1}]
    assert parse("  ", "text") is None
    with pytest.raises(ValueError, match="NUL"):
        parse("a\x00b", "text")


def test_kinds_order_and_display():
    assert [kind_of(n) for n in ("issue_date", "total", "currency", "term_months", "parties", "issuer")] == [
        "date", "amount", "currency", "integer", "list", "text"]
    assert kind_of("unknown", 3.5) == "amount" and kind_of("unknown", [1]) == "list"
    assert field_order("invoice", ["total", "zeta", "issuer", "alpha"]) == ["issuer", "total", "alpha", "zeta"]
    assert show(1234.5, "amount", "comma") == "1.234,50" and show(1234.5, "amount", "dot") == "1,234.50"
    assert show(["A", "B"], "list") == "A; B" and show(None, "text") == ""


def test_the_decimal_style_is_read_from_the_evidence_of_amounts():
    german = {"fields": {"total": {"value": 1.0, "evidence": {"text": "Gesamt: 1.220,00"}},
                         "tax": {"value": 1.0, "evidence": {"text": "MwSt 19%: 194,79"}}}}
    english = {"fields": {"total": {"value": 1.0, "evidence": {"text": "Total: 1,220.00"}}}}
    assert decimal_style(german) == "comma" and decimal_style(english) == "dot"
    assert decimal_style({"fields": {"total": {"value": 1.0}}}) == "dot" and decimal_style(None) == "dot"
