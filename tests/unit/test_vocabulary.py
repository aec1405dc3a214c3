"""Statuses and priorities are defined once, in schema.models, and every layer uses those
definitions: the engine, the API models, the command line and the upload page."""

import inspect
import re
from pathlib import Path

import pytest

from agents.report import ReportStatus
from schema import payloads, queue
from schema.errors import InvalidPayload
from schema.models import (
    DEFAULT_PRIORITY,
    MAX_PRIORITY,
    MIN_PRIORITY,
    TERMINAL_STATUSES,
    TaskStatus,
    is_priority,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_report_status_is_the_enum_and_nothing_else_is_accepted():
    for status in ReportStatus:
        body = {"status": status.value, "result": {}, "error": "e"}
        assert payloads.parse_callback(body).status is status
    with pytest.raises(InvalidPayload, match="status must be"):
        payloads.parse_callback({"status": "cancelled"})


def test_the_terminal_set_is_the_task_statuses_that_end():
    assert {s for s in TaskStatus if s.terminal} == TERMINAL_STATUSES
    assert "completed" in TERMINAL_STATUSES and "enqueued" not in TERMINAL_STATUSES


def test_no_module_spells_the_terminal_set_again():
    words = ['"completed"', '"failed"', '"cancelled"']
    spelled = re.compile(r"[({\[]\s*(" + "|".join(words) + r")\s*,\s*(" + "|".join(words) + r")\s*,\s*("
                         + "|".join(words) + r")\s*[)}\]]")
    found = [str(p.relative_to(ROOT)) for pkg in ("app", "schema", "worker")
             for p in (ROOT / pkg).rglob("*.py") if spelled.search(p.read_text())]
    assert found == []


def test_priority_range_and_default():
    assert [p for p in range(-2, 12) if is_priority(p)] == list(range(MIN_PRIORITY, MAX_PRIORITY + 1))
    assert not is_priority(True) and not is_priority(5.0) and not is_priority("5")
    assert is_priority(DEFAULT_PRIORITY)


def test_every_entry_point_defaults_to_the_one_default_priority():
    from app.api.foresight import ForecastIn
    from app.cli import build_parser

    assert inspect.signature(queue.enqueue).parameters["priority"].default == DEFAULT_PRIORITY
    assert ForecastIn.model_fields["priority"].default == DEFAULT_PRIORITY
    args = build_parser().parse_args(["submit", "--agent", "a", "x.pdf"])
    assert args.priority == DEFAULT_PRIORITY


def test_the_pages_offer_only_priorities_and_the_default():
    from app.components.task_table import RETRY_PRIORITIES
    from app.pages.upload import PRIORITIES

    assert DEFAULT_PRIORITY in PRIORITIES and all(is_priority(p) for p in PRIORITIES)
    assert all(is_priority(p) for p in RETRY_PRIORITIES if p != -1)
