"""OCR and text documents timed on this machine by the worker: the priors a forecast uses until
an agent has runs of its own.

A scanned page costs seconds of CPU where a text page costs milliseconds, and how many depends on
the machine and the resolution pages are read at. Once it has had no run for two seconds after it
started (in a thread; the measure takes seconds of CPU, which a backlog should not wait on) the
worker reads the first page of two bundled samples (a sparse invoice, a dense contract) through the
same OCR as a run, and records the mean per standard page of OCR work (agents/scanwork.py: a
page of 30 lines of text) for its host. Each page is first made into what a
desk scanner gives (150 dpi, tilted, softened, specked with dust, JPEG): Tesseract takes two to
three times as long over such a page as over a clean rendering. Each page is read REPEATS times and
its fastest reading kept: the first reading also loads Tesseract's language data, and a measure
taken while the server around it is still starting read 20.7 s a page where the batch's scans then
took 14.6 (docs/BENCHMARKS.md).

It also runs the bundled text samples, one by one and merged into one document, through the
agent's own path (read, classify, extract by the rules; no model is called) and records a line of
seconds a document and a page. A host that measured both within the last day at the same
resolution is not measured again.
"""

from __future__ import annotations

import io
import os
import random
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from schema import calibration, rates
from worker import logs

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

SAMPLES = Path(__file__).resolve().parents[1] / "app" / "samples"
PAGES = ("invoice_harborline_INV-2024-0117.pdf", "contract_master_services_meridian.pdf")
FRESH = timedelta(days=1)
# Each page or document is timed this many times and its fastest time kept.
REPEATS = 2


class Stopped(Exception):
    """The worker stopped during a measure: it is left unfinished and nothing is recorded."""


def _check(stop: threading.Event | None) -> None:
    """Between two readings: ends the measure if the worker is stopping (a reading takes seconds)."""
    if stop is not None and stop.is_set():
        raise Stopped


def reading_dpi() -> float:
    """The resolution runs on this machine read scanned pages at."""
    from agents.ocr import DEFAULT_DPI

    return float(os.environ.get("QUIRE_OCR_DPI") or DEFAULT_DPI)


def measure_seconds_per_page(paths: list[Path]) -> float | None:
    """Mean seconds one standard page of OCR work takes, read on these PDFs (see measure_ocr); None
    when OCR cannot run here or no page could be read."""
    measured = measure_ocr(paths)
    return None if measured is None else measured[0]


def measure_ocr(paths: list[Path], stop: threading.Event | None = None) -> tuple[float, float] | None:
    """Mean wall and CPU seconds one standard page of OCR work (agents/scanwork.py) takes, read on
    the first page of these PDFs (each page's fastest of REPEATS readings, over its work; the CPU
    seconds are this thread's and Tesseract's own); None when OCR cannot run here or no page could
    be read. Raises Stopped when `stop` is set between two readings."""
    from agents.ocr import ocr_available, ocr_page
    from agents.scanwork import page_lines, page_work

    if not ocr_available():
        return None
    import pypdfium2

    walls, cpus = [], []
    for path in paths:
        if not path.is_file():
            continue
        pdf = pypdfium2.PdfDocument(as_scan(path.read_bytes()))
        try:
            fastest: tuple[float, float] | None = None
            for _ in range(REPEATS):
                _check(stop)
                started, cpu = time.monotonic(), _cpu_seconds()
                ocr_page(pdf[0])
                took = (time.monotonic() - started, _cpu_seconds() - cpu)
                fastest = took if fastest is None or took[0] < fastest[0] else fastest
            if fastest is not None:  # per standard page: what a forecast counts a scan's OCR work in
                work = page_work(page_lines(pdf[0]))
                walls.append(fastest[0] / work)
                cpus.append(fastest[1] / work)
        finally:
            pdf.close()
    if not walls:
        return None
    return sum(walls) / len(walls), sum(cpus) / len(cpus)


