"""The dashboard's Plotly charts: throughput, cost by agent and customer, latency, confidence."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from nicegui import ui

from app.components import format as fmt
from schema.models import TaskStatus
from schema.stats_types import Charts

# Mid-grey text reads on the light and the dark theme alike.
FONT = {"family": "Inter, Roboto, -apple-system, Segoe UI, sans-serif", "size": 12, "color": "#64748b"}
CONFIG = {"displayModeBar": False, "responsive": True}
LLM_COLOR, COMPUTE_COLOR = "#2563eb", "#94a3b8"
GRID = "rgba(148, 163, 184, 0.25)"  # faint on white and on the dark theme alike


def _layout(**extra: Any) -> dict[str, Any]:
    layout = {"margin": {"l": 56, "r": 16, "t": 8, "b": 40}, "height": 260, "font": FONT,
              "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)",
              "xaxis": {"gridcolor": GRID, "zeroline": False},
              "yaxis": {"gridcolor": GRID, "zeroline": False, "rangemode": "tozero"},
              "legend": {"orientation": "h", "y": 1.12, "x": 0}, "bargap": 0.15}
    layout.update(extra)
    return layout


def _count_axis(largest: int, **extra: Any) -> dict[str, Any]:
    """An axis of whole tasks: integer ticks only (Plotly would put ticks at 0.5 for small counts)."""
    axis = {"gridcolor": GRID, "rangemode": "tozero", "tickformat": ",d", **extra}
    if largest <= 6:
        axis.update(dtick=1, tick0=0)
    return axis


def _empty(message: str) -> dict[str, Any]:
    return {"data": [], "config": CONFIG,
            "layout": _layout(xaxis={"visible": False}, yaxis={"visible": False},
                              annotations=[{"text": message, "showarrow": False, "font": {"color": "#94a3b8"},
                                            "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}])}


def throughput_figure(charts: Charts) -> dict[str, Any]:
    if not charts.throughput:
        return _empty("No tasks for these filters")
    series: dict[str, dict[datetime, int]] = {}
    for row in charts.throughput:
        series.setdefault(row["series"], {})[row["bucket"]] = row["n"]
    data = []
    names = [n for n in (fmt.SUBMITTED, *(s.value for s in TaskStatus if s.terminal)) if n in series]
    # A date axis has no natural bar width: give each bar its share of the bucket, in milliseconds.
    width = charts.bucket_seconds * 1000 * 0.8 / len(names)
    for i, name in enumerate(names):
        points = sorted(series[name].items())
        # Bars sit inside their bucket [start, start + bucket), side by side.
        data.append({"type": "bar", "name": name, "marker": {"color": fmt.STATUS_HEX[name]}, "width": width,
                     "offset": charts.bucket_seconds * 100 + i * width,
                     "x": [p[0].isoformat() for p in points], "y": [p[1] for p in points],
                     "hovertemplate": "%{y:,} " + name + "<extra>%{x}</extra>"})
    # Margin each side keeps one or two buckets from filling the whole width.
    buckets = sorted({row["bucket"] for row in charts.throughput})
    bucket = timedelta(seconds=charts.bucket_seconds)
    span = [(buckets[0] - bucket / 2).isoformat(), (buckets[-1] + bucket * 1.5).isoformat()]
    per = {10: "10 s", 30: "30 s", 60: "minute", 300: "5 min", 900: "15 min", 3600: "hour", 21600: "6 h",
           86400: "day"}.get(charts.bucket_seconds, "week")
    return {"data": data, "config": CONFIG,
            "layout": _layout(barmode="overlay", xaxis={"type": "date", "range": span, "gridcolor": GRID},
                              yaxis=_count_axis(max(row["n"] for row in charts.throughput),
                                                title={"text": f"tasks per {per}"}))}


def cost_figure(rows: list[dict[str, Any]], *, horizontal: bool = False) -> dict[str, Any]:
    if not any(float(r["llm_cost_usd"]) or float(r["compute_cost_usd"]) for r in rows):
        if rows and not any(r["tokens"] for r in rows):
            return _empty("No LLM used and no compute rate set: nothing to price")
        if rows:
            return _empty("Tokens used but unpriced: set the agent's prices in quire.toml")
        return _empty("No spend recorded for these filters")
    keys = [r["key"] for r in rows]
    llm = [float(r["llm_cost_usd"]) for r in rows]
    compute = [float(r["compute_cost_usd"]) for r in rows]
    hover = [f"{r['tasks']:,} tasks, {fmt.tokens(r['tokens'])} tokens" for r in rows]

    def bar(name: str, values: list[float], color: str) -> dict[str, Any]:
        axes = {"y": keys, "x": values, "orientation": "h"} if horizontal else {"x": keys, "y": values}
        return {"type": "bar", "name": name, "marker": {"color": color}, "customdata": hover,
                "hovertemplate": "%{customdata}<br>$%{" + ("x" if horizontal else "y") + ":,.4f}<extra>" + name
                                 + "</extra>", **axes}
    money_axis = {"tickprefix": "$", "gridcolor": GRID, "rangemode": "tozero"}
    layout = _layout(barmode="stack", **({"xaxis": money_axis, "yaxis": {"automargin": True,
                                                                           "autorange": "reversed"}}
                                          if horizontal else {"yaxis": money_axis}))
    return {"data": [bar("LLM", llm, LLM_COLOR), bar("compute (measured)", compute, COMPUTE_COLOR)],
            "config": CONFIG, "layout": layout}


def histogram_figure(bins: list[dict[str, Any]], *, label, color: str, empty: str, axis: str,
                     x_range: list[float] | None = None, tick_format: str | None = None) -> dict[str, Any]:
    if not bins:
        return _empty(empty)
    return {"data": [{"type": "bar", "x": [(b["lo"] + b["hi"]) / 2 for b in bins], "y": [b["n"] for b in bins],
                      "width": [(b["hi"] - b["lo"]) * 0.92 for b in bins], "marker": {"color": color},
                      "customdata": [f"{label(b['lo'])} – {label(b['hi'])}" for b in bins],
                      "hovertemplate": "%{customdata}: %{y:,} tasks<extra></extra>"}],
            "config": CONFIG, "layout": _layout(xaxis={"title": {"text": axis}, "gridcolor": GRID,
                                                       **({"range": x_range} if x_range else {}),
                                                       **({"tickformat": tick_format} if tick_format else {})},
                                                yaxis=_count_axis(max(b["n"] for b in bins),
                                                                  title={"text": "tasks"}))}


class ChartsBoard:
    """Five charts in a responsive grid, redrawn from one Charts value."""

    def __init__(self) -> None:
        self.plots: dict[str, ui.plotly] = {}
        specs = [("throughput", "Throughput over time", "lg:col-span-2"),
                 ("cost_agent", "Cost by agent", ""), ("cost_customer", "Cost by customer", ""),
                 ("latency", "Response time distribution", ""), ("confidence", "Confidence distribution", "")]
        with ui.element("div").classes("grid grid-cols-1 lg:grid-cols-2 gap-4 w-full"):
            for key, title, span in specs:
                with ui.card().classes(f"quire-card p-4 gap-2 {span}"):
                    ui.label(title).classes("quire-section-title")
                    self.plots[key] = ui.plotly(_empty("Loading…")).classes("w-full") \
                        .props(f'data-testid="chart-{key}"')

    def update(self, charts: Charts) -> None:
        figures = {
            "throughput": throughput_figure(charts),
            "cost_agent": cost_figure(charts.cost_by_agent),
            "cost_customer": cost_figure(charts.cost_by_customer, horizontal=True),
            "latency": histogram_figure(charts.latency_bins, label=fmt.duration, color="#0ea5e9",
                                        empty="No completed tasks", axis="submission to completion (s)"),
            "confidence": histogram_figure(charts.confidence_bins, label=fmt.percent, color="#8b5cf6",
                                           empty="No completed tasks", axis="overall confidence",
                                           x_range=[0, 1], tick_format=".0%"),
        }
        for key, figure in figures.items():
            plot = self.plots[key]
            if plot.figure != figure:
                plot.update_figure(figure)
