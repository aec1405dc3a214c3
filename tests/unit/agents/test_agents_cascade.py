"""The cascade: rules first, the model (a local fake) only for the fields below the threshold."""

import json

import pytest

from agents.cascade import CascadeExtractor, full_llm_tokens, review_threshold
from agents.classify import classify
from agents.cli import apply_run_settings, build_parser
from agents.confidence import REVIEW_THRESHOLD, calibrate
from agents.fields import FIELD_SPECS, Usage
from agents.layout import DocView
from agents.offline import offline_fields
from agents.pdf import parse_pdf
from agents.tracing import Tracer
from tests.unit.agents import agents_samples as samples
from tests.unit.agents.agents_fakes import FakeChatServer, completion


@pytest.fixture
def llm(monkeypatch):
    def configure(server: FakeChatServer) -> None:
        monkeypatch.setenv("QUIRE_LLM_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("QUIRE_LLM_MODEL", "fake-model")
        monkeypatch.setenv("QUIRE_LLM_PRICE_INPUT_PER_MTOK", "3")
        monkeypatch.setenv("QUIRE_LLM_PRICE_OUTPUT_PER_MTOK", "15")
    return configure


def _invoice():
    doc = parse_pdf(samples.invoice_it()[0], "invoice_it.pdf")
    view = DocView.of(doc.pages)
    rules = offline_fields(view, "invoice")
    calibrate(view, "invoice", rules, "rules", set())  # as the cascade reads them
    return doc, rules


def _split(rules) -> tuple[float, list[str]]:
    """A threshold between the rules' least and most confident readings, and the fields below it."""
    found = sorted(fv.confidence for fv in rules.values() if fv.value is not None)
    assert found[0] < found[-1], "the sample must give readings of different confidence"
    threshold = (found[0] + found[-1]) / 2
    return threshold, [n for n, fv in rules.items() if fv.confidence < threshold]


def test_the_model_is_asked_only_for_the_doubtful_fields(llm) -> None:
    doc, rules = _invoice()
    threshold, doubtful = _split(rules)
    assert doubtful and len(doubtful) < len(rules)
    answer = {"document_type": "invoice",
              "fields": {n: {"value": None, "confidence": 0} for n in doubtful}}
    answer["fields"][doubtful[0]] = {"value": rules[doubtful[0]].value, "confidence": 0.93}
    with FakeChatServer([(200, completion(json.dumps(answer), 900, 40))]) as server:
        llm(server)
        usage = Usage()
        extraction = CascadeExtractor(threshold=threshold).extract(doc, classify(doc.text), usage, Tracer())
    assert len(server.requests) == 1
    asked = server.requests[0]["messages"][1]["content"]
    assert f"Fill only these fields: {', '.join(doubtful)};" in asked
    for name in FIELD_SPECS["invoice"]:
        assert (f'"{name}": {{"value"' in asked) == (name in doubtful), name  # candidates: doubtful only
    assert "Rossi Forniture" in asked  # the page text goes with them
    stages = {n: fv.stage for n, fv in extraction.fields.items()}
    assert stages[doubtful[0]] == "llm"
    assert extraction.fields[doubtful[0]].confidence >= 0.93
    for name in doubtful[1:]:  # the model gave nothing: the rules' reading stays
        assert stages[name] == "rules" and extraction.fields[name].value == rules[name].value
    assert all(stages[n] == "rules" for n in rules if n not in doubtful)
    assert (usage.input_tokens, usage.output_tokens) == (900, 40)
    assert extraction.model == "fake-model" and extraction.extractor == "cascade"
    result = extraction.result(doc.page_count)
    full = full_llm_tokens(doc, "invoice", {"document_type": "invoice",
                                            "fields": result["fields"]})
    assert result["tokens_saved"] == full - 940 > 0
    assert result["fields"][doubtful[0]]["stage"] == "llm"


def test_nothing_doubtful_means_no_model_call(llm) -> None:
    doc, _rules = _invoice()
    with FakeChatServer([(200, completion("{}"))]) as server:
        llm(server)
        usage = Usage()
        extraction = CascadeExtractor(threshold=0.0).extract(doc, classify(doc.text), usage, Tracer())
    assert server.requests == []
    assert usage.input_tokens == usage.output_tokens == 0
    assert {fv.stage for fv in extraction.fields.values()} == {"rules"}
    assert extraction.extra["tokens_saved"] > 1000
    assert extraction.needs_review is False


def test_a_core_field_below_the_threshold_needs_review_when_the_model_is_not_asked() -> None:
    doc, _rules = _invoice()
    extraction = CascadeExtractor(use_llm=False, threshold=0.999).extract(doc, classify(doc.text), Usage(),
                                                                          Tracer())
    assert extraction.needs_review is True


def test_the_threshold_comes_from_the_command_line(monkeypatch) -> None:
    monkeypatch.delenv("QUIRE_REVIEW_THRESHOLD", raising=False)
    assert review_threshold() == REVIEW_THRESHOLD == 0.6  # the review queue's default too
    args = build_parser().parse_args(["run", "--document", "x.pdf", "--extractor", "cascade",
                                      "--review-threshold", "0.65"])
    apply_run_settings(args)
    assert args.extractor == "cascade" and review_threshold() == 0.65
    monkeypatch.setenv("QUIRE_REVIEW_THRESHOLD", "not a number")
    assert review_threshold() == 0.6


def test_an_optional_field_not_found_does_not_start_a_call_alone() -> None:
    from agents.cascade import doubtful_fields
    from agents.fields import FieldValue, empty_fields

    fields = empty_fields("invoice")
    for name in ("issuer", "invoice_number", "issue_date", "total", "currency", "subtotal", "tax", "line_items"):
        fields[name] = FieldValue("x", 0.95, "rules")
    assert doubtful_fields(fields, 0.8) == []  # only the due date is missing: many invoices have none
    fields["issuer"] = FieldValue("x", 0.5, "rules")
    assert doubtful_fields(fields, 0.8) == ["issuer", "due_date"]
    fields["issuer"] = FieldValue("x", 0.95, "rules")
    fields["tax"] = FieldValue(1.0, 0.5, "rules")  # a value read with doubt is worth a call
    assert doubtful_fields(fields, 0.8) == ["due_date", "tax"]
    fields["tax"] = FieldValue(1.0, 0.5, "xml")  # never the XML's
    assert doubtful_fields(fields, 0.8) == []
