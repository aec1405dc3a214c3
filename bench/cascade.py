"""What the cascade would send to the model: per folder of documents, how many need the model at all,
how many fields it is asked for, and its tokens against the LLM extractor reading everything.

Usage:
    python bench/cascade.py FOLDER [FOLDER ...] [--threshold 0.8]

No model is called: the cascade runs with the model stage off, and the tokens it would have spent
are estimated the way the offline extractor estimates the LLM extractor's (agents/prompt.py): the
field-only prompt of every chunk for a document with a doubtful field, and an answer holding only
those fields. The figure to read is `cascade/full`, the share of the LLM extractor's tokens the
cascade spends; the forecast's static share for cascade agents (schema/forecast.py) is set from it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.cascade import CascadeExtractor, doubtful_fields, full_llm_tokens
from agents.classify import classify
from agents.errors import DocumentError
from agents.fields import Usage
from agents.pdf import read_document
from agents.prompt import build_field_messages, chunk_pages, estimate_json, estimate_messages
from agents.tracing import Tracer

SUFFIXES = (".pdf", ".xml", ".p7m")


def measure(path: Path, threshold: float) -> dict | None:
    """One document's doubtful fields and the tokens of the cascade and of the LLM extractor."""
    try:
        document = read_document(str(path))
    except DocumentError:
        return None
    classification = classify(document.text) if not document.einvoice else None
    extractor = CascadeExtractor(use_llm=False, threshold=threshold)
    extraction = extractor.extract(document, classification or _invoice(), Usage(), Tracer())
    doubtful = doubtful_fields(extraction.fields, threshold)
    answer = {"document_type": extraction.document_type,
              "fields": {n: fv.as_dict() for n, fv in extraction.fields.items()}}
    full = full_llm_tokens(document, extraction.document_type, answer)
    spent = 0
    if doubtful and document.pages and not document.einvoice:
        chunks = chunk_pages(document.pages)
        candidates = {n: extraction.fields[n].as_dict() for n in doubtful}
        spent = sum(estimate_messages(build_field_messages(c, document.page_count, i, len(chunks),
                                                           extraction.document_type, doubtful, candidates))
                    for i, c in enumerate(chunks))
        spent += estimate_json({"fields": {n: answer["fields"][n] for n in doubtful}})
    return {"doubtful": doubtful, "full": full, "spent": spent, "einvoice": bool(document.einvoice)}


def _invoice():
    from agents.classify import Classification

    return Classification("invoice", 1.0, {"invoice": 1.0})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="+")
    parser.add_argument("--threshold", type=float, default=0.8)
    args = parser.parse_args(argv)
    print(f"threshold {args.threshold}")
    print(f"{'folder':<32} {'docs':>5} {'e-inv':>5} {'to model':>8} {'fields asked':>12} {'cascade/full':>12}")
    for folder in args.folder:
        rows = [m for p in sorted(Path(folder).rglob("*")) if p.suffix.lower() in SUFFIXES
                for m in [measure(p, args.threshold)] if m is not None]
        if not rows:
            continue
        asked = [r for r in rows if r["spent"]]
        fields = sum(len(r["doubtful"]) for r in asked) / max(1, len(asked))
        share = sum(r["spent"] for r in rows) / max(1, sum(r["full"] for r in rows))
        print(f"{folder[-32:]:<32} {len(rows):>5} {sum(r['einvoice'] for r in rows):>5} "
              f"{len(asked):>8} {fields:>12.1f} {share:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
