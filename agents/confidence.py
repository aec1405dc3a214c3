"""A field's confidence as the estimated probability that it is right.

The rules give each value a score; this module counts the evidence around it (is the value
printed on the page, next to its label, more than once; did the rules read other values for it
nearly as confidently; do the document's sums agree; was the page read by OCR) and turns score and evidence into a probability with a small logistic model
per field. The coefficients are fitted on the development corpus by bench/calibrate.py and
live in agents/calibration.json, where each one can be read and questioned.

A document's confidence is that of its weakest key field: a document whose key field is
missing, or that has no field at all, is never confident.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

from agents.evidence import evidence_of, find_spot
from agents.fields import CORE_FIELDS, FIELD_SPECS, FieldValue
from agents.layout import DocView

COEFFICIENTS = Path(__file__).with_name("calibration.json")
# Below this a key field sends the document to a person (schema.stats_types.REVIEW_CONFIDENCE
# holds the same number for the app's filter; a test checks they agree).
REVIEW_THRESHOLD = 0.6
# A document whose cross-check failed is shown for review even when every field scored well,
# and its amounts are never more likely right than this: a rule, not fitted, since too few
# documents of the corpus have sums that disagree to learn it from.
_FAILED_CHECK_CAP = 0.59
FEATURES = ("score", "printed", "near_label", "repeated", "rivals", "sums_agree", "sums_disagree",
            "ocr")
_CLIP = 0.02
_TOLERANCE = 0.021


def _logit(p: float) -> float:
    p = min(1 - _CLIP, max(_CLIP, p))
    return math.log(p / (1 - p))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(_TOLERANCE, 0.001 * abs(b))


def sums_check(fields: dict[str, FieldValue]) -> bool | None:
    """Whether the invoice's figures agree with each other (None when nothing can be checked).

    Subtotal + tax = total, or the line items add up to the subtotal or the total.
    """
    value = {n: fv.value for n, fv in fields.items()}
    sub, tax, total = value.get("subtotal"), value.get("tax"), value.get("total")
    items = value.get("line_items") or []
    amounts = [amount for i in items if isinstance(i, dict)
               and isinstance(amount := i.get("amount"), (int, float))]
    verdicts = []
    if sub is not None and tax is not None and total is not None:
        verdicts.append(_close(sub + tax, total))
    if amounts and (sub is not None or total is not None):
        verdicts.append(any(_close(sum(amounts), t) for t in (sub, total) if t is not None))
    if not verdicts:
        return None
    return any(verdicts)


def kind_of(document_type: str, name: str) -> str:
    return FIELD_SPECS.get(document_type, {}).get(name, "text")


def signals(view: DocView, document_type: str, name: str, fv: FieldValue,
            sums: bool | None, ocr_pages: set[int]) -> tuple[dict[str, float], dict | None]:
    """The counted evidence for one found value, and its evidence object."""
    kind = kind_of(document_type, name)
    spot, count = (None, 0)
    if kind in ("text", "date", "amount", "currency"):
        spot, count = find_spot(view, kind, fv.value, fv.line, last=kind == "amount")
    near = spot is not None and fv.line is not None and 0 <= spot.line - fv.line <= 3
    page = view.pages[spot.line] if spot is not None else None
    amount_field = kind == "amount"
    features = {
        "score": _logit(float(fv.confidence)),
        "printed": float(spot is not None),
        "near_label": float(near),
        "repeated": float(count > 1),
        "rivals": float(min(fv.rivals, 2)),
        "sums_agree": float(bool(sums) and amount_field),
        "sums_disagree": float(sums is False and amount_field),
        "ocr": float(page in ocr_pages if page is not None else bool(ocr_pages)),
    }
    return features, evidence_of(view, spot)


@functools.lru_cache(maxsize=1)
def _model() -> dict[str, Any]:
    return json.loads(COEFFICIENTS.read_text(encoding="utf-8"))


def probability(name: str, features: dict[str, float], model: dict[str, Any] | None = None
                ) -> float:
    """The fitted model's probability that a value with these features is right."""
    model = model or _model()
    coef = model["fields"].get(name) or model["fields"]["other"]
    z = coef["intercept"] + sum(coef["weights"].get(f, 0.0) * features[f] for f in FEATURES)
    p = 1 / (1 + math.exp(-z))
    return min(p, _FAILED_CHECK_CAP) if features.get("sums_disagree") else p


def calibrate(view: DocView, document_type: str, fields: dict[str, FieldValue], stage: str,
              ocr_pages: set[int]) -> dict[str, dict[str, float]]:
    """Sets each found field's evidence, stage and calibrated confidence; returns the signals."""
    sums = sums_check(fields) if document_type == "invoice" else None
    found: dict[str, dict[str, float]] = {}
    for name, fv in fields.items():
        if fv.value is None:
            fv.confidence, fv.stage, fv.evidence = 0.0, None, None
            continue
        fv.stage = stage
        features, fv.evidence = signals(view, document_type, name, fv, sums, ocr_pages)
        found[name] = features
        fv.confidence = round(probability(name, features), 3)
    return found


def attach_evidence(view: DocView, document_type: str, fields: dict[str, FieldValue],
                    stage: str) -> None:
    """Sets each field's stage and evidence, leaving its confidence as it is (a model's answer)."""
    for name, fv in fields.items():
        fv.stage = stage if fv.value is not None else None
        kind = kind_of(document_type, name)
        if fv.value is None or kind not in ("text", "date", "amount", "currency"):
            fv.evidence = None
            continue
        spot, _ = find_spot(view, kind, fv.value, None, last=kind == "amount")
        fv.evidence = evidence_of(view, spot)


def document_confidence(document_type: str, fields: dict[str, FieldValue],
                        classification_confidence: float, failed_check: bool) -> float:
    """The weakest key field's confidence (0 when one is missing or nothing was found)."""
    keys = [n for n in CORE_FIELDS.get(document_type, ()) if n in fields]
    if not fields or all(fv.value is None for fv in fields.values()):
        return 0.0
    weakest = min((fields[n].confidence if fields[n].value is not None else 0.0) for n in keys) \
        if keys else min(fv.confidence for fv in fields.values() if fv.value is not None)
    confidence = weakest * min(1.0, 0.5 + 0.5 * classification_confidence)
    if failed_check:
        confidence = min(confidence, _FAILED_CHECK_CAP)
    return round(confidence, 3)


def needs_review(confidence: float, threshold: float = REVIEW_THRESHOLD) -> bool:
    """Whether a person should check the result: a key field is below the threshold or a
    cross-check failed (both bring the document's confidence below it)."""
    return confidence < threshold
