"""Callback validation: the Report it makes, and the exact message naming the first thing wrong."""

import dataclasses

import pytest

from agents.report import ReportStatus
from schema.errors import InvalidPayload
from schema.payloads import MAX_DEPTH, Report, check_storable, parse_callback

OK = {"status": "completed", "result": {}}


def nested(levels: int, make) -> object:
    value: object = 1
    for _ in range(levels):
        value = make(value)
    return value


def test_a_report_is_the_constructors_report():
    body = {"status": "completed", "confidence": 1, "pages": 2, "result": {"fields": {}, "n": [1.5, "é"]},
            "input_tokens": 10, "output_tokens": 0, "llm_cost_usd": 0, "run_id": "r" * 600, "rate_limited": 0}
    report = parse_callback(body)
    expected = Report(status=ReportStatus.COMPLETED, result=body["result"], confidence=1.0, error=None, retryable=False,
                      input_tokens=10, output_tokens=0, llm_cost_usd=0.0, compute_cost_usd=None,
                      run_id="r" * 512, trace_id=None, pages=2)
    assert report == expected and repr(report) == repr(expected)
    assert list(vars(report).items()) == list(vars(expected).items())
    assert type(report.confidence) is float and type(report.llm_cost_usd) is float
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.status = "failed"
    failed = parse_callback({"status": "failed", "error": "e" * 5000, "retryable": True,
                             "rate_limited": 3, "retry_after_seconds": 2, "rate_limited_at": 1_800_000_000,
                             "rate_limit_tpm": 20_000})
    assert (failed.error, failed.retryable, failed.rate_limited, failed.retry_after_seconds,
            failed.rate_limited_at, failed.rate_limit_tpm) == ("e" * 4000, True, 3, 2.0, 1.8e9, 20_000)


@pytest.mark.parametrize("body, message", [
    ([], "callback body must be a JSON object"),
    ({"status": "done"}, "status must be 'completed' or 'failed', not 'done'"),
    ({"status": "completed"}, "a completed callback must carry a result"),
    ({"status": "failed", "error": ""}, "a failed callback must carry an error message"),
    ({**OK, "extra": 1, "also": 2}, "unknown callback fields: also, extra"),
    ({**OK, "result": []}, "result must be a JSON object or null"),
    ({**OK, "confidence": True}, "confidence must be a number from 0 to 1, not True"),
    ({"status": "failed", "error": "x", "retryable": "yes"}, "retryable must be true or false"),
    ({"status": "failed", "error": 5}, "error must be a string, not int"),
    ({**OK, "output_tokens": 1.5}, "output_tokens must be an integer from 0 to 100,000,000, not 1.5"),
    ({**OK, "pages": True}, "pages must be an integer from 0 to 1,000,000, not True"),
    ({**OK, "compute_cost_usd": -1}, "compute_cost_usd must be a number from 0 to 10,000,000, not -1"),
    ({**OK, "run_id": 3}, "run_id must be a string, not int"),
    ({**OK, "rate_limited_at": 1_800_000_000_000}, "rate_limited_at must be a time in Unix seconds "
                                                   "(2000 to 2200), not 1800000000000"),
    ({**OK, "rate_limited_at": "2027-01-01"}, "rate_limited_at must be a time in Unix seconds "
                                              "(2000 to 2200), not 2027-01-01"),
    ({**OK, "rate_limit_tpm": -5}, "rate_limit_tpm must be an integer from 0 to 1,000,000,000,000, not -5"),
    ({**OK, "input_tokens": -1, "llm_cost_usd": -1},
     "input_tokens must be an integer from 0 to 100,000,000, not -1"),
    ({**OK, "llm_cost_usd": float("nan")}, "body.llm_cost_usd is nan: JSON numbers must be finite"),
    ({**OK, "result": {"a": "x\x00y"}}, "body.result.a contains a NUL character (\\u0000)"),
    ({**OK, "result": {"a\x00": 1}}, "body.result key contains a NUL character (\\u0000)"),
    ({**OK, "result": {"a": ["\ud800"]}}, "body.result.a[0] is not valid Unicode (a lone surrogate)"),
    ({**OK, "result": {"a": [1.0, float("inf")]}}, "body.result.a[1] is inf: JSON numbers must be finite"),
    ({**OK, "result": {"l": nested(70, lambda v: [v])}},
     "body.result.l" + "[0]" * (MAX_DEPTH - 1) + f" nests deeper than {MAX_DEPTH} levels"),
])
def test_the_first_thing_wrong_is_named(body, message):
    with pytest.raises(InvalidPayload) as caught:
        parse_callback(body)
    assert str(caught.value) == message


def test_storable_up_to_the_nesting_limit():
    check_storable(nested(MAX_DEPTH, lambda v: {"k": v}))
    check_storable(nested(MAX_DEPTH, lambda v: [v]))
    check_storable(nested(MAX_DEPTH - 1, lambda v: [v, "é", 1.5, None, True, (2,)]))
    for too_deep in (nested(MAX_DEPTH + 1, lambda v: {"k": v}), nested(MAX_DEPTH + 1, lambda v: [v])):
        with pytest.raises(InvalidPayload, match=f"nests deeper than {MAX_DEPTH} levels"):
            check_storable(too_deep)
    check_storable(nested(MAX_DEPTH, lambda v: [[]] if v == 1 else [v]))  # an empty list at the limit
