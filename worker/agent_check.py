"""Checks each agent's configuration before anything is claimed for it: a mistake there is no run's fault."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from schema import queue, worker_queries
from schema.models import Agent
from worker import logs
from worker.executors import DatabricksExecutor, LocalExecutor, NoopExecutor
from worker.executors.databricks import configured_job_id, missing_job_reason

if TYPE_CHECKING:
    import psycopg

EXECUTORS = (LocalExecutor.name, NoopExecutor.name, DatabricksExecutor.name)
EXTRACTORS = ("offline", "llm", "cascade")
# Extractors that call a model: a local agent needs a model and an endpoint for them.
MODEL_EXTRACTORS = ("llm", "cascade")


def config_error(agent: Agent, *, executors: Iterable[str] = EXECUTORS,
                 env: Mapping[str, str] = os.environ) -> str | None:
    """Why the agent cannot run as configured in this environment, or None when it can."""
    executors = sorted(executors)
    if agent.executor not in executors:
        return f"unknown executor {agent.executor!r} (expected one of {', '.join(executors)})"
    settings = agent.settings or {}
    extractor = str(settings.get("extractor") or "offline")
    if extractor not in EXTRACTORS:
        return f"unknown extractor {extractor!r} (expected one of {', '.join(EXTRACTORS)})"
    threshold = settings.get("review_threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                  or not 0 <= threshold <= 1):
        return f"review_threshold must be a number from 0 to 1 (got {threshold!r})"
    if agent.executor == DatabricksExecutor.name:
        job_id, raw = configured_job_id(settings, env)
        if job_id is None:
            return missing_job_reason(raw)
        return None  # the job's own environment decides the rest
    if extractor in MODEL_EXTRACTORS and agent.executor == LocalExecutor.name:
        if not (agent.model or env.get("QUIRE_LLM_MODEL", "").strip()):
            return f"extractor {extractor!r} needs a model: set the agent's model or QUIRE_LLM_MODEL"
        if not (env.get("QUIRE_LLM_BASE_URL", "").strip() or env.get("DATABRICKS_HOST", "").strip()):
            return f"extractor {extractor!r} needs an endpoint: set QUIRE_LLM_BASE_URL or DATABRICKS_HOST"
    return None


def check_agents(conn: psycopg.Connection, *, executors: Iterable[str] = EXECUTORS, env: Mapping[str, str] = os.environ,
                 worker_id: str | None = None) -> dict[str, str]:
    """Checks every agent and stores the outcome on its row; returns the misconfigured ones by name."""
    executors = list(executors)
    problems: dict[str, str] = {}
    for agent in queue.list_agents(conn):
        error = config_error(agent, executors=executors, env=env)
        if error:
            problems[agent.name] = error
        if worker_queries.agent_set_config_error(conn, agent.name, error):
            logs.change("agent", "misconfigured" if error else "configured", agent=agent.name, error=error,
                        worker=worker_id)
    return problems