def _cpu_seconds() -> float:
    """CPU seconds of this thread and of the child processes waited for (Tesseract runs as one)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + children.ru_utime + children.ru_stime


def measure_text_seconds(paths: list[Path], stop: threading.Event | None = None) -> tuple[float, float] | None:
    """Seconds a text document takes through the agent's path without a model (read, classify,
    extract by the rules), as a line: a base a document and a rate a page, fitted over these PDFs
    one by one and merged into one document. None when none could be read. Raises Stopped when
    `stop` is set between two readings."""
    import tempfile

    import pypdfium2

    from agents.offline import OfflineExtractor
    from agents.runner import EXIT_COMPLETED, run
    from agents.tracing import Tracer

    readable = [p for p in paths if p.is_file()]
    if not readable:
        return None
    points: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory(prefix="quire-calibration-") as scratch:
        merged = pypdfium2.PdfDocument.new()
        try:
            for path in readable:
                source = pypdfium2.PdfDocument(path.read_bytes())
                try:
                    merged.import_pages(source)
                finally:
                    source.close()
            if len(readable) > 1:
                target = Path(scratch) / "merged.pdf"
                merged.save(str(target))
                readable.append(target)
        finally:
            merged.close()
        for path in readable:
            fastest, pages = None, 0
            for _ in range(REPEATS):
                _check(stop)
                started = time.monotonic()
                outcome = run(str(path), extractor=OfflineExtractor(), tracer=Tracer())
                took = time.monotonic() - started
                fastest = took if fastest is None else min(fastest, took)
                pages = outcome.payload.get("pages") or 0
            if outcome.exit_code == EXIT_COMPLETED and pages and fastest is not None:
                points.append((pages, fastest))
    return fit_line(points)


def fit_line(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Least squares of seconds on pages (rates.least_squares), neither part negative: a base below
    zero gives the line through the origin instead. None without points."""
    if not points:
        return None
    base, slope = rates.least_squares([(float(p), s) for p, s in points])
    if base < 0:
        return 0.0, sum(p * s for p, s in points) / sum(p * p for p, _ in points)
    return base, slope


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


def text_samples() -> list[Path]:
    """The bundled text PDFs the text measure runs."""
    return sorted(SAMPLES.glob("*.pdf"))


def calibrate(pool: ConnectionPool, worker_id: str, *, host: str | None = None,
              stop: threading.Event | None = None) -> float | None:
    """Measures and records this host's OCR seconds per page and a text document's seconds unless a
    fresh measure of both exists; OCR's figure recorded (None: skipped, or OCR cannot run here).
    A `stop` set during the measure ends it at the next reading, recording nothing (Stopped)."""
    host = host or socket.gethostname()
    dpi = reading_dpi()
    with pool.connection(timeout=10) as conn:
        latest = calibration.ocr_calibration_latest(conn)
    if (latest is not None and latest.host == host and latest.dpi == dpi and latest.text_seconds_base is not None
            and datetime.now(UTC) - latest.measured_at < FRESH):
        return None
    text = measure_text_seconds(text_samples(), stop)
    ocr = measure_ocr([SAMPLES / name for name in PAGES], stop)
    seconds, cpu = ocr if ocr is not None else (None, None)
    if seconds is None and text is None:
        return None
    _check(stop)
    with pool.connection(timeout=10) as conn:
        calibration.ocr_calibration_upsert(conn, host=host, seconds_per_page=seconds, dpi=dpi,
                                           cpu_seconds_per_page=cpu if cpu and cpu > 0 else None,
                                           text_seconds_base=text[0] if text else None,
                                           text_seconds_per_page=text[1] if text else None)
    logs.change("worker", "measured OCR and text", worker=worker_id,
                seconds_per_page=None if seconds is None else round(seconds, 2),
                cpu_seconds_per_page=None if cpu is None else round(cpu, 2), dpi=dpi,
                text_seconds_base=None if text is None else round(text[0], 3),
                text_seconds_per_page=None if text is None else round(text[1], 3))
    return seconds
