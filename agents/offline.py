"""The offline extractor: deterministic rules, no network, token use estimated from the text."""

from __future__ import annotations

from typing import Any

from agents.classify import Classification
from agents.confidence import calibrate, document_confidence, needs_review, sums_check
from agents.fields import Extraction, FieldValue, Usage, empty_fields
from agents.layout import DocView
from agents.pdf import Document
from agents.prompt import build_messages, chunk_pages, estimate_json, estimate_messages
from agents.rules_contract import extract_contract
from agents.rules_financial import extract_financial
from agents.rules_invoice import extract_invoice
from agents.tracing import cost_of, record_usage

_RULES = {
    "invoice": extract_invoice,
    "contract": extract_contract,
    "financial_statement": extract_financial,
}


def estimate_usage(document: Document, type_hint: str | None, answer: Any) -> tuple[int, int]:
    """Tokens the LLM extractor would have used: its prompts for every chunk, and the answer."""
    chunks = chunk_pages(document.pages)
    input_tokens = sum(
        estimate_messages(build_messages(chunk, document.page_count, i, len(chunks),
                                         type_hint, type_hint if i else None))
        for i, chunk in enumerate(chunks)
    )
    return input_tokens, estimate_json(answer)


def page_sizes(document: Document) -> list[list[float]]:
    """Each page's [width, height] in points, for viewers that scale evidence boxes."""
    return [[round(p.width, 1), round(p.height, 1)] for p in document.pages]


def offline_fields(view: DocView, doc_type: str) -> dict[str, FieldValue]:
    """The rules' fields for a document of `doc_type` (no fields for "other")."""
    rules = _RULES.get(doc_type)
    return rules(view) if rules else empty_fields(doc_type)


class OfflineExtractor:
    """Rule-based extraction for layouts never seen before, in en/it/fr/de/nl/es/pt."""

    name = "offline"

    def extract(self, document: Document, classification: Classification, usage: Usage,
                tracer: Any) -> Extraction:
        doc_type = classification.document_type
        inputs = {"extractor": self.name, "document_type": doc_type}
        with tracer.span("extract", "PARSER", inputs) as span:
            view = DocView.of(document.pages)
            fields = offline_fields(view, doc_type)
            ocr = set(document.ocr_pages)
            signals = calibrate(view, doc_type, fields, "ocr" if ocr else "rules", ocr)
            failed = doc_type == "invoice" and sums_check(fields) is False
            confidence = document_confidence(doc_type, fields, classification.confidence,
                                             failed)
            answer = {"document_type": doc_type,
                      "fields": {n: fv.as_dict() for n, fv in fields.items()}}
            input_tokens, output_tokens = estimate_usage(document, doc_type, answer)
            cost = cost_of(input_tokens, output_tokens)
            usage.add(input_tokens, output_tokens, cost)
            usage.estimated = True
            record_usage(span, input_tokens, output_tokens, cost, estimated=True)
            extraction = Extraction(
                document_type=doc_type,
                fields=fields,
                confidence=confidence,
                extractor=self.name,
                model=None,
                usage=usage,
                page_sizes=page_sizes(document),
                needs_review=needs_review(confidence),
                signals=signals,
            )
            span.set_outputs({"fields_found": sum(fv.value is not None for fv in fields.values()),
                              "confidence": extraction.confidence})
        return extraction
