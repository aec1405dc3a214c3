"""Writes the sample invoices, contracts and statement that `quire up --samples` enqueues.

Run once with `python -m app.samples.make_samples`; the PDFs and samples.json are kept in the
repository, and the fixed creation date makes the output byte-identical on every run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from fpdf import FPDF

HERE = Path(__file__).parent
CREATED = datetime(2024, 6, 1, tzinfo=UTC)
INK, MUTED, RULE = (20, 32, 52), (100, 112, 130), (205, 212, 222)


class Sheet(FPDF):
    """An A4 page with a letterhead band and a page footer."""

    def __init__(self, company: str, address: str, footer: str) -> None:
        super().__init__(format="A4")
        self.company, self.address, self.footer_text = company, address, footer
        self.set_creation_date(CREATED)
        self.set_auto_page_break(True, margin=22)
        self.set_margins(18, 18, 18)

    def header(self) -> None:
        self.set_font("Helvetica", "B", 15)
        self.set_text_color(*INK)
        self.cell(0, 8, self.company, new_x="LMARGIN", new_y="NEXT")
        self.set_font("Helvetica", "", 8.5)
        self.set_text_color(*MUTED)
        self.multi_cell(0, 4, self.address, new_x="LMARGIN", new_y="NEXT")
        self.set_draw_color(*RULE)
        self.line(18, self.get_y() + 2, 192, self.get_y() + 2)
        self.ln(7)
        self.set_text_color(*INK)

    def footer(self) -> None:
        self.set_y(-14)
        self.set_font("Helvetica", "", 7.5)
        self.set_text_color(*MUTED)
        self.cell(0, 5, f"{self.footer_text}    {self.page_no()}/{{nb}}", align="C")

    def doc_title(self, text: str) -> None:
        self.set_font("Helvetica", "B", 13)
        self.cell(0, 8, text, new_x="LMARGIN", new_y="NEXT")
        self.ln(1)

    def pairs(self, rows: list[tuple[str, str]], width: float = 44) -> None:
        for label, value in rows:
            self.set_font("Helvetica", "B", 9)
            self.cell(width, 5.5, label)
            self.set_font("Helvetica", "", 9)
            self.cell(0, 5.5, value, new_x="LMARGIN", new_y="NEXT")
        self.ln(3)

    def paragraph(self, text: str, size: float = 9.5) -> None:
        self.set_font("Helvetica", "", size)
        self.multi_cell(0, 4.8, text, new_x="LMARGIN", new_y="NEXT")
        self.ln(2)

    def heading(self, text: str) -> None:
        self.set_font("Helvetica", "B", 10.5)
        self.cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")


def money(amount: float, style: str) -> str:
    text = f"{amount:,.2f}"
    return text.replace(",", "X").replace(".", ",").replace("X", ".") if style == "eu" else text


def invoice(spec: dict) -> Sheet:
    pdf = Sheet(spec["issuer"], spec["issuer_address"], spec["footer"])
    pdf.add_page()
    labels, style, cur = spec["labels"], spec["style"], spec["currency"]
    pdf.doc_title(labels["title"])
    pdf.pairs([(labels["number"], spec["number"]), (labels["date"], spec["date"]), (labels["due"], spec["due"]),
               (labels["customer"], spec["bill_to"])])
    widths = (92, 20, 30, 32)
    pdf.set_fill_color(238, 242, 247)
    pdf.set_font("Helvetica", "B", 9)
    for head, w in zip(labels["columns"], widths):
        pdf.cell(w, 7, head, border="B", fill=True, align="L" if w == 92 else "R")
    pdf.ln()
    pdf.set_font("Helvetica", "", 9)
    subtotal = 0.0
    for description, qty, price in spec["lines"]:
        amount = round(qty * price, 2)
        subtotal += amount
        pdf.cell(widths[0], 6.5, description)
        pdf.cell(widths[1], 6.5, f"{qty:g}", align="R")
        pdf.cell(widths[2], 6.5, money(price, style), align="R")
        pdf.cell(widths[3], 6.5, money(amount, style), align="R", new_x="LMARGIN", new_y="NEXT")
    tax = round(subtotal * spec["tax_rate"], 2)
    pdf.ln(3)
    for label, value, bold in ((labels["subtotal"], subtotal, False), (labels["tax"], tax, False),
                               (labels["total"], subtotal + tax, True)):
        pdf.set_font("Helvetica", "B" if bold else "", 10 if bold else 9)
        pdf.cell(sum(widths[:3]), 6.5, label, align="R")
        pdf.cell(widths[3], 6.5, f"{cur} {money(value, style)}", align="R", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    pdf.paragraph(spec["terms"], size=8.5)
    return pdf


def contract(spec: dict) -> Sheet:
    pdf = Sheet(spec["heading"], spec["subheading"], spec["footer"])
    pdf.add_page()
    pdf.doc_title(spec["title"])
    pdf.paragraph(spec["preamble"])
    for number, (heading, text) in enumerate(spec["clauses"], start=1):
        pdf.heading(f"{number}. {heading}")
        pdf.paragraph(text)
    pdf.ln(6)
    pdf.set_font("Helvetica", "", 9)
    for _ in spec["signatories"]:
        pdf.cell(87, 5, "_" * 38)
    pdf.ln(6)
    for party in spec["signatories"]:
        pdf.cell(87, 5, party)
    return pdf


def statement(spec: dict) -> Sheet:
    pdf = Sheet(spec["company"], spec["address"], spec["footer"])
    pdf.add_page()
    pdf.doc_title(spec["title"])
    pdf.paragraph(spec["intro"])
    for section, rows in spec["sections"]:
        pdf.heading(section)
        for label, current, prior in rows:
            pdf.set_font("Helvetica", "B" if label.startswith("Total") or label == "Net income" else "", 9)
            pdf.cell(110, 6, label)
            pdf.cell(32, 6, f"{current:,.0f}", align="R")
            pdf.cell(32, 6, f"{prior:,.0f}", align="R", new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
    pdf.paragraph(spec["notes"], size=8.5)
    return pdf


def main() -> None:
    from app.samples.sample_specs import CONTRACTS, INVOICES, STATEMENTS

    manifest = {}
    for builder, specs in ((invoice, INVOICES), (contract, CONTRACTS), (statement, STATEMENTS)):
        for spec in specs:
            pdf = builder(spec)
            pdf.alias_nb_pages()
            target = HERE / str(spec["file"])
            pdf.output(str(target))
            manifest[spec["file"]] = {"customer": spec["customer"], "kind": builder.__name__}
            print(f"wrote {target.name} ({pdf.pages_count} pages)")
    (HERE / "samples.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
