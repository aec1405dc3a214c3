"""PDF canvas for the bench corpus: fonts, running headers/footers and small drawing helpers."""

from __future__ import annotations

import importlib.util
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from fpdf import FPDF

# Fixed so that the same seed always yields byte-identical PDFs (fpdf2 hashes it into /ID).
CREATION_DATE = datetime(2024, 1, 1, tzinfo=UTC)

CORE_FAMILIES = {"sans": "Helvetica", "serif": "Times", "mono": "Courier"}
DEJAVU_FILES = {
    "sans": {"": "DejaVuSans.ttf", "B": "DejaVuSans-Bold.ttf", "I": "DejaVuSans-Oblique.ttf"},
    "serif": {"": "DejaVuSerif.ttf", "B": "DejaVuSerif-Bold.ttf", "I": "DejaVuSerif-Italic.ttf"},
    "mono": {"": "DejaVuSansMono.ttf", "B": "DejaVuSansMono-Bold.ttf",
             "I": "DejaVuSansMono-Oblique.ttf"},
}

# Core PDF fonts only cover Latin-1; these stand-ins keep the text readable and extractable.
LATIN1_FALLBACK = {
    "€": "EUR", "\u201e": '"', "\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'",
    "\u2013": "-", "\u2014": "-", "\u202f": " ", "\u2026": "...", "\u2022": "*",
}

PAGE_LABELS = {
    "en": ["Page {n} of {nb}", "Page {n}/{nb}", "{n} / {nb}"],
    "it": ["Pagina {n} di {nb}", "Pag. {n}/{nb}", "{n} / {nb}"],
    "fr": ["Page {n} sur {nb}", "Page {n}/{nb}", "{n} / {nb}"],
    "de": ["Seite {n} von {nb}", "Seite {n}/{nb}", "{n} / {nb}"],
}


