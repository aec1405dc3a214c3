"""Page layouts for bench-corpus invoices: five letterhead styles built from shared blocks."""

from __future__ import annotations

import random
import textwrap
from decimal import Decimal

from fpdf.fonts import FontFace

from bench.corpus_invoice_spec import InvoiceSpec
from bench.corpus_invoice_text import CLOSING, ON_RECEIPT, PAYMENT_SENTENCES
from bench.corpus_names import COUNTRY_NAMES
from bench.corpus_pdf import DocPDF

CURRENCY_WORD = {"en": "Currency", "it": "Valuta", "fr": "Devise", "de": "Währung"}
LETTER_WORDING = {
    "en": ("Dear Sir or Madam,",
           "Please find below our invoice for the goods and services supplied.", "Kind regards"),
    "it": ("Gentile Cliente,", "con la presente Vi addebitiamo quanto segue:", "Cordiali saluti"),
    "fr": ("Madame, Monsieur,", "veuillez trouver ci-dessous le détail de notre facture.",
           "Cordialement"),
    "de": ("Sehr geehrte Damen und Herren,",
           "wir erlauben uns, Ihnen folgende Leistungen in Rechnung zu stellen:",
           "Mit freundlichen Grüßen"),
}


# -- blocks shared by the layouts --

def tax_label(spec: InvoiceSpec) -> str:
    key = "tax_us" if spec.locale.country == "US" else "tax"
    return spec.labels[key].format(rate=spec.rate_text())


def amount_text(spec: InvoiceSpec, value: Decimal) -> str:
    return spec.fmt.money(value, spec.currency)


def title_text(spec: InvoiceSpec) -> str:
    title = spec.labels["title"]
    return f"{title} {spec.number}" if title.endswith(("Nr.", "n.", "n°")) else title


def meta_pairs(spec: InvoiceSpec, keys: list[str]) -> list[tuple[str, str]]:
    """Label/value pairs for the header fields; a missing due date is simply not printed."""
    fmt, lab = spec.fmt, spec.labels
    values = {
        "number": spec.number,
        "issue_date": fmt.date(spec.issue_date),
        "due_date": fmt.date(spec.due_date) if spec.due_date else None,
        "order_date": fmt.date(spec.order_date),
        "delivery_date": fmt.date(spec.delivery_date),
        "customer_no": spec.customer_no,
        "order_ref": spec.order_ref,
    }
    pairs = [(lab[key], values[key]) for key in keys if values.get(key)]
    if "currency" in keys and spec.style["state_currency"]:
        pairs.append((CURRENCY_WORD[spec.locale.lang], spec.currency))
    return pairs


def party_lines(spec: InvoiceSpec, company) -> list[str]:
    lines = [company.name, *company.address]
    if company.country != spec.locale.country:
        lines.append(COUNTRY_NAMES[spec.locale.lang][company.country])
    return [*lines, company.tax_id]


def items_table(pdf: DocPDF, spec: InvoiceSpec, borders: str | None = None) -> None:
    lab, st, fmt = spec.labels, spec.style, spec.fmt
    show_money = st["money_in_table"]
    plain = spec.fmt.money_mode == "none" or not show_money
    suffix = f" ({spec.currency})" if st["state_currency"] and plain else ""
    head = [lab["code"]] if st["show_code"] else []
    widths = [16] if st["show_code"] else []
    head += [lab["description"], lab["qty"], lab["unit_price"] + suffix]
    widths += [62, 14, 26]
    if st["show_vat"]:
        head.append(lab["vat_col"])
        widths.append(13)
    head.append(lab["amount"] + suffix)
    widths.append(28)
    left = 2 if st["show_code"] else 1
    aligns = ["LEFT"] * left + ["RIGHT"] * (len(head) - left)
    fill = (238, 238, 238) if st["zebra"] else None
    pdf.set_fill_color(255)
    pdf.font(-0.5)
    with pdf.table(
        borders_layout=borders or st["borders"], col_widths=widths, text_align=aligns,
        headings_style=FontFace(emphasis="BOLD", fill_color=(215, 215, 215) if fill else None),
        cell_fill_color=fill, cell_fill_mode="ROWS" if fill else "NONE",
        line_height=pdf.base.size * 0.5, padding=1, repeat_headings=1, width=pdf.epw,
    ) as table:
        row = table.row()
        for text in head:
            row.cell(text)
        for item in spec.items:
            row = table.row()
            if st["show_code"]:
                row.cell(item.code)
            row.cell(item.description)
            row.cell(fmt.qty(item.qty))
            row.cell(amount_text(spec, item.unit_price) if show_money else fmt.num(item.unit_price))
            if st["show_vat"]:
                row.cell(spec.rate_text())
            row.cell(amount_text(spec, item.amount) if show_money else fmt.num(item.amount))
    pdf.ln(3)


