"""Prepares a database for a process: migrations, agent configuration from quire.toml, backoff."""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from schema import customers, db, queue
from schema.migrate import migrate
from schema.settings import Settings


def prepare_database(settings: Settings, *, configure_agents: bool = True,
                     then: Callable[[psycopg.Connection], None] | None = None) -> str:
    """Migrates the database in use and applies the configured agents; returns the DSN. `then`, if
    given, runs on the same connection afterwards (one connection a start, not one per step)."""
    dsn = db.database_url(settings)
    queue.set_backoff(settings.backoff_base_seconds, settings.backoff_cap_seconds)
    agents = settings.agent_configs() if configure_agents else {}
    budgets = ({name: c.monthly_llm_budget_usd for name, c in settings.customer_configs().items()}
               if configure_agents else {})
    with db.connect(dsn) as conn:
        migrate(conn)
        for name, config in agents.items():
            queue.configure_agent(conn, name, **config.as_dict())
        if budgets:
            customers.customer_budget_apply_config(conn, budgets)
        if configure_agents:
            shares = {name: (c.guaranteed_tasks, c.max_tasks) for name, c in settings.customer_configs().items()}
            if shares:
                customers.customer_shares_apply_config(conn, shares)
        if then is not None:
            then(conn)
    return dsn
