"""Customers' monthly LLM budgets: set by quire.toml or an operator, read against this month's spend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal, InvalidOperation

import psycopg
from psycopg.types.json import Jsonb

from schema.errors import InvalidArgument
from schema.sql import fetch_all, fetch_one, require_idle, run_query

MAX_BUDGET_USD = Decimal("1000000000")


@dataclass(frozen=True)
class CustomerBudget:
    """A customer's spend this month against its budget (None: no budget)."""

    customer: str
    monthly_llm_budget_usd: Decimal | None
    month_llm_cost_usd: Decimal
    month: date
    updated_by: str | None = None
    updated_at: datetime | None = None

    @property
    def over_budget(self) -> bool:
        return self.monthly_llm_budget_usd is not None and self.month_llm_cost_usd >= self.monthly_llm_budget_usd

    @property
    def used_fraction(self) -> float | None:
        if not self.monthly_llm_budget_usd:
            return None if self.monthly_llm_budget_usd is None else 1.0
        return float(self.month_llm_cost_usd / self.monthly_llm_budget_usd)


CENT = Decimal("0.01")
_BUDGET_RANGE = f"between $0 and ${MAX_BUDGET_USD:,}"


def _budget(value: object) -> Decimal | None:
    """A monthly budget in dollars and whole cents (the column's precision), or None for none; a
    fraction of a cent is refused rather than rounded (0.001 would become $0.00: nothing would run)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise InvalidArgument(f"The monthly LLM budget must be a number of dollars (or none), not {str(value)[:40]!r}")
    try:
        amount = Decimal(str(value))
    except InvalidOperation as exc:
        raise InvalidArgument(f"The monthly LLM budget must be a number of dollars, not {str(value)[:40]!r}") from exc
    if not amount.is_finite() or amount < 0 or amount > MAX_BUDGET_USD:
        raise InvalidArgument(f"The monthly LLM budget must be {_BUDGET_RANGE}, not {str(value)[:40]}")
    if amount != amount.quantize(CENT):
        raise InvalidArgument(f"The monthly LLM budget is kept in whole cents: {str(value)[:40]} has a fraction "
                              "of a cent (use, for example, 0.01)")
    return amount.quantize(CENT)


def _customer(name: object) -> str:
    if not isinstance(name, str) or not name.strip() or "\x00" in name or len(name) > 200:
        raise InvalidArgument("A customer name must not be empty, and is at most 200 characters long")
    return name.strip()


def customer_budget_set(conn: psycopg.Connection, customer: str, budget_usd: object, *, actor: str,
                        now: datetime | None = None) -> CustomerBudget:
    """Sets or clears (None) a customer's monthly LLM budget; its waiting tasks move once under it."""
    name, amount = _customer(customer), _budget(budget_usd)
    require_idle(conn)
    with conn.transaction():
        fetch_one(conn, "customer_budget_set", {"customer": name, "budget": amount, "actor": actor, "now": now})
    listed = {b.customer: b for b in customer_budget_list(conn, now=now)}
    if name in listed:
        return listed[name]
    # Cleared and nothing spent this month: not listed, and nothing to wait for.
    month = run_query(conn, "SELECT date_trunc('month', coalesce(%s, now()) AT TIME ZONE 'UTC')::date AS m",
                      [now])[0]["m"]
    return CustomerBudget(name, None, Decimal(0), month, actor)


def customer_budget_apply_config(conn: psycopg.Connection, budgets: Mapping[str, object]) -> int:
    """Applies quire.toml's budgets that changed since last applied; returns how many."""
    changed = 0
    with conn.transaction():
        for customer, value in budgets.items():
            changed += fetch_one(conn, "customer_budget_apply_config",
                                 {"customer": _customer(customer), "budget": _budget(value)}) is not None
    return changed


def customer_shares_apply_config(conn: psycopg.Connection, shares: dict[str, tuple[int | None, int | None]]) -> int:
    """Applies quire.toml's guaranteed share and burst ceiling per customer (tasks of each agent at
    once; None: none) that changed since last applied; returns how many."""
    changed = 0
    with conn.transaction():
        for customer, (guaranteed, ceiling) in shares.items():
            for value, what in ((guaranteed, "guaranteed_tasks"), (ceiling, "max_tasks")):
                if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                          or not 1 <= value <= 100_000):
                    raise InvalidArgument(f"{customer}: {what} must be a whole number of tasks from 1 to 100,000")
            if guaranteed is not None and ceiling is not None and guaranteed > ceiling:
                raise InvalidArgument(f"{customer}: the guaranteed tasks ({guaranteed}) cannot be more than "
                                      f"its ceiling ({ceiling})")
            changed += fetch_one(conn, "customer_shares_apply_config", {
                "customer": _customer(customer), "guaranteed": guaranteed, "ceiling": ceiling,
                "shares": Jsonb({"guaranteed_tasks": guaranteed, "max_tasks": ceiling})}) is not None
    return changed


def customer_budget_list(conn: psycopg.Connection, *, now: datetime | None = None) -> list[CustomerBudget]:
    """Budgeted customers and customers with spend this month, by name."""
    return [CustomerBudget(**r) for r in fetch_all(conn, "customer_budget_list", {"now": now})]


def customer_over_budget_list(conn: psycopg.Connection, *, now: datetime | None = None) -> set[str]:
    """Customers whose tasks wait for budget now."""
    return {r["customer"] for r in fetch_all(conn, "customer_over_budget_list", {"now": now})}
