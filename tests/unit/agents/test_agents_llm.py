"""The LLM extractor against a local OpenAI-compatible server: usage, repair, retries, chunks."""

import json
import time

import pytest

from agents.classify import classify
from agents.errors import ConfigurationError, ExtractionError
from agents.fields import Usage
from agents.llm import ChatClient, Endpoint
from agents.llm_extractor import LLMExtractor, parse_answer
from agents.pdf import parse_pdf
from agents.tracing import Tracer
from tests.unit.agents import agents_samples as samples
from tests.unit.agents.agents_fakes import FakeChatServer, completion

INVOICE_ANSWER = {
    "document_type": "invoice",
    "fields": {
        "issuer": {"value": "Rossi Forniture S.r.l.", "confidence": 0.95},
        "invoice_number": {"value": "FT-2024/0042", "confidence": 0.97},
        "issue_date": {"value": "2024-03-01", "confidence": 0.9},
        "due_date": {"value": "2024-03-31", "confidence": 0.9},
        "currency": {"value": "EUR", "confidence": 0.99},
        "subtotal": {"value": 1200, "confidence": 0.9},
        "tax": {"value": 264.0, "confidence": 0.9},
        "total": {"value": 1464.0, "confidence": 0.95},
        "line_items": {"value": [{"description": "Consulenza tecnica", "quantity": 2,
                                  "unit_price": 500, "amount": 1000}], "confidence": 0.8},
    },
}


@pytest.fixture
def llm_env(monkeypatch):
    def configure(server: FakeChatServer) -> None:
        monkeypatch.setenv("QUIRE_LLM_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("QUIRE_LLM_API_KEY", "test-key")
        monkeypatch.setenv("QUIRE_LLM_MODEL", "fake-model")
        monkeypatch.setenv("QUIRE_LLM_PRICE_INPUT_PER_MTOK", "3")
        monkeypatch.setenv("QUIRE_LLM_PRICE_OUTPUT_PER_MTOK", "15")
    return configure


def _run(name: str = "invoice_it", usage: Usage | None = None):
    doc = parse_pdf(getattr(samples, name)()[0], f"{name}.pdf")
    usage = usage if usage is not None else Usage()
    extraction = LLMExtractor().extract(doc, classify(doc.text), usage, Tracer())
    return extraction, usage


def test_valid_answer_gives_fields_tokens_and_cost(llm_env) -> None:
    with FakeChatServer([(200, completion(json.dumps(INVOICE_ANSWER), 1000, 200))],
                        api_key="test-key") as server:
        llm_env(server)
        extraction, usage = _run()
    assert extraction.document_type == "invoice"
    assert extraction.model == "fake-model" and extraction.extractor == "llm"
    assert extraction.fields["total"].value == 1464.0
    assert extraction.fields["subtotal"].value == 1200.0
    assert extraction.fields["line_items"].value[0]["quantity"] == 2.0
    # A model's values are found on the page too: the reviewer sees where each one stands.
    total = extraction.fields["total"]
    assert total.stage == "llm" and total.evidence["page"] == 1
    assert total.evidence["text"].startswith("1.464,00")
    assert extraction.fields["invoice_number"].evidence["text"] == "FT-2024/0042"
    assert extraction.needs_review is False and extraction.page_sizes[0][0] > 500
    assert (usage.input_tokens, usage.output_tokens) == (1000, 200)
    assert usage.llm_cost_usd == pytest.approx(1000 * 3 / 1e6 + 200 * 15 / 1e6)
    request = server.requests[0]
    assert request["model"] == "fake-model"
    assert request["response_format"] == {"type": "json_object"}
    assert request["temperature"] == 0
    assert "FT-2024/0042" in request["messages"][1]["content"]
    assert server.auth_headers == ["Bearer test-key"]


def test_invalid_json_is_repaired_once(llm_env) -> None:
    replies = [(200, completion("Sure! Here is the data: {broken", 900, 20)),
               (200, completion(json.dumps(INVOICE_ANSWER), 950, 180))]
    with FakeChatServer(replies) as server:
        llm_env(server)
        extraction, usage = _run()
    assert len(server.requests) == 2
    repair = server.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "Sure! Here is the data: {broken"}
    assert "could not be used" in repair[-1]["content"]
    assert extraction.fields["invoice_number"].value == "FT-2024/0042"
    assert (usage.input_tokens, usage.output_tokens) == (1850, 200)


