"""Generates a deterministic corpus of synthetic business PDFs with ground-truth JSON beside each.

Usage:
    python bench/corpus.py OUT_DIR --count N --seed S [--max-pages P]
                           [--kinds invoice,contract,financial_statement]

Each document is written as ``NNNN_KIND.pdf`` plus ``NNNN_KIND.json`` in the ground-truth format
of docs/CONTRACTS.md: ``{"document_type", "language", "pages", "fields"}`` with the same field
names and value types as an extraction result's ``fields[*].value``:

- dates are ISO ``YYYY-MM-DD`` whatever the rendering (``01/03/2024``, ``1er mars 2024``, ...);
- amounts are plain numbers in full currency units, even when a statement prints them
  "in thousands"; an invoice's ``subtotal + tax == total`` exactly and every line item's
  ``amount == round(quantity * unit_price, 2)``;
- ``currency`` is the ISO 4217 code even when the PDF shows a symbol (€, $, £);
- ``due_date`` is ``null`` on invoices payable on receipt;
- ``term_months`` is the initial contract term in months ("two (2) years" -> 24), not any
  renewal period;
- ``governing_law`` is a short English jurisdiction name: the country for national law
  ("Italy", "France", "Germany", "Switzerland"), the state for US state law ("New York",
  "Delaware", "California") and "England and Wales" for English law;
- ``parties`` lists the contracting companies' names in the order they are introduced.

The same ``--seed`` (and options) always produce byte-identical files.  The euro sign needs a
Unicode font: DejaVu from matplotlib's bundled fonts or /usr/share/fonts; documents that use a
core PDF font (or every document, where no DejaVu is found) print "EUR" instead.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script: make the repository root importable so that `bench.*` resolves.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus_contract import generate_contract
from bench.corpus_invoice import generate_invoice
from bench.corpus_statement import generate_statement

GENERATORS = {
    "invoice": generate_invoice,
    "contract": generate_contract,
    "financial_statement": generate_statement,
}
# Half invoices, a quarter each of the others; any three consecutive documents cover all kinds.
KIND_CYCLE = ("invoice", "contract", "financial_statement", "invoice")


def kind_for(index: int, kinds: tuple[str, ...]) -> str:
    cycle = [kind for kind in KIND_CYCLE if kind in kinds]
    return cycle[index % len(cycle)]


def document_name(index: int, kind: str) -> str:
    return f"{index:04d}_{kind}"


def generate_document(kind: str, seed: int, index: int, max_pages: int = 200) -> tuple[bytes, dict]:
    """PDF bytes and ground truth for one document; a pure function of its arguments."""
    if max_pages < 1:
        raise ValueError("max_pages must be at least 1")
    rng = random.Random(f"quire-bench:{seed}:{index}:{kind}")
    return GENERATORS[kind](rng, max_pages)


def generate_corpus(out_dir: str | Path, count: int, seed: int, max_pages: int = 200,
                    kinds: tuple[str, ...] = tuple(GENERATORS)) -> list[Path]:
    """Write count documents and their truth files; returns the PDF paths in order."""
    unknown = set(kinds) - set(GENERATORS)
    if unknown or not kinds:
        raise ValueError(f"unknown document kinds: {sorted(unknown) or 'none given'}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        kind = kind_for(index, kinds)
        data, truth = generate_document(kind, seed, index, max_pages)
        name = document_name(index, kind)
        (out / f"{name}.pdf").write_bytes(data)
        (out / f"{name}.json").write_text(json.dumps(truth, ensure_ascii=False, indent=2) + "\n",
                                          encoding="utf-8")
        paths.append(out / f"{name}.pdf")
    return paths


def _parse_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [kind for kind in kinds if kind not in GENERATORS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown kind(s) {unknown}; choose from {', '.join(GENERATORS)}")
    return kinds


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", help="directory to write NAME.pdf + NAME.json into")
    parser.add_argument("--count", type=int, required=True, help="number of documents")
    parser.add_argument("--seed", type=int, required=True, help="seed; same seed, same corpus")
    parser.add_argument("--max-pages", type=_positive, default=200,
                        help="upper bound on pages per document (default 200)")
    parser.add_argument("--kinds", type=_parse_kinds, default=tuple(GENERATORS),
                        help="comma-separated subset of " + ",".join(GENERATORS))
    args = parser.parse_args(argv)
    if args.count < 0:
        parser.error("--count must not be negative")
    started = time.perf_counter()
    paths = generate_corpus(args.out_dir, args.count, args.seed, args.max_pages, args.kinds)
    kinds, languages, pages = Counter(), Counter(), 0
    for path in paths:
        truth = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        kinds[truth["document_type"]] += 1
        languages[truth["language"]] += 1
        pages += truth["pages"]
    print(f"wrote {len(paths)} documents ({pages} pages) to {args.out_dir} in "
          f"{time.perf_counter() - started:.1f}s")
    print("  kinds: " + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
    print("  languages: " + ", ".join(f"{k}={v}" for k, v in sorted(languages.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
