"""Fits the confidence model of agents/confidence.py on a development corpus, and checks it.

Usage:
    python bench/calibrate.py --fit DIR [DIR ...] [--holdout DIR ...] [--unknown-labels N]
                              [--samples FILE] [--write]

Each document of the --fit folders is read and extracted offline; every field its truth file
lists and the extractor found becomes one sample: the evidence the model counts (the rules'
score, printed on the page, beside its label, stated twice, sums agree or disagree, read by
OCR) and whether the value is right (bench/extraction_scoring.py). One small logistic model per
core invoice field and one for every other field are fitted with an L2 penalty. With --write
the coefficients go to agents/calibration.json. The reliability table (confidence bucket ->
share right) is printed for the fit and the held-out folders, per source: text layer or OCR.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from bench.extraction import load_cases
from bench.extraction_scoring import score_document

GROUPS = ("issuer", "invoice_number", "issue_date", "total", "currency")
BUCKETS = (0.0, 0.5, 0.8, 0.9, 0.97, 1.01)
PENALTY = 1.0
# Evidence left out of a field's model because it teaches a habit of one producer rather than
# something true of invoices: the generator prints every seller's name in its letterhead and
# its footer, so "printed twice" would make a real seller printed once look doubtful.
LEFT_OUT = {"issuer": ("repeated",)}


def group_of(document_type: str, name: str) -> str:
    return name if document_type == "invoice" and name in GROUPS else "other"


def samples(folders: list[str], processes: int = 2, unknown_labels: int = 0,
            originals: bool = True) -> list[dict]:
    """One sample per found field of every document with a truth file in the folders.

    With `unknown_labels`, each text-layer invoice is also read that many more times with half
    of its label words replaced by words no rule knows (see `unknown_labels`).
    """
    from multiprocessing import Pool

    cases = [(str(pdf), truth, folder, 0) for folder in folders
             for pdf, truth in load_cases(folder)]
    cases += [(path, truth, folder, seed) for path, truth, folder, _ in list(cases)
              for seed in range(1, unknown_labels + 1)
              if truth["document_type"] == "invoice" and "scan" not in Path(path).name]
    if not originals:
        cases = [case for case in cases if case[3]]
    with Pool(processes) as pool:
        return [row for rows in pool.imap(_document_samples, cases) for row in rows]


def unknown_labels(document, seed: int, share: float = 0.5) -> None:
    """Replaces about `share` of the document's invoice label words by made-up ones in place.

    Real invoices label their fields in words the rules do not all know: this makes the
    development corpus show the extractor failing the way it fails on them (a value taken from
    a weaker label, a guess, a rival reading), so the confidence model learns what those
    failures look like. Lengths are kept, so every character keeps its box.
    """
    import random
    import re

    from agents.layout import Cell, Line, fold
    from agents.rules_invoice import LABELS

    rng = random.Random(f"{document.name}/{seed}")
    phrases = sorted({fold(p) for items in LABELS.values() for p, _ in items}, key=len,
                     reverse=True)
    pattern = re.compile("|".join(rf"(?<!\w){re.escape(p)}(?!\w)" for p in phrases))

    def scramble(text: str) -> str:
        chars = list(text)
        for m in pattern.finditer(fold(text)):
            if rng.random() < share:
                for i in range(m.start(), m.end()):
                    if chars[i].isalpha():
                        letter = rng.choice("bcdfghklmnprstvz")
                        chars[i] = letter.upper() if chars[i].isupper() else letter
        return "".join(chars)

    for page in document.pages:
        page.lines = [Line(tuple(Cell(scramble(c.text), c.x0, c.x1, c.top, c.bottom, c.edges)
                                 for c in line.cells)) for line in page.lines]


def _document_samples(case: tuple[str, dict, str, int]) -> list[dict]:
    from agents.classify import classify
    from agents.fields import Usage
    from agents.offline import OfflineExtractor
    from agents.pdf import read_document
    from agents.tracing import Tracer

    path, truth, folder, seed = case
    try:
        document = read_document(path)
    except Exception as exc:  # a document the agent refuses scores nothing
        print(f"skipped {path}: {exc}", file=sys.stderr)
        return []
    if seed:
        unknown_labels(document, seed)
    extraction = OfflineExtractor().extract(document, classify(document.text), Usage(), Tracer())
    scored = score_document(extraction.result(document.page_count), truth)
    doc_type = truth["document_type"]
    found = []
    for name, outcome in scored["fields"].items():
        features = extraction.signals.get(name)
        if features is None or extraction.document_type != doc_type:
            continue
        found.append({
            "document": Path(path).name, "folder": folder, "field": name,
            "group": group_of(doc_type, name), "features": features,
            "correct": bool(outcome.correct), "ocr": bool(document.ocr_pages),
            "language": truth.get("language"), "unknown_labels": bool(seed),
            "confidence": extraction.fields[name].confidence,
        })
    return found


def fit_group(rows: list[dict], names: tuple[str, ...]) -> dict:
    """Logistic regression by Newton's method with an L2 penalty (intercept unpenalised).

    One right and one wrong made-up sample with no evidence keep a field the corpus never saw
    wrong (currency) from a certainty no real document earns.
    """
    import numpy as np

    pseudo = [{"features": dict.fromkeys(names, 0.0), "correct": c} for c in (True, False)]
    x = np.array([[1.0] + [r["features"][n] for n in names] for r in rows + pseudo])
    y = np.array([1.0 if r["correct"] else 0.0 for r in rows + pseudo])
    w = np.zeros(x.shape[1])
    penalty = np.eye(x.shape[1]) * PENALTY
    penalty[0, 0] = 1e-6
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ w))
        gradient = x.T @ (p - y) + penalty @ w
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return {"intercept": round(float(w[0]), 3),
            "weights": {n: round(float(v), 3) for n, v in zip(names, w[1:])},
            "samples": len(rows), "right": int(y.sum()) - 1}


def fit(rows: list[dict]) -> dict:
    from agents.confidence import FEATURES

    model = {"about": "Logistic model per field: p = 1 / (1 + exp(-(intercept + sum(weight * "
                      "feature)))). Fitted by bench/calibrate.py; see docs/BENCHMARKS.md.",
             "features": list(FEATURES), "fields": {}}
    for group in (*GROUPS, "other"):
        # A field the corpus never shows borrows the fit over every field.
        chosen = [r for r in rows if r["group"] == group] or rows
        used = tuple(f for f in FEATURES if f not in LEFT_OUT.get(group, ()))
        coef = fit_group(chosen, used)
        coef["weights"] = {f: coef["weights"].get(f, 0.0) for f in FEATURES}
        model["fields"][group] = coef
    return model


def rescore(rows: list[dict], model: dict) -> None:
    from agents.confidence import probability

    for r in rows:
        r["confidence"] = round(probability(r["group"], r["features"], model), 3)


def reliability(rows: list[dict]) -> dict[str, list[tuple[str, int, int]]]:
    """Per source (text layer, the same with unknown labels, OCR, all): (bucket, right, count)
    for each confidence bucket."""
    table: dict[str, list[tuple[str, int, int]]] = {}
    for source, keep in (("text layer", lambda r: not r["ocr"] and not r.get("unknown_labels")),
                         ("text, unknown labels", lambda r: bool(r.get("unknown_labels"))),
                         ("OCR", lambda r: r["ocr"]), ("all", lambda r: True)):
        rows_in = [r for r in rows if keep(r)]
        buckets = []
        for low, high in itertools.pairwise(BUCKETS):
            inside = [r for r in rows_in if low <= r["confidence"] < high]
            label = f"{low:.2f}–{min(high, 1.0):.2f}"
            buckets.append((label, sum(r["correct"] for r in inside), len(inside)))
        table[source] = buckets
    return table


def format_reliability(title: str, rows: list[dict]) -> str:
    lines = [f"{title}: {len(rows)} fields",
             "| source | confidence | right | fields | share right |", "|---|---|---|---|---|"]
    for source, buckets in reliability(rows).items():
        for label, right, count in buckets:
            share = f"{100 * right / count:.0f}%" if count else "–"
            lines.append(f"| {source} | {label} | {right} | {count} | {share} |")
    high = [r for r in rows if r["confidence"] >= 0.9]
    if high:
        lines.append(f"at confidence ≥ 0.9: {sum(r['correct'] for r in high)}/{len(high)} right "
                     f"({100 * sum(r['correct'] for r in high) / len(high):.1f}%)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", nargs="+", required=True, help="development folders")
    parser.add_argument("--holdout", nargs="*", default=[], help="folders kept out of the fit")
    parser.add_argument("--write", action="store_true", help="write agents/calibration.json")
    parser.add_argument("--unknown-labels", type=int, default=0, metavar="N",
                        help="also read each text invoice N times with half its label words "
                             "made unknown (see unknown_labels)")
    parser.add_argument("--samples", metavar="FILE",
                        help="keep the samples in FILE and reuse them when it exists (refits "
                             "without extracting again; delete it after changing the agents)")
    args = parser.parse_args(argv)
    cache = Path(args.samples) if args.samples else None
    if cache and cache.is_file():
        fit_rows, held = json.loads(cache.read_text(encoding="utf-8"))
    else:
        fit_rows = samples(args.fit)
        held = samples(args.holdout) if args.holdout else []
    if args.unknown_labels and not any(r.get("unknown_labels") for r in fit_rows):
        fit_rows += samples(args.fit, unknown_labels=args.unknown_labels, originals=False)
        held += samples(args.holdout, unknown_labels=args.unknown_labels, originals=False)
    if cache:
        cache.write_text(json.dumps([fit_rows, held]), encoding="utf-8")
    model = fit(fit_rows)
    rescore(fit_rows, model)
    rescore(held, model)
    if args.write:
        from agents.confidence import COEFFICIENTS

        COEFFICIENTS.write_text(json.dumps(model, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(model["fields"], indent=1))
    print(format_reliability("fit", fit_rows))
    if held:
        print(format_reliability("held out", held))
    return 0


if __name__ == "__main__":
    sys.exit(main())
