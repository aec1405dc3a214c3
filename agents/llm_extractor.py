"""The LLM extractor: page chunks to a chat model, validated JSON answers, one repair retry."""

from __future__ import annotations

from typing import Any

from agents.classify import DOCUMENT_TYPES, Classification
from agents.errors import ExtractionError
from agents.fields import (
    FIELD_SPECS, Extraction, FieldValue, Usage, empty_fields, overall_confidence, validate_fields,
)
from agents.llm import ChatClient, parse_json_object
from agents.pdf import Document
from agents.prompt import build_messages, chunk_pages

_REPAIR = ("Your reply could not be used: {problems}. Reply again with only the JSON object, "
           "following the rules exactly (ISO dates, plain numbers, ISO 4217 currency codes).")


class InvalidAnswer(ValueError):
    """A model reply that is not valid JSON or does not match the field schema."""


def parse_answer(content: str, fixed_type: str | None) -> tuple[str, dict[str, FieldValue]]:
    """The document type and validated fields of a reply, or InvalidAnswer listing problems."""
    try:
        data = parse_json_object(content)
    except ValueError as exc:
        raise InvalidAnswer(f"not a JSON object ({exc})") from None
    doc_type = fixed_type or data.get("document_type")
    if doc_type not in DOCUMENT_TYPES:
        raise InvalidAnswer(f"document_type must be one of {', '.join(DOCUMENT_TYPES)}")
    fields, problems = validate_fields(doc_type, data.get("fields", {}))
    if problems:
        raise InvalidAnswer("; ".join(problems))
    return doc_type, fields


def merge_fields(into: dict[str, FieldValue], new: dict[str, FieldValue]) -> None:
    """Combine a later chunk's fields: lists grow, single values keep the more confident one."""
    for name, fv in new.items():
        current = into.get(name)
        if fv.value is None:
            continue
        if current is None or current.value is None:
            into[name] = fv
        elif name == "line_items":
            confidence = min(current.confidence, fv.confidence)
            into[name] = FieldValue(current.value + fv.value, confidence)
        elif name == "parties":
            joined = current.value + [p for p in fv.value if p not in current.value]
            into[name] = FieldValue(joined, max(current.confidence, fv.confidence))
        elif fv.confidence > current.confidence:
            into[name] = fv


class LLMExtractor:
    """Extraction by a chat model, one call per chunk of pages that fits the context budget."""

    name = "llm"

    def __init__(self, client: ChatClient | None = None):
        self._client = client

    def extract(self, document: Document, classification: Classification, usage: Usage,
                tracer: Any) -> Extraction:
        client = self._client or ChatClient.from_env()
        try:
            return self._extract(client, document, classification, usage, tracer)
        finally:
            if self._client is None:
                client.close()

    def _extract(self, client: ChatClient, document: Document, classification: Classification,
                 usage: Usage, tracer: Any) -> Extraction:
        chunks = chunk_pages(document.pages)
        with tracer.span("extract", "CHAIN", {"extractor": self.name, "chunks": len(chunks),
                                                   "model": client.endpoint.model}) as span:
            doc_type: str | None = None
            fields: dict[str, FieldValue] = {}
            for i, chunk in enumerate(chunks):
                messages = build_messages(chunk, document.page_count, i, len(chunks),
                                          classification.document_type, doc_type)
                answer_type, answer_fields = self._ask(client, messages, doc_type, usage, tracer)
                if doc_type is None:
                    doc_type = answer_type
                    fields = empty_fields(doc_type)
                    if doc_type == "other":
                        break  # nothing to extract from the remaining pages
                merge_fields(fields, answer_fields)
            doc_type = doc_type or "other"
            # Agreement between the model and the keyword classifier is evidence of its own.
            agrees = doc_type == classification.document_type
            type_confidence = max(classification.confidence, 0.9) if agrees else 0.75
            fields = {n: fields.get(n, FieldValue()) for n in FIELD_SPECS[doc_type]}
            extraction = Extraction(
                document_type=doc_type,
                fields=fields,
                confidence=overall_confidence(fields, type_confidence),
                extractor=self.name,
                model=client.endpoint.model,
                usage=usage,
            )
            span.set_outputs({"document_type": doc_type, "confidence": extraction.confidence})
        return extraction

    def _ask(self, client: ChatClient, messages: list[dict], fixed_type: str | None,
             usage: Usage, tracer: Any) -> tuple[str, dict[str, FieldValue]]:
        reply = client.complete(messages, tracer, usage)
        try:
            return parse_answer(reply.content, fixed_type)
        except InvalidAnswer as exc:
            problems = str(exc)
        # One repair round: show the model its reply and what was wrong with it.
        repair = messages + [
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": _REPAIR.format(problems=problems)},
        ]
        second = client.complete(repair, tracer, usage)
        try:
            return parse_answer(second.content, fixed_type)
        except InvalidAnswer as exc:
            raise ExtractionError(
                f"the model returned an invalid answer twice (first: {problems}; after "
                f"repair: {exc})") from None
