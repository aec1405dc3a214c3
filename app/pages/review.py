"""The review page: the document's page on one side, its fields on the other, keyboard first; on a
phone, a read-only view with approve and reject."""

from __future__ import annotations

from fastapi import Request
from nicegui import app, ui

from app import inputs, reviews
from app.auth import Identity, viewer
from app.components.layout import frame
from app.components.review_desk import ReviewDesk
from schema.review import Review, ReviewStatus
from schema.stats_types import TaskFilter


def review_filter(customer: str | None, agent: str | None, date_from: str | None, date_to: str | None) -> TaskFilter:
    """The dashboard's filters, from the page's query string (ValueError if invalid)."""
    return inputs.make_filter(date_from, date_to, None, [agent] if agent else None, [customer] if customer else None)


async def _open(who: Identity, flt: TaskFilter, task_id: int | None) -> tuple[Review | None, bool]:
    pool, settings = app.state.pool, app.state.settings
    if task_id is None:
        item = await reviews.claim_next(pool, settings, who.actor, flt) if who.reviewer else None
        return item, item is not None
    if who.reviewer:
        item = await reviews.claim_task(pool, settings, who.actor, task_id)
    else:
        item = await reviews.read_of_task(pool, task_id)
    mine = item is not None and item.status is ReviewStatus.OPEN and item.claimed_by == who.name and who.reviewer
    return item, mine


async def _page(request: Request, task_id: int | None, query: dict[str, str | None]) -> None:
    who = viewer(request)
    with frame(who, active="review"):
        try:
            flt = review_filter(query.get("customer"), query.get("agent"), query.get("date_from"), query.get("date_to"))
        except ValueError as exc:
            ui.label(str(exc)).classes("text-negative")
            return
        item, mine = await _open(who, flt, task_id)
        if task_id is not None and item is None:
            ui.label(f"There is no review for task {shown}." if (shown := query.get("shown")) else "No review.") \
                .classes("text-lg font-semibold") \
                .props('data-testid="review-none"')
            ui.link("Open the next document to review", "/review").classes("text-primary")
            return
        desk = ReviewDesk(who, flt, item, mine=mine)
        await desk.render()
    desk.watch()


@ui.page("/review", title="Review · Quire", response_timeout=20)
async def review_next_page(request: Request, customer: str | None = None, agent: str | None = None,
                           date_from: str | None = None, date_to: str | None = None) -> None:
    await _page(request, None, {"customer": customer, "agent": agent, "date_from": date_from, "date_to": date_to})


@ui.page("/review/{task_id}", title="Review · Quire", response_timeout=20)
async def review_task_page(request: Request, task_id: str, customer: str | None = None, agent: str | None = None,
                           date_from: str | None = None, date_to: str | None = None) -> None:
    number = int(task_id) if task_id.isascii() and task_id.isdigit() and len(task_id) < 19 else 0
    await _page(request, number if inputs.valid_id(number) else -1,
                {"customer": customer, "agent": agent, "date_from": date_from, "date_to": date_to,
                 "shown": task_id if len(task_id) <= 40 else task_id[:40] + "…"})
