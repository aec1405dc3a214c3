"""Usage is priced only when both token prices are known: one missing price makes it unpriced, not $0."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.tracing import cost_of, prices
from worker.costs import TraceUsage, priced

USAGE = TraceUsage(input_tokens=1_000_000, output_tokens=500_000, llm_cost_usd=None)


@pytest.mark.parametrize("price_in, price_out, expected", [
    ("2", "8", (2.0, 8.0)),
    ("2", "", None),
    ("", "8", None),
    ("", "", None),
    ("0", "0", (0.0, 0.0)),   # a price of zero is a price: free usage is priced at $0
])
def test_the_agent_prices_both_sides_or_none(monkeypatch, price_in, price_out, expected):
    monkeypatch.setenv("QUIRE_LLM_PRICE_INPUT_PER_MTOK", price_in)
    monkeypatch.setenv("QUIRE_LLM_PRICE_OUTPUT_PER_MTOK", price_out)
    assert prices() == expected
    cost = cost_of(1_000_000, 500_000)
    assert cost == (None if expected is None else (expected[0], expected[1] / 2))


@pytest.mark.parametrize("price_in, price_out, expected", [
    (Decimal("2"), Decimal("8"), 6.0),
    (Decimal("2"), None, None),
    (None, Decimal("8"), None),
    (None, None, None),
])
def test_the_reconciler_prices_both_sides_or_none(price_in, price_out, expected):
    assert priced(USAGE, price_in, price_out) == expected


def test_a_traces_own_cost_wins_over_missing_prices():
    assert priced(TraceUsage(10, 10, 0.125), None, Decimal("8")) == 0.125
