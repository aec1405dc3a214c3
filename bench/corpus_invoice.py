"""Invoice documents for the bench corpus: random specification, ground truth and rendering."""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal

from bench.corpus_invoice_layouts import LAYOUT_FUNCS
from bench.corpus_invoice_spec import InvoiceSpec, LineItem
from bench.corpus_invoice_text import ITEMS, amount_like_reference, invoice_number, pick_labels
from bench.corpus_locale import MONTHS, money, pick_formatter, pick_locale
from bench.corpus_names import make_company, partner_country
from bench.corpus_pdf import DocPDF, pick_font

LAYOUTS = tuple(LAYOUT_FUNCS)


def _iban(rng: random.Random, country: str) -> str:
    digits = "".join(str(rng.randrange(10)) for _ in range(24))
    if country == "US":
        return f"ABA {digits[:9]} · Account {digits[9:19]}"
    prefix = {"IT": "IT60 X054", "DE": "DE89 3704", "CH": "CH93 0076", "FR": "FR76 3000",
              "GB": "GB29 NWBK"}[country]
    return "IBAN " + prefix + " " + " ".join(digits[i:i + 4] for i in range(0, 16, 4))


def _item_count(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.5:
        return rng.randint(1, 5)
    if roll < 0.8:
        return rng.randint(6, 20)
    return rng.randint(21, 60)


def _items(rng: random.Random, lang: str, month: str) -> list[LineItem]:
    out = []
    for _ in range(_item_count(rng)):
        text, (low, high), fractional = rng.choice(ITEMS[lang])
        if rng.random() < 0.3:
            text = f"{text} - {month}"
        qty = (Decimal(rng.randint(1, 32)) / 4 if fractional and rng.random() < 0.6
               else Decimal(rng.choice([1, 1, 1, 2, 3, 4, 5, 10, 12, 20, 25, 50])))
        price = (money(rng.uniform(low, high)) if rng.random() < 0.7
                 else Decimal(rng.randint(low, high)))
        code = f"{rng.randint(100, 9999)}.{rng.randint(10, 99)}"
        out.append(LineItem(code, text, qty, money(price)))
    return out


def build_invoice(rng: random.Random) -> InvoiceSpec:
    locale = pick_locale(rng)
    layout = rng.choice(LAYOUTS)
    font = pick_font(rng, kinds=("mono",) if layout == "mono" else ("sans", "sans", "serif"))
    fmt = pick_formatter(rng, locale, font.unicode)
    issuer = make_company(rng, locale.country, fmt)
    customer = make_company(rng, partner_country(rng, locale.country), fmt, {issuer.name})
    issue = date(2021, 1, 1) + timedelta(days=rng.randrange(5 * 365))
    days = rng.choice([14, 30, 30, 45, 60, 90])
    due = issue + timedelta(days=days) if rng.random() < 0.9 else None
    order = issue - timedelta(days=rng.randint(3, 40))
    delivery = issue - timedelta(days=rng.randint(0, 10))
    currency = rng.choice(locale.currencies)
    items = _items(rng, locale.lang, MONTHS[locale.lang][issue.month - 1])
    style = {
        "borders": rng.choice(["ALL", "HORIZONTAL_LINES", "NONE", "MINIMAL", "SINGLE_TOP_LINE"]),
        "zebra": rng.random() < 0.35,
        "show_code": rng.random() < 0.5,
        "show_vat": rng.random() < 0.3,
        "totals_side": rng.choice("LRR"),
        "totals_box": rng.random() < 0.5,
        "money_in_table": rng.random() < 0.3,
        "state_currency": fmt.money_mode == "none" or rng.random() < 0.3,
        "print_stamp": rng.random() < 0.3,
    }
    return InvoiceSpec(
        locale=locale, fmt=fmt, font=font, layout=layout, labels=pick_labels(rng, locale.lang),
        issuer=issuer, customer=customer, number=invoice_number(rng, issue.year, locale.country),
        issue_date=issue, due_date=due, order_date=order, delivery_date=delivery,
        currency=currency, tax_rate=Decimal(rng.choice(locale.tax_rates)), items=items,
        customer_no=f"{rng.randint(10000, 99999)}", order_ref=amount_like_reference(rng, fmt.num),
        iban=_iban(rng, locale.country), payment_days=days, style=style,
        render_seed=rng.randrange(2**32),
    )


def render_invoice(spec: InvoiceSpec) -> tuple[bytes, int]:
    pdf = DocPDF(spec.font, spec.locale.lang, random.Random(spec.render_seed))
    pdf.header_from_page = 2
    pdf.header_left = spec.issuer.name
    pdf.header_right = f"{spec.labels['number']} {spec.number}"
    pdf.footer_lines = [spec.issuer.reg_line]
    pdf.add_page()
    LAYOUT_FUNCS[spec.layout](pdf, spec)
    data = bytes(pdf.output())
    return data, pdf.pages_count


def generate_invoice(rng: random.Random, max_pages: int) -> tuple[bytes, dict]:
    spec = build_invoice(rng)
    data, pages = render_invoice(spec)
    while pages > max_pages and len(spec.items) > 1:
        spec.items = spec.items[: max(1, len(spec.items) * 2 // 3)]
        data, pages = render_invoice(spec)
    return data, {"document_type": "invoice", "language": spec.locale.lang, "pages": pages,
                  "fields": spec.truth_fields()}

