"""Monthly LLM budgets per customer: over-budget tasks wait enqueued, neither failed nor dropped."""

from datetime import timedelta
from decimal import Decimal

import pytest

from schema import customers, queue
from schema.errors import InvalidArgument
from schema.models import TaskStatus
from tests.factories import make_agent, make_task


def _spend(conn, claim, cost):
    queue.apply_callback(conn, claim.attempt_id, {
        "status": "completed", "result": {"ok": True}, "confidence": 0.9,
        "input_tokens": 1000, "output_tokens": 100, "llm_cost_usd": cost})


def _clock(conn):
    return conn.execute("SELECT now() AS n").fetchone()["n"]


@pytest.mark.parametrize("cap", [None, 4])
def test_tasks_of_a_customer_over_budget_wait_enqueued_until_the_budget_allows(conn, cap):
    make_agent(conn, max_concurrent_tasks=cap)
    now = _clock(conn)
    customers.customer_budget_set(conn, "acme", 1, actor="op", now=now)
    first, *rest = [make_task(conn, customer="acme", now=now - timedelta(minutes=10 - i)) for i in range(3)]
    other = make_task(conn, customer="globex", now=now - timedelta(minutes=1))
    (claim,) = queue.claim(conn, agent="docs", worker_id="w", now=now)
    assert claim.task.id == first.id
    _spend(conn, claim, 0.6)
    _spend(conn, claim, 0.6)  # a replayed report counts once
    (turn,) = queue.claim(conn, agent="docs", worker_id="w", now=now)
    assert turn.task.id == other.id  # fair share: the other customer's turn
    (claim,) = queue.claim(conn, agent="docs", worker_id="w", now=now)
    assert claim.task.id == rest[0].id
    _spend(conn, claim, 0.7)
    assert customers.customer_over_budget_list(conn, now=now) == {"acme"}
    (budget,) = customers.customer_budget_list(conn, now=now)
    assert budget.month_llm_cost_usd == Decimal("1.3") and budget.over_budget
    assert queue.claim(conn, agent="docs", worker_id="w", limit=10, now=now) == []
    later = make_task(conn, customer="globex", now=now - timedelta(seconds=1))
    got = queue.claim(conn, agent="docs", worker_id="w", limit=10, now=now)
    assert [c.task.id for c in got] == [later.id]  # the other customer is not held back
    waiting = queue.get_task(conn, rest[1].id)
    assert waiting.status is TaskStatus.ENQUEUED and waiting.error is None
    customers.customer_budget_set(conn, "acme", 5, actor="op", now=now)
    assert [c.task.id for c in queue.claim(conn, agent="docs", worker_id="w", limit=10, now=now)] == [rest[1].id]


def test_a_new_month_starts_a_new_budget(conn):
    make_agent(conn)
    now = _clock(conn).replace(day=15)
    customers.customer_budget_set(conn, "acme", 1, actor="op")
    make_task(conn, customer="acme", now=now - timedelta(hours=1))
    later = make_task(conn, customer="acme", now=now - timedelta(minutes=1))
    (claim,) = queue.claim(conn, agent="docs", worker_id="w", now=now)
    _spend(conn, claim, 2)
    assert queue.claim(conn, agent="docs", worker_id="w", now=now) == []
    next_month = now + timedelta(days=31)
    assert [c.task.id for c in queue.claim(conn, agent="docs", worker_id="w", now=next_month)] == [later.id]


def test_clearing_a_budget_releases_the_customer(conn):
    make_agent(conn)
    now = _clock(conn)
    customers.customer_budget_set(conn, "acme", 0, actor="op", now=now)
    task = make_task(conn, customer="acme", now=now - timedelta(minutes=1))
    _ = make_task(conn, customer="acme", now=now - timedelta(seconds=30))
    (claim,) = queue.claim(conn, agent="docs", worker_id="w", now=now)  # nothing spent yet: 0 >= 0 is not reached
    assert claim.task.id == task.id
    _spend(conn, claim, 0.01)
    assert queue.claim(conn, agent="docs", worker_id="w", now=now) == []
    cleared = customers.customer_budget_set(conn, "acme", None, actor="op", now=now)
    assert cleared.monthly_llm_budget_usd is None and not cleared.over_budget
    assert len(queue.claim(conn, agent="docs", worker_id="w", now=now)) == 1


def test_quire_toml_budgets_apply_once_and_an_operator_change_holds(conn):
    assert customers.customer_budget_apply_config(conn, {"acme": 100, "globex": 20.5}) == 2
    customers.customer_budget_set(conn, "acme", 250, actor="op")
    assert customers.customer_budget_apply_config(conn, {"acme": 100, "globex": 20.5}) == 0
    by_name = {b.customer: b for b in customers.customer_budget_list(conn)}
    assert by_name["acme"].monthly_llm_budget_usd == Decimal("250.00")
    assert by_name["globex"].monthly_llm_budget_usd == Decimal("20.50")
    assert customers.customer_budget_apply_config(conn, {"acme": 120}) == 1  # the file changed
    by_name = {b.customer: b for b in customers.customer_budget_list(conn)}
    assert by_name["acme"].monthly_llm_budget_usd == Decimal("120.00") and by_name["acme"].updated_by == "quire.toml"


@pytest.mark.parametrize("bad", [-1, "ten", True, float("nan"), 1e12])
def test_bad_budgets_are_refused_and_change_nothing(conn, bad):
    customers.customer_budget_set(conn, "acme", 10, actor="op")
    with pytest.raises(InvalidArgument):
        customers.customer_budget_set(conn, "acme", bad, actor="op")
    with pytest.raises(InvalidArgument):
        customers.customer_budget_set(conn, "", 5, actor="op")
    (budget,) = customers.customer_budget_list(conn)
    assert budget.monthly_llm_budget_usd == Decimal("10.00")