@lru_cache(maxsize=1)
def dejavu_dir() -> Path | None:
    """A directory holding the DejaVu TTFs: matplotlib's bundled copy, else the system one."""
    candidates = []
    spec = importlib.util.find_spec("matplotlib")
    if spec and spec.origin:
        candidates.append(Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf")
    candidates.append(Path("/usr/share/fonts/truetype/dejavu"))
    needed = [name for styles in DEJAVU_FILES.values() for name in styles.values()]
    for folder in candidates:
        if all((folder / name).is_file() for name in needed):
            return folder
    return None


@dataclass(frozen=True)
class FontChoice:
    """Family and size of a document's text; unicode means a TTF that can draw €, „ and ’."""

    kind: str        # sans, serif, mono
    unicode: bool
    size: float

    @property
    def family(self) -> str:
        return f"dejavu-{self.kind}" if self.unicode else CORE_FAMILIES[self.kind]


def pick_font(rng: random.Random, kinds=("sans", "sans", "serif", "mono"),
              sizes=(8.5, 9, 9.5, 10)) -> FontChoice:
    kind = rng.choice(kinds)
    wants_unicode = rng.random() < 0.6
    return FontChoice(kind, wants_unicode and dejavu_dir() is not None, rng.choice(sizes))


class DocPDF(FPDF):
    """An A4 page with a running header/footer and a document-wide base font."""

    def __init__(self, font: FontChoice, lang: str, rng: random.Random):
        super().__init__(format="A4", unit="mm")
        self.set_creation_date(CREATION_DATE)
        self.base = font
        self.lang = lang
        self.header_left = ""
        self.header_right = ""
        self.header_from_page = 1
        self.footer_lines: list[str] = []
        self.page_label = rng.choice(PAGE_LABELS[lang])
        self.page_label_align = rng.choice("LCR")
        self.set_margins(18, 18, 18)
        self.set_auto_page_break(True, margin=24)
        if font.unicode:
            folder = dejavu_dir()
            for style, name in DEJAVU_FILES[font.kind].items():
                self.add_font(font.family, style, str(folder / name))

    def normalize_text(self, text):
        if not self.base.unicode:
            for char, repl in LATIN1_FALLBACK.items():
                text = text.replace(char, repl)
        return super().normalize_text(text)

    def font(self, delta: float = 0, style: str = "") -> None:
        self.set_font(self.base.family, style, self.base.size + delta)

    @property
    def width(self) -> float:
        return self.epw

    def header(self):
        if self.page_no() < self.header_from_page or not (self.header_left or self.header_right):
            return
        self.font(-2)
        self.set_text_color(90)
        self.set_xy(self.l_margin, 8)
        self.cell(self.epw / 2, 4, self.header_left)
        self.cell(self.epw / 2, 4, self.header_right, align="R")
        self.set_draw_color(170)
        self.line(self.l_margin, 13, self.w - self.r_margin, 13)
        self.set_text_color(0)
        self.set_draw_color(0)
        self.set_y(max(self.t_margin, 17))

    def footer(self):
        self.font(-2.5)
        self.set_text_color(100)
        self.set_y(-20)
        for line in self.footer_lines:
            self.cell(0, 3.5, line, align="C", new_x="LMARGIN", new_y="NEXT")
        label = self.page_label.format(n=self.page_no(), nb="{nb}")
        self.set_y(-11)
        self.cell(0, 4, label, align=self.page_label_align)
        self.set_text_color(0)

    # -- drawing helpers shared by the layouts --

    def line_text(self, text: str, delta: float = 0, style: str = "", align: str = "L",
                  h: float | None = None, w: float = 0) -> None:
        self.font(delta, style)
        self.cell(w, h or self.base.size * 0.5, text, align=align, new_x="LMARGIN", new_y="NEXT")

    def para(self, text: str, delta: float = 0, style: str = "", align: str = "J",
             gap: float = 2) -> None:
        self.font(delta, style)
        self.multi_cell(0, self.base.size * 0.48, text, align=align, new_x="LMARGIN",
                        new_y="NEXT")
        self.ln(gap)

    def block(self, x: float, y: float, w: float, lines: list[str], delta: float = 0,
              bold_first: bool = False, align: str = "L", h: float | None = None) -> float:
        """Draw lines in a column at (x, y) and return the y below them."""
        h = h or self.base.size * 0.48
        for i, text in enumerate(lines):
            self.set_xy(x, y)
            self.font(delta + (1 if bold_first and i == 0 else 0),
                      "B" if bold_first and i == 0 else "")
            self.cell(w, h, text, align=align)
            y += h
        return y

    def label_value(self, x: float, y: float, w_label: float, w_value: float, label: str,
                    value: str, stacked: bool = False, align: str = "L") -> float:
        """One meta field, either 'Label: value' on one line or the label above the value."""
        h = self.base.size * 0.48
        self.set_xy(x, y)
        if stacked:
            self.font(-1.5)
            self.set_text_color(110)
            self.cell(w_label + w_value, h, label, align=align)
            self.set_text_color(0)
            self.set_xy(x, y + h)
            self.fit_cell(w_label + w_value, h, value, 0, "B", align=align)
            return y + 2 * h + 1
        self.fit_cell(w_label, h, label, 0, "B")
        self.fit_cell(w_value, h, value, 0, align=align)
        return y + h

    def fit_cell(self, w: float, h: float, text: str, delta: float = 0, style: str = "",
                 align: str = "L") -> None:
        """A one-line cell whose type shrinks until the text fits, so nothing overlaps."""
        while delta > -4:
            self.font(delta, style)
            if self.get_string_width(text) <= w - 1:
                break
            delta -= 0.5
        self.cell(w, h, text, align=align)

    def rule(self, gray: int = 120, width: float = 0.2) -> None:
        self.set_draw_color(gray)
        self.set_line_width(width)
        self.line(self.l_margin, self.get_y(), self.w - self.r_margin, self.get_y())
        self.set_draw_color(0)
        self.set_line_width(0.2)
        self.ln(2)

    def ensure_space(self, height: float) -> None:
        if self.will_page_break(height):
            self.add_page()
