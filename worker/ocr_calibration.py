"""OCR and text documents timed on this machine by the worker: the priors a forecast uses until
an agent has runs of its own.

A scanned page costs seconds of CPU where a text page costs milliseconds, and how many depends on
the machine and the resolution pages are read at. Once it has had no run for two seconds after it
started (in a process of its own at the lowest CPU priority, given up when work comes: see
measure_apart) the worker reads the first page of two bundled samples (a sparse invoice, a dense
contract) through the same OCR as a run, and records the mean per standard page of OCR work
(agents/scanwork.py: a page of 30 lines of text) for its host. Each page is first made into what a
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

import asyncio
import contextlib
import io
import json
import os
import random
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schema import calibration, rates
from worker import logs
from worker.apart import start_apart

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

SAMPLES = Path(__file__).resolve().parents[1] / "app" / "samples"
PAGES = ("invoice_harborline_INV-2024-0117.pdf", "contract_master_services_meridian.pdf")
FRESH = timedelta(days=1)
# Each page or document is timed this many times and its fastest time kept.
REPEATS = 2


def reading_dpi() -> float:
    """The resolution runs on this machine read scanned pages at."""
    from agents.ocr import DEFAULT_DPI

    return float(os.environ.get("QUIRE_OCR_DPI") or DEFAULT_DPI)


def measure_seconds_per_page(paths: list[Path]) -> float | None:
    """Mean seconds one standard page of OCR work takes, read on these PDFs (see measure_ocr); None
    when OCR cannot run here or no page could be read."""
    measured = measure_ocr(paths)
    return None if measured is None else measured[0]


def measure_ocr(paths: list[Path]) -> tuple[float, float] | None:
    """Mean wall and CPU seconds one standard page of OCR work (agents/scanwork.py) takes, read on
    the first page of these PDFs (each page's fastest of REPEATS readings, over its work; the CPU
    seconds are this thread's and Tesseract's own); None when OCR cannot run here or no page could
    be read."""
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


def measure_text_seconds(paths: list[Path]) -> tuple[float, float] | None:
    """Seconds a text document takes through the agent's path without a model (read, classify,
    extract by the rules), as a line: a base a document and a rate a page, fitted over these PDFs
    one by one and merged into one document. None when none could be read."""
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


@dataclass(frozen=True)
class Measured:
    """What a measure found on this host; None where that part could not run or read anything."""

    ocr: tuple[float, float] | None    # wall and CPU seconds a standard page of OCR work takes
    text: tuple[float, float] | None   # a text document's seconds: a base, and a rate a page


def measure() -> Measured:
    """Times the bundled samples: text through the agent's path, and the scanned pages through OCR."""
    return Measured(text=measure_text_seconds(text_samples()), ocr=measure_ocr([SAMPLES / name for name in PAGES]))


def is_fresh(pool: ConnectionPool, *, host: str | None = None) -> bool:
    """Whether this host measured both OCR and text, at this resolution, within FRESH."""
    with pool.connection(timeout=10) as conn:
        latest = calibration.ocr_calibration_latest(conn)
    return (latest is not None and latest.host == (host or socket.gethostname()) and latest.dpi == reading_dpi()
            and latest.text_seconds_base is not None and datetime.now(UTC) - latest.measured_at < FRESH)


def record(pool: ConnectionPool, worker_id: str, measured: Measured, *, host: str | None = None) -> float | None:
    """Records a measure for this host; OCR's seconds a page recorded (None: OCR could not run)."""
    seconds, cpu = measured.ocr if measured.ocr is not None else (None, None)
    text = measured.text
    if seconds is None and text is None:
        return None
    dpi = reading_dpi()
    with pool.connection(timeout=10) as conn:
        calibration.ocr_calibration_upsert(conn, host=host or socket.gethostname(), seconds_per_page=seconds, dpi=dpi,
                                           cpu_seconds_per_page=cpu if cpu and cpu > 0 else None,
                                           text_seconds_base=text[0] if text else None,
                                           text_seconds_per_page=text[1] if text else None)
    logs.change("worker", "measured OCR and text", worker=worker_id,
                seconds_per_page=None if seconds is None else round(seconds, 2),
                cpu_seconds_per_page=None if cpu is None else round(cpu, 2), dpi=dpi,
                text_seconds_base=None if text is None else round(text[0], 3),
                text_seconds_per_page=None if text is None else round(text[1], 3))
    return seconds


def calibrate(pool: ConnectionPool, worker_id: str, *, host: str | None = None) -> float | None:
    """Measures and records this host's OCR seconds per page and a text document's seconds unless a
    fresh measure of both exists, in this process; OCR's figure recorded (None: skipped, or OCR
    cannot run here). The worker measures apart instead (measure_apart)."""
    if is_fresh(pool, host=host):
        return None
    return record(pool, worker_id, measure(), host=host)


# How often a measure under way looks whether work came.
BUSY_POLL_SECONDS = 0.1
# The measure's CPU priority (nice): the lowest, so any work on the machine goes first.
LOWEST_PRIORITY = 19


async def measure_apart(busy: Callable[[], bool], *, started: Callable[[int], None] | None = None) -> Measured | None:
    """measure() in a process of its own at the lowest CPU priority, given up as soon as `busy()`.

    The measure takes tens of seconds of CPU (about 30 s here), much of it holding the interpreter
    lock: run in the worker's process at its first idle moment, a backlog that came just after
    took 1.4 to 1.8 times as long to drain (docs/BENCHMARKS.md). Here work never waits on it: the process yields the CPU to any other, and it
    is killed (with its Tesseract) as soon as work comes, or when this coroutine is cancelled.
    Returns None when it was given up; raises RuntimeError when the process failed. `started` is
    told the process id."""
    process = await start_apart("worker.ocr_calibration", nice=LOWEST_PRIORITY,
                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    if started is not None:
        started(process.pid)
    output = asyncio.ensure_future(process.communicate())
    try:
        while not output.done():
            if busy():
                return None
            await asyncio.wait([output], timeout=BUSY_POLL_SECONDS)
        stdout, stderr = output.result()
    finally:
        if process.returncode is None:  # given up or cancelled: the process and its Tesseract go
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await asyncio.shield(process.wait())
        output.cancel()
    if process.returncode != 0:
        raise RuntimeError(f"the measure exited with {process.returncode}: {stderr.decode(errors='replace')[-500:]}")
    found = json.loads(stdout.splitlines()[-1])  # the last line: what the measure printed last
    return Measured(ocr=_pair(found.get("ocr")), text=_pair(found.get("text")))


def _pair(value: Any) -> tuple[float, float] | None:
    return None if value is None else (float(value[0]), float(value[1]))


def _main() -> int:
    """`python -m worker.ocr_calibration`: measure() as JSON on stdout (what measure_apart reads)."""
    measured = measure()
    print(json.dumps({"ocr": measured.ocr, "text": measured.text}))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
