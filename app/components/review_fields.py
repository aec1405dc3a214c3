"""The review page's widgets: one field (value, confidence, stage, input, note, error), the legend
of keys, and the phone's read-only view with approve and reject."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nicegui import ui

from app import review_values
from app.components import format as fmt
from schema.review import Review

# The keys, as the legend shows them; the page's on_key and the inputs' handlers implement them.
KEYS = [("↓ / j", "next field"), ("↑ / k", "previous field"), ("Enter", "edit field"),
        ("Enter (editing)", "save, next field"), ("Esc", "cancel edit"), ("Space", "accept field"),
        ("Ctrl+Enter", "approve, open next"), ("Shift+R", "reject"), ("Shift+S", "skip"),
        ("PgUp / PgDn", "page")]
# The review keys must not also scroll the page, outside the text fields.
KEYS_SCRIPT = """<script>
document.addEventListener('keydown', (e) => {
  const typing = ['INPUT', 'TEXTAREA', 'SELECT'].includes(e.target.tagName) || e.target.isContentEditable;
  if (!typing && [' ', 'ArrowUp', 'ArrowDown', 'PageUp', 'PageDown'].includes(e.key)) e.preventDefault();
});
</script>"""
REVIEW_CSS = """
.quire-field { border: 1px solid #e3e8ef; border-radius: 8px; padding: 8px 10px; background: #fff; }
.quire-field.selected { border-color: #2563eb; box-shadow: 0 0 0 2px rgba(37,99,235,0.25); }
.quire-field.accepted { background: #f0fdf4; }
.quire-field.accepted.selected { background: #ecfdf5; }
.quire-field-name { font-size: 0.74rem; letter-spacing: 0.04em; text-transform: uppercase; color: #475569; font-weight: 600; }
.quire-page { border: 1px solid #e3e8ef; border-radius: 8px; overflow: hidden; background: #fff; }
.quire-kbd { font-family: ui-monospace, monospace; font-size: 0.72rem; border: 1px solid #cbd5e1; border-bottom-width: 2px;
  border-radius: 4px; padding: 0 5px; background: #f8fafc; color: #0f172a; white-space: nowrap; }
.quire-phone { display: none; }
@media (max-width: 767px) { .quire-desk { display: none !important; } .quire-phone { display: flex; } }
.body--dark .quire-field { background: #111a2b; border-color: #23324a; }
.body--dark .quire-field.accepted { background: #10261c; }
.body--dark .quire-field-name { color: #94a3b8; }
.body--dark .quire-kbd { background: #1e293b; color: #e2e8f0; border-color: #334155; }
"""


@dataclass
class FieldRow:
    """The widgets of one field in the desk view."""

    name: str
    kind: review_values.Kind
    box: Any
    input: Any
    note: Any
    error: Any


def field_row(index: int, name: str, extracted: dict[str, Any], value: Any, style: review_values.Style, *,
              editable: bool) -> FieldRow:
    """One field of the desk view; the page wires its events."""
    kind = review_values.kind_of(name, extracted.get("value"))
    with ui.element("div").classes("quire-field w-full cursor-pointer") \
            .props(f'data-testid="field-{name}" data-index="{index}"') as box:
        with ui.row().classes("w-full items-center gap-2 no-wrap"):
            ui.label(name.replace("_", " ")).classes("quire-field-name grow")
            if extracted.get("stage"):
                ui.badge(extracted["stage"], color="grey-5").classes("text-xs")
            confidence = extracted.get("confidence")
            if isinstance(confidence, (int, float)):
                ui.badge(fmt.percent(confidence), color="negative" if confidence < 0.6 else
                         "warning" if confidence < 0.85 else "positive").classes("text-xs")
            if not extracted.get("evidence"):
                ui.icon("location_off", size="16px").classes("quire-muted").tooltip("no box on the page")
        field_input = ui.input(value=review_values.show(value, kind, style)) \
            .props(f'dense outlined data-testid="input-{name}" {"" if editable else "readonly"}') \
            .classes("w-full quire-mono")
        note = ui.label().classes("text-xs quire-muted").props(f'data-testid="note-{name}"')
        error = ui.label().classes("text-xs text-negative").props(f'data-testid="error-{name}" role="alert"')
        error.set_visibility(False)
    return FieldRow(name, kind, box, field_input, note, error)


def keys_legend() -> None:
    """The keys, shown on the page."""
    with ui.element("div").classes("quire-desk w-full flex flex-wrap gap-x-3 gap-y-1 pt-1 text-xs quire-muted") \
            .props('data-testid="review-keys"'):
        for key, what in KEYS:
            with ui.row().classes("items-center gap-1 no-wrap"):
                ui.html(f'<span class="quire-kbd">{key}</span>', sanitize=False)
                ui.label(what)


def phone_view(item: Review, names: list[str], style: review_values.Style, *, enabled: bool, on_approve: Callable,
               on_reject: Callable) -> None:
    """Below 768 px: the values, read only, with approve and reject, and the first page."""
    with ui.column().classes("quire-phone w-full gap-2").props('data-testid="review-phone"'):
        for name in names:
            kind = review_values.kind_of(name, (item.fields.get(name) or {}).get("value"))
            with ui.row().classes("w-full items-baseline gap-2 no-wrap quire-field"):
                ui.label(name.replace("_", " ")).classes("quire-field-name").style("min-width: 110px")
                ui.label(review_values.show(item.values.get(name), kind, style) or "—") \
                    .classes("quire-mono break-words min-w-0").props(f'data-testid="phone-{name}"')
        with ui.row().classes("w-full gap-2 no-wrap pt-2"):
            ui.button("Approve", icon="check_circle", on_click=on_approve) \
                .props('color=positive unelevated data-testid="phone-approve"').classes("grow").set_enabled(enabled)
            ui.button("Reject", icon="block", on_click=on_reject) \
                .props('outline color=negative data-testid="phone-reject"').classes("grow").set_enabled(enabled)
        ui.image(f"/api/review/tasks/{item.task_id}/pages/1.png").classes("w-full quire-page")
