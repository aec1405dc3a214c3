"""Sanity and arithmetic checks for invoice figures and numbers.

Competing readings of subtotal, tax, total, discount and shipping are resolved by consistency
(subtotal - discount + shipping + tax = total, within rounding); absurd amounts (identifiers read
as money, eleven-digit or negative totals) and tax or company IDs read as invoice numbers are
rejected. Every check that fails lowers the confidence of the fields it involves.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from agents.amounts import money_values
from agents.fields import FieldValue

# Amounts beyond this are identifiers or phone numbers, not what an invoice charges.
MAX_AMOUNT = 1e9
# VAT numbers (EU, UK, CH), Indian GSTIN/PAN/CIN, Brazilian CNPJ: never an invoice number.
_TAX_ID = re.compile(
    r"^(?:(?:AT|BE|BG|CY|CZ|DE|DK|EE|EL|ES|FI|FR|GB|HR|HU|IE|IT|LT|LU|LV|MT|NL|PL|PT|RO|SE|SI|"
    r"SK|CH|NO)U?[\s.-]?[0-9A-Z]{2}[\s.]?[0-9]{3}[\s.]?[0-9]{3}[\s.]?[0-9A-Z]{0,6}|"
    r"\d{9}B\d{2}|\d{2}[A-Z]{5}\d{4}[A-Z][0-9A-Z]Z[0-9A-Z]|[A-Z]{5}\d{4}[A-Z]|"
    r"[UL]\d{5}[A-Z]{2}\d{4}[A-Z]{3}\d{6}|\d{2}\.\d{3}\.\d{3}/\d{4}-\d{2})$")


def is_tax_id(value: str) -> bool:
    """Whether an identifier has the shape of a VAT, GST, PAN, CIN or CNPJ number."""
    token = value.strip().upper()
    return bool(_TAX_ID.match(token)) and sum(ch.isdigit() for ch in token) >= 7


def parse_invoice_amount(text: str) -> float | None:
    """The first amount in `text` that can be an invoice figure (not an ID, not absurd)."""
    values = money_values(text[:160])
    if not values:
        return None
    first = values[0]
    token = text[first.start:first.end].strip("()-− ")
    digits = re.sub(r"\D", "", token)
    # Eight or more digits with no grouping and no decimals: an ID, a phone or account number.
    if token.isdigit() and len(digits) >= 8 and first.currency is None:
        return None
    if abs(first.value) >= MAX_AMOUNT:
        return None
    return first.value


def _close(a: float, b: float) -> bool:
    # Rounding per line can leave a few cents between the sum and the printed total.
    return abs(a - b) <= max(0.021, 0.001 * abs(b))


def _options(candidates: list, limit: int = 4) -> list[tuple[float | None, float]]:
    """Distinct (value, confidence) readings, best first, plus 'not printed'."""
    seen: dict[float, float] = {}
    for cand in candidates:
        value = cand.value
        if value is None or value < 0 or abs(value) >= MAX_AMOUNT:
            continue
        seen[value] = max(seen.get(value, 0.0), cand.confidence)
    ranked = sorted(seen.items(), key=lambda kv: -kv[1])[:limit]
    return [*ranked, (None, 0.0)]


def resolve_totals(fields: dict[str, FieldValue], readings: dict[str, list]) -> list[str]:
    """Choose subtotal, tax and total among their readings by consistency; list failed checks.

    `readings` maps subtotal, tax, total, discount and shipping to candidates (objects with
    `value` and `confidence`), best first.
    """
    opts = {name: _options(readings.get(name, [])) for name in
            ("subtotal", "tax", "total", "discount", "shipping")}
    best: tuple[float, Any] | None = None
    for sub, tax, total, disc, ship in itertools.product(*(opts[n] for n in (
            "subtotal", "tax", "total", "discount", "shipping"))):
        score = sub[1] + tax[1] + total[1] + 0.5 * (disc[1] + ship[1])
        consistent = sub[0] is not None and tax[0] is not None and total[0] is not None and _close(
            sub[0] - (disc[0] or 0) + (ship[0] or 0) + tax[0], total[0])
        if (disc[0] or ship[0]) and not consistent:
            continue  # discounts and shipping are taken only when they make the sum work
        if consistent:
            score += 2.0
        if best is None or score > best[0]:
            best = (score, (sub, tax, total, consistent))
    failed: list[str] = []
    if best is None:
        return failed
    sub, tax, total, consistent = best[1]
    for name, (value, confidence) in (("subtotal", sub), ("tax", tax), ("total", total)):
        fields[name] = FieldValue(value, confidence) if value is not None else FieldValue()
    chosen = [fields[n] for n in ("subtotal", "tax", "total")]
    if consistent:
        for fv in chosen:
            fv.confidence = max(fv.confidence, 0.97)
        return failed
    sub_v, tax_v, total_v = (fv.value for fv in chosen)
    if None not in (sub_v, tax_v, total_v):
        failed.append("subtotal + tax != total")
        for fv in chosen:
            fv.confidence = round(fv.confidence * 0.7, 3)
    elif total_v is None and sub_v is not None and tax_v is not None:
        fields["total"] = FieldValue(round(sub_v + tax_v, 2), 0.6)
    elif sub_v is None and total_v is not None and tax_v is not None:
        if tax_v <= total_v:
            fields["subtotal"] = FieldValue(round(total_v - tax_v, 2), 0.55)
        else:
            failed.append("tax exceeds total")
            fields["tax"] = FieldValue(tax_v, round(fields["tax"].confidence * 0.5, 3))
    elif sub_v is not None and total_v is not None and tax_v is None:
        if total_v >= sub_v:
            fields["tax"] = FieldValue(round(total_v - sub_v, 2), 0.55)
        else:
            failed.append("subtotal exceeds total")
            fields["subtotal"].confidence = round(fields["subtotal"].confidence * 0.6, 3)
    return failed


def check_line_items(fields: dict[str, FieldValue], items: list[dict]) -> bool | None:
    """Whether the line items add up to the subtotal or total (None when there is nothing to check)."""
    amounts = [amount for item in items if isinstance(amount := item.get("amount"), (int, float))]
    targets = [fields[n].value for n in ("subtotal", "total") if fields[n].value is not None]
    if not amounts or not targets:
        return None
    return any(_close(sum(amounts), t) for t in targets)


def answer_problems(document_type: str, fields: dict[str, FieldValue]) -> dict[str, str]:
    """Checks a model's answer must pass, as the offline rules do: field name -> what is wrong."""
    problems: dict[str, str] = {}
    value = {name: fv.value for name, fv in fields.items()}
    for name in ("subtotal", "tax", "total", "revenue", "total_assets", "total_value"):
        amount = value.get(name)
        if isinstance(amount, (int, float)) and abs(amount) >= MAX_AMOUNT * 1000:
            problems[name] = f"{amount} is not a plausible amount (an identifier read as money?)"
    if document_type != "invoice":
        return problems
    number = value.get("invoice_number")
    if isinstance(number, str) and is_tax_id(number):
        problems["invoice_number"] = (f"{number!r} has the shape of a VAT/GST/company ID, "
                                      "not an invoice number")
    for name in ("subtotal", "tax", "total"):
        amount = value.get(name)
        if isinstance(amount, (int, float)) and abs(amount) >= MAX_AMOUNT:
            problems[name] = f"{amount} is not a plausible invoice amount"
    sub, tax, total = value.get("subtotal"), value.get("tax"), value.get("total")
    if sub is not None and tax is not None and total is not None and not _close(sub + tax, total):
        problems["total"] = (f"subtotal {sub} + tax {tax} = {round(sub + tax, 2)}, not the total "
                             f"{total} (a discount, shipping line or a misread figure?)")
    if total is not None and total < 0 and (sub is None or sub >= 0):
        problems["total"] = f"a negative total {total} on an invoice that is not a credit note"
    return problems


def lower_confidence(fields: dict[str, FieldValue], names, factor: float = 0.7) -> None:
    """Multiply the confidence of the named fields, for checks that still fail."""
    for name in names:
        if name in fields and fields[name].value is not None:
            fields[name].confidence = round(fields[name].confidence * factor, 3)
