"""Scoring rules that compare one extracted field value with its ground truth.

- dates: exact ISO string match;
- amounts: equal within 0.01 absolute or 0.5 % relative (whichever is looser);
- integers (term_months): exact;
- strings: equal after Unicode normalisation, case folding and dropping whitespace and
  punctuation ("ACME S.p.A." == "Acme SpA"); a truth given as a list of strings for a text
  field (a brand and its legal name) accepts any of them;
- parties: the document scores 1 only if the normalised sets are equal; the per-party metric
  counts each truth party found as a hit and each missing or extra party as a miss;
- line_items: 1 only if the item count matches and every truth amount is matched one-to-one by
  a predicted amount; per-document count and per-item amount metrics are reported alongside.

A null truth is matched only by a null prediction, so invented values count as errors; when
the extractor returned no result at all, every field counts as an error. Only the fields a truth
file lists are scored (the real-world corpus records the five core invoice fields).
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, field

CORE_FIELDS = ("issuer", "invoice_number", "issue_date", "total", "currency")
FIELDS_BY_TYPE = {
    "invoice": ("issuer", "invoice_number", "issue_date", "due_date", "currency", "subtotal",
                "tax", "total", "line_items"),
    "contract": ("parties", "effective_date", "term_months", "governing_law", "total_value",
                 "currency"),
    "financial_statement": ("company", "period_end", "currency", "revenue", "net_income",
                            "total_assets"),
}
DATE_FIELDS = {"issue_date", "due_date", "effective_date", "period_end"}
AMOUNT_FIELDS = {"subtotal", "tax", "total", "total_value", "revenue", "net_income",
                 "total_assets"}
INT_FIELDS = {"term_months"}
AMOUNT_ABS_TOL = 0.01
AMOUNT_REL_TOL = 0.005


@dataclass
class FieldScore:
    """Outcome for one field of one document, plus any sub-metrics it contributes."""

    correct: bool
    extra: dict[str, tuple[int, int]] = field(default_factory=dict)  # metric -> (hits, n)


def normalize_text(value) -> str:
    text = unicodedata.normalize("NFKC", str(value)).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def to_number(value) -> float | None:
    """A numeric value, or None; numeric strings are accepted, booleans are not."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def amount_match(pred, truth) -> bool:
    number = to_number(pred)
    if number is None:
        return False
    # The epsilon keeps "exactly one cent off" inside the tolerance despite binary floats.
    return math.isclose(number, float(truth), rel_tol=AMOUNT_REL_TOL,
                        abs_tol=AMOUNT_ABS_TOL + 1e-9)


def date_match(pred, truth) -> bool:
    return isinstance(pred, str) and pred.strip() == truth


def int_match(pred, truth) -> bool:
    number = to_number(pred)
    return number is not None and number == int(truth)


def string_match(pred, truth) -> bool:
    if not isinstance(pred, (str, int, float)) or isinstance(pred, bool):
        return False
    return normalize_text(pred) != "" and normalize_text(pred) == normalize_text(truth)


def _as_list(pred) -> list:
    if pred is None:
        return []
    if isinstance(pred, (list, tuple)):
        return list(pred)
    return [pred]


def parties_score(pred, truth: list[str]) -> FieldScore:
    predicted = {normalize_text(p) for p in _as_list(pred) if isinstance(p, str)} - {""}
    expected = {normalize_text(p) for p in truth}
    hits = len(predicted & expected)
    return FieldScore(predicted == expected, {"parties[each]": (hits, len(predicted | expected))})


def _item_amount(item) -> float | None:
    if isinstance(item, dict):
        return to_number(item.get("amount"))
    return None


def line_items_score(pred, truth: list[dict]) -> FieldScore:
    predicted = [_item_amount(item) for item in _as_list(pred)]
    remaining = [a for a in predicted if a is not None]
    matched = 0
    for item in truth:
        for i, amount in enumerate(remaining):
            if amount_match(amount, item["amount"]):
                matched += 1
                del remaining[i]
                break
    count_ok = len(predicted) == len(truth)
    return FieldScore(count_ok and matched == len(truth), {
        "line_items.count": (int(count_ok), 1),
        "line_items.amount": (matched, len(truth)),
    })


def score_field(name: str, pred, truth) -> FieldScore:
    """Apply the rule for this field name; see the module docstring."""
    if truth is None:
        return FieldScore(pred is None or pred == [] or pred == "")
    if name == "parties":
        return parties_score(pred, truth)
    if name == "line_items":
        return line_items_score(pred, truth)
    if pred is None:
        return FieldScore(False)
    if name in DATE_FIELDS:
        return FieldScore(date_match(pred, truth))
    if name in AMOUNT_FIELDS:
        return FieldScore(amount_match(pred, truth))
    if name in INT_FIELDS:
        return FieldScore(int_match(pred, truth))
    if isinstance(truth, list):
        return FieldScore(any(string_match(pred, t) for t in truth))
    return FieldScore(string_match(pred, truth))


def predicted_value(result: dict | None, name: str):
    """fields[name]["value"] from an extraction result, tolerating absent or bare values."""
    if not isinstance(result, dict):
        return None
    fields = result.get("fields")
    if not isinstance(fields, dict) or name not in fields:
        return None
    entry = fields[name]
    return entry.get("value") if isinstance(entry, dict) else entry


def score_document(result: dict | None, truth: dict) -> dict:
    """Per-field outcomes plus classification for one document."""
    doc_type = truth["document_type"]
    names = [name for name in FIELDS_BY_TYPE.get(doc_type, tuple(truth["fields"]))
             if name in truth["fields"]]
    fields = {}
    for name in names:
        outcome = score_field(name, predicted_value(result, name), truth["fields"].get(name))
        if not isinstance(result, dict):
            # No result at all (the extractor crashed): even null truths are not "found".
            outcome.correct = False
        fields[name] = outcome
    predicted_type = result.get("document_type") if isinstance(result, dict) else None
    return {"document_type": doc_type, "predicted_type": predicted_type,
            "classified": predicted_type == doc_type, "fields": fields}
