"""OCR timed on this machine by the worker: the prior a forecast uses for scans until scans ran.

A scanned page costs seconds of CPU where a text page costs milliseconds, and how many depends on
the machine and the resolution pages are read at. Once it has had no run for two seconds after it
started (in a thread; the measure takes seconds of CPU, which a backlog should not wait on) the
worker reads the first page of two bundled samples (a sparse invoice, a dense
contract) through the same OCR as a run, and records the mean per page for its host. Each page is
first made into what a desk scanner gives (150 dpi, tilted, softened, specked with dust, JPEG):
Tesseract takes two to three times as long over such a page as over a clean rendering. A host that
measured within the last day at the same resolution is not measured again.
"""

from __future__ import annotations

import io
import os
import random
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from schema import calibration
from worker import logs

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

SAMPLES = Path(__file__).resolve().parents[1] / "app" / "samples"
PAGES = ("invoice_harborline_INV-2024-0117.pdf", "contract_master_services_meridian.pdf")
FRESH = timedelta(days=1)


def reading_dpi() -> float:
    """The resolution runs on this machine read scanned pages at."""
    from agents.ocr import DEFAULT_DPI

    return float(os.environ.get("QUIRE_OCR_DPI") or DEFAULT_DPI)


def measure_seconds_per_page(paths: list[Path]) -> float | None:
    """Mean seconds one page of these PDFs takes through OCR; None when OCR cannot run here or no
    page could be read."""
    from agents.ocr import ocr_available, ocr_page

    if not ocr_available():
        return None
    import pypdfium2

    times = []
    for path in paths:
        if not path.is_file():
            continue
        pdf = pypdfium2.PdfDocument(as_scan(path.read_bytes()))
        try:
            started = time.monotonic()
            ocr_page(pdf[0])
            times.append(time.monotonic() - started)
        finally:
            pdf.close()
    return sum(times) / len(times) if times else None


def as_scan(document: bytes, dpi: int = 150, seed: int = 1) -> bytes:
    """The first page of a PDF as an image-only PDF, the way a desk scanner makes one."""
    import pypdfium2
    from PIL import Image, ImageFilter

    pdf = pypdfium2.PdfDocument(document)
    try:
        image = pdf[0].render(scale=dpi / 72).to_pil().convert("L")
    finally:
        pdf.close()
    # A sheet never lies quite straight on the glass, the optics soften edges, and dust specks.
    image = image.rotate(0.8, expand=True, fillcolor=255, resample=Image.Resampling.BICUBIC).filter(ImageFilter.GaussianBlur(0.6))
    rng, pixels = random.Random(seed), image.load()
    for _ in range(image.width * image.height // 400):
        pixels[rng.randrange(image.width), rng.randrange(image.height)] = rng.randrange(0, 120)
    out = io.BytesIO()
    image.save(out, format="PDF", resolution=float(dpi), quality=60)
    return out.getvalue()


def calibrate(pool: ConnectionPool, worker_id: str, *, host: str | None = None) -> float | None:
    """Measures and records this host's OCR seconds per page unless a fresh measure exists; the
    figure recorded (None: skipped, or OCR cannot run here)."""
    host = host or socket.gethostname()
    dpi = reading_dpi()
    with pool.connection(timeout=10) as conn:
        latest = calibration.ocr_calibration_latest(conn)
    if (latest is not None and latest.host == host and latest.dpi == dpi
            and datetime.now(UTC) - latest.measured_at < FRESH):
        return None
    seconds = measure_seconds_per_page([SAMPLES / name for name in PAGES])
    if seconds is None:
        return None
    with pool.connection(timeout=10) as conn:
        calibration.ocr_calibration_upsert(conn, host=host, seconds_per_page=seconds, dpi=dpi)
    logs.change("worker", "measured OCR", worker=worker_id, seconds_per_page=round(seconds, 2), dpi=dpi)
    return seconds
