"""Measures an extractor's field-level accuracy on a folder of bench PDFs with truth JSON.

Usage:
    python bench/extraction.py DIR [DIR ...] [--extractor offline] [--limit N] [--json]
                               [--failures K]

PDFs are found in each DIR and its subfolders; a document's source is its folder relative to
the parent of DIR (``realworld/scans``, ``corpus``), and the five core invoice fields are also
reported per source.

The extractor is ``agents.extract.extract_document(path, extractor=...)`` returning the result
shape of docs/CONTRACTS.md.  Scoring rules are documented in bench/extraction_scoring.py.
Token figures are estimates (characters of the PDF text layer / 4), i.e. what an LLM
extractor would read, plus whatever token counts the extractor itself reports.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: make the repository root importable for `bench.*` and `agents.*`.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from bench.extraction_scoring import (
    CORE_FIELDS,
    FIELDS_BY_TYPE,
    predicted_value,
    score_document,
)

ExtractFn = Callable[..., dict]
CHARS_PER_TOKEN = 4


def load_cases(folder: str | Path, limit: int | None = None) -> list[tuple[Path, dict]]:
    """PDFs (in the folder and its subfolders) that have a NAME.json beside them, in path order."""
    cases = []
    for pdf in sorted(Path(folder).rglob("*.pdf")):
        truth_path = pdf.with_suffix(".json")
        if truth_path.is_file():
            cases.append((pdf, json.loads(truth_path.read_text(encoding="utf-8"))))
        if limit is not None and len(cases) >= limit:
            break
    return cases


def estimate_tokens(pdf: Path) -> int:
    import pypdfium2 as pdfium

    try:
        doc = pdfium.PdfDocument(str(pdf))
    except pdfium.PdfiumError:
        return 0  # an unreadable file is the extractor's error to report, not the bench's
    try:
        chars = 0
        for page in doc:
            textpage = page.get_textpage()
            chars += len(textpage.get_text_range())
            textpage.close()
            page.close()
    finally:
        doc.close()
    return math.ceil(chars / CHARS_PER_TOKEN)


def _unwrap(result):
    """Accept a callback payload ({"result": {...}}) as well as a bare result."""
    if isinstance(result, dict) and "fields" not in result and "status" in result:
        inner = result.get("result")
        # A failed payload carries no result and scores like a crash.
        return inner if isinstance(inner, dict) else None
    return result


def _reported_tokens(raw) -> tuple[int, int]:
    if not isinstance(raw, dict):
        return 0, 0
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else raw
    return int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)


def _ratio(hits: float, n: int) -> float | None:
    return round(hits / n, 4) if n else None


def source_of(pdf: Path, folder: Path) -> str:
    """The folder a document came from, relative to the parent of the benchmarked folder."""
    return pdf.parent.relative_to(folder.parent).as_posix()


def run_benchmark(folder: str | Path | list, extract_fn: ExtractFn, extractor: str = "offline",
                  limit: int | None = None, keep_failures: int = 5) -> dict:
    """Run the extractor over the folder(s) and aggregate scores into a JSON-ready report."""
    folders = [Path(f) for f in folder] if isinstance(folder, (list, tuple)) else [Path(folder)]
    cases = [(pdf, truth, source_of(pdf, root))
             for root in folders for pdf, truth in load_cases(root, limit)]
    counts: dict = defaultdict(lambda: defaultdict(lambda: [0, 0]))  # type -> field -> [hits, n]
    by_source: dict = defaultdict(lambda: defaultdict(lambda: [0, 0]))  # source -> field -> ..
    by_language: dict = defaultdict(lambda: defaultdict(lambda: [0, 0]))  # language -> field
    confidences: list[tuple[float, bool, bool]] = []  # (confidence, right, read by OCR)
    classified, errors, elapsed = 0, [], 0.0
    tokens_est, tokens_in, tokens_out = 0, 0, 0
    failures: dict = defaultdict(list)
    for pdf, truth, source in cases:
        started = time.perf_counter()
        try:
            raw = extract_fn(str(pdf), extractor=extractor)
        except Exception as exc:  # a crash on one document must not end the run
            raw = None
            errors.append({"document": pdf.name, "error": f"{type(exc).__name__}: {exc}"})
        elapsed += time.perf_counter() - started
        result = _unwrap(raw)
        reported = _reported_tokens(raw)
        tokens_in, tokens_out = tokens_in + reported[0], tokens_out + reported[1]
        tokens_est += estimate_tokens(pdf)
        scored = score_document(result, truth)
        classified += scored["classified"]
        doc_type = truth["document_type"]
        source_cells = by_source[source]
        source_cells["(documents)"][1] += 1
        source_cells["(classification)"][0] += scored["classified"]
        source_cells["(classification)"][1] += 1
        language_cells = by_language[truth.get("language") or "?"]
        language_cells["(documents)"][1] += 1
        language_cells["(classification)"][0] += scored["classified"]
        language_cells["(classification)"][1] += 1
        for name, outcome in scored["fields"].items():
            if doc_type == "invoice" and name in CORE_FIELDS:
                source_cells[name][0] += outcome.correct
                source_cells[name][1] += 1
                language = by_language[truth.get("language") or "?"]
                language[name][0] += outcome.correct
                language[name][1] += 1
            found = _field_confidence(result, name)
            if found is not None:
                confidences.append((found[0], bool(outcome.correct), found[1]))
            cell = counts[doc_type][name]
            cell[0] += outcome.correct
            cell[1] += 1
            for metric, (hits, n) in outcome.extra.items():
                counts[doc_type][metric][0] += hits
                counts[doc_type][metric][1] += n
            key = f"{doc_type}.{name}"
            if not outcome.correct and len(failures[key]) < keep_failures:
                failures[key].append({"document": pdf.name, "truth": truth["fields"].get(name),
                                      "predicted": predicted_value(result, name)})
    report = _report(", ".join(map(str, folders)), extractor, len(cases), counts, classified,
                     errors, elapsed, (tokens_est, tokens_in, tokens_out), failures)
    report["sources"] = _sources(by_source)
    report["languages"] = _sources(by_language)
    report["reliability"] = _reliability(confidences)
    return report


RELIABILITY_BUCKETS = (0.0, 0.5, 0.8, 0.9, 0.97, 1.01)


def _field_confidence(result, name: str) -> tuple[float, bool] | None:
    """A found field's confidence and whether it was read by OCR (None when not found)."""
    entry = (result or {}).get("fields", {}).get(name) if isinstance(result, dict) else None
    if not isinstance(entry, dict) or entry.get("value") is None:
        return None
    confidence = entry.get("confidence")
    if not isinstance(confidence, (int, float)):
        return None
    return float(confidence), entry.get("stage") == "ocr"


