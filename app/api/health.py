"""Health and Prometheus metrics; per-process counters for what the tables do not record."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from psycopg_pool import ConnectionPool

from app import auth, live, services
from app.api.common import get_pool

router = APIRouter(tags=["operations"])


class Counters:
    """Monotonic per-process counters, exported as Prometheus counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        key = (name, tuple(sorted(labels.items())))
        with self._lock:
            self._values[key] = self._values.get(key, 0) + amount

    def items(self) -> list[tuple[str, dict[str, str], float]]:
        with self._lock:
            return [(name, dict(labels), value) for (name, labels), value in sorted(self._values.items())]


COUNTERS = Counters()


def record_callback(outcome: str) -> None:
    """Counts one callback by outcome (applied, recorded, duplicate, ignored, rejected)."""
    COUNTERS.inc("quire_callback_outcomes_total", outcome=outcome)


@router.get("/healthz")
async def healthz(request: Request, pool: ConnectionPool = Depends(get_pool)) -> JSONResponse:
    """200 while the database answers; `listen` says whether live push is on or the app is polling.

    Anonymous callers (load balancers, probes) get the states only; the error texts, which can
    name hosts and socket paths, are for signed-in callers.
    """
    db_ok, db_detail = await services.database_ok(pool)
    broadcaster = live.current()
    body = {"status": "ok" if db_ok and broadcaster.healthy else ("degraded" if db_ok else "down"),
            "database": "ok" if db_ok else "unavailable", "listen": "live" if broadcaster.healthy else "polling"}
    if auth.identity_of(request).authenticated:
        body.update(database=db_detail, listen_error=None if broadcaster.healthy else broadcaster.last_error,
                    sse_subscribers=broadcaster.subscribers)
    return JSONResponse(body, status_code=200 if db_ok else 503)


def _line(name: str, labels: Mapping[str, str], value: float) -> str:
    if labels:
        inner = ",".join(f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                         for k, v in labels.items())
        return f"{name}{{{inner}}} {value:g}"
    return f"{name} {value:g}"


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(request: Request, pool: ConnectionPool = Depends(get_pool)) -> PlainTextResponse:
    """Prometheus text format: tasks, claims, throttling, callbacks, queue age, live push."""
    data = await services.metrics_data(pool)
    out: list[str] = []

    def family(name: str, kind: str, text: str, samples: list[tuple[Mapping[str, str], float]]) -> None:
        out.append(f"# HELP {name} {text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(_line(name, labels, value) for labels, value in samples)

    family("quire_tasks", "gauge", "Tasks by agent and status.",
           [({"agent": agent, "status": status}, n) for agent, by in sorted(data["status"]["agents"].items())
            for status, n in sorted(by.items())])
    family("quire_oldest_enqueued_age_seconds", "gauge", "Age of the oldest enqueued task.",
           [({"agent": r["agent"]}, r["oldest_enqueued_age_s"]) for r in data["queue"]])
    family("quire_tasks_waiting_for_budget", "gauge", "Enqueued tasks refused admission for lack of token budget.",
           [({"agent": r["agent"]}, r["waiting_for_budget"]) for r in data["queue"]])
    claims: dict[str, int] = {}
    for r in data["attempts"]:
        claims[r["agent"]] = claims.get(r["agent"], 0) + r["n"]
    family("quire_claims_total", "counter", "Tasks claimed (attempts started).",
           [({"agent": a}, n) for a, n in sorted(claims.items())])
    family("quire_attempts", "gauge", "Attempts by agent and attempt status.",
           [({"agent": r["agent"], "status": r["status"]}, r["n"]) for r in data["attempts"]])
    family("quire_callbacks_received_total", "counter", "Callbacks received, replays included.",
           [({"agent": a}, sum(r["callbacks"] for r in data["attempts"] if r["agent"] == a)) for a in sorted(claims)])
    worker = getattr(request.app.state, "worker", None)
    worker_counters = getattr(worker, "counters", None)
    if isinstance(worker_counters, Mapping):
        for key, value in sorted(worker_counters.items()):
            family(f"quire_worker_{key}_total", "counter", f"Worker {key.replace('_', ' ')} (this process).",
                   [({}, value)])
    broadcaster = live.current()
    family("quire_listen_up", "gauge", "1 while the LISTEN connection is healthy.", [({}, int(broadcaster.healthy))])
    family("quire_listen_connects_total", "counter", "LISTEN connections made (reconnects after the first).",
           [({}, broadcaster.connects)])
    family("quire_notifications_total", "counter", "Notifications received.", [({}, broadcaster.notifications)])
    family("quire_sse_subscribers", "gauge", "Open event subscriptions (SSE and pages).",
           [({}, broadcaster.subscribers)])
    by_name: dict[str, list[tuple[Mapping[str, str], float]]] = {}
    for name, labels, value in COUNTERS.items():
        by_name.setdefault(name, []).append((labels, value))
    for name, samples in by_name.items():
        family(name, "counter", "Counted by this process.", samples)
    return PlainTextResponse("\n".join(out) + "\n", media_type="text/plain; version=0.0.4")
