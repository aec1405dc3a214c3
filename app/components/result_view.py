"""Pieces of the task detail page: facts, the extracted result, attempts and the timeline."""

from __future__ import annotations

from nicegui import ui

from app.components import format as fmt
from schema.models import Task, TaskStatus

FIELD_LABELS = {
    "issuer": "Issuer", "invoice_number": "Invoice number", "issue_date": "Issue date", "due_date": "Due date",
    "currency": "Currency", "subtotal": "Subtotal", "tax": "Tax", "total": "Total", "line_items": "Line items",
    "parties": "Parties", "effective_date": "Effective date", "term_months": "Term (months)",
    "governing_law": "Governing law", "total_value": "Total value", "company": "Company",
    "period_end": "Period end", "revenue": "Revenue", "net_income": "Net income", "total_assets": "Total assets",
}


def fact(label: str, value: str, *, mono: bool = False, title: str | None = None) -> None:
    with ui.column().classes("gap-0 min-w-0"):
        ui.label(label).classes("quire-kpi-label")
        # As wide as its grid cell and no wider: a long value is cut with an ellipsis on a phone.
        text = ui.label(value).classes("text-sm text-slate-900 truncate w-full" + (" quire-mono" if mono else ""))
        if title:
            text.tooltip(title)


def _confidence_bar(confidence: float | None) -> None:
    value = confidence or 0.0
    color = "positive" if value >= 0.8 else ("warning" if value >= 0.5 else "negative")
    with ui.row().classes("items-center gap-2 no-wrap w-24 sm:w-40"):
        ui.linear_progress(value, show_value=False, size="6px").props(f"rounded color={color} track-color=grey-3")
        ui.label(fmt.percent(confidence)).classes("text-xs w-10 text-right")


def source_text(source: dict) -> str:
    """"e-invoice XML · Factur-X · EN 16931": where exact values came from."""
    return " · ".join(str(source[k]) for k in ("kind", "standard", "profile", "envelope") if source.get(k))


def finding_text(finding: dict) -> str:
    """One audit finding in words."""
    if finding.get("kind") == "xml_page_mismatch":
        named = str(finding.get("field", ""))
        field = FIELD_LABELS.get(named, named.replace("_", " "))
        page = finding.get("page")
        return (f"{field}: the e-invoice XML states {fmt.value_text(finding.get('xml'))}, the page shows "
                f"{fmt.value_text(page) if page is not None else 'nothing'}")
    return str(finding.get("kind", "finding")).replace("_", " ")


def _source_and_findings(result: dict) -> None:
    source = result.get("source")
    if isinstance(source, dict) and source:
        ui.label(source_text(source)).classes("text-xs quire-muted").props('data-testid="result-source"')
    for finding in result.get("findings") or []:
        if isinstance(finding, dict):
            ui.label(finding_text(finding)).classes("text-sm text-negative") \
                .props('data-testid="result-finding"')


def result_card(task: Task) -> None:
    with ui.card().classes("quire-card w-full p-5 gap-3"):
        with ui.row().classes("w-full items-center"):
            ui.label("Extracted result").classes("quire-section-title")
            ui.space()
            if task.result:
                kind = str(task.result.get("document_type", "other")).replace("_", " ")
                ui.badge(kind, color="blue-grey-7").classes("px-2 py-1")
                extractor = task.result.get("extractor")
                if extractor:
                    model = task.result.get("model")
                    ui.label(f"{extractor}{' · ' + model if model else ''}").classes("text-xs quire-muted")
        if not task.result:
            waiting = {TaskStatus.ENQUEUED: "Waiting for a worker.",
                       TaskStatus.PROCESSING: "The agent is reading the document…"}
            ui.label(waiting.get(task.status, "No result.")).classes("quire-muted")
            return
        _source_and_findings(task.result)
        fields = task.result.get("fields") or {}
        if not fields:
            ui.label("The agent returned no fields.").classes("quire-muted")
            return
        # A narrow screen scrolls the fields sideways inside the card, never the page.
        with ui.element("div").classes("w-full overflow-x-auto"), \
                ui.element("table").classes("w-full text-sm").props('data-testid="result-fields"'):
            with ui.element("tr").classes("text-left quire-kpi-label"):
                for head in ("Field", "Value", "Confidence", "Source"):
                    with ui.element("th").classes("py-2 font-medium"):
                        ui.label(head)
            for name, item in fields.items():
                item = item if isinstance(item, dict) else {"value": item, "confidence": None}
                value = item.get("value")
                lines = value if name == "line_items" and isinstance(value, list) and value else None
                with ui.element("tr").classes("border-t border-slate-100 align-top"):
                    with ui.element("td").classes("py-2 pr-4 text-slate-600 whitespace-nowrap"):
                        ui.label(FIELD_LABELS.get(name, name.replace("_", " ").capitalize()))
                    with ui.element("td").classes("py-2 pr-4"):
                        if lines:
                            ui.label(f"{len(lines)} line{'s' if len(lines) != 1 else ''}").classes("font-medium")
                        else:
                            ui.label(fmt.value_text(value)).classes("font-medium" if value is not None else "quire-muted")
                    with ui.element("td").classes("py-2 pr-4"):
                        _confidence_bar(item.get("confidence"))
                    with ui.element("td").classes("py-2").props(f'data-testid="evidence-{name}"'):
                        _evidence(item)
                if lines:
                    # A table of its own, under its row and across the columns: inside the value
                    # column it widened that column until the sources beside it were cut off.
                    with ui.element("tr"), ui.element("td").classes("pb-2").props('colspan="4"'):
                        _line_items(lines)
        if task.result.get("needs_review"):
            ui.label("A key field is doubtful or a cross-check failed: a person should check this result.") \
                .classes("text-sm text-warning").props('data-testid="result-needs-review"')


