"""The dashboard's review section: backlog, decisions, time to review, approvals per day, correction
rate per field and accuracy per agent, extractor and model, all counted from the corrections."""

from __future__ import annotations

from collections.abc import Callable

from nicegui import ui

from app.components import format as fmt
from schema.review import ReviewFigures


def _share(part: int, whole: int) -> str:
    return fmt.percent(part / whole) if whole else "—"


class ReviewBoard:
    """Figures of the review trail under the dashboard's filters, with links to review and export."""

    def __init__(self, export_url: Callable[[str], str], review_url: Callable[[], str]) -> None:
        self.export_url, self.review_url = export_url, review_url
        with ui.card().classes("quire-card w-full p-4 gap-3").props('data-testid="review-board"'):
            with ui.row().classes("w-full items-center gap-2"):
                ui.label("Review").classes("quire-section-title")
                ui.label("what reviewers checked and corrected").classes("text-sm quire-muted")
                ui.space()
                self.open_link = ui.link("Review next", "/review").classes("text-primary font-medium") \
                    .props('data-testid="review-open"')
                for kind in ("csv", "xlsx", "json"):
                    ui.button(f"Approved {kind.upper()}", icon="download",
                              on_click=lambda k=kind: ui.navigate.to(self.export_url(k))) \
                        .props(f'flat dense no-caps data-testid="review-export-{kind}"')
            with ui.element("div").classes("grid grid-cols-2 md:grid-cols-6 gap-x-8 gap-y-3 w-full"):
                self.kpis = {}
                for key, label in (("open", "Backlog"), ("held", "Being reviewed"), ("approved", "Approved"),
                                   ("rejected", "Rejected"), ("p50", "Time to review p50"),
                                   ("p90", "Time to review p90")):
                    with ui.column().classes("gap-0"):
                        ui.label(label).classes("quire-kpi-label")
                        self.kpis[key] = ui.label("—").classes("quire-kpi-value") \
                            .props(f'data-testid="review-kpi-{key}"')
            with ui.element("div").classes("grid grid-cols-1 lg:grid-cols-3 gap-4 w-full"):
                self.per_day = self._table("Approved per day", [("day", "Day (UTC)"), ("approved", "Approved")],
                                           "review-per-day")
                self.rates = self._table("Correction rate per field",
                                         [("field", "Field"), ("reviewed", "Reviewed"), ("corrected", "Corrected"),
                                          ("rate", "Rate")], "review-field-rates")
                self.accuracy = self._table("Field accuracy", [("who", "Agent · extractor · model"),
                                                                ("documents", "Docs"), ("accuracy", "Accuracy")],
                                            "review-accuracy")

    @staticmethod
    def _table(title: str, columns: list[tuple[str, str]], testid: str) -> ui.table:
        with ui.column().classes("gap-1 min-w-0"):
            ui.label(title).classes("text-sm font-semibold")
            return ui.table(columns=[{"name": k, "label": label, "field": k, "align": "left"} for k, label in columns],
                            rows=[], row_key=columns[0][0]) \
                .props(f'dense flat bordered hide-bottom no-data-label="nothing approved yet" data-testid="{testid}"') \
                .classes("w-full")

    def update(self, figures: ReviewFigures) -> None:
        values = {"open": fmt.count(figures.open), "held": fmt.count(figures.held),
                  "approved": fmt.count(figures.approved), "rejected": fmt.count(figures.rejected),
                  "p50": fmt.duration(figures.review_p50_s), "p90": fmt.duration(figures.review_p90_s)}
        for key, text in values.items():
            self.kpis[key].text = text
        self.open_link.props(f'href="{self.review_url()}"')
        self.per_day.rows = [{"day": day.isoformat(), "approved": n} for day, n in figures.approved_per_day[-14:]]
        self.rates.rows = [{**r, "rate": _share(r["corrected"], r["reviewed"])}
                           for r in sorted(figures.field_rates, key=lambda r: -r["corrected"] / max(r["reviewed"], 1))]
        self.accuracy.rows = [{"who": f"{r['agent']} · {r['extractor']} · {r['model']}", "documents": r["documents"],
                               "accuracy": _share(r["right"], r["fields"])} for r in figures.accuracy]
