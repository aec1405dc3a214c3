"""Confirmation before an operator action that spends money or stops work: the count and the consequence."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from nicegui import ui

from schema.models import TaskStatus


def _tasks(n: int, what: str = "task") -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def retry_consequence(statuses: Iterable[TaskStatus]) -> tuple[str, str]:
    """The dialog's title and body for retrying tasks in these states."""
    counts = Counter(statuses)
    completed = counts.get(TaskStatus.COMPLETED, 0)
    ended = counts.get(TaskStatus.FAILED, 0) + counts.get(TaskStatus.CANCELLED, 0)
    parts, body = [], []
    if completed:
        parts.append(f"re-extract {_tasks(completed, 'completed document')}")
        body.append("Each completed document is read again as a new task: this spends tokens again.")
    if ended:
        parts.append(f"run {_tasks(ended, 'failed or cancelled task')} again")
        body.append("Failed and cancelled tasks go back to the queue with a fresh attempt budget; "
                    "each run spends tokens.")
    title = " and ".join(parts) or "nothing to retry"
    return title[0].upper() + title[1:] + "?", " ".join(body)


def cancel_consequence(count: int) -> tuple[str, str]:
    """The dialog's title and body for cancelling `count` tasks."""
    return (f"Cancel {_tasks(count)}?",
            "Work in progress stops and its result is discarded. A cancelled task can be run again later "
            "with Retry, which starts it over.")


async def confirm(title: str, body: str, *, action: str, color: str, icon: str) -> bool:
    """Asks before acting; True only when the operator presses the action button."""
    with ui.dialog() as dialog, ui.card().classes("quire-card p-5 gap-3 max-w-[440px]") \
            .props('data-testid="confirm-dialog"'):
        with ui.row().classes("items-center gap-2 no-wrap"):
            ui.icon(icon, size="26px").classes(f"text-{color}")
            ui.label(title).classes("text-lg font-semibold").props('data-testid="confirm-title"')
        ui.label(body).classes("text-sm quire-muted").props('data-testid="confirm-body"')
        with ui.row().classes("w-full justify-end gap-2"):
            ui.button("Keep as is", on_click=lambda: dialog.submit(False)) \
                .props('flat color=secondary data-testid="confirm-no"')
            ui.button(action, icon=icon, on_click=lambda: dialog.submit(True)) \
                .props(f'unelevated color={color} data-testid="confirm-yes"')
    result = await dialog
    dialog.delete()
    return bool(result)