def evidence_text(item: dict) -> str | None:
    """Where a field's value was read, for a reader: "p. 1 · “Rechnungsnr. RE-2024-318”"."""
    evidence = item.get("evidence")
    if not isinstance(evidence, dict):
        return None
    page, text = evidence.get("page"), evidence.get("text")
    parts = [f"p. {page}" if isinstance(page, int) else None,
             f"“{text}”" if isinstance(text, str) and text else None]
    return " · ".join(p for p in parts if p) or None


def _evidence(item: dict) -> None:
    shown = evidence_text(item)
    stage = item.get("stage")
    if shown is None:
        # A value found but printed nowhere (computed, or read by a model) says so.
        value = item.get("value")
        located = value is not None and not isinstance(value, (list, dict)) and "evidence" in item
        note = "not on the page" if located else fmt.DASH
        ui.label(note).classes("text-xs quire-muted whitespace-nowrap")
        return
    # Whole, wrapped within its column: the quote is what a reader checks the value by. The column
    # keeps room for it beside a wide field (line items); a narrow screen scrolls the table sideways.
    label = ui.label(shown).classes("text-xs text-slate-700 quire-mono") \
        .style("min-width: 11rem; max-width: 20rem; overflow-wrap: anywhere")
    if stage:
        label.tooltip(f"read by {stage}")


def _line_items(items: list[dict]) -> None:
    columns = [{"name": k, "label": k.replace("_", " "), "field": k, "align": "right" if k != "description" else "left"}
               for k in ("description", "quantity", "unit_price", "amount")]
    rows = [{k: fmt.value_text(item.get(k)) for k in ("description", "quantity", "unit_price", "amount")}
            for item in items[:50]]
    ui.table(columns=columns, rows=rows).props("flat dense hide-bottom").classes("w-full")


def attempts_table(task: Task) -> None:
    with ui.card().classes("quire-card w-full p-5 gap-3"):
        ui.label("Attempts").classes("quire-section-title")
        if not task.attempts:
            ui.label("Not claimed yet.").classes("quire-muted")
            return
        columns = [{"name": n, "label": label, "field": n, "align": "left"} for n, label in (
            ("no", "#"), ("status", "Status"), ("worker", "Worker / executor"), ("run", "Job run"),
            ("trace", "Trace"), ("tokens", "Tokens in / out"), ("llm", "LLM cost"), ("compute", "Compute"),
            ("started", "Started (UTC)"), ("took", "Took"))]
        rows = []
        for a in task.attempts:
            took = (a.finished_at - a.started_at).total_seconds() if a.finished_at else None
            rows.append({"no": a.attempt_no, "status": fmt.attempt_status(a.status.value),
                         "worker": f"{a.worker_id} / {a.executor or fmt.DASH}", "run": a.job_run_id or fmt.DASH,
                         "trace": a.trace_id or fmt.DASH,
                         "tokens": f"{fmt.tokens(a.input_tokens)} / {fmt.tokens(a.output_tokens)}",
                         "llm": fmt.money(a.llm_cost_usd), "compute": fmt.money(a.compute_cost_usd),
                         "started": fmt.when(a.started_at), "took": fmt.duration(took)})
        ui.table(columns=columns, rows=rows, row_key="no").props('flat dense hide-bottom wrap-cells '
                                                                 'data-testid="attempts"').classes("w-full")
        for a in task.attempts:
            if a.error:
                ui.label(f"Attempt {a.attempt_no}: {a.error}").classes("text-sm text-negative")


def timeline(task: Task) -> None:
    with ui.card().classes("quire-card w-full p-5 gap-2"):
        ui.label("Timeline").classes("quire-section-title")
        if not task.events:
            ui.label("No events yet.").classes("quire-muted")
            return
        with ui.timeline(side="right", layout="dense").props('data-testid="timeline"'):
            for event in reversed(task.events):
                status = event.status.value
                prev = event.prev_status.value if event.prev_status else None
                subtitle = fmt.when(event.at) + (f" · {event.actor}" if event.actor else "")
                title, body = fmt.event_words(status, prev)
                ui.timeline_entry(body, title=title, subtitle=subtitle, icon=fmt.STATUS_ICONS.get(status),
                                  color=fmt.STATUS_COLORS.get(status))
