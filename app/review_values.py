"""What a reviewer may type into a field: dates, amounts in the document's decimal style, ISO 4217
currency codes, whole numbers, lists and text; each parsed to the result's value type or refused
with a plain message."""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Any, Literal

Kind = Literal["date", "amount", "currency", "integer", "list", "text"]
Style = Literal["comma", "dot"]  # the decimal mark: 1.234,56 (comma) or 1,234.56 (dot)

DATE_FIELDS = {"issue_date", "due_date", "effective_date", "period_end"}
AMOUNT_FIELDS = {"subtotal", "tax", "total", "total_value", "revenue", "net_income", "total_assets"}
INTEGER_FIELDS = {"term_months"}
LIST_FIELDS = {"parties", "line_items"}

# The result contract's field order per document type (a result's JSON keys come back reordered).
FIELD_ORDER = {
    "invoice": ["issuer", "invoice_number", "issue_date", "due_date", "currency", "subtotal", "tax", "total",
                "line_items"],
    "contract": ["parties", "effective_date", "term_months", "governing_law", "total_value", "currency"],
    "financial_statement": ["company", "period_end", "currency", "revenue", "net_income", "total_assets"],
}


def field_order(document_type: str | None, names: list[str]) -> list[str]:
    """The names in the contract's order for the type, the others after them by name."""
    known = FIELD_ORDER.get(document_type or "", [])
    return [n for n in known if n in names] + sorted(n for n in names if n not in known)


# Active ISO 4217 codes (2024), with XAU/XAG and the like left out: documents bill in money.
ISO_4217 = frozenset([
    "AED", "AFN", "ALL", "AMD", "ANG", "AOA", "ARS", "AUD", "AWG", "AZN", "BAM", "BBD", "BDT", "BGN", "BHD", "BIF",
    "BMD", "BND", "BOB", "BRL", "BSD", "BTN", "BWP", "BYN", "BZD", "CAD", "CDF", "CHF", "CLP", "CNY", "COP", "CRC",
    "CUP", "CVE", "CZK", "DJF", "DKK", "DOP", "DZD", "EGP", "ERN", "ETB", "EUR", "FJD", "FKP", "GBP", "GEL", "GHS",
    "GIP", "GMD", "GNF", "GTQ", "GYD", "HKD", "HNL", "HTG", "HUF", "IDR", "ILS", "INR", "IQD", "IRR", "ISK", "JMD",
    "JOD", "JPY", "KES", "KGS", "KHR", "KMF", "KPW", "KRW", "KWD", "KYD", "KZT", "LAK", "LBP", "LKR", "LRD", "LSL",
    "LYD", "MAD", "MDL", "MGA", "MKD", "MMK", "MNT", "MOP", "MRU", "MUR", "MVR", "MWK", "MXN", "MYR", "MZN", "NAD",
    "NGN", "NIO", "NOK", "NPR", "NZD", "OMR", "PAB", "PEN", "PGK", "PHP", "PKR", "PLN", "PYG", "QAR", "RON", "RSD",
    "RUB", "RWF", "SAR", "SBD", "SCR", "SDG", "SEK", "SGD", "SHP", "SLE", "SLL", "SOS", "SRD", "SSP", "STN", "SVC",
    "SYP", "SZL", "THB", "TJS", "TMT", "TND", "TOP", "TRY", "TTD", "TWD", "TZS", "UAH", "UGX", "USD", "UYU", "UZS",
    "VES", "VND", "VUV", "WST", "XAF", "XCD", "XOF", "XPF", "YER", "ZAR", "ZMW", "ZWL",
])


def kind_of(name: str, value: Any = None) -> Kind:
    """A field's type: by its name in the result contract, else by its extracted value."""
    if name in DATE_FIELDS:
        return "date"
    if name in AMOUNT_FIELDS:
        return "amount"
    if name == "currency":
        return "currency"
    if name in INTEGER_FIELDS:
        return "integer"
    if name in LIST_FIELDS or isinstance(value, (list, dict)):
        return "list"
    if isinstance(value, bool):
        return "text"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "amount"
    return "text"


_COMMA_DECIMAL = re.compile(r"\d[.\s']?\d{0,3},\d{1,2}(?!\d)")
_DOT_DECIMAL = re.compile(r"\d[,\s']?\d{0,3}\.\d{1,2}(?!\d)")


