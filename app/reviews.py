"""Review operations shared by the review page and the HTTP API, run off the event loop over the pool."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from psycopg_pool import ConnectionPool

from app import page_images, review_values
from app.figure_cache import in_thread
from schema import review
from schema.review import QueueEntry, Review, ReviewFigures, ReviewStatus
from schema.settings import Settings
from schema.stats_types import TaskFilter


class FieldError(ValueError):
    """A value a reviewer gave that its field's type refuses."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def coerce(values: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Each given value checked against its field's type: text is parsed (dates, amounts in the
    document's decimal style, currency codes); typed JSON values must already have the type."""
    style = review_values.decimal_style(result)
    stated = result.get("fields")
    fields = stated if isinstance(stated, dict) else {}
    out: dict[str, Any] = {}
    for name, value in values.items():
        found = fields.get(name)
        extracted = found.get("value") if isinstance(found, dict) else None
        kind = review_values.kind_of(name, extracted)
        try:
            if isinstance(value, str):
                out[name] = review_values.parse(value, kind, style)
            elif value is None:
                out[name] = None
            elif kind == "amount" and isinstance(value, (int, float)) and not isinstance(value, bool):
                out[name] = float(value)
            elif (kind == "integer" and isinstance(value, int) and not isinstance(value, bool)) or (kind == "list" and isinstance(value, (list, dict))):
                out[name] = value
            else:
                raise ValueError(f"expected {'text' if kind in ('date', 'currency', 'text') else kind}, "
                                 f"got {type(value).__name__}")
        except ValueError as exc:
            raise FieldError(name, str(exc)) from None
    return out


async def claim_next(pool: ConnectionPool, settings: Settings, who: str, flt: TaskFilter | None = None) -> Review | None:
    """The reviewer's held document, else the next one in the queue, claimed; None when none waits."""
    def work(conn):
        claim = review.claim_next(conn, who, flt, lease_seconds=settings.review_lease_seconds)
        return review.read(conn, claim.review_id) if claim else None
    return await in_thread(pool, work)


async def claim_task(pool: ConnectionPool, settings: Settings, who: str, task_id: int) -> Review | None:
    """The review of one task, claimed for `who` when it is open and nobody else holds it; None when
    the task has no review. The returned review says who holds it."""
    def work(conn):
        review_id = review.review_of_task(conn, task_id)
        if review_id is None:
            return None
        review.claim_one(conn, review_id, who, lease_seconds=settings.review_lease_seconds)
        return review.read(conn, review_id)
    return await in_thread(pool, work)


async def read(pool: ConnectionPool, review_id: int) -> Review:
    return await in_thread(pool, review.read, review_id)


async def read_of_task(pool: ConnectionPool, task_id: int) -> Review | None:
    """The review of one task, read only; None when it has none."""
    def work(conn):
        review_id = review.review_of_task(conn, task_id)
        return review.read(conn, review_id) if review_id else None
    return await in_thread(pool, work)


async def save(pool: ConnectionPool, settings: Settings, review_id: int, claim_token: int, who: str,
               values: dict[str, Any], reason: str | None = None) -> Review:
    """Validates and saves corrections; StaleReview (409) or FieldError (422), nothing written."""
    def work(conn):
        current = review.read(conn, review_id)
        review.save(conn, review_id, claim_token, who, coerce(values, current.result), reason=reason,
                    lease_seconds=settings.review_lease_seconds)
        return review.read(conn, review_id)
    return await in_thread(pool, work)


async def decide(pool: ConnectionPool, review_id: int, claim_token: int, who: str, status: ReviewStatus, *,
                 values: dict[str, Any] | None = None, note: str | None = None) -> Review:
    """Approves (with last corrections, atomically) or rejects; StaleReview or FieldError, nothing written."""
    def work(conn):
        current = review.read(conn, review_id)
        review.decide(conn, review_id, claim_token, who, status, values=coerce(values or {}, current.result),
                      note=note)
        return review.read(conn, review_id)
    return await in_thread(pool, work)


async def release(pool: ConnectionPool, review_id: int, claim_token: int, who: str) -> bool:
    return await in_thread(pool, review.release, review_id, claim_token, who)


async def extend(pool: ConnectionPool, settings: Settings, review_id: int, claim_token: int, who: str) -> bool:
    return await in_thread(pool, review.extend, review_id, claim_token, who,
                           lease_seconds=settings.review_lease_seconds)


async def queue(pool: ConnectionPool, flt: TaskFilter | None = None, *, limit: int = 50) -> list[QueueEntry]:
    return await in_thread(pool, review.queue, flt, limit=limit)


async def figures(pool: ConnectionPool, flt: TaskFilter | None = None) -> ReviewFigures:
    return await in_thread(pool, review.figures, flt)


async def events_after(pool: ConnectionPool, after_id: int) -> list[dict[str, Any]]:
    return await in_thread(pool, review.events_after, after_id)


async def last_event_id(pool: ConnectionPool) -> int:
    return await in_thread(pool, review.last_event_id)


async def history(pool: ConnectionPool, task_id: int) -> list[dict[str, Any]]:
    return await in_thread(pool, review.history_of_task, task_id)


# Pages of documents ---------------------------------------------------------------------------

def cache_dir(settings: Settings) -> Path:
    return Path(settings.data_dir) / "page-cache"


@dataclass(frozen=True)
class PageView:
    """What the review page draws for one page: the image URL, the size in points, the words."""

    url: str
    width: float
    height: float
    words: list[dict[str, Any]]


async def page_view(task_id: int, uri: str, sha256: str | None, page: int) -> PageView:
    import asyncio

    text = await asyncio.to_thread(page_images.page_text, uri, sha256, page)
    return PageView(url=f"/api/review/tasks/{task_id}/pages/{page}.png", width=text.width, height=text.height,
                    words=[{"t": w.text, "b": list(w.bbox), "l": w.line} for w in text.words])


async def page_png(settings: Settings, uri: str, sha256: str | None, page: int) -> Path:
    import asyncio

    return await asyncio.to_thread(page_images.page_png, cache_dir(settings), uri, sha256, page)


# Export ---------------------------------------------------------------------------------------

EXPORT_MEDIA_TYPES = {"csv": "text/csv; charset=utf-8",
                      "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                      "json": "application/json"}
EXPORT_HEAD = ["review_id", "task_id", "agent", "customer", "document_name", "document_type",
               "approved_by", "approved_at_utc", "corrected_fields"]


def _utc(value: datetime | None) -> datetime | None:
    return value.astimezone(UTC).replace(tzinfo=None) if value is not None else None


def _cell(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else value


def export_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per approved document: who approved it, which fields were corrected, and every field's
    value as approved (one column per field, in order of first appearance)."""
    fields: list[str] = []
    for row in rows:
        fields += [name for name in row["values"] if name not in fields]
    records = [{"review_id": r["review_id"], "task_id": r["task_id"], "agent": r["agent"], "customer": r["customer"],
                "document_name": r["document_name"], "document_type": r["document_type"],
                "approved_by": r["approved_by"], "approved_at_utc": _utc(r["approved_at"]),
                "corrected_fields": ";".join(sorted(r["corrected_fields"])),
                **{name: _cell(r["values"].get(name)) for name in fields}} for r in rows]
    return pd.DataFrame.from_records(records, columns=EXPORT_HEAD + fields)


def export_json(rows: list[dict[str, Any]]) -> bytes:
    return json.dumps([{"review_id": r["review_id"], "task_id": r["task_id"], "agent": r["agent"],
                        "customer": r["customer"], "document_name": r["document_name"],
                        "document_type": r["document_type"], "approved_by": r["approved_by"],
                        "approved_at": r["approved_at"].isoformat(), "corrected_fields": sorted(r["corrected_fields"]),
                        "fields": r["values"]} for r in rows], ensure_ascii=False, indent=1).encode()


async def export(pool: ConnectionPool, flt: TaskFilter, kind: Literal["csv", "xlsx", "json"]) -> bytes:
    """The approved documents of the filter as CSV, XLSX or JSON bytes."""
    rows = await in_thread(pool, review.export_rows, flt)
    if kind == "json":
        return export_json(rows)
    table = export_frame(rows)
    if kind == "csv":
        return table.to_csv(index=False).encode("utf-8")
    buffer = io.BytesIO()
    with pd.ExcelWriter(buffer, engine="openpyxl") as writer:
        table.to_excel(writer, index=False, sheet_name="approved")
    return buffer.getvalue()
