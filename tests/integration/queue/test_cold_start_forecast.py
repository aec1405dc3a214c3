"""A forecast from a cold start: OCR's page rate as a worker measured it on its machine, a range
wide enough for a prior, and a batch's first scans teaching the ETAs of the ones after them."""

from datetime import timedelta

import pytest

from schema import calibration, forecast, queue
from schema.errors import InvalidArgument
from schema.rates import CALIBRATED_SPREAD, STATIC_OCR_SECONDS_PER_PAGE
from tests.factories import make_agent, make_task


def _clock(conn):
    return conn.execute("SELECT now() AS n").fetchone()["n"]


def _run(conn, *, pages, seconds, scanned, start):
    make_task(conn, "docs", pages=pages, scanned=scanned, now=start)
    (claim,) = queue.claim(conn, agent="docs", worker_id="w", now=start)
    queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {"ok": True}, "confidence": 0.9},
                         now=start + timedelta(seconds=seconds))


def _scan_forecast(conn, pages=10):
    return forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=pages, scanned=True)],
                                   workers=1, compute_rate_usd_per_hour=0)


def test_before_any_scan_ran_the_page_rate_is_the_one_measured_on_the_workers_machine(conn):
    make_agent(conn, max_concurrent_tasks=1)
    static = _scan_forecast(conn)
    assert "OCR time estimated" in static.basis
    assert forecast.learned_rates(conn, "docs").ocr_seconds_per_page == STATIC_OCR_SECONDS_PER_PAGE
    calibration.ocr_calibration_upsert(conn, host="old-host", seconds_per_page=20.0, dpi=300,
                                       now=_clock(conn) - timedelta(days=2))
    calibration.ocr_calibration_upsert(conn, host="worker-1", seconds_per_page=3.0, dpi=300)
    rates = forecast.learned_rates(conn, "docs")
    assert (rates.ocr_seconds_per_page, rates.ocr_prior) == (3.0, "measured")  # the newest measure
    measured = _scan_forecast(conn)
    assert "measured on the worker's machine" in measured.basis
    assert measured.work_seconds < static.work_seconds
    # A prior's range: at least as wide as CALIBRATED_SPREAD around the figure.
    assert measured.eta_low_seconds <= measured.eta_seconds * CALIBRATED_SPREAD[0] + 1e-6
    assert measured.eta_high_seconds >= measured.eta_seconds * CALIBRATED_SPREAD[1] - 1e-6
    # A host measuring again replaces its own figure.
    calibration.ocr_calibration_upsert(conn, host="worker-1", seconds_per_page=4.0, dpi=150)
    latest = calibration.ocr_calibration_latest(conn)
    assert (latest.host, latest.seconds_per_page, latest.dpi) == ("worker-1", 4.0, 150)


def test_a_measure_must_be_positive(conn):
    with pytest.raises(InvalidArgument):
        calibration.ocr_calibration_upsert(conn, host="h", seconds_per_page=0, dpi=300)
    with pytest.raises(InvalidArgument):
        calibration.ocr_calibration_upsert(conn, host="h", seconds_per_page=2.0, dpi=-1)
    assert calibration.ocr_calibration_latest(conn) is None


def test_the_first_scans_of_a_batch_move_the_rate_towards_what_they_took(conn):
    make_agent(conn, max_concurrent_tasks=1)
    calibration.ocr_calibration_upsert(conn, host="worker-1", seconds_per_page=4.0, dpi=300)
    start = _clock(conn) - timedelta(hours=1)
    # Text taught its line: 1 s a document and 0.5 s a page.
    for i, pages in enumerate([1, 2, 4, 8]):
        _run(conn, pages=pages, seconds=1 + 0.5 * pages, scanned=False, start=start + timedelta(minutes=i))
    # One scan of 6 pages took 1 + 12 * 6 s: three times the prior a page.
    _run(conn, pages=6, seconds=1 + 12 * 6, scanned=True, start=start + timedelta(minutes=10))
    rates = forecast.learned_rates(conn, "docs")
    assert rates.ocr_learned_from == 1
    # 6 pages at 12 s against the prior's 2 pages at 4 s: (72 + 8) / 8 = 10 s a page.
    assert rates.ocr_seconds_per_page == pytest.approx(10.0, rel=1e-3)
    assert rates.ocr_seconds_base == pytest.approx(1.0, rel=1e-3)
    # With a second one, closer still.
    _run(conn, pages=6, seconds=1 + 12 * 6, scanned=True, start=start + timedelta(minutes=11))
    assert forecast.learned_rates(conn, "docs").ocr_seconds_per_page == pytest.approx((144 + 8) / 14, rel=1e-3)
