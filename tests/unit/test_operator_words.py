"""Plain words for what operators read: why a task waits, timelines, attempt states, the LLM cost tile."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from app.components import format as fmt
from app.components.agent_controls import parse_until
from app.components.kpis import llm_cost_tile
from app.components.task_table import waiting_text
from schema.waiting import REASON_WORDS, WaitReason

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_every_wait_reason_reads_in_plain_words_with_how_long_where_known():
    assert set(REASON_WORDS) == set(WaitReason)
    assert waiting_text("retry_backoff", NOW + timedelta(seconds=40), NOW) == "waiting to retry · in 40 s"
    assert waiting_text("agent_paused", NOW + timedelta(hours=2), NOW) == "agent paused · in 2 h 00 min"
    assert waiting_text("agent_paused", None, NOW) == "agent paused"
    assert waiting_text("customer_budget", NOW + timedelta(days=20), NOW) == \
        "customer over budget · until 2026-03-21 12:00:00 UTC"
    assert waiting_text(None, None, NOW) is None


def test_a_release_from_hold_and_a_hand_back_read_as_what_happened():
    assert fmt.event_words("enqueued", "enqueued") == ("released", "released from hold: it may run now")
    assert fmt.event_words("enqueued", None) == ("enqueued", "submitted")
    assert fmt.event_words("completed", "processing") == ("completed", "from processing")
    assert fmt.attempt_status("handed_back") == "handed back (its worker stopped)"
    assert "_" not in fmt.attempt_status("some_new_state")


@dataclass
class S:
    input_tokens: int = 0
    output_tokens: int = 0
    llm_cost_usd: Decimal | None = Decimal("0")
    unpriced_attempts: int = 0
    tasks_with_usage: int = 0
    total: int = 3
    spend_per_task: dict = field(default_factory=dict)


def test_the_llm_cost_tile_says_no_llm_was_used_instead_of_zero_dollars():
    assert llm_cost_tile(S())[0] == "no LLM used"
    assert llm_cost_tile(S(input_tokens=900, output_tokens=10, unpriced_attempts=2, tasks_with_usage=2))[0] == \
        "unpriced"
    assert llm_cost_tile(S(input_tokens=900, llm_cost_usd=Decimal("0.0123"), tasks_with_usage=1))[0] == "$0.0123"


def test_the_time_to_resume_is_read_in_plain_words():
    assert parse_until("") is None
    assert parse_until("2999-01-31 18:00") == datetime(2999, 1, 31, 18, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="Write the time to resume as"):
        parse_until("tomorrow")
    with pytest.raises(ValueError, match="must be in the future"):
        parse_until("2001-01-01 00:00")


def test_tasks_at_once_are_whole_numbers():
    assert [fmt.at_once(x) for x in (1.0, 1.99, 1.8, 3.4, 0.7)] == [
        "one at a time", "2 at once", "about 2 at once", "about 3 at once", "one at a time"]


def test_a_budget_out_of_range_is_answered_in_plain_words():
    from app.components.budgets import budget_problem

    assert budget_problem(None) is None and budget_problem(0) is None and budget_problem(250.5) is None
    assert budget_problem(-1) == "A budget cannot be negative. Enter 0 or more, or leave it empty for no budget."
    assert budget_problem(2e9) == "A monthly budget can be at most 1,000,000,000 USD."
    assert "monthly_llm_budget_usd" not in (budget_problem(-1) + budget_problem(2e9))