def totals_block(pdf: DocPDF, spec: InvoiceSpec, side: str | None = None,
                 boxed: bool | None = None) -> None:
    side = side or spec.style["totals_side"]
    boxed = spec.style["totals_box"] if boxed is None else boxed
    total_label = spec.labels["total"]
    if spec.fmt.money_mode == "none":
        # Bare numbers everywhere else; the grand total still names its currency.
        total_label += f" ({spec.currency})"
    rows = [(spec.labels["subtotal"], spec.subtotal), (tax_label(spec), spec.tax),
            (total_label, spec.total)]
    h = pdf.base.size * 0.6
    pdf.ensure_space(h * 4)
    x = pdf.l_margin if side == "L" else pdf.w - pdf.r_margin - 90
    pdf.set_fill_color(225)
    for i, (label, value) in enumerate(rows):
        last = i == len(rows) - 1
        pdf.set_x(x)
        pdf.font(1 if last else 0, "B" if last else "")
        pdf.cell(52, h, label, border=1 if boxed else 0, fill=boxed and last)
        pdf.cell(38, h, amount_text(spec, value), border=1 if boxed else 0, align="R",
                 fill=boxed and last, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)


def payment_text(spec: InvoiceSpec) -> str:
    rng = random.Random(spec.render_seed)
    if spec.due_date is None:
        return rng.choice(ON_RECEIPT[spec.locale.lang])
    return rng.choice(PAYMENT_SENTENCES[spec.locale.lang]).format(
        total=amount_text(spec, spec.total), due=spec.fmt.date(spec.due_date),
        days=spec.payment_days)


def closing_block(pdf: DocPDF, spec: InvoiceSpec) -> None:
    rng = random.Random(spec.render_seed + 1)
    pdf.ensure_space(25)
    pdf.para(payment_text(spec), align="L")
    pdf.para(f"{spec.labels['bank']}: {spec.iban}", delta=-1, align="L", gap=1)
    pdf.para(rng.choice(CLOSING[spec.locale.lang]), delta=-1, style="I", align="L")


# -- layouts --

def classic(pdf: DocPDF, s: InvoiceSpec) -> None:
    """Issuer top-left, title and 'Label: value' meta top-right, bill-to below."""
    top = pdf.get_y()
    y_left = pdf.block(pdf.l_margin, top, 95, party_lines(s, s.issuer), bold_first=True)
    pdf.set_xy(pdf.w - pdf.r_margin - 80, top)
    pdf.fit_cell(80, 10, title_text(s), 8, "B", align="R")
    y = top + 13
    for label, value in meta_pairs(s, ["number", "issue_date", "due_date", "customer_no",
                                       "order_ref", "delivery_date", "currency"]):
        y = pdf.label_value(pdf.w - pdf.r_margin - 80, y, 40, 40, label + ":", value, align="R")
    y = max(y_left, y) + 6
    pdf.set_xy(pdf.l_margin, y)
    pdf.line_text(s.labels["bill_to"] + ":", 0, "B")
    pdf.set_y(pdf.block(pdf.l_margin, pdf.get_y(), 100, party_lines(s, s.customer)) + 6)
    items_table(pdf, s)
    totals_block(pdf, s)
    closing_block(pdf, s)


def centered(pdf: DocPDF, s: InvoiceSpec) -> None:
    """Centred letterhead, labels printed above their values in a row, bill-to on the right."""
    pdf.line_text(s.issuer.name, 6, "B", "C", h=9)
    pdf.line_text(" · ".join([*s.issuer.address, s.issuer.tax_id]), -1, align="C")
    pdf.ln(1)
    pdf.rule()
    pdf.line_text(title_text(s), 5, "B", "C", h=10)
    pairs = meta_pairs(s, ["number", "issue_date", "due_date", "order_date"])
    col = pdf.epw / len(pairs)
    y = pdf.get_y() + 2
    bottom = y
    for i, (label, value) in enumerate(pairs):
        bottom = pdf.label_value(pdf.l_margin + i * col, y, 0, col, label, value, stacked=True,
                                 align="C")
    x = pdf.w - pdf.r_margin - 85
    pdf.set_xy(x, bottom + 4)
    pdf.font(-1)
    pdf.cell(85, 4, s.labels["bill_to"])
    end = pdf.block(x, bottom + 9, 85, party_lines(s, s.customer), bold_first=True)
    pdf.set_y(end + 2)
    pdf.line_text(f"{s.labels['order_ref']}: {s.order_ref}", -1)
    pdf.ln(3)
    items_table(pdf, s)
    totals_block(pdf, s)
    closing_block(pdf, s)


