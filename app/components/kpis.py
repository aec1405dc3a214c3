"""Headline figures: counts per status, tokens, costs, response time and confidence."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from nicegui import ui

from app.components import format as fmt
from app.services import ComputeCost
from schema.models import TaskStatus
from schema.stats_types import Summary

STATUS_LABELS = [(status.value, status.value.capitalize()) for status in TaskStatus]


def _card(label: str, testid: str, *, accent: str | None = None) -> tuple[ui.label, ui.label]:
    style = f"border-left: 4px solid {accent}" if accent else ""
    with ui.card().classes("quire-card p-4 gap-1 min-w-[150px] flex-1").style(style):
        ui.label(label).classes("quire-kpi-label")
        value = ui.label(fmt.DASH).classes("quire-kpi-value").props(f'data-testid="{testid}"')
        sub = ui.label("").classes("text-xs quire-muted")
    return value, sub


def spend_note(summary: Summary) -> str:
    """Median and p90 LLM spend per task (never the mean), and usage that has no price yet."""
    llm = summary.spend_per_task.get("llm") or {}
    parts = ([f"median {fmt.money(llm['p50'])} per task, p90 {fmt.money(llm['p90'])}"]
             if llm.get("p50") is not None else [])
    if summary.unpriced_attempts:
        parts.append(f"{summary.unpriced_attempts:,} unpriced")
    return "; ".join(parts) or ("no usage reported yet" if not summary.tasks_with_usage else "no price configured")


def llm_cost_tile(summary: Summary) -> tuple[str, str]:
    """The LLM cost card's figure and line: where no model was called it says so, never "$0.00"."""
    if not summary.input_tokens and not summary.output_tokens and not summary.llm_cost_usd:
        return "no LLM used", ("no task called a model" if summary.total
                               else "no tasks")
    if not summary.llm_cost_usd and summary.unpriced_attempts:
        return "unpriced", spend_note(summary)
    return fmt.money(summary.llm_cost_usd), spend_note(summary)


class KpiBoard:
    """Two rows of figure cards; the compute-cost card fetches on demand."""

    def __init__(self, on_fetch_compute: Callable[[], Awaitable[ComputeCost]]) -> None:
        self._on_fetch_compute = on_fetch_compute
        self.status: dict[str, tuple[ui.label, ui.label]] = {}
        with ui.row().classes("w-full gap-4 flex-wrap items-stretch"):
            for key, label in STATUS_LABELS:
                self.status[key] = _card(label, f"kpi-{key}", accent=fmt.STATUS_HEX[key])
        with ui.row().classes("w-full gap-4 flex-wrap items-stretch"):
            self.tokens = _card("Tokens in / out", "kpi-tokens")
            # Two large counts side by side: a smaller size keeps them on one line.
            self.tokens[0].classes(replace="quire-kpi-value text-lg whitespace-nowrap").style("font-size: 1.15rem")
            self.llm_cost = _card("LLM cost", "kpi-llm-cost")
            with ui.card().classes("quire-card p-4 gap-1 min-w-[190px] flex-1"):
                with ui.row().classes("w-full items-center justify-between no-wrap"):
                    ui.label("Compute cost").classes("quire-kpi-label")
                    self.fetch_button = ui.button("Fetch", icon="cloud_download", on_click=self.fetch_compute) \
                        .props('flat dense size=sm color=primary data-testid="fetch-compute"')
                with ui.row().classes("items-center gap-2"):
                    self.compute_value = ui.label(fmt.DASH).classes("quire-kpi-value") \
                        .props('data-testid="kpi-compute-cost"')
                    self.compute_spinner = ui.spinner(size="sm")
                    self.compute_spinner.visible = False
                self.compute_sub = ui.label("Slow figure: fetched on demand").classes("text-xs quire-muted")
            self.latency = _card("Median response time", "kpi-median-latency")
            self.confidence = _card("Average confidence", "kpi-confidence")

    def update(self, summary: Summary) -> None:
        for key, (value, sub) in self.status.items():
            n = summary.counts.get(key, 0)
            value.text = fmt.count(n)
            sub.text = f"{n / summary.total:.0%} of {summary.total:,}" if summary.total else "no tasks"
        total_tokens = summary.input_tokens + summary.output_tokens
        self.tokens[0].text = f"{fmt.tokens(summary.input_tokens)} / {fmt.tokens(summary.output_tokens)}"
        self.tokens[1].text = (f"{fmt.tokens(total_tokens / summary.tasks_with_usage)} per task on average"
                               if summary.tasks_with_usage else "no usage reported yet")
        self.llm_cost[0].text, self.llm_cost[1].text = llm_cost_tile(summary)
        self.latency[0].text = fmt.duration(summary.median_latency_s)
        self.latency[1].text = (f"p95 {fmt.duration(summary.p95_latency_s)}, submission to completion less time held"
                                if summary.median_latency_s is not None else "no completed tasks")
        self.confidence[0].text = fmt.percent(summary.avg_confidence)
        self.confidence[1].text = ("over completed documents" if summary.avg_confidence is not None
                                   else "no completed tasks")

    def reset_compute(self) -> None:
        """The figure belongs to one filter: a new filter clears it until fetched again."""
        self.compute_value.text = fmt.DASH
        self.compute_sub.text = "Slow figure: fetched on demand"

    async def fetch_compute(self) -> None:
        self.fetch_button.disable()
        self.compute_spinner.visible = True
        self.compute_value.text = ""
        self.compute_sub.text = "Querying compute cost…"
        try:
            result = await self._on_fetch_compute()
            self.compute_value.text = fmt.money(result.cost_usd)
            source = "billing tables" if result.source == "billing" else "measured run time"
            self.compute_sub.text = f"From {source}: {result.detail}"
        except Exception as exc:  # shown to the operator; the figure simply stays unknown
            self.compute_value.text = fmt.DASH
            self.compute_sub.text = f"Could not fetch: {exc}"
        finally:
            self.compute_spinner.visible = False
            self.fetch_button.enable()
