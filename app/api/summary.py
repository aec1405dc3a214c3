"""Dashboard figures over HTTP: every summary figure and chart series, and the slow compute cost."""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter, Depends, HTTPException
from psycopg_pool import ConnectionPool
from pydantic import BaseModel

from app import services
from app.api.common import get_pool
from app.api.schemas import ChartsOut, SummaryOut, filter_query, plain
from app.auth import Identity, require_user
from schema.stats_types import TaskFilter

router = APIRouter(prefix="/api", tags=["dashboard"])


@router.get("/summary", response_model=SummaryOut)
async def get_summary(flt: TaskFilter = Depends(filter_query), _: Identity = Depends(require_user),
                      pool: ConnectionPool = Depends(get_pool)) -> SummaryOut:
    """Counts per status, tokens, LLM cost, measured compute cost, latency, confidence and charts.

    Read once a second at most per filter, for every page and API client showing it; `catching_up`
    says a backlog (a bulk load) is being folded and the figures count what was folded (`as_of`)."""
    overview = (await services.live_summary(pool, flt, exact=True))[0]
    charts = (await services.live_charts(pool, flt, exact=True))[0]
    return SummaryOut.of(overview, plain(dataclasses.asdict(charts)))


@router.get("/charts", response_model=ChartsOut)
async def get_charts(flt: TaskFilter = Depends(filter_query), _: Identity = Depends(require_user),
                     pool: ConnectionPool = Depends(get_pool)) -> ChartsOut:
    """Throughput, cost by agent and customer, response time and confidence bins, for the same filters."""
    charts = (await services.live_charts(pool, flt, exact=True))[0]
    return ChartsOut(**plain(dataclasses.asdict(charts)))


class ComputeCostOut(BaseModel):
    cost_usd: float | None
    source: str
    detail: str


@router.get("/compute-cost", response_model=ComputeCostOut)
async def get_compute_cost(flt: TaskFilter = Depends(filter_query), _: Identity = Depends(require_user),
                           pool: ConnectionPool = Depends(get_pool)) -> ComputeCostOut:
    """Slow: the billing tables on Databricks (QUIRE_WAREHOUSE_ID set), else the measured cost."""
    try:
        cost = await services.compute_cost(pool, flt)
    except Exception as exc:  # the billing service's own error is the useful message
        raise HTTPException(status_code=502, detail=f"compute cost unavailable: {exc}") from exc
    return ComputeCostOut(cost_usd=float(cost.cost_usd) if cost.cost_usd is not None else None,
                          source=cost.source, detail=cost.detail)
