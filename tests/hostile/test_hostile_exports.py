"""Formula injection: names and customers that a spreadsheet would run are exported as text."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import openpyxl

from app import export

HOSTILE = ['=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "@SUM(1)", "-2+3", "\tTAB", "\rCR"]


def rows() -> list[dict]:
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    return [{"task_id": n + 1, "created_at": moment, "finished_at": moment, "status": "completed",
             "agent": "documents", "customer": text, "document_name": text, "pages": 2, "attempts": 1,
             "input_tokens": 100, "output_tokens": 10, "llm_cost_usd": Decimal("-0.25") if n == 0 else Decimal("1.5"),
             "llm_unpriced": False, "compute_cost_usd": Decimal("0.01"), "dbus": None, "compute_pending": False}
            for n, text in enumerate(HOSTILE)]


def test_csv_cells_that_would_start_a_formula_get_a_leading_quote_and_numbers_stay_numbers():
    table = list(csv.DictReader(io.StringIO(export.render(export.frame(rows()), "csv").decode())))
    for row, text in zip(table, HOSTILE):
        for column in ("customer", "document_name"):
            assert row[column] == "'" + text, (column, row[column])
    assert table[0]["llm_cost_usd"] == "-0.25", "a negative amount is a number, not a formula to defuse"
    assert table[1]["llm_cost_usd"] == "1.5" and table[0]["input_tokens"] == "100"
    plain = list(csv.DictReader(io.StringIO(export.render(export.frame(
        [{**rows()[0], "customer": "Acme = Co", "document_name": "a-b.pdf"}]), "csv").decode())))
    assert (plain[0]["customer"], plain[0]["document_name"]) == ("Acme = Co", "a-b.pdf")


def test_xlsx_holds_no_formula_and_keeps_the_amounts_numeric():
    book = openpyxl.load_workbook(io.BytesIO(export.render(export.frame(rows()), "xlsx")))
    sheet = book["tasks"]
    header = [c.value for c in sheet[1]]
    formulas = [c.coordinate for row in sheet.iter_rows() for c in row if c.data_type == "f"]
    assert formulas == []
    for line, text in zip(sheet.iter_rows(min_row=2), HOSTILE):
        cells = dict(zip(header, line))
        for column in ("customer", "document_name"):
            assert cells[column].data_type == "s" and cells[column].value.replace("\n", "\r") == text.replace("\n", "\r")
        assert isinstance(cells["llm_cost_usd"].value, float) and cells["llm_cost_usd"].data_type == "n"
        assert cells["input_tokens"].value == 100
    first = dict(zip(header, next(sheet.iter_rows(min_row=2))))
    assert first["llm_cost_usd"].value == -0.25
