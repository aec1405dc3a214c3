"""Locale conventions for the bench corpus: dates, numbers, money and number words."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")

MONTHS = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"],
    "it": ["gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto",
           "settembre", "ottobre", "novembre", "dicembre"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août",
           "septembre", "octobre", "novembre", "décembre"],
    "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August",
           "September", "Oktober", "November", "Dezember"],
}

# Only the values the generator ever spells out; contracts phrase terms and notice periods
# with these.
NUMBER_WORDS = {
    "en": {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 10: "ten",
           12: "twelve", 14: "fourteen", 18: "eighteen", 24: "twenty-four", 30: "thirty",
           36: "thirty-six", 48: "forty-eight", 60: "sixty", 90: "ninety"},
    "it": {1: "un", 2: "due", 3: "tre", 4: "quattro", 5: "cinque", 6: "sei", 10: "dieci",
           12: "dodici", 14: "quattordici", 18: "diciotto", 24: "ventiquattro", 30: "trenta",
           36: "trentasei", 48: "quarantotto", 60: "sessanta", 90: "novanta"},
    "fr": {1: "un", 2: "deux", 3: "trois", 4: "quatre", 5: "cinq", 6: "six", 10: "dix",
           12: "douze", 14: "quatorze", 18: "dix-huit", 24: "vingt-quatre", 30: "trente",
           36: "trente-six", 48: "quarante-huit", 60: "soixante", 90: "quatre-vingt-dix"},
    "de": {1: "ein", 2: "zwei", 3: "drei", 4: "vier", 5: "fünf", 6: "sechs", 10: "zehn",
           12: "zwölf", 14: "vierzehn", 18: "achtzehn", 24: "vierundzwanzig", 30: "dreißig",
           36: "sechsunddreißig", 48: "achtundvierzig", 60: "sechzig", 90: "neunzig"},
}

SYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£", "CHF": "CHF"}

# thousands separator, decimal separator
NUMBER_STYLES = {
    "comma_dot": (",", "."),     # 1,234.56
    "dot_comma": (".", ","),     # 1.234,56
    "space_comma": ("\xa0", ","),  # 1 234,56 (no-break space, as French typesetting uses)
    "apos_dot": ("'", "."),      # 1'234.56
}

DATE_STYLES = ("iso", "dmy_slash", "mdy_slash", "dmy_dot", "long", "long_us")


@dataclass(frozen=True)
class Locale:
    """Regional conventions that a document issued from one place follows."""

    code: str
    lang: str
    country: str
    number_style: str
    date_styles: tuple[str, ...]
    currencies: tuple[str, ...]
    symbol_after: bool
    tax_rates: tuple[str, ...]


LOCALES = {
    "en-GB": Locale("en-GB", "en", "GB", "comma_dot", ("iso", "dmy_slash", "long"),
                    ("GBP", "GBP", "EUR", "USD"), False, ("20",)),
    "en-US": Locale("en-US", "en", "US", "comma_dot", ("iso", "mdy_slash", "long_us"),
                    ("USD",), False, ("0", "6.25", "7", "8.875")),
    "it-IT": Locale("it-IT", "it", "IT", "dot_comma", ("dmy_slash", "long", "iso"),
                    ("EUR",), False, ("22", "10")),
    "fr-FR": Locale("fr-FR", "fr", "FR", "space_comma", ("dmy_slash", "long", "iso"),
                    ("EUR",), True, ("20", "10")),
    "de-DE": Locale("de-DE", "de", "DE", "dot_comma", ("dmy_dot", "long", "iso"),
                    ("EUR",), True, ("19", "7")),
    "de-CH": Locale("de-CH", "de", "CH", "apos_dot", ("dmy_dot", "long"),
                    ("CHF", "CHF", "EUR"), False, ("8.1",)),
}

# Weighted so that each of the four languages is well represented.
LOCALE_WEIGHTS = {"en-GB": 2, "en-US": 2, "it-IT": 3, "fr-FR": 3, "de-DE": 3, "de-CH": 1}


def pick_locale(rng: random.Random) -> Locale:
    codes = list(LOCALE_WEIGHTS)
    return LOCALES[rng.choices(codes, weights=[LOCALE_WEIGHTS[c] for c in codes])[0]]


def money(value) -> Decimal:
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_UP)


def format_date(d: date, style: str, lang: str) -> str:
    if style == "iso":
        return d.isoformat()
    if style == "dmy_slash":
        return f"{d.day:02d}/{d.month:02d}/{d.year}"
    if style == "mdy_slash":
        return f"{d.month:02d}/{d.day:02d}/{d.year}"
    if style == "dmy_dot":
        return f"{d.day:02d}.{d.month:02d}.{d.year}"
    month = MONTHS[lang][d.month - 1]
    if style == "long_us":
        return f"{month} {d.day}, {d.year}"
    if style != "long":
        raise ValueError(f"unknown date style {style!r}")
    if lang == "fr":
        return f"{'1er' if d.day == 1 else d.day} {month} {d.year}"
    if lang == "de":
        return f"{d.day}. {month} {d.year}"
    return f"{d.day} {month} {d.year}"


def format_number(value, style: str, decimals: int = 2, parens: bool = False) -> str:
    """Group and punctuate a number; negative values get a minus sign or parentheses."""
    thousands, point = NUMBER_STYLES[style]
    q = Decimal(str(value)).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    digits = f"{abs(q):.{decimals}f}"
    whole, _, frac = digits.partition(".")
    groups = []
    while len(whole) > 3:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    groups.insert(0, whole)
    text = thousands.join(groups) + (point + frac if decimals else "")
    if q < 0:
        return f"({text})" if parens else f"-{text}"
    return text


def format_quantity(qty: Decimal, style: str) -> str:
    """Whole quantities print without decimals, fractional ones (hours, kg) with two."""
    if qty == qty.to_integral_value():
        return format_number(qty, style, 0)
    return format_number(qty, style, 2)


@dataclass(frozen=True)
class Formatter:
    """Everything one document needs to render its dates and amounts consistently."""

    locale: Locale
    date_style: str
    money_mode: str      # "symbol", "code" or "none" (currency stated elsewhere)
    euro_ok: bool        # whether the chosen font can draw the euro sign
    parens: bool = False
    nbsp: bool = True

    @property
    def lang(self) -> str:
        return self.locale.lang

    def date(self, d: date) -> str:
        return format_date(d, self.date_style, self.lang)

    def num(self, value, decimals: int = 2) -> str:
        text = format_number(value, self.locale.number_style, decimals, self.parens)
        return text if self.nbsp else text.replace("\xa0", " ")

    def qty(self, value: Decimal) -> str:
        return format_quantity(value, self.locale.number_style)

    def marker(self, currency: str) -> str:
        if self.money_mode == "symbol" and (currency != "EUR" or self.euro_ok):
            return SYMBOLS[currency]
        return currency

    def money(self, value, currency: str, decimals: int = 2) -> str:
        amount = self.num(value, decimals)
        if self.money_mode == "none":
            return amount
        mark = self.marker(currency)
        if self.locale.symbol_after and mark != "$":
            return f"{amount} {mark}"
        if mark in ("$", "£") or (mark == "€" and self.lang == "en"):
            return f"{mark}{amount}"
        return f"{mark} {amount}"


def pick_formatter(rng: random.Random, locale: Locale, euro_ok: bool,
                   modes=("symbol", "symbol", "code", "none")) -> Formatter:
    return Formatter(locale, rng.choice(locale.date_styles), rng.choice(modes), euro_ok,
                     parens=rng.random() < 0.3, nbsp=rng.random() < 0.7)


def all_date_renderings(d: date, lang: str) -> set[str]:
    """Every way the generator could have written a date, for checking rendered text."""
    return {format_date(d, style, lang) for style in DATE_STYLES}


def all_number_renderings(value, decimals=(2, 0)) -> set[str]:
    """Every grouping/punctuation the generator could have used for an amount."""
    out = set()
    for style in NUMBER_STYLES:
        for dec in decimals:
            for parens in (False, True):
                text = format_number(value, style, dec, parens)
                out.add(text)
                out.add(text.replace("\xa0", " "))
    return out


def number_words(n: int, lang: str) -> str:
    return NUMBER_WORDS[lang][n]
