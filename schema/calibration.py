"""OCR's seconds per page as worker hosts measured it at start-up: the forecasts' prior for scans."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

from schema.errors import InvalidArgument
from schema.sql import fetch_all, fetch_one


@dataclass(frozen=True)
class OcrCalibration:
    """One host's measure: seconds one page took through OCR, at this resolution, then."""

    host: str
    seconds_per_page: float
    dpi: float
    measured_at: datetime


def ocr_calibration_upsert(conn: psycopg.Connection, *, host: str, seconds_per_page: float, dpi: float,
                           now: datetime | None = None) -> None:
    """Records (or replaces) a host's measure."""
    if not seconds_per_page > 0 or not dpi > 0:
        raise InvalidArgument("an OCR measure needs a positive time per page and resolution")
    fetch_all(conn, "ocr_calibration_upsert", {"host": host, "seconds_per_page": float(seconds_per_page),
                                               "dpi": float(dpi), "now": now})


def ocr_calibration_latest(conn: psycopg.Connection) -> OcrCalibration | None:
    """The newest measure of any host, or None before any worker measured one."""
    row = fetch_one(conn, "ocr_calibration_latest_one")
    return None if row is None else OcrCalibration(**row)
