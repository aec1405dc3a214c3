"""How a task's costs read: unpriced LLM usage and pending compute are said, never shown as $0."""

from dataclasses import dataclass
from decimal import Decimal

from app.components import format as fmt


@dataclass
class A:
    llm_cost_usd: Decimal | None = None
    llm_unpriced: bool = False
    compute_cost_usd: Decimal | None = None
    dbus: Decimal | None = None
    compute_state: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    compute_unpriced: bool = False


def test_unpriced_llm_usage_is_not_zero_dollars():
    assert fmt.llm_cost([A(llm_unpriced=True)]) == "unpriced"
    assert fmt.llm_cost([A(Decimal("0.5")), A(llm_unpriced=True)]) == "$0.5000 + unpriced"
    assert fmt.llm_cost([A(Decimal("0.1463"))]) == "$0.1463"
    assert fmt.llm_cost([A(Decimal("0"), input_tokens=900, output_tokens=100)]) == "$0.00"  # a price of 0, said on purpose


def test_no_llm_used_is_said_never_zero_dollars():
    assert fmt.llm_cost([A(), A(Decimal("0"))]) == "no LLM used"
    assert fmt.llm_cost([]) == fmt.DASH  # not run yet


def test_compute_waiting_for_billing_reads_pending():
    assert fmt.compute_cost([A(compute_state="pending")]) == "pending"
    billed = A(compute_cost_usd=Decimal("1.4"), dbus=Decimal("2"), compute_state="billed")
    assert fmt.compute_cost([billed]) == "$1.40 (2.00 DBU) (provisional)"
    assert fmt.compute_cost([billed, A(compute_state="pending")]) == "$1.40 (2.00 DBU) + pending"
    final = A(compute_cost_usd=Decimal("1.4"), dbus=Decimal("2"), compute_state="final")
    assert fmt.compute_cost([final]) == "$1.40 (2.00 DBU)"


def test_compute_never_billed_or_without_a_list_price_is_not_zero_dollars():
    assert fmt.compute_cost([A(compute_state="unbilled")]) == "never billed"
    unpriced = A(dbus=Decimal("3"), compute_state="final", compute_unpriced=True)
    assert fmt.compute_cost([unpriced]) == "$0.00 (3.00 DBU) + unpriced"


def test_an_estimated_count_is_rounded_as_a_person_says_it():
    from app.components.format import approx

    assert [approx(n) for n in (870, 1234, 35_400, 1_234_567)] == ["870", "1.2k", "35k", "1.2M"]
