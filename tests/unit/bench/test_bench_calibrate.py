"""The confidence model's fit: it learns what the evidence says, and the checked-in one is whole."""

from __future__ import annotations

import json
import math
import random

from agents.confidence import COEFFICIENTS, FEATURES, probability
from bench.calibrate import fit, reliability, rescore


def _rows(count: int, seed: int = 5) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        printed = rng.random() < 0.7
        score = rng.uniform(-1, 3)
        # Values printed on the page are right far more often than values that are not.
        right = rng.random() < (0.95 if printed else 0.3)
        features = dict.fromkeys(FEATURES, 0.0) | {"score": score, "printed": float(printed)}
        rows.append({"group": "total", "features": features, "correct": right, "ocr": i % 4 == 0})
    return rows


def test_the_fit_learns_that_printed_values_are_right_more_often() -> None:
    rows = _rows(400)
    model = fit(rows)
    weights = model["fields"]["total"]["weights"]
    assert weights["printed"] > 1.0
    printed = dict.fromkeys(FEATURES, 0.0) | {"printed": 1.0}
    missing = dict.fromkeys(FEATURES, 0.0)
    assert probability("total", printed, model) > 0.85 > 0.5 > probability("total", missing, model)


def test_the_reliability_table_counts_each_bucket_per_source() -> None:
    rows = _rows(200)
    rescore(rows, fit(rows))
    table = reliability(rows)
    assert sum(n for _, _, n in table["all"]) == 200
    assert sum(n for _, _, n in table["OCR"]) == 50
    assert all(right <= n for _, right, n in table["text layer"])


def test_the_checked_in_model_covers_every_field_and_feature() -> None:
    model = json.loads(COEFFICIENTS.read_text(encoding="utf-8"))
    assert set(model["fields"]) == {"issuer", "invoice_number", "issue_date", "total", "currency",
                                    "other"}
    for coef in model["fields"].values():
        assert set(coef["weights"]) == set(FEATURES)
        assert all(math.isfinite(v) for v in coef["weights"].values())
