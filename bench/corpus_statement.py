"""Financial statements for the bench corpus: consistent figures, ground truth and rendering."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta

from fpdf.fonts import FontFace

from bench.corpus_locale import Formatter, Locale, pick_formatter, pick_locale
from bench.corpus_names import Company, make_company
from bench.corpus_pdf import DocPDF, FontChoice, pick_font
from bench.corpus_statement_text import (
    BALANCE_ROWS,
    BOLD_ROWS,
    INCOME_ROWS,
    NOTES,
    ROW_LABELS,
    SECTIONS,
    TITLES,
    UNIT_LINES,
)


def _figures(rng: random.Random, scale: int, loss: bool, revenue: float) -> dict[str, int]:
    """One year of figures in whole currency units, multiples of the display scale."""
    def r(x: float) -> int:
        return round(x / scale) * scale

    f = {"revenue": r(revenue)}
    f["cogs"] = -r(f["revenue"] * rng.uniform(0.4, 0.7))
    f["gross"] = f["revenue"] + f["cogs"]
    # A loss-making year spends more than its gross profit on overheads.
    f["admin"] = -r(f["gross"] * (rng.uniform(1.05, 1.4) if loss else rng.uniform(0.4, 0.8)))
    f["other_income"] = r(f["revenue"] * rng.uniform(0, 0.02))
    f["operating"] = f["gross"] + f["admin"] + f["other_income"]
    f["finance"] = -r(f["revenue"] * rng.uniform(0.002, 0.03))
    f["pbt"] = f["operating"] + f["finance"]
    f["tax"] = -r(max(0, f["pbt"]) * rng.uniform(0.22, 0.3))
    f["net"] = f["pbt"] + f["tax"]
    for key, share in (("ppe", (0.2, 0.8)), ("intangibles", (0.02, 0.2)),
                       ("fin_assets", (0.0, 0.1)), ("inventories", (0.05, 0.2)),
                       ("receivables", (0.1, 0.3)), ("cash", (0.03, 0.2))):
        f[key] = r(f["revenue"] * rng.uniform(*share))
    f["nca_total"] = f["ppe"] + f["intangibles"] + f["fin_assets"]
    f["ca_total"] = f["inventories"] + f["receivables"] + f["cash"]
    f["total_assets"] = f["nca_total"] + f["ca_total"]
    f["net_bs"] = f["net"]
    f["share_capital"] = r(rng.choice([0.02, 0.05, 0.1]) * f["total_assets"])
    f["borrowings"] = r(f["total_assets"] * rng.uniform(0.1, 0.35))
    f["payables"] = r(f["total_assets"] * rng.uniform(0.08, 0.2))
    f["other_liab"] = r(f["total_assets"] * rng.uniform(0.02, 0.08))
    f["liab_total"] = f["borrowings"] + f["payables"] + f["other_liab"]
    f["equity_total"] = f["total_assets"] - f["liab_total"]
    f["reserves"] = f["equity_total"] - f["share_capital"] - f["net_bs"]
    f["total_el"] = f["equity_total"] + f["liab_total"]
    return f


def _period_end(rng: random.Random) -> date:
    year = rng.randint(2019, 2024)
    return rng.choice([date(year, 12, 31)] * 4 + [date(year, 6, 30), date(year, 3, 31)])


@dataclass
class StatementSpec:
    """Every random choice behind one set of financial statements."""

    locale: Locale
    fmt: Formatter
    font: FontChoice
    company: Company
    period_end: date
    currency: str
    scale: int
    current: dict
    prior: dict
    pages: int
    labels: dict
    render_seed: int

    @property
    def lang(self) -> str:
        return self.locale.lang

    def truth_fields(self) -> dict:
        return {
            "company": self.company.name,
            "period_end": self.period_end.isoformat(),
            "currency": self.currency,
            "revenue": float(self.current["revenue"]),
            "net_income": float(self.current["net"]),
            "total_assets": float(self.current["total_assets"]),
        }


def build_statement(rng: random.Random, max_pages: int) -> StatementSpec:
    locale = pick_locale(rng)
    font = pick_font(rng, kinds=("sans", "serif"), sizes=(8.5, 9, 9.5))
    fmt = pick_formatter(rng, locale, font.unicode, modes=("none",))
    scale = 1000 if rng.random() < 0.3 else 1
    loss = rng.random() < 0.15
    revenue = rng.uniform(2e6, 4e8)
    labels = {key: rng.choice(options) for key, options in ROW_LABELS[locale.lang].items()}
    return StatementSpec(
        locale=locale, fmt=fmt, font=font, company=make_company(rng, locale.country, fmt),
        period_end=_period_end(rng), currency=rng.choice(locale.currencies), scale=scale,
        current=_figures(rng, scale, loss, revenue),
        prior=_figures(rng, scale, rng.random() < 0.1, revenue / rng.uniform(0.85, 1.3)),
        pages=min(rng.choice([1, 2, 2, 3, 4]), max_pages), labels=labels,
        render_seed=rng.randrange(2**32),
    )


def _prior_end(end: date) -> date:
    return end.replace(year=end.year - 1)


def _table(pdf: DocPDF, spec: StatementSpec, rows: tuple, heads: list[str], borders: str,
           with_notes: bool) -> None:
    fmt, rng = spec.fmt, random.Random(spec.render_seed + len(rows))
    widths = [90, 14, 35, 35] if with_notes else [104, 35, 35]
    head = [""] + ([SECTIONS[spec.lang]["note"]] if with_notes else []) + heads
    pdf.font(-0.5)
    with pdf.table(borders_layout=borders, col_widths=widths, width=pdf.epw,
                   text_align=["LEFT"] + ["RIGHT"] * (len(widths) - 1), padding=0.8,
                   line_height=pdf.base.size * 0.48, headings_style=FontFace(emphasis="BOLD"),
                   repeat_headings=1) as table:
        row = table.row()
        for text in head:
            row.cell(text)
        for key in rows:
            style = FontFace(emphasis="BOLD") if key in BOLD_ROWS else None
            row = table.row(style=style)
            row.cell(spec.labels[key])
            if with_notes:
                row.cell(str(rng.randint(3, 24)) if not key.endswith("_h") and
                         rng.random() < 0.4 else "")
            for figures in (spec.current, spec.prior):
                value = figures.get(key)
                row.cell("" if value is None else fmt.num(value / spec.scale, 0))
    pdf.ln(4)


def _heading(pdf: DocPDF, spec: StatementSpec, section: str, period: str, unit: str) -> None:
    pdf.line_text(section, 2, "B", h=8)
    pdf.line_text(period, -0.5, "I")
    pdf.line_text(unit, -1)
    pdf.ln(2)


def render_statement(spec: StatementSpec) -> tuple[bytes, int]:
    lang, fmt = spec.lang, spec.fmt
    rng = random.Random(spec.render_seed)
    pdf = DocPDF(spec.font, lang, rng)
    end, prior = fmt.date(spec.period_end), fmt.date(_prior_end(spec.period_end))
    sec = SECTIONS[lang]
    title = rng.choice(TITLES[lang]).format(year=spec.period_end.year, end=end)
    pdf.header_left, pdf.header_right = spec.company.name, title
    pdf.header_from_page = 2
    pdf.footer_lines = [spec.company.reg_line]
    unit = rng.choice(UNIT_LINES[lang][spec.scale]).format(cur=spec.currency)
    year_heads = [str(spec.period_end.year), str(spec.period_end.year - 1)]
    if spec.period_end.month != 12:
        year_heads = [end, prior]
    borders = rng.choice(["NONE", "HORIZONTAL_LINES", "SINGLE_TOP_LINE"])
    notes = rng.random() < 0.5
    pdf.add_page()
    if spec.pages >= 4:
        _cover(pdf, spec, title)
        pdf.add_page()
    pdf.line_text(spec.company.name, 5, "B", h=9)
    pdf.line_text(title, 1, h=7)
    pdf.ln(3)
    _heading(pdf, spec, rng.choice(sec["income"]), sec["period"].format(end=end), unit)
    _table(pdf, spec, INCOME_ROWS, year_heads, borders, notes)
    if spec.pages >= 2:
        pdf.add_page()
    _heading(pdf, spec, rng.choice(sec["balance"]), sec["as_at"].format(end=end), unit)
    _table(pdf, spec, BALANCE_ROWS, [end, prior], borders, notes)
    if spec.pages >= 3:
        pdf.add_page()
        _notes(pdf, spec, rng)
    return bytes(pdf.output()), pdf.pages_count


def _cover(pdf: DocPDF, spec: StatementSpec, title: str) -> None:
    pdf.set_y(90)
    pdf.line_text(spec.company.name, 10, "B", "C", h=14)
    pdf.line_text(title, 3, align="C", h=10)
    pdf.ln(6)
    for line in [*spec.company.address, spec.company.tax_id]:
        pdf.line_text(line, 0, align="C")


def _notes(pdf: DocPDF, spec: StatementSpec, rng: random.Random) -> None:
    fmt = spec.fmt
    pdf.line_text(SECTIONS[spec.lang]["notes"], 2, "B", h=8)
    pdf.ln(2)
    approved = spec.period_end + timedelta(days=rng.randint(40, 110))
    values = {
        "approved": fmt.date(approved), "person": spec.company.people[0],
        "employees": rng.randint(12, 4000),
        "dividend": fmt.money(rng.randint(5, 300) / 100, spec.currency),
        "paydate": fmt.date(approved + timedelta(days=rng.randint(20, 60))),
        "fee": fmt.money(rng.randint(20, 400) * 1000, spec.currency),
        "end": fmt.date(spec.period_end),
    }
    for i, template in enumerate(NOTES[spec.lang], start=1):
        pdf.line_text(f"{SECTIONS[spec.lang]['note']} {i}", 0, "B")
        pdf.para(template.format(**values), align="L")


def generate_statement(rng: random.Random, max_pages: int) -> tuple[bytes, dict]:
    spec = build_statement(rng, max_pages)
    data, pages = render_statement(spec)
    while pages > max_pages and spec.font.size > 6.5:
        # Both statements on one page need a smaller type size.
        spec.font = FontChoice(spec.font.kind, spec.font.unicode, spec.font.size - 0.5)
        data, pages = render_statement(spec)
    return data, {"document_type": "financial_statement", "language": spec.lang, "pages": pages,
                  "fields": spec.truth_fields()}