def _reliability(confidences: list[tuple[float, bool, bool]]) -> dict:
    """Per source (text layer, OCR, all): each confidence bucket's count and share right."""
    table = {}
    for source, keep in (("text layer", lambda ocr: not ocr), ("OCR", lambda ocr: ocr),
                         ("all", lambda ocr: True)):
        rows = []
        for low, high in itertools.pairwise(RELIABILITY_BUCKETS):
            inside = [right for conf, right, ocr in confidences
                      if keep(ocr) and low <= conf < high]
            rows.append({"bucket": f"{low:.2f}-{min(high, 1.0):.2f}", "n": len(inside),
                         "right": sum(inside), "share": _ratio(sum(inside), len(inside))})
        table[source] = rows
    return table


def _sources(by_source) -> dict:
    sources = {}
    for source in sorted(by_source):
        cells = by_source[source]
        core = [cells[name] for name in CORE_FIELDS if cells[name][1]]
        hits, n = sum(c[0] for c in core), sum(c[1] for c in core)
        sources[source] = {
            "documents": cells["(documents)"][1],
            "classification": _ratio(*cells["(classification)"]),
            "fields": {name: {"accuracy": _ratio(*cells[name]), "n": cells[name][1]}
                       for name in CORE_FIELDS if cells[name][1]},
            "core": {"accuracy": _ratio(hits, n), "correct": hits, "n": n},
        }
    return sources


def _report(folder, extractor, n_docs, counts, classified, errors, elapsed, tokens,
            failures) -> dict:
    fields, per_type, total_hits, total_n = {}, {}, 0, 0
    for doc_type in sorted(counts):
        fields[doc_type] = {}
        type_hits = type_n = 0
        for name, (hits, n) in counts[doc_type].items():
            fields[doc_type][name] = {"accuracy": _ratio(hits, n), "correct": hits, "n": n}
            if name in FIELDS_BY_TYPE.get(doc_type, ()):
                type_hits, type_n = type_hits + hits, type_n + n
        per_type[doc_type] = {"accuracy": _ratio(type_hits, type_n), "n": type_n}
        total_hits, total_n = total_hits + type_hits, total_n + type_n
    est, reported_in, reported_out = tokens
    return {
        "folder": str(folder), "extractor": extractor, "documents": n_docs,
        "errors": errors, "elapsed_s": round(elapsed, 3),
        "docs_per_s": round(n_docs / elapsed, 2) if elapsed > 0 else None,
        "classification": {"accuracy": _ratio(classified, n_docs), "correct": classified,
                           "n": n_docs},
        "fields": fields, "per_type": per_type,
        "overall": {"accuracy": _ratio(total_hits, total_n), "correct": total_hits, "n": total_n},
        "tokens": {"estimated_input": est,
                   "estimated_input_per_doc": round(est / n_docs) if n_docs else 0,
                   "reported_input": reported_in, "reported_output": reported_out},
        "failures": dict(failures),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:5.1f}%"