def decimal_style(result: dict[str, Any] | None) -> Style:
    """How the document writes amounts, read from the evidence of its amount fields (dot if unknown)."""
    comma = dot = 0
    fields = (result or {}).get("fields") or {}
    for name, item in fields.items() if isinstance(fields, dict) else ():
        evidence = item.get("evidence") if isinstance(item, dict) else None
        text = evidence.get("text") if isinstance(evidence, dict) else None
        if name not in AMOUNT_FIELDS or not isinstance(text, str):
            continue
        comma += len(_COMMA_DECIMAL.findall(text))
        dot += len(_DOT_DECIMAL.findall(text))
    return "comma" if comma > dot else "dot"


def show(value: Any, kind: Kind, style: Style = "dot") -> str:
    """A value as the reviewer sees and edits it ("" for none)."""
    if value is None:
        return ""
    if kind == "amount" and isinstance(value, (int, float)) and not isinstance(value, bool):
        text = f"{value:,.2f}"
        return text.replace(",", "\u2009").replace(".", ",").replace("\u2009", ".") if style == "comma" else text
    if kind == "list" or isinstance(value, (list, dict)):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return "; ".join(value)
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _amount(text: str, style: Style) -> float:
    mark, group = (",", ".") if style == "comma" else (".", ",")
    cleaned = text.replace(" ", "").replace("\u00a0", "").replace("'", "")
    cleaned = re.sub(r"^(?:[A-Z]{3}|[€$£¥])|(?:[A-Z]{3}|[€$£¥])$", "", cleaned)  # a currency beside the number
    negative = cleaned.startswith("-") or (cleaned.startswith("(") and cleaned.endswith(")"))
    cleaned = cleaned.strip("-()")
    whole, _, fraction = cleaned.partition(mark)
    if mark in fraction or group in fraction or not re.fullmatch(r"\d*", fraction):
        raise ValueError(_amount_hint(text, style))
    if group in whole:
        head, *rest = whole.split(group)
        if not (1 <= len(head) <= 3 and head.isdigit() and all(len(p) == 3 and p.isdigit() for p in rest)):
            raise ValueError(_amount_hint(text, style))
        whole = head + "".join(rest)
    if not whole.isdigit() and not (whole == "" and fraction):
        raise ValueError(_amount_hint(text, style))
    number = float(f"{whole or 0}.{fraction or 0}")
    return -number if negative else number


def _amount_hint(text: str, style: Style) -> str:
    example = "1.234,56" if style == "comma" else "1,234.56"
    return f"“{text}” is not an amount: this document writes amounts like {example}"


def parse(text: str, kind: Kind, style: Style = "dot") -> Any:
    """The value a reviewer's text stands for; ValueError with a plain message when it is not one.
    An empty text is "not on the document" (None)."""
    text = (text or "").strip()
    if not text:
        return None
    if len(text) > 2000:
        raise ValueError("at most 2000 characters")
    if "\x00" in text:
        raise ValueError("a value must not contain a NUL character")
    if kind == "date":
        match = re.fullmatch(r"(\d{1,2})[./](\d{1,2})[./](\d{4})", text)
        try:
            if match:  # day first, as written across Europe; ISO dates are taken as they are
                day, month, year = (int(g) for g in match.groups())
                return date(year, month, day).isoformat()
            return date.fromisoformat(text).isoformat()
        except ValueError:
            raise ValueError(f"“{text}” is not a date: write it as YYYY-MM-DD (or DD.MM.YYYY)") from None
    if kind == "amount":
        return _amount(text, style)
    if kind == "currency":
        code = text.upper()
        if code not in ISO_4217:
            raise ValueError(f"“{text}” is not an ISO 4217 currency code (such as EUR, USD, CHF)")
        return code
    if kind == "integer":
        if not re.fullmatch(r"-?\d{1,12}", text):
            raise ValueError(f"“{text}” is not a whole number")
        return int(text)
    if kind == "list":
        if text.startswith(("[", "{")):
            try:
                return json.loads(text)
            except ValueError:
                raise ValueError("not valid JSON: write names separated by “;” or a JSON list") from None
        return [part.strip() for part in text.split(";") if part.strip()]
    return text
