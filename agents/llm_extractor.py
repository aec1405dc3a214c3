"""The LLM extractor: page chunks to a chat model, validated and cross-checked JSON answers.

The offline rules' reading is given to the model as a hint; every answer goes through the same
schema validation and arithmetic and sanity checks as the offline result, and gets one repair
round when it fails them (the model sees its reply and the list of problems).
"""

from __future__ import annotations

from typing import Any

from agents.arithmetic import answer_problems, lower_confidence
from agents.classify import DOCUMENT_TYPES, Classification
from agents.confidence import attach_evidence, document_confidence, needs_review, sums_check
from agents.errors import ExtractionError
from agents.fields import (
    FIELD_SPECS,
    Extraction,
    FieldValue,
    Usage,
    empty_fields,
    validate_fields,
)
from agents.layout import DocView
from agents.llm import ChatClient, parse_json_object
from agents.offline import offline_fields, page_sizes
from agents.pdf import Document
from agents.prompt import build_messages, chunk_pages

_REPAIR = ("Your reply could not be used: {problems}. Reply again with only the JSON object, "
           "following the rules exactly (ISO dates, plain numbers, ISO 4217 currency codes).")
_RECHECK = ("Some values in your reply fail the document's checks: {problems}. Read the document "
            "again and reply with the whole corrected JSON object; where the document itself is "
            "inconsistent, keep what it prints and lower that field's confidence.")


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
        hint = _offline_hint(document, classification.document_type)
        with tracer.span("extract", "CHAIN", {"extractor": self.name, "chunks": len(chunks),
                                                   "model": client.endpoint.model}) as span:
            doc_type: str | None = None
            fields: dict[str, FieldValue] = {}
            for i, chunk in enumerate(chunks):
                messages = build_messages(chunk, document.page_count, i, len(chunks),
                                          classification.document_type, doc_type,
                                          hint=hint if i == 0 else None)
                answer_type, answer_fields = self.ask(client, messages, doc_type, usage, tracer)
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
            if len(chunks) > 1:
                # The merged answer is checked again: chunks answered separately can disagree.
                lower_confidence(fields, answer_problems(doc_type, fields))
            attach_evidence(DocView.of(document.pages), doc_type, fields, "llm")
            failed = doc_type == "invoice" and sums_check(fields) is False
            confidence = document_confidence(doc_type, fields, type_confidence, failed)
            extraction = Extraction(
                document_type=doc_type,
                fields=fields,
                confidence=confidence,
                extractor=self.name,
                model=client.endpoint.model,
                usage=usage,
                page_sizes=page_sizes(document),
                needs_review=needs_review(confidence),
            )
            span.set_outputs({"document_type": doc_type, "confidence": extraction.confidence})
        return extraction

    def ask(self, client: ChatClient, messages: list[dict], fixed_type: str | None,
            usage: Usage, tracer: Any) -> tuple[str, dict[str, FieldValue]]:
        """One model call and its validated fields, with a repair round when they fail a check."""
        reply = client.complete(messages, tracer, usage)
        try:
            doc_type, fields = parse_answer(reply.content, fixed_type)
        except InvalidAnswer as exc:
            problems = str(exc)
            return self._repair(client, messages, reply.content, problems, fixed_type, usage, tracer)
        failed = answer_problems(doc_type, fields)
        if not failed:
            return doc_type, fields
        # One repair round for answers that parse but fail the arithmetic and sanity checks.
        listed = "; ".join(f"{name}: {why}" for name, why in failed.items())
        repair = [
            *messages,
            {"role": "assistant", "content": reply.content},
            {"role": "user", "content": _RECHECK.format(problems=listed)},
        ]
        second = client.complete(repair, tracer, usage)
        try:
            doc_type2, fields2 = parse_answer(second.content, fixed_type)
        except InvalidAnswer:
            lower_confidence(fields, failed)  # the repair broke the schema: keep the first, doubted
            return doc_type, fields
        lower_confidence(fields2, answer_problems(doc_type2, fields2))
        return doc_type2, fields2

    def _repair(self, client: ChatClient, messages: list[dict], content: str, problems: str,
                fixed_type: str | None, usage: Usage, tracer: Any) -> tuple[str, dict[str, FieldValue]]:
        # One repair round: show the model its reply and what was wrong with it.
        repair = [
            *messages,
            {"role": "assistant", "content": content},
            {"role": "user", "content": _REPAIR.format(problems=problems)},
        ]
        second = client.complete(repair, tracer, usage)
        try:
            doc_type, fields = parse_answer(second.content, fixed_type)
        except InvalidAnswer as exc:
            raise ExtractionError(
                f"the model returned an invalid answer twice (first: {problems}; after "
                f"repair: {exc})") from None
        lower_confidence(fields, answer_problems(doc_type, fields))
        return doc_type, fields


def _offline_hint(document: Document, type_hint: str) -> dict[str, Any] | None:
    """The offline rules' values for the classifier's type, for the model to verify."""
    try:
        fields = offline_fields(DocView.of(document.pages), type_hint)
    except Exception:  # a hint is optional: a rule failing on an odd layout must not stop the run
        return None
    found = {name: fv.value for name, fv in fields.items()
             if fv.value is not None and name != "line_items"}
    return found or None