def format_table(report: dict, show_failures: int = 0) -> str:
    lines = [f"extractor={report['extractor']}  documents={report['documents']}  "
             f"folder={report['folder']}", "",
             f"{'document type':<22}{'field':<22}{'accuracy':>9}{'n':>7}", "-" * 60]
    for doc_type, fields in report["fields"].items():
        main = FIELDS_BY_TYPE.get(doc_type, ())
        ordered = [f for f in main if f in fields] + sorted(f for f in fields if f not in main)
        for name in ordered:
            cell = fields[name]
            label = name if name in main else f"  {name}"
            lines.append(f"{doc_type:<22}{label:<22}{_pct(cell['accuracy']):>9}{cell['n']:>7}")
        summary = report["per_type"][doc_type]
        lines.append(f"{doc_type:<22}{'(all fields)':<22}{_pct(summary['accuracy']):>9}"
                     f"{summary['n']:>7}")
        lines.append("")
    cls, overall, tokens = report["classification"], report["overall"], report["tokens"]
    rate = report["docs_per_s"]
    lines += [
        f"{'overall (all fields)':<44}{_pct(overall['accuracy']):>9}{overall['n']:>7}",
        f"{'classification':<44}{_pct(cls['accuracy']):>9}{cls['n']:>7}",
        f"throughput: {rate if rate is not None else '-'} docs/s "
        f"({report['elapsed_s']:.1f}s extracting, {len(report['errors'])} errors)",
        f"tokens: ~{tokens['estimated_input']:,} estimated input "
        f"(~{tokens['estimated_input_per_doc']:,}/doc, text chars/{CHARS_PER_TOKEN}); "
        f"reported by extractor: {tokens['reported_input']:,} in / "
        f"{tokens['reported_output']:,} out",
    ]
    for error in report["errors"][:10]:
        lines.append(f"  error {error['document']}: {error['error']}")
    lines += ["", format_sources(report), "", format_sources(report, "languages"), "",
              format_reliability(report)]
    if show_failures:
        lines += ["", "sample failures (truth -> predicted):"]
        for key, items in sorted(report["failures"].items()):
            for item in items[:show_failures]:
                lines.append(f"  {key:<32} {item['document']:<30} "
                             f"{json.dumps(item['truth'], ensure_ascii=False)[:60]} -> "
                             f"{json.dumps(item['predicted'], ensure_ascii=False)[:60]}")
    return "\n".join(lines)


def format_reliability(report: dict) -> str:
    """Confidence bucket -> share of found fields right, per source (text layer or OCR)."""
    lines = ["reliability (found fields)", f"{'source':<12}{'confidence':<12}{'right':>8}{'n':>7}",
             "-" * 39]
    for source, rows in report.get("reliability", {}).items():
        for row in rows:
            if row["n"]:
                lines.append(f"{source:<12}{row['bucket']:<12}{_pct(row['share']):>8}"
                             f"{row['n']:>7}")
    return "\n".join(lines)


def format_sources(report: dict, key: str = "sources") -> str:
    """The five core invoice fields and classification, one row per source (or language)."""
    short = {"issuer": "issuer", "invoice_number": "number", "issue_date": "date",
             "total": "total", "currency": "currency"}
    header = (f"{'source':<24}{'docs':>5}{'class.':>8}"
              + "".join(f"{short[n]:>9}" for n in CORE_FIELDS) + f"{'core':>8}")
    lines = [f"core invoice fields per {key[:-1]}", header, "-" * len(header)]
    for source, row in report.get(key, {}).items():
        cells = "".join(f"{_pct(row['fields'].get(n, {}).get('accuracy')):>9}"
                        for n in CORE_FIELDS)
        lines.append(f"{source:<24}{row['documents']:>5}{_pct(row['classification']):>8}"
                     f"{cells}{_pct(row['core']['accuracy']):>8}")
    return "\n".join(lines)


def _default_extractor() -> ExtractFn:
    from agents.extract import extract_document

    return extract_document


def main(argv: list[str] | None = None, extract_fn: ExtractFn | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="+", help="directories of NAME.pdf + NAME.json files")
    parser.add_argument("--extractor", default="offline", help="offline or llm (default offline)")
    parser.add_argument("--limit", type=int, default=None, help="score only the first N documents")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--failures", type=int, default=0, metavar="K",
                        help="also print up to K sample mismatches per field")
    args = parser.parse_args(argv)
    for folder in args.folder:
        if not Path(folder).is_dir():
            parser.error(f"{folder} is not a directory")
    if extract_fn is None:
        try:
            extract_fn = _default_extractor()
        except ImportError as exc:
            print(f"cannot import agents.extract.extract_document: {exc}", file=sys.stderr)
            return 2
    report = run_benchmark(args.folder, extract_fn, args.extractor, args.limit,
                           keep_failures=max(5, args.failures))
    if not report["documents"]:
        print(f"no PDF with a truth file in {', '.join(args.folder)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        print(format_table(report, args.failures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
