"""What worker hosts measured at start-up: OCR's seconds per page and a text document's seconds
through the agent's path, the forecasts' priors until an agent has runs of its own."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

from schema.errors import InvalidArgument
from schema.sql import fetch_all, fetch_one


@dataclass(frozen=True)
class OcrCalibration:
    """One host's measure: seconds one standard page of OCR work (agents/scanwork.py: a scanned page
    of 30 lines of text) took at this resolution (None: OCR cannot run there), and a text document's
    seconds (a base and a rate a page; None: not measured)."""

    host: str
    seconds_per_page: float | None
    dpi: float
    measured_at: datetime
    text_seconds_base: float | None = None
    text_seconds_per_page: float | None = None
    cpu_seconds_per_page: float | None = None  # OCR's CPU seconds a standard page in that measure (None: unknown)

    @property
    def slowdown(self) -> float:
        """Wall seconds per CPU second of the OCR measure: how much the machine's other work slowed
        it then (1: a core to itself)."""
        if not self.seconds_per_page or not self.cpu_seconds_per_page:
            return 1.0
        return max(self.seconds_per_page / self.cpu_seconds_per_page, 1.0)


def ocr_calibration_upsert(conn: psycopg.Connection, *, host: str, seconds_per_page: float | None, dpi: float,
                           now: datetime | None = None, text_seconds_base: float | None = None,
                           text_seconds_per_page: float | None = None,
                           cpu_seconds_per_page: float | None = None) -> None:
    """Records (or replaces) a host's measure."""
    if seconds_per_page is None and text_seconds_base is None:
        raise InvalidArgument("a measure needs OCR's time per page or a text document's time")
    if (seconds_per_page is not None and not seconds_per_page > 0) or not dpi > 0:
        raise InvalidArgument("an OCR measure needs a positive time per page and resolution")
    if (text_seconds_base is None) != (text_seconds_per_page is None) or any(
            x is not None and not x >= 0 for x in (text_seconds_base, text_seconds_per_page)):
        raise InvalidArgument("a text measure needs a time per document and per page, neither negative")
    if cpu_seconds_per_page is not None and (seconds_per_page is None or not cpu_seconds_per_page > 0):
        raise InvalidArgument("OCR's CPU time per page must be positive, beside its wall time")
    def number(x: float | None) -> float | None:
        return None if x is None else float(x)
    fetch_all(conn, "ocr_calibration_upsert", {
        "host": host, "seconds_per_page": number(seconds_per_page), "dpi": float(dpi), "now": now,
        "text_seconds_base": number(text_seconds_base), "text_seconds_per_page": number(text_seconds_per_page),
        "cpu_seconds_per_page": number(cpu_seconds_per_page)})


def ocr_calibration_latest(conn: psycopg.Connection) -> OcrCalibration | None:
    """The newest measure of any host, or None before any worker measured one."""
    row = fetch_one(conn, "ocr_calibration_latest_one")
    return None if row is None else OcrCalibration(**row)