def test_schema_violations_twice_fail_with_a_clear_error_and_keep_usage(llm_env) -> None:
    bad = json.loads(json.dumps(INVOICE_ANSWER))
    bad["fields"]["issue_date"]["value"] = "1 March 2024"
    bad["fields"]["total"]["value"] = "1.464,00 €"
    usage = Usage()
    with FakeChatServer([(200, completion(json.dumps(bad), 500, 50))]) as server:
        llm_env(server)
        with pytest.raises(ExtractionError) as caught:
            _run(usage=usage)
    message = str(caught.value)
    assert "invalid answer twice" in message and "issue_date" in message and "total" in message
    assert caught.value.retryable is True
    assert len(server.requests) == 2
    assert (usage.input_tokens, usage.output_tokens) == (1000, 100)


def test_server_errors_are_retried_and_client_errors_are_not(llm_env) -> None:
    replies = [(503, {"error": "busy"}, {"Retry-After": "0"}),
               (200, completion(json.dumps(INVOICE_ANSWER)))]
    with FakeChatServer(replies) as server:
        llm_env(server)
        extraction, _ = _run()
    assert len(server.requests) == 2 and extraction.fields["total"].value == 1464.0
    with FakeChatServer([(200, completion("{}"))], api_key="other-key") as server:
        llm_env(server)
        with pytest.raises(ExtractionError, match="HTTP 401"):
            _run()
    assert len(server.requests) == 1


def test_rate_limits_are_waited_out_within_the_attempt_and_counted(llm_env) -> None:
    # More 429s than the retries of other errors: the quota speaks, the call waits each Retry-After.
    limited = (429, {"error": {"message": "rate limit exceeded"}}, {"Retry-After": "0.05"})
    with FakeChatServer([limited] * 5 + [(200, completion(json.dumps(INVOICE_ANSWER)))]) as server:
        llm_env(server)
        extraction, usage = _run()
    assert len(server.requests) == 6 and extraction.fields["total"].value == 1464.0
    assert usage.rate_limited == 5 and usage.retry_after_seconds == 0.05  # reported: AIMD learns
    assert usage.rate_limit_tpm is None  # this endpoint states no limit


def test_a_rate_limit_reports_when_it_first_came_and_the_limit_the_endpoint_states(llm_env) -> None:
    limited = (429, {"error": {"message": "rate limit exceeded"}},
               {"Retry-After": "0.05", "x-ratelimit-limit-tokens": "20000"})
    before = time.time()
    with FakeChatServer([limited, limited, (200, completion(json.dumps(INVOICE_ANSWER)))]) as server:
        llm_env(server)
        _, usage = _run()
    assert usage.rate_limited == 2 and usage.rate_limit_tpm == 20_000
    # The first 429's time, not the second's: the minute before it shows what the endpoint served.
    assert before <= usage.rate_limited_at <= server.requests_at[1]


def test_rate_limits_give_up_once_the_waiting_budget_is_spent(llm_env, monkeypatch) -> None:
    monkeypatch.setenv("QUIRE_LLM_RATE_LIMIT_WAIT_SECONDS", "1")
    with FakeChatServer([(429, {"error": {"message": "rate limit exceeded"}},
                          {"Retry-After": "0.3"})]) as server:
        llm_env(server)
        usage = Usage()
        with pytest.raises(ExtractionError, match="still rate limited"):
            _run(usage=usage)
    # Three waits of 0.3 s (a little more, spread) fit the budget of one second; a fourth does not.
    assert len(server.requests) == 4 and usage.rate_limited == 4


def test_servers_without_json_mode_are_asked_again_without_it(llm_env) -> None:
    replies = [(400, {"error": {"message": "response_format is not supported"}}),
               (200, completion(json.dumps(INVOICE_ANSWER)))]
    with FakeChatServer(replies) as server:
        llm_env(server)
        extraction, _ = _run()
    assert "response_format" in server.requests[0]
    assert "response_format" not in server.requests[1]
    assert extraction.fields["total"].value == 1464.0


