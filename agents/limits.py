"""Limits on what one PDF may cost to read: inflated stream bytes, image pixels, pages, page area.

A small PDF can inflate to gigabytes (a deflate bomb) or declare a page 200 inches wide that
renders to billions of pixels. These checks read the file's raw bytes with bounded memory, before
PDFium parses anything. `python -m agents.limits FILE...` runs them, then opens each file with
PDFium, in a process whose address space is capped: the app checks uploads that way, never in its
own process.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import zlib
from dataclasses import dataclass

MB = 1_000_000
POINTS_PER_METRE = 72 / 0.0254
_STREAM = re.compile(rb"stream\r?\n")
_ENDSTREAM = b"endstream"
_OBJ = re.compile(rb"\d+\s+\d+\s+obj\b")
_IMAGE = re.compile(rb"/Subtype\s*/Image\b")
_FLATE = re.compile(rb"/FlateDecode\b|/Fl\b")
_WIDTH = re.compile(rb"/Width\s+(\d+)(?!\s+\d+\s+R)")
_HEIGHT = re.compile(rb"/Height\s+(\d+)(?!\s+\d+\s+R)")
_DICT_WINDOW = 4096
_INFLATE_CHUNK = 1 << 16


class TooCostly(ValueError):
    """A PDF past one of the limits, with the reason a person can act on."""


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        return default
    return value if value > 0 else default


@dataclass(frozen=True)
class Limits:
    """What one document may cost; each from a QUIRE_* variable, with a default for ordinary documents."""

    max_pages: int = 2000                 # QUIRE_MAX_PAGES
    max_inflated_mb: float = 64           # QUIRE_MAX_INFLATED_MB: text, fonts and other non-image streams
    max_image_megapixels: float = 150     # QUIRE_MAX_IMAGE_MEGAPIXELS: one embedded image
    max_page_area_m2: float = 2.0         # QUIRE_MAX_PAGE_AREA_M2: one page (A0 is 1 m²)
    check_memory_mb: int = 1024           # QUIRE_CHECK_MEMORY_MB: address space of the checking process
    check_seconds: float = 60             # QUIRE_CHECK_SECONDS: time to check one file
    ocr_max_megapixels: float = 40        # QUIRE_OCR_MAX_MEGAPIXELS: one page rendered for OCR
    ocr_min_dpi: float = 100              # below this a page is too large to OCR, and refused

    @classmethod
    def from_env(cls) -> Limits:
        return cls(max_pages=int(_env_number("QUIRE_MAX_PAGES", cls.max_pages)),
                   max_inflated_mb=_env_number("QUIRE_MAX_INFLATED_MB", cls.max_inflated_mb),
                   max_image_megapixels=_env_number("QUIRE_MAX_IMAGE_MEGAPIXELS", cls.max_image_megapixels),
                   max_page_area_m2=_env_number("QUIRE_MAX_PAGE_AREA_M2", cls.max_page_area_m2),
                   check_memory_mb=int(_env_number("QUIRE_CHECK_MEMORY_MB", cls.check_memory_mb)),
                   check_seconds=_env_number("QUIRE_CHECK_SECONDS", cls.check_seconds),
                   ocr_max_megapixels=_env_number("QUIRE_OCR_MAX_MEGAPIXELS", cls.ocr_max_megapixels),
                   ocr_min_dpi=_env_number("QUIRE_OCR_MIN_DPI", cls.ocr_min_dpi))


def _inflated_size(data: bytes, start: int, end: int, budget: int) -> int:
    """Bytes the deflate data in data[start:end] inflates to, counting stops past `budget`."""
    inflater = zlib.decompressobj()
    total, pos = 0, start
    try:
        while pos < end and total <= budget:
            chunk = data[pos:min(end, pos + _INFLATE_CHUNK)]
            pos += len(chunk)
            out = inflater.decompress(chunk, _INFLATE_CHUNK)
            total += len(out)
            # Whatever one input chunk holds back is drained a bounded piece at a time.
            while inflater.unconsumed_tail and not inflater.eof and total <= budget:
                out = inflater.decompress(inflater.unconsumed_tail, _INFLATE_CHUNK)
                total += len(out)
                if not out:
                    break
            if inflater.eof:
                break
    except zlib.error:
        pass  # a damaged or non-deflate stream: PDFium decides what it makes of it
    return total


def check_streams(data: bytes, limits: Limits) -> None:
    """TooCostly when the streams inflate past the limit or an image has too many pixels."""
    budget = int(limits.max_inflated_mb * MB)
    total = 0
    pos = 0
    while True:
        match = _STREAM.search(data, pos)
        if match is None:
            return
        start = match.end()
        end = data.find(_ENDSTREAM, start)
        end = len(data) if end < 0 else end
        pos = end + len(_ENDSTREAM)
        head_from = max(0, match.start() - _DICT_WINDOW)
        objects = list(_OBJ.finditer(data, head_from, match.start()))
        head = data[objects[-1].start() if objects else head_from:match.start()]
        if _IMAGE.search(head):
            width, height = _WIDTH.search(head), _HEIGHT.search(head)
            if width and height:
                pixels = int(width.group(1)) * int(height.group(1))
                if pixels > limits.max_image_megapixels * MB:
                    raise TooCostly(f"an image of {int(width.group(1)):,} × {int(height.group(1)):,} pixels "
                                    f"is over the {limits.max_image_megapixels:g} megapixel limit")
            continue  # images are decoded only to render a page, which the OCR limit bounds
        if not _FLATE.search(head):
            continue
        total += _inflated_size(data, start, end, budget - total)
        if total > budget:
            raise TooCostly(f"its streams inflate to over {limits.max_inflated_mb:g} MB "
                            f"(QUIRE_MAX_INFLATED_MB); a {len(data) / MB:.1f} MB file should not")


def page_area_m2(width_pt: float, height_pt: float) -> float:
    return (width_pt / POINTS_PER_METRE) * (height_pt / POINTS_PER_METRE)


def check_page(number: int, width_pt: float, height_pt: float, limits: Limits) -> None:
    """TooCostly for a page larger than the page-area limit."""
    area = page_area_m2(width_pt, height_pt)
    if not math.isfinite(area) or area > limits.max_page_area_m2:
        raise TooCostly(f"page {number} is {width_pt / 72:.0f} × {height_pt / 72:.0f} inches, over the "
                        f"{limits.max_page_area_m2:g} m² page limit (QUIRE_MAX_PAGE_AREA_M2)")


def check_page_count(pages: int, limits: Limits) -> None:
    if pages > limits.max_pages:
        raise TooCostly(f"{pages:,} pages is over the {limits.max_pages:,} page limit (QUIRE_MAX_PAGES)")


def ocr_dpi(width_pt: float, height_pt: float, wanted_dpi: float, limits: Limits) -> float:
    """The resolution to render a page for OCR: `wanted_dpi`, lowered so the page stays under the
    pixel limit; TooCostly when that would be below the lowest resolution OCR can read."""
    inches = max(width_pt / 72, 1e-6) * max(height_pt / 72, 1e-6)
    cap = math.sqrt(limits.ocr_max_megapixels * MB / inches)
    dpi = min(wanted_dpi, cap)
    if dpi < limits.ocr_min_dpi:
        raise TooCostly(f"a page of {width_pt / 72:.0f} × {height_pt / 72:.0f} inches is too large to OCR: "
                        f"{limits.ocr_max_megapixels:g} megapixels (QUIRE_OCR_MAX_MEGAPIXELS) would read it "
                        f"at {dpi:.0f} dpi, under the {limits.ocr_min_dpi:g} dpi OCR needs")
    return dpi


def inspect(data: bytes, limits: Limits) -> dict:
    """What the app wants to know of a PDF, or why it is refused: run in a capped process."""
    import pypdfium2 as pdfium

    check_streams(data, limits)
    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        return {"ok": False, "error": "pdfium", "detail": str(exc)}
    try:
        pages = len(pdf)
        check_page_count(pages, limits)
        chars = 0
        for index in range(pages):
            page = pdf[index]
            try:
                width, height = page.get_size()
                check_page(index + 1, width, height, limits)
                textpage = page.get_textpage()
                try:
                    chars += max(0, textpage.count_chars())
                finally:
                    textpage.close()
            finally:
                page.close()
        from agents.einvoice import embedded_einvoice

        einvoice = embedded_einvoice(pdf, "document")
        ocr_work = None
        if pages and not chars:  # a scan: its OCR work, for forecasts (a few pages rendered coarsely)
            from agents.scanwork import document_work

            ocr_work = document_work(pdf)
    finally:
        pdf.close()
    return {"ok": True, "pages": pages, "chars": chars, "einvoice": einvoice.standard if einvoice else None,
            "ocr_work": ocr_work}


def cap_memory(megabytes: int) -> None:
    """Caps this process's address space: past it an allocation fails instead of the machine swapping."""
    import resource

    limit = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def peak_mb() -> float | None:
    """This process's peak resident memory since it started (VmHWM), in MB; None off Linux."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1000
    except OSError:
        pass
    return None


def main(paths: list[str]) -> int:
    """One JSON line per file, written as each is done, so a file that kills the process is known."""
    limits = Limits.from_env()
    cap_memory(limits.check_memory_mb)
    for path in paths:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
            answer = inspect(data, limits)
        except TooCostly as exc:
            answer = {"ok": False, "error": "limit", "detail": str(exc)}
        except MemoryError:
            answer = {"ok": False, "error": "memory",
                      "detail": f"reading it needs more than {limits.check_memory_mb} MB (QUIRE_CHECK_MEMORY_MB)"}
        answer["peak_mb"] = peak_mb()  # so far in this process: what checking costs, for the benchmark
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
