"""Health and Prometheus metrics (prometheus-client): rollup figures, live push, and per-process counters."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from psycopg_pool import ConnectionPool

from app import auth, live, services
from app.api.common import get_pool
from worker.metrics import PROCESS, Metrics, Union

router = APIRouter(tags=["operations"])


COUNTERS = Metrics({"quire_callback_outcomes": ("Callbacks by outcome (applied, recorded, duplicate, ignored, "
                                                  "rejected), counted by this process.", ("outcome",))})


def record_callback(outcome: str) -> None:
    """Counts one callback by outcome (applied, recorded, duplicate, ignored, rejected)."""
    COUNTERS.inc("quire_callback_outcomes", outcome=outcome)


@router.get("/healthz")
async def healthz(request: Request, pool: ConnectionPool = Depends(get_pool)) -> JSONResponse:
    """200 while the database answers; `listen` says whether live push is on or the app is polling.

    Anonymous callers (load balancers, probes) get the states only; the error texts, which can
    name hosts and socket paths, are for signed-in callers.
    """
    db_ok, db_detail = await services.database_ok(pool)
    broadcaster = live.current()
    body: dict[str, Any] = {"status": "ok" if db_ok and broadcaster.healthy else ("degraded" if db_ok else "down"),
            "database": "ok" if db_ok else "unavailable", "listen": "live" if broadcaster.healthy else "polling"}
    if auth.identity_of(request).authenticated:
        body.update(database=db_detail, listen_error=None if broadcaster.healthy else broadcaster.last_error,
                    sse_subscribers=broadcaster.subscribers)
    return JSONResponse(body, status_code=200 if db_ok else 503)


class QueueCollector(Collector):
    """The database's figures for one scrape, read from the rollups (never a count over the tables)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def collect(self):
        totals, queue = self.data["totals"], self.data["queue"]
        tasks = GaugeMetricFamily("quire_tasks", "Tasks by agent and status.", labels=["agent", "status"])
        for r in totals:
            tasks.add_metric([r["agent"], r["status"]], r["tasks"])
        yield tasks
        per_agent: dict[str, dict[str, float]] = {}
        for r in totals:
            entry = per_agent.setdefault(r["agent"], {})
            for key in ("attempts", "input_tokens", "output_tokens", "llm_cost_usd", "compute_cost_usd",
                        "unpriced", "compute_pending"):
                entry[key] = entry.get(key, 0) + float(r[key] or 0)
        families = [
            (CounterMetricFamily, "quire_claims", "Tasks claimed (attempts started).", "attempts"),
            (CounterMetricFamily, "quire_llm_cost_usd", "LLM spend recorded, in USD.", "llm_cost_usd"),
            (CounterMetricFamily, "quire_compute_cost_usd", "Compute spend recorded, in USD.", "compute_cost_usd"),
            (GaugeMetricFamily, "quire_unpriced_attempts", "Attempts with token usage but no price.", "unpriced"),
            (GaugeMetricFamily, "quire_compute_pending_attempts",
             "Finished job runs whose billed compute is not reconciled yet.", "compute_pending"),
        ]
        for kind, name, text, key in families:
            family = kind(name, text, labels=["agent"])
            for agent, entry in sorted(per_agent.items()):
                family.add_metric([agent], entry[key])
            yield family
        tokens = CounterMetricFamily("quire_tokens", "Model tokens recorded.", labels=["agent", "direction"])
        for agent, entry in sorted(per_agent.items()):
            tokens.add_metric([agent, "input"], entry["input_tokens"])
            tokens.add_metric([agent, "output"], entry["output_tokens"])
        yield tokens
        age = GaugeMetricFamily("quire_oldest_enqueued_age_seconds", "Age of the oldest enqueued task.",
                                labels=["agent"])
        waiting = GaugeMetricFamily("quire_tasks_waiting_for_budget",
                                    "Enqueued tasks refused admission for lack of token budget.", labels=["agent"])
        for r in queue:
            age.add_metric([r["agent"]], r["oldest_enqueued_age_s"])
            waiting.add_metric([r["agent"]], r["waiting_for_budget"])
        yield age
        yield waiting


class LiveCollector(Collector):
    """The process's LISTEN connection and subscribers."""

    def collect(self):
        broadcaster = live.current()
        yield GaugeMetricFamily("quire_listen_up", "1 while the LISTEN connection is healthy.",
                                value=int(broadcaster.healthy))
        yield CounterMetricFamily("quire_listen_connects", "LISTEN connections made (reconnects after the first).",
                                  value=broadcaster.connects)
        yield CounterMetricFamily("quire_notifications", "Notifications received.", value=broadcaster.notifications)
        yield GaugeMetricFamily("quire_sse_subscribers", "Open event subscriptions (SSE and pages).",
                                value=broadcaster.subscribers)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request, pool: ConnectionPool = Depends(get_pool)) -> PlainTextResponse:
    """Prometheus exposition: rollup figures, queue age, live push, and this process's counters."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(await services.metrics_data(pool)))
    registry.register(LiveCollector())
    worker = getattr(request.app.state, "worker", None)
    worker_metrics = getattr(worker, "metrics", None)
    sources = [COUNTERS.registry, PROCESS.registry]
    sources += [worker_metrics.registry] if isinstance(worker_metrics, Metrics) else []
    registry.register(Union(*sources))
    return PlainTextResponse(generate_latest(registry).decode(), media_type=CONTENT_TYPE_LATEST)