def test_long_documents_are_sent_in_chunks_and_merged(llm_env, monkeypatch) -> None:
    def answer(request: dict) -> tuple:
        # The document part only: the offline hint before it may name the law as well.
        text = request["messages"][1]["content"].split("\nPart ", 1)[-1]
        fields = {}
        if text.startswith("1 of"):
            fields = {"parties": {"value": ["Delta Logistics Ltd"], "confidence": 0.9},
                      "effective_date": {"value": "2024-01-02", "confidence": 0.9}}
        if "New York" in text:
            fields = {"parties": {"value": ["Epsilon Retail Inc."], "confidence": 0.8},
                      "governing_law": {"value": "New York", "confidence": 0.9}}
        return 200, completion(json.dumps({"document_type": "contract", "fields": fields}), 700, 40)

    monkeypatch.setenv("QUIRE_LLM_CONTEXT_TOKENS", "600")
    with FakeChatServer([answer]) as server:
        llm_env(server)
        extraction, usage = _run("long_contract")
    calls = len(server.requests)
    assert calls >= 3
    assert "suggests the document is" in server.requests[0]["messages"][1]["content"]
    assert all("The document is a contract" in r["messages"][1]["content"]
               for r in server.requests[1:])
    assert extraction.fields["parties"].value == ["Delta Logistics Ltd", "Epsilon Retail Inc."]
    assert extraction.fields["governing_law"].value == "New York"
    assert extraction.fields["effective_date"].value == "2024-01-02"
    assert extraction.fields["term_months"].value is None
    assert (usage.input_tokens, usage.output_tokens) == (700 * calls, 40 * calls)


def test_missing_usage_is_estimated(llm_env) -> None:
    body = completion(json.dumps(INVOICE_ANSWER))
    del body["usage"]
    with FakeChatServer([(200, body)]) as server:
        llm_env(server)
        _, usage = _run()
    assert usage.input_tokens > 300 and usage.output_tokens > 50


def test_endpoint_configuration(monkeypatch) -> None:
    for name in ("QUIRE_LLM_BASE_URL", "QUIRE_LLM_MODEL", "DATABRICKS_HOST", "QUIRE_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="QUIRE_LLM_MODEL"):
        Endpoint.from_env()
    monkeypatch.setenv("QUIRE_LLM_MODEL", "m")
    with pytest.raises(ConfigurationError, match="QUIRE_LLM_BASE_URL"):
        Endpoint.from_env()
    monkeypatch.setenv("QUIRE_LLM_BASE_URL", "http://127.0.0.1:9/v1/")
    endpoint = Endpoint.from_env()
    assert endpoint.base_url == "http://127.0.0.1:9/v1" and endpoint.auth_headers() == {}
    assert isinstance(ChatClient(endpoint), ChatClient)


def test_parse_answer_accepts_code_fences_and_fixed_types() -> None:
    doc_type, fields = parse_answer('```json\n{"document_type": "other", "fields": {}}\n```', None)
    assert doc_type == "other" and fields == {}
    doc_type, fields = parse_answer('{"fields": {"total": {"value": 5, "confidence": 1}}}', "invoice")
    assert doc_type == "invoice" and fields["total"].value == 5.0


def test_answers_failing_the_arithmetic_get_one_repair_round(llm_env) -> None:
    wrong = json.loads(json.dumps(INVOICE_ANSWER))
    wrong["fields"]["total"]["value"] = 1364.0  # a misread digit: 1200 + 264 != 1364
    replies = [(200, completion(json.dumps(wrong), 900, 100)),
               (200, completion(json.dumps(INVOICE_ANSWER), 950, 110))]
    with FakeChatServer(replies) as server:
        llm_env(server)
        extraction, usage = _run()
    assert len(server.requests) == 2
    first = server.requests[0]["messages"]
    assert "A rule-based reader found these values" in first[1]["content"]
    assert "the seller who issued the invoice" in first[0]["content"]
    recheck = server.requests[1]["messages"][-1]["content"]
    assert "fail the document's checks" in recheck and "not the total 1364" in recheck
    assert extraction.fields["total"].value == 1464.0
    assert extraction.fields["total"].confidence == 0.95
    assert (usage.input_tokens, usage.output_tokens) == (1850, 210)


def test_an_answer_still_failing_after_repair_is_kept_with_lower_confidence(llm_env) -> None:
    vat = json.loads(json.dumps(INVOICE_ANSWER))
    vat["fields"]["invoice_number"]["value"] = "IT01234567890"
    with FakeChatServer([(200, completion(json.dumps(vat), 500, 50))]) as server:
        llm_env(server)
        extraction, _ = _run()
    assert len(server.requests) == 2  # one repair round, no more
    assert "VAT/GST/company ID" in server.requests[1]["messages"][-1]["content"]
    assert extraction.fields["invoice_number"].value == "IT01234567890"
    assert extraction.fields["invoice_number"].confidence == pytest.approx(0.97 * 0.7)
    assert extraction.fields["total"].confidence == 0.95  # untouched: it passed its checks