def banner(pdf: DocPDF, s: InvoiceSpec) -> None:
    """Coloured title bar, seller and buyer in two boxed columns, boxed meta grid."""
    rng = random.Random(s.render_seed + 2)
    pdf.set_fill_color(*rng.choice([(30, 60, 110), (20, 90, 70), (90, 30, 40), (50, 50, 50)]))
    pdf.rect(0, 0, pdf.w, 28, "F")
    pdf.set_text_color(255)
    pdf.set_xy(pdf.l_margin, 9)
    # The number sits on the right of the bar, so the title drops its "No." marker.
    pdf.fit_cell(90, 10, s.labels["title"].removesuffix(" Nr.").removesuffix(" n.")
                 .removesuffix(" n°"), 10, "B")
    pdf.set_xy(pdf.l_margin + 90, 9)
    pdf.fit_cell(pdf.epw - 90, 10, f"{s.labels['number']} {s.number}", 2, align="R")
    pdf.set_text_color(0)
    pdf.set_fill_color(255)
    y = 36
    half = (pdf.epw - 6) / 2
    for i, (title, company) in enumerate([(s.labels["seller"], s.issuer),
                                          (s.labels["bill_to"], s.customer)]):
        x = pdf.l_margin + i * (half + 6)
        pdf.rect(x, y, half, 34)
        pdf.set_xy(x + 2, y + 1)
        pdf.font(-1.5)
        pdf.cell(half - 4, 4, title.upper())
        pdf.block(x + 2, y + 6, half - 4, party_lines(s, company), bold_first=True)
    y += 40
    pairs = meta_pairs(s, ["issue_date", "due_date", "delivery_date", "customer_no",
                           "order_ref", "currency"])
    col = pdf.epw / 3
    for i, (label, value) in enumerate(pairs):
        x, yy = pdf.l_margin + (i % 3) * col, y + (i // 3) * 12
        pdf.rect(x, yy, col, 12)
        pdf.label_value(x + 2, yy + 1.5, 0, col - 4, label, value, stacked=True)
    pdf.set_y(y + 12 * ((len(pairs) + 2) // 3) + 6)
    items_table(pdf, s)
    totals_block(pdf, s, side="R")
    closing_block(pdf, s)


def letter(pdf: DocPDF, s: InvoiceSpec) -> None:
    """Business letter: window address, info block, subject line, due date only in prose."""
    pdf.block(pdf.l_margin, 14, pdf.epw, [s.issuer.name], delta=4, bold_first=True, align="R")
    pdf.block(pdf.l_margin, 21, pdf.epw, [*s.issuer.address, s.issuer.tax_id], delta=-1,
              align="R")
    pdf.set_xy(pdf.l_margin, 48)
    pdf.fit_cell(96, 4, f"{s.issuer.name} · {s.issuer.address[0]} · {s.issuer.address[1]}",
                 -2.5, "U")
    y_addr = pdf.block(pdf.l_margin, 54, 90, party_lines(s, s.customer)[:-1])
    y = 48.0
    for label, value in meta_pairs(s, ["customer_no", "number", "issue_date", "delivery_date",
                                       "order_ref"]):
        y = pdf.label_value(118, y, 36, 38, label + ":", value)
    pdf.set_y(max(y, y_addr) + 12)
    greeting, intro, regards = LETTER_WORDING[s.locale.lang]
    title = title_text(s)
    pdf.line_text(title if s.number in title else f"{title} {s.number}", 2, "B", h=8)
    pdf.ln(2)
    pdf.para(greeting, align="L", gap=1)
    pdf.para(intro, align="L")
    items_table(pdf, s, borders="HORIZONTAL_LINES")
    totals_block(pdf, s, side="R", boxed=False)
    closing_block(pdf, s)
    pdf.para(f"{regards}\n{s.issuer.name}", align="L")


def mono(pdf: DocPDF, s: InvoiceSpec) -> None:
    """Fixed-width print-out, as produced by older accounting systems."""
    lab, fmt, width = s.labels, s.fmt, 78
    h = pdf.base.size * 0.45
    money = (lambda v: amount_text(s, v)) if s.style["money_in_table"] else fmt.num

    def out(text: str = "", style: str = "") -> None:
        pdf.font(0, style)
        pdf.cell(0, h, text, new_x="LMARGIN", new_y="NEXT")

    for i, line in enumerate(party_lines(s, s.issuer)):
        out(line.upper() if i == 0 else line, "B" if i == 0 else "")
    out("=" * width)
    out(f"{title_text(s).upper():<34}{lab['number'] + ': ' + s.number:>44}", "B")
    pairs = meta_pairs(s, ["issue_date", "due_date", "customer_no", "order_ref", "currency"])
    for left, right in zip(pairs[::2], [*pairs[1::2], ("", "")]):
        right_text = f"{right[0]}: {right[1]}" if right[0] else ""
        out(f"{left[0] + ': ' + left[1]:<39}{right_text:>39}")
    out("-" * width)
    out(lab["bill_to"] + ":")
    for line in party_lines(s, s.customer):
        out("  " + line)
    out("-" * width)
    out(f"{lab['qty'][:8]:>8} {lab['description'][:41]:<41}{lab['unit_price'][:13]:>13}"
        f"{lab['amount'][:15]:>15}", "B")
    for item in s.items:
        out(f"{fmt.qty(item.qty):>8} {item.description:<41}{money(item.unit_price):>13}"
            f"{money(item.amount):>15}")
    out("-" * width)
    for label, value, style in [(lab["subtotal"], s.subtotal, ""), (tax_label(s), s.tax, ""),
                                (lab["total"], s.total, "B")]:
        out(f"{label:>58}{amount_text(s, value):>20}", style)
    out("=" * width)
    for line in textwrap.wrap(payment_text(s), width):
        out(line)
    out(f"{lab['bank']}: {s.iban}")


LAYOUT_FUNCS = {"classic": classic, "centered": centered, "banner": banner, "letter": letter,
                "mono": mono}
