"""Contract documents for the bench corpus: specification, ground truth and rendering."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from bench.corpus_contract_filler import FillerWriter
from bench.corpus_contract_text import (
    AND,
    COURTS,
    EFFECTIVE,
    FEES,
    GOVERNING_LAW,
    HEADINGS,
    LAW_BY_LOCALE,
    PARTY,
    PREAMBLE,
    RENEWAL,
    ROLES,
    TERM,
    TITLES,
    term_phrase,
)
from bench.corpus_locale import Formatter, Locale, money, pick_formatter, pick_locale
from bench.corpus_names import COUNTRY_NAMES, Company, make_company, partner_country
from bench.corpus_pdf import DocPDF, FontChoice, pick_font

TERM_MONTHS = (6, 12, 12, 18, 24, 24, 36, 36, 48, 60)
REF_WORD = {"en": "Ref.", "it": "Rif.", "fr": "Réf.", "de": "Vertrags-Nr."}


@dataclass
class ContractSpec:
    """Every random choice behind one contract; rendering is a pure function of it."""

    locale: Locale
    fmt: Formatter
    font: FontChoice
    kind: str
    parties: list[Company]
    signing_date: date
    effective_date: date
    term_months: int
    term_text: dict
    jurisdiction: str
    law_sentence: str
    total_value: Decimal
    currency: str
    instalments: int
    renewal: bool
    notice_days: int
    reference: str
    target_pages: int
    render_seed: int

    @property
    def lang(self) -> str:
        return self.locale.lang

    def truth_fields(self) -> dict:
        return {
            "parties": [p.name for p in self.parties],
            "effective_date": self.effective_date.isoformat(),
            "term_months": self.term_months,
            "governing_law": self.jurisdiction,
            "total_value": float(self.total_value),
            "currency": self.currency,
        }


def _target_pages(rng: random.Random) -> int:
    """Most contracts are short; a few run to tens or hundreds of pages."""
    roll = rng.random()
    if roll < 0.6:
        return rng.randint(1, 4)
    if roll < 0.85:
        return rng.randint(5, 15)
    if roll < 0.95:
        return rng.randint(16, 60)
    return rng.randint(61, 200)


def build_contract(rng: random.Random, max_pages: int) -> ContractSpec:
    locale = pick_locale(rng)
    font = pick_font(rng, kinds=("serif", "serif", "sans"), sizes=(9, 9.5, 10, 10.5))
    fmt = pick_formatter(rng, locale, font.unicode, modes=("symbol", "code", "code"))
    kind = rng.choice(list(TITLES["en"]))
    first = make_company(rng, locale.country, fmt)
    parties = [first, make_company(rng, partner_country(rng, locale.country), fmt, {first.name})]
    if rng.random() < 0.15:
        parties.append(make_company(rng, locale.country, fmt, {p.name for p in parties}))
    signing = date(2020, 1, 1) + timedelta(days=rng.randrange(6 * 365))
    effective = signing + timedelta(days=rng.choice([0, 0, 1, 14, 30, 45, 61]))
    months = rng.choice(TERM_MONTHS)
    jurisdiction = rng.choice(LAW_BY_LOCALE[locale.code])
    sentences = GOVERNING_LAW[jurisdiction].get(locale.lang) or GOVERNING_LAW[jurisdiction]["en"]
    value = Decimal(rng.randint(10, 4000) * 500)
    if rng.random() < 0.25:
        value = money(value + Decimal(rng.randint(1, 99999)) / 100)
    return ContractSpec(
        locale=locale, fmt=fmt, font=font, kind=kind, parties=parties, signing_date=signing,
        effective_date=effective, term_months=months,
        term_text=term_phrase(rng, months, locale.lang),
        jurisdiction=jurisdiction, law_sentence=rng.choice(sentences), total_value=value,
        currency=rng.choice(locale.currencies), instalments=rng.choice([2, 4, 12]),
        renewal=rng.random() < 0.4, notice_days=rng.choice([30, 60, 90]),
        reference=f"{REF_WORD[locale.lang]} {signing.year}/"
                  f"{fmt.num(rng.randint(100, 999999) / 10, 1)}",
        target_pages=min(_target_pages(rng), max_pages), render_seed=rng.randrange(2**32),
    )


def _clause(pdf: DocPDF, number: int, heading: str, paragraphs: list[str], lang: str) -> None:
    prefix = f"{number}." if lang == "en" else f"{HEADINGS[lang]['clause']} {number}"
    pdf.ensure_space(18)
    pdf.line_text(f"{prefix} {heading}", 0.5, "B", h=7)
    for text in paragraphs:
        pdf.para(text, gap=1.5)


def _party_text(spec: ContractSpec, company: Company, role: str) -> str:
    template = random.Random(spec.render_seed + len(company.name)).choice(PARTY[spec.lang])
    country = COUNTRY_NAMES[spec.lang][company.country]
    return template.format(name=company.name, country=country, role=role,
                           address=", ".join(company.address), tax_id=company.tax_id)


def render_contract(spec: ContractSpec, filler_pages: int) -> tuple[bytes, int]:
    """Key clauses interleaved with boilerplate until roughly filler_pages pages are full."""
    lang, fmt = spec.lang, spec.fmt
    rng = random.Random(spec.render_seed)
    pdf = DocPDF(spec.font, lang, rng)
    pdf.header_left = TITLES[lang][spec.kind]
    pdf.header_right = spec.reference
    pdf.header_from_page = rng.choice([1, 2])
    roles = ROLES[lang][spec.kind]
    writer = FillerWriter(spec.render_seed + 7, lang, fmt, spec.currency, roles, spec.signing_date)
    heads = HEADINGS[lang]
    pdf.add_page()
    pdf.line_text(TITLES[lang][spec.kind], 5, "B", "C", h=10)
    pdf.ln(4)
    pdf.para(PREAMBLE[lang].format(title=TITLES[lang][spec.kind].title(),
                                   signing=fmt.date(spec.signing_date)), align="L")
    names = [*roles, ROLES[lang]["third"]]
    for i, company in enumerate(spec.parties):
        pdf.para(f"({i + 1}) " + _party_text(spec, company, names[i]), align="L", gap=1)
        if i < len(spec.parties) - 1:
            pdf.para(AND[lang], align="L", gap=1)
    pdf.ln(2)
    number = 1
    _clause(pdf, number, heads["effective"], [rng.choice(EFFECTIVE[lang]).format(
        eff=fmt.date(spec.effective_date))], lang)
    term = rng.choice(TERM[lang]).format(**spec.term_text)
    if spec.renewal:
        term += " " + RENEWAL[lang].format(notice=spec.notice_days)
    number += 1
    _clause(pdf, number, heads["term"], [term], lang)
    fees_page = max(1, filler_pages // 2)
    fees = rng.choice(FEES[lang]).format(payer=roles[1], value=fmt.money(spec.total_value,
                                         spec.currency), instalments=spec.instalments)
    fees_done = False
    while pdf.page < filler_pages:
        if not fees_done and pdf.page >= fees_page:
            number += 1
            _clause(pdf, number, heads["fees"], [fees], lang)
            fees_done = True
        number += 1
        _clause(pdf, number, *writer.clause(), lang)
    if not fees_done:
        number += 1
        _clause(pdf, number, heads["fees"], [fees], lang)
    number += 1
    city = spec.parties[0].city
    _clause(pdf, number, heads["law"], [spec.law_sentence + " " + COURTS[lang].format(city=city)],
            lang)
    _signatures(pdf, spec, heads)
    return bytes(pdf.output()), pdf.pages_count


def _signatures(pdf: DocPDF, spec: ContractSpec, heads: dict) -> None:
    row = 24
    rows = (len(spec.parties) + 1) // 2
    pdf.ensure_space(12 + row * rows)
    pdf.ln(3)
    pdf.para(heads["sign"], align="L")
    col = pdf.epw / 2
    y = pdf.get_y()
    sign_date = spec.fmt.date(spec.signing_date)
    for i, company in enumerate(spec.parties):
        x, yy = pdf.l_margin + (i % 2) * col, y + (i // 2) * row
        lines = [heads["signed"], company.name, "", "_" * 28,
                 f"{company.people[0]}   {heads['date']}: {sign_date}"]
        pdf.block(x, yy, col - 4, lines, delta=-1)
    pdf.set_y(y + row * rows)


def generate_contract(rng: random.Random, max_pages: int) -> tuple[bytes, dict]:
    spec = build_contract(rng, max_pages)
    # The closing clauses may spill onto one more page than the boilerplate filled.
    filler_pages = spec.target_pages
    data, pages = render_contract(spec, filler_pages)
    while pages > max_pages and filler_pages > 1:
        filler_pages -= 1
        data, pages = render_contract(spec, filler_pages)
    if pages > max_pages:
        spec.font = FontChoice(spec.font.kind, spec.font.unicode, 7.5)
        data, pages = render_contract(spec, 1)
    return data, {"document_type": "contract", "language": spec.lang, "pages": pages,
                  "fields": spec.truth_fields()}
