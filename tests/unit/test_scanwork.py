"""A scan's OCR work is counted from its lines of text before any OCR runs (agents/scanwork.py)."""

import io
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageDraw, ImageFont

from agents.limits import Limits, inspect
from agents.scanwork import PAGE_BASE, STANDARD_LINES, document_work, page_lines, page_work

DPI = 150
SAMPLES = Path(__file__).resolve().parents[2] / "app" / "samples"


def _page(lines: int, *, specks: bool = True) -> Image.Image:
    """An A4 page scanned at 150 dpi with `lines` lines of text, and dust over all of it."""
    image = Image.new("L", (int(8.27 * DPI), int(11.69 * DPI)), 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=22)
    for i in range(lines):
        draw.text((120, 150 + i * 40), f"Line {i + 1}: 3 x consulting services at 1,250.00 EUR = 3,750.00 EUR",
                  fill=20, font=font)
    if specks:
        for n in range(0, image.width * image.height, 397):  # single dark pixels, as dust on the glass
            image.putpixel((n % image.width, (n // image.width) % image.height), 60)
    return image


def _scan(*pages: Image.Image) -> bytes:
    out = io.BytesIO()
    pages[0].save(out, format="PDF", save_all=True, append_images=list(pages[1:]), resolution=float(DPI))
    return out.getvalue()


def _lines(data: bytes) -> list[int]:
    pdf = pdfium.PdfDocument(data)
    try:
        return [page_lines(pdf[i]) for i in range(len(pdf))]
    finally:
        pdf.close()


def test_lines_of_text_are_counted_and_dust_is_not():
    assert _lines(_scan(_page(0))) == [0]
    [sparse, dense] = _lines(_scan(_page(8), _page(35)))
    assert sparse == pytest.approx(8, abs=1)
    assert dense == pytest.approx(35, abs=3)


def test_a_blank_page_costs_its_base_and_a_standard_page_one():
    assert page_work(0) == pytest.approx(PAGE_BASE)
    assert page_work(STANDARD_LINES) == pytest.approx(1.0)
    assert page_work(2 * STANDARD_LINES) == pytest.approx(2 - PAGE_BASE)


def test_a_long_scan_is_measured_on_a_sample_of_its_pages():
    data = _scan(*[_page(30 if i % 2 else 6, specks=False) for i in range(40)])
    pdf = pdfium.PdfDocument(data)
    try:
        work = document_work(pdf)
    finally:
        pdf.close()
    # Half the pages dense, half sparse: about 40 times their mean, whichever pages were read.
    mean = (page_work(30) + page_work(6)) / 2
    assert work == pytest.approx(40 * mean, rel=0.25)


def test_the_upload_check_measures_a_scan_and_leaves_a_text_pdf_alone():
    dense = inspect(_scan(_page(35), _page(35)), Limits.from_env())
    sparse = inspect(_scan(_page(5), _page(5)), Limits.from_env())
    blank = inspect(_scan(_page(0)), Limits.from_env())
    assert dense["ok"] and dense["pages"] == 2 and dense["chars"] == 0
    assert dense["ocr_work"] > 2 * sparse["ocr_work"] > 0
    assert blank["ocr_work"] == pytest.approx(PAGE_BASE)
    text = inspect((SAMPLES / "contract_master_services_meridian.pdf").read_bytes(), Limits.from_env())
    assert text["chars"] > 0 and text["ocr_work"] is None


def test_a_scanners_dark_edges_are_not_lines():
    page = _page(10)
    edged = page.copy()
    for x in range(40):  # the lid's shadow down both sides of the sheet
        for y in range(edged.height):
            edged.putpixel((x, y), 30)
            edged.putpixel((edged.width - 1 - x, y), 30)
    assert _lines(_scan(edged)) == _lines(_scan(page))
