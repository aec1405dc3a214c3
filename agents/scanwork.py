"""A scan's OCR work, read before any OCR runs: its text lines, counted on a coarse render.

Tesseract's time on a page follows the text it finds there far more than the page itself: over 95
pages of generated scans a page took 1.8 to 14.8 s of CPU, and its lines of text told them apart (a
correlation of 0.87, against none for a page count; docs/BENCHMARKS.md). A line is cheap to count
before reading: at 75 dpi, with specks of dust taken out by a median filter, the rows of pixels
holding ink form one band per line of text. A band taller than a line (a photo, a logo, lines set
close) counts as the lines it could hold.

The work is given in standard pages: a page of STANDARD_LINES lines is one, a blank page
PAGE_BASE (turning, binarising and laying out a page costs that much whatever it holds), a dense
page more than one. A forecast learns seconds per standard page where it learned seconds per page.
"""

from __future__ import annotations

from typing import Any

# A page of this many lines of text is one standard page of OCR work.
STANDARD_LINES = 30
# What a page without text costs, in standard pages.
PAGE_BASE = 0.2
# The coarse render lines are counted on, and the most pixels it may have (a very large page is
# rendered at less).
DPI = 75
MAX_PIXELS = 4_000_000
# Pages read to count lines (about 50 ms each); the rest of a longer document is taken to be like them.
SAMPLE_PAGES = 4
# At DPI: a band of ink at least this tall is a line (shorter: a rule, a stray mark), and a line
# of text with the space under it is about LINE_PX tall.
MIN_BAND_PX = 3
LINE_PX = 14
# A pixel row holds ink where more than this many of its pixels are dark, its outer EDGE_SHARE of
# width on each side not counted.
ROW_INK_PX = 2
EDGE_SHARE = 0.05
_DARK = 160


def page_lines(page: Any) -> int:
    """Lines of text on one pypdfium2 page, counted at DPI."""
    import numpy as np
    from PIL import ImageFilter

    width, height = page.get_size()
    scale = min(DPI / 72, (MAX_PIXELS / max(width * height, 1.0)) ** 0.5)
    image = page.render(scale=scale, grayscale=True).to_pil().convert("L").filter(ImageFilter.MedianFilter(3))
    ink = np.asarray(image) < _DARK
    # A scanner's dark edge (the lid, the sheet's shadow) would ink every row: the sides are left out.
    edge = int(ink.shape[1] * EDGE_SHARE)
    rows = ink[:, edge:ink.shape[1] - edge].sum(axis=1) > ROW_INK_PX
    # Runs of inked rows: where the profile steps up and where it steps down.
    edges = np.flatnonzero(np.diff(np.concatenate(([0], rows.astype(np.int8), [0]))))
    heights = (edges[1::2] - edges[::2]) * (DPI / 72 / scale)
    return int(sum(max(1, round(h / LINE_PX)) for h in heights if h >= MIN_BAND_PX))


def page_work(lines: int) -> float:
    """A page's OCR work in standard pages."""
    return PAGE_BASE + (1 - PAGE_BASE) * lines / STANDARD_LINES


def document_work(pdf: Any) -> float | None:
    """A scanned document's OCR work in standard pages: up to SAMPLE_PAGES pages spread over it
    are counted, and the others taken to be like them. None where a page cannot be rendered: the
    document is not refused for that, and its pages stand for its work."""
    import pypdfium2 as pdfium

    pages = len(pdf)
    if not pages:
        return 0.0
    picked = sorted({round(i * (pages - 1) / max(SAMPLE_PAGES - 1, 1)) for i in range(min(SAMPLE_PAGES, pages))})
    work = []
    for index in picked:
        page = pdf[index]
        try:
            work.append(page_work(page_lines(page)))
        except pdfium.PdfiumError:
            return None
        finally:
            page.close()
    return round(sum(work) / len(work) * pages, 3)
