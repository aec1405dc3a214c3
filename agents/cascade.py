"""The cascade: what the document states exactly first, then the offline rules, then the model
only for the fields still in doubt.

1. An e-invoice XML (uploaded, or embedded in a PDF/A-3) gives exact fields at no token cost;
   for a PDF its page is read by the rules too, and where page and XML disagree on the invoice
   number, date or total, that is an audit finding.
2. The offline rules read the page text.
3. The fields whose confidence is below the agent's review threshold go to the model, with the
   page text and the rules' candidates; an e-invoice never goes to the model.

Each field records the stage that produced it; the result records the tokens saved against
running the model on the whole document.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Any

from agents.amounts import money_values
from agents.arithmetic import answer_problems, lower_confidence
from agents.classify import Classification
from agents.confidence import (
    REVIEW_THRESHOLD,
    attach_evidence,
    calibrate,
    document_confidence,
    needs_review,
    sums_check,
)
from agents.dates import find_dates
from agents.einvoice import XML_CONFIDENCE, EInvoice
from agents.fields import CORE_FIELDS, FIELD_SPECS, Extraction, FieldValue, Usage, empty_fields
from agents.layout import DocView
from agents.llm import ChatClient
from agents.llm_extractor import LLMExtractor, merge_fields
from agents.offline import estimate_usage, offline_fields, page_sizes
from agents.pdf import Document
from agents.prompt import build_field_messages, chunk_pages, estimate_json, estimate_messages, system_prompt

DEFAULT_THRESHOLD = REVIEW_THRESHOLD
# The fields an auditor compares between the XML and the page a person reads.
CROSS_CHECKED = ("invoice_number", "issue_date", "total")


def review_threshold() -> float:
    """The agent's review threshold (QUIRE_REVIEW_THRESHOLD, set from its configuration)."""
    raw = os.environ.get("QUIRE_REVIEW_THRESHOLD", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_THRESHOLD
    except ValueError:
        return DEFAULT_THRESHOLD
    return min(max(value, 0.0), 1.0)


def xml_fields(einvoice: EInvoice) -> dict[str, FieldValue]:
    """The invoice fields an e-invoice states, exact (stage "xml"); the rest not found."""
    fields = empty_fields("invoice")
    for name, value in einvoice.fields.items():
        if name in fields:
            fields[name] = FieldValue(value, XML_CONFIDENCE, "xml")
    return fields


def doubtful_fields(fields: dict[str, FieldValue], threshold: float) -> list[str]:
    """The fields to ask the model for: those below the threshold, once one is worth a call.

    A call is worth it for a core field (or the currency) below the threshold, or for any value the
    rules read with doubt. An optional field the rules did not find (many invoices have no due date)
    does not start a call on its own, but is asked for when a call is made anyway.
    """
    below = [n for n, fv in fields.items() if fv.stage != "xml" and fv.confidence < threshold]
    worth = any(n in CORE_FIELDS["invoice"] or fields[n].value is not None for n in below)
    return below if worth else []


def cross_check(einvoice: EInvoice, page_text: str, page_fields: dict[str, FieldValue],
                dayfirst: bool = True) -> list[dict[str, Any]]:
    """Findings where the visible page contradicts the XML.

    A value the XML states that appears anywhere on the page agrees, whatever the rules read; a
    finding needs the rules to have read a different value and the XML's value to be absent.
    """
    findings = []
    for name in CROSS_CHECKED:
        stated = einvoice.fields.get(name)
        read = page_fields.get(name)
        if stated is None or read is None or read.value is None or _same(name, stated, read.value):
            continue
        if _on_page(name, stated, page_text, dayfirst):
            continue
        findings.append({"kind": "xml_page_mismatch", "field": name, "xml": stated, "page": read.value})
    return findings


def _normal_id(text: str) -> str:
    return re.sub(r"[\s\-_/.]", "", str(text)).casefold()


def _same(name: str, a: Any, b: Any) -> bool:
    if name == "total":
        return abs(float(a) - float(b)) < 0.005
    if name == "invoice_number":
        return _normal_id(a) == _normal_id(b)
    return a == b


def _on_page(name: str, stated: Any, text: str, dayfirst: bool) -> bool:
    if name == "total":
        return any(abs(a.value - float(stated)) < 0.005 for a in money_values(text))
    if name == "issue_date":
        return any(d.iso == stated for d in find_dates(text, dayfirst))
    return _normal_id(stated) in _normal_id(text)


def full_llm_tokens(document: Document, doc_type: str, answer: dict) -> int:
    """Tokens the LLM extractor would spend reading the whole document (the cascade's yardstick)."""
    if document.pages:
        return sum(estimate_usage(document, doc_type, answer))
    # An XML alone: the instructions, the XML as text and the answer.
    return estimate_messages([{"role": "system", "content": system_prompt()}]) + \
        (document.einvoice.tokens if document.einvoice else 0) + estimate_json(answer)


class CascadeExtractor:
    """XML, then rules, then the model for doubtful fields only (`extractor = "cascade"`)."""

    def __init__(self, client: ChatClient | None = None, *, use_llm: bool = True,
                 threshold: float | None = None, name: str = "cascade"):
        self._client = client
        self.use_llm = use_llm
        self.threshold = threshold
        self.name = name

    def extract(self, document: Document, classification: Classification, usage: Usage,
                tracer: Any) -> Extraction:
        threshold = review_threshold() if self.threshold is None else self.threshold
        einvoice = document.einvoice
        doc_type = "invoice" if einvoice else classification.document_type
        with tracer.span("extract", "CHAIN", {"extractor": self.name, "document_type": doc_type,
                                               "threshold": threshold}) as span:
            page_fields: dict[str, FieldValue] = {}
            view = DocView.of(document.pages) if document.pages else None
            rules_stage = "ocr" if document.ocr_pages and len(document.ocr_pages) == document.page_count \
                else "rules"
            if view is not None and FIELD_SPECS.get(doc_type):
                page_fields = offline_fields(view, doc_type)
                calibrate(view, doc_type, page_fields, rules_stage, set(document.ocr_pages))
            fields = xml_fields(einvoice) if einvoice else empty_fields(doc_type)
            if einvoice and view is not None:
                # Where the page shows what the XML states; the stage stays "xml".
                stated = {n: fv for n, fv in fields.items() if fv.value is not None}
                attach_evidence(view, doc_type, stated, "xml")
            findings = cross_check(einvoice, view.text, page_fields, view.dayfirst) \
                if einvoice and view is not None else []
            for name, fv in page_fields.items():
                if name in fields and fields[name].value is None and fv.value is not None:
                    fields[name] = replace(fv, stage=rules_stage)  # evidence and all
            doubtful = doubtful_fields(fields, threshold)
            model = None
            if doubtful and self.use_llm and not einvoice and view is not None:  # the document has pages
                model = self._ask_model(document, doc_type, fields, doubtful, usage, tracer)
                answered = {n: fields[n] for n in doubtful if fields[n].stage == "llm"}
                attach_evidence(view, doc_type, answered, "llm")
                lower_confidence(fields, [n for n in answer_problems(doc_type, fields)
                                          if fields[n].stage != "xml"])
            answer = {"document_type": doc_type, "fields": {n: fv.as_dict() for n, fv in fields.items()}}
            spent = usage.input_tokens + usage.output_tokens
            saved = max(0, full_llm_tokens(document, doc_type, answer) - spent)
            type_confidence = 1.0 if einvoice else classification.confidence
            failed = doc_type == "invoice" and sums_check(fields) is False
            confidence = document_confidence(doc_type, fields, type_confidence, failed)
            extra: dict[str, Any] = {"tokens_saved": saved}
            if einvoice:
                extra["source"] = einvoice.source()
            if findings:
                extra["findings"] = findings
            extraction = Extraction(document_type=doc_type, fields=fields, confidence=confidence,
                                    extractor=self.name, model=model, usage=usage, extra=extra,
                                    page_sizes=page_sizes(document) if document.pages else None,
                                    needs_review=bool(findings) or needs_review(confidence, threshold))
            span.set_outputs({"stages": {n: fv.stage for n, fv in fields.items() if fv.stage},
                              "asked_model": doubtful if model else [], "tokens_saved": saved,
                              "findings": len(findings), "confidence": confidence})
        return extraction

    def _ask_model(self, document: Document, doc_type: str, fields: dict[str, FieldValue],
                   doubtful: list[str], usage: Usage, tracer: Any) -> str:
        """Asks the model for the doubtful fields only; its answers replace the rules' where given."""
        client = self._client or ChatClient.from_env()
        try:
            candidates = {n: {"value": fields[n].value, "confidence": round(fields[n].confidence, 3),
                              "evidence": getattr(fields[n], "evidence", None)} for n in doubtful}
            chunks = chunk_pages(document.pages)
            asker = LLMExtractor(client)
            answers: dict[str, FieldValue] = {}
            for i, chunk in enumerate(chunks):
                messages = build_field_messages(chunk, document.page_count, i, len(chunks), doc_type,
                                                doubtful, candidates)
                _, got = asker.ask(client, messages, doc_type, usage, tracer)
                merge_fields(answers, {n: got[n] for n in doubtful if n in got})
            for name, fv in answers.items():
                if fv.value is None:
                    continue
                previous = fields[name]
                # The model agreeing with the rules is two readings of one value.
                confidence = max(fv.confidence, previous.confidence) if fv.value == previous.value \
                    else fv.confidence
                fields[name] = FieldValue(fv.value, confidence, "llm")
            return client.endpoint.model
        finally:
            if self._client is None:
                client.close()
