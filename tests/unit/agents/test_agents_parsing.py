"""Numbers, amounts, currencies and dates in the formats business documents use."""

import pytest

from agents.amounts import currency_code, dominant_currency, find_amounts, parse_number
from agents.dates import find_dates, is_iso_date, month_end, parse_date


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,234.56", 1234.56), ("1.234,56", 1234.56), ("1 234,56", 1234.56),
        ("1\u202f234,56", 1234.56), ("1\u00a0234,56", 1234.56), ("1'234.56", 1234.56),
        ("1’234.56", 1234.56), ("1.500", 1500.0), ("1,500", 1500.0), ("0,125", 0.125),
        ("12.5", 12.5), ("12,50", 12.5), ("1.000.000", 1000000.0), ("1,000,000.00", 1000000.0),
        ("(1,234)", -1234.0), ("-12.00", -12.0), ("1.234,00-", -1234.0), ("42", 42.0),
    ],
)
def test_parse_number_formats(text: str, value: float) -> None:
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["0042", "1,2,3", "12.34.5", "1.23.456", "IT0123", "9999999999999"])
def test_parse_number_rejects_codes_and_bad_grouping(text: str) -> None:
    assert parse_number(text) is None


def test_find_amounts_reads_currency_and_skips_dates_ids_and_flags_percentages() -> None:
    found = find_amounts("FT-2024/0042 del 01/03/2024  IVA 22%  264,00 €  P.IVA IT01234567890")
    assert [(a.value, a.currency, a.percent) for a in found] == [(22.0, None, True), (264.0, "EUR", False)]
    assert [a.value for a in find_amounts("Total: USD 5,912.71")] == [5912.71]
    assert find_amounts("CHF 1'250.50")[0].currency == "CHF"
    assert find_amounts("£ 10,000.00")[0].currency == "GBP"
    assert find_amounts("1.000,00EUR")[0].currency == "EUR"


@pytest.mark.parametrize(
    ("text", "code"),
    [("€ 10", "EUR"), ("$10", "USD"), ("US$ 10", "USD"), ("£5", "GBP"), ("CHF 3", "CHF"),
     ("Fr. 3", "CHF"), ("JPY 500", "JPY"), ("500 euro", "EUR"), ("nothing here", None)],
)
def test_currency_codes(text: str, code: str | None) -> None:
    assert currency_code(text) == code


def test_dominant_currency_counts_mentions() -> None:
    code, share = dominant_currency("€ 1  € 2  EUR 3  $ 4")
    assert code == "EUR" and share == pytest.approx(0.75)
    assert dominant_currency("no money") == (None, 0.0)


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("2024-03-01", "2024-03-01"), ("2024/03/01", "2024-03-01"), ("01/03/2024", "2024-03-01"),
        ("01.03.2024", "2024-03-01"), ("1-3-2024", "2024-03-01"), ("15.03.24", "2024-03-15"),
        ("1 March 2024", "2024-03-01"), ("March 1st, 2024", "2024-03-01"),
        ("Mar. 1, 2024", "2024-03-01"), ("01-Mar-2024", "2024-03-01"),
        ("1° marzo 2024", "2024-03-01"), ("31 dicembre 2023", "2023-12-31"),
        ("1er mars 2024", "2024-03-01"), ("le 5 janvier 2025", "2025-01-05"),
        ("15 août 2024", "2024-08-15"), ("5. Februar 2024", "2024-02-05"),
        ("6. März 2024", "2024-03-06"), ("1. Dezember 2023", "2023-12-01"),
        ("31/12/2023", "2023-12-31"), ("13/01/2024", "2024-01-13"),
    ],
)
def test_dates_in_many_formats_and_languages(text: str, iso: str) -> None:
    assert parse_date(text) == iso


def test_ambiguous_numeric_dates_follow_the_convention() -> None:
    assert parse_date("03/04/2024", dayfirst=True) == "2024-04-03"
    assert parse_date("03/04/2024", dayfirst=False) == "2024-03-04"
    # A part above 12 settles it whatever the convention.
    assert parse_date("03/15/2024", dayfirst=True) == "2024-03-15"


def test_invalid_dates_and_non_dates_are_ignored() -> None:
    assert parse_date("31/02/2024") is None
    assert find_dates("version 12.5 and 3.4, total 1.234,56") == []
    assert [d.iso for d in find_dates("from 1 May 2024 to 30 June 2024")] == ["2024-05-01", "2024-06-30"]


def test_iso_date_check_and_month_end() -> None:
    assert is_iso_date("2024-02-29")
    assert not is_iso_date("2023-02-29")
    assert not is_iso_date("01/02/2024")
    assert not is_iso_date(20240101)
    assert month_end(2024, 2) == "2024-02-29"
    assert month_end(2023, 12) == "2023-12-31"
