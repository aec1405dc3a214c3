"""The worker's JSON log lines: their keys, their order and their timestamp."""

import enum
import json
import logging
import math
from datetime import UTC, datetime
from unittest import mock

import pytest

from worker import logs


class Level(enum.IntEnum):
    ONE = 1


def isoformat(ns: int) -> str:
    """The timestamp datetime.now(timezone.utc) gives at `ns` nanoseconds past the epoch."""
    us = ns // 1000
    return (datetime.fromtimestamp(us // 1_000_000, UTC).replace(microsecond=us % 1_000_000)
            .isoformat(timespec="milliseconds"))


@pytest.mark.parametrize("ns", [0, 999_999, 1_000_000, 946_684_799_999_999_999, 946_684_800_000_000_000,
                                1_764_566_031_123_456_789, 1_764_566_031_999_999_999, 4_102_444_800_000_500_000])
def test_timestamps_are_isoformat_to_the_millisecond(ns):
    with mock.patch.object(logs.time, "time_ns", return_value=ns):
        assert logs._timestamp() == isoformat(ns)
    with mock.patch.object(logs.time, "time_ns", return_value=ns + 1_000_000_000):
        assert logs._timestamp() == isoformat(ns + 1_000_000_000)  # the next second is formatted anew


def test_a_timestamp_is_now():
    before = datetime.now(UTC).isoformat(timespec="milliseconds")
    stamp = logs._timestamp()
    assert before <= stamp <= datetime.now(UTC).isoformat(timespec="milliseconds")


def test_a_change_is_one_json_line_in_order_without_none():
    with mock.patch.object(logs, "_emit") as emit, mock.patch.object(logs.log, "isEnabledFor", return_value=True), \
            mock.patch.object(logs.time, "time_ns", return_value=1_764_566_031_123_456_789):
        logs.change("task", "claimed", task=1, attempt=None, agent="docs", at=datetime(2026, 1, 1))
    [(level, line)] = [call.args for call in emit.call_args_list]
    assert level == logging.INFO and line == (
        '{"ts":"2025-12-01T05:13:51.123+00:00","entity":"task","event":"claimed",'
        '"task":1,"agent":"docs","at":"2026-01-01T00:00:00"}')
    assert list(json.loads(line)) == ["ts", "entity", "event", "task", "agent", "at"]


@pytest.mark.parametrize("value", [0, -7, 2**70, True, False, 0.1, 1e300, 0.003, -0.0, 1e-7, 123456.789,
                                   float("nan"), float("inf"), float("-inf"), "plain", 'quote " and \\ back',
                                   "line\nbreak\ttab", "é ü \u2028 \U0001f600", "", [1, "a", None],
                                   {"k": {"n": 1.5}}, datetime(2026, 1, 1, tzinfo=UTC), Level.ONE])
def test_a_line_is_what_the_json_encoder_writes(value):
    fields = {"task": 3, "value": value, "skipped": None, "with space": "x"}
    record = {"ts": "T", "entity": "task", "event": 'claimed "now"'} | {k: v for k, v in fields.items() if v is not None}
    with mock.patch.object(logs, "_timestamp", return_value="T"):
        line = logs._line("task", 'claimed "now"', fields)
    assert line == logs._encode(record)
    decoded, expected = json.loads(line)["value"], json.loads(logs._encode({"v": value}))["v"]
    assert decoded == expected or (math.isnan(decoded) and math.isnan(expected))
