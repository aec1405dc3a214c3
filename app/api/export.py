"""Export of the filtered per-task cost table: GET /api/export.csv and /api/export.xlsx."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, Depends, Response
from psycopg_pool import ConnectionPool

from app import export
from app.api.common import get_pool
from app.api.schemas import filter_query
from app.auth import Identity, require_user
from schema.stats_types import TaskFilter

router = APIRouter(prefix="/api", tags=["dashboard"])


async def _file(kind: Literal["csv", "xlsx"], flt: TaskFilter, pool: ConnectionPool) -> Response:
    data = await export.export(pool, flt, kind)
    name = f"quire-costs-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.{kind}"
    return Response(content=data, media_type=export.MEDIA_TYPES[kind],
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


@router.get("/export.csv", response_class=Response,
            responses={200: {"content": {"text/csv": {}}, "description": "one row per task"}})
async def export_csv(flt: TaskFilter = Depends(filter_query), _: Identity = Depends(require_user),
                     pool: ConnectionPool = Depends(get_pool)) -> Response:
    """The per-task cost table for the dashboard's filters (same query parameters), as CSV."""
    return await _file("csv", flt, pool)


@router.get("/export.xlsx", response_class=Response,
            responses={200: {"content": {export.MEDIA_TYPES["xlsx"]: {}}, "description": "one row per task"}})
async def export_xlsx(flt: TaskFilter = Depends(filter_query), _: Identity = Depends(require_user),
                      pool: ConnectionPool = Depends(get_pool)) -> Response:
    """The per-task cost table for the dashboard's filters (same query parameters), as XLSX."""
    return await _file("xlsx", flt, pool)
