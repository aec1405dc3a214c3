"""What one generated invoice is made of: every random choice, so that rendering is a pure function of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from bench.corpus_locale import Formatter, Locale, money
from bench.corpus_names import Company
from bench.corpus_pdf import FontChoice


@dataclass
class LineItem:
    """One billed row; the amount is always quantity times unit price, rounded to cents."""

    code: str
    description: str
    qty: Decimal
    unit_price: Decimal

    @property
    def amount(self) -> Decimal:
        return money(self.qty * self.unit_price)

    def truth(self) -> dict:
        qty = int(self.qty) if self.qty == self.qty.to_integral_value() else float(self.qty)
        return {"description": self.description, "quantity": qty,
                "unit_price": float(self.unit_price), "amount": float(self.amount)}


@dataclass
class InvoiceSpec:
    """Every random choice behind one invoice, so that rendering is a pure function of it."""

    locale: Locale
    fmt: Formatter
    font: FontChoice
    layout: str
    labels: dict
    issuer: Company
    customer: Company
    number: str
    issue_date: date
    due_date: date | None
    order_date: date
    delivery_date: date
    currency: str
    tax_rate: Decimal
    items: list[LineItem]
    customer_no: str
    order_ref: str
    iban: str
    payment_days: int
    style: dict = field(default_factory=dict)
    render_seed: int = 0

    @property
    def subtotal(self) -> Decimal:
        return sum((item.amount for item in self.items), Decimal("0.00"))

    @property
    def tax(self) -> Decimal:
        return money(self.subtotal * self.tax_rate / 100)

    @property
    def total(self) -> Decimal:
        return self.subtotal + self.tax

    def rate_text(self) -> str:
        decimals = -self.tax_rate.normalize().as_tuple().exponent
        return self.fmt.num(self.tax_rate, max(0, decimals))

    def truth_fields(self) -> dict:
        return {
            "issuer": self.issuer.name,
            "invoice_number": self.number,
            "issue_date": self.issue_date.isoformat(),
            "due_date": self.due_date.isoformat() if self.due_date else None,
            "currency": self.currency,
            "subtotal": float(self.subtotal),
            "tax": float(self.tax),
            "total": float(self.total),
            "line_items": [item.truth() for item in self.items],
        }
