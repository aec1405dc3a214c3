"""A forecast from a cold start: OCR's page rate and a text document's time as a worker measured
them on its machine, a range wide enough for a prior, and a batch's first scans and text documents
teaching the ETAs of the ones after them."""

from datetime import timedelta

import pytest

from schema import calibration, forecast, queue
from schema.errors import InvalidArgument
from schema.rates import (
    CALIBRATED_SPREAD,
    MODEL_SECONDS_PRIOR,
    PRIOR_WEIGHT,
    RUN_OVERHEAD_SECONDS,
    STATIC_OCR_SECONDS_PER_PAGE,
    STATIC_SECONDS_BASE,
    STATIC_SECONDS_PER_PAGE,
    STATIC_SPREAD,
)
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


def _text_forecast(conn, agent="docs", pages=2):
    return forecast.forecast_batch(conn, agent=agent, priority=0, files=[forecast.FileFacts(pages=pages)],
                                   workers=1, compute_rate_usd_per_hour=0)


def test_a_local_agents_text_prior_is_its_path_as_measured_plus_a_launch_and_the_models_answer(conn):
    make_agent(conn, max_concurrent_tasks=1, settings={"extractor": "llm"})
    make_agent(conn, "rules", max_concurrent_tasks=1, settings={"extractor": "offline"})
    make_agent(conn, "remote", max_concurrent_tasks=1, executor="databricks", settings={"extractor": "llm"})
    static = forecast.learned_rates(conn, "docs")
    assert (static.seconds_base, static.seconds_per_page, static.text_prior) == (
        STATIC_SECONDS_BASE, STATIC_SECONDS_PER_PAGE, "static")
    assert "static estimates" in _text_forecast(conn).basis
    # OCR took 6 s a page of wall time for 3 s of CPU: the machine's other work slowed it twice.
    calibration.ocr_calibration_upsert(conn, host="worker-1", seconds_per_page=6.0, cpu_seconds_per_page=3.0,
                                       dpi=300, text_seconds_base=0.1, text_seconds_per_page=0.02)
    rates = forecast.learned_rates(conn, "docs")
    assert rates.text_prior == "measured"
    assert rates.seconds_base == pytest.approx(0.1 + RUN_OVERHEAD_SECONDS * 2 + MODEL_SECONDS_PRIOR)
    assert rates.seconds_per_page == pytest.approx(0.02)
    assert rates.ocr_seconds_base == pytest.approx(rates.seconds_base)  # a scan is launched and answered alike
    assert rates.ocr_seconds_per_page == pytest.approx(6.0)
    # The model's answer is a prior: the range reaches the static top until runs say.
    assert rates.spread == (CALIBRATED_SPREAD[0], STATIC_SPREAD[1])
    measured = _text_forecast(conn)
    assert "text time as measured on the worker's machine" in measured.basis
    assert measured.eta_high_seconds == pytest.approx(measured.eta_seconds * STATIC_SPREAD[1], rel=1e-3)
    # An extractor that calls no model is forecast without the model's answer, in a measured range.
    rules = forecast.learned_rates(conn, "rules")
    assert rules.seconds_base == pytest.approx(0.1 + RUN_OVERHEAD_SECONDS * 2)
    assert rules.spread == CALIBRATED_SPREAD
    # This machine's measure says nothing of a run on Databricks.
    remote = forecast.learned_rates(conn, "remote")
    assert (remote.seconds_base, remote.text_prior) == (STATIC_SECONDS_BASE, "static")


def test_a_machine_without_ocr_still_measures_text(conn):
    make_agent(conn, max_concurrent_tasks=1)
    calibration.ocr_calibration_upsert(conn, host="worker-1", seconds_per_page=None, dpi=300,
                                       text_seconds_base=0.2, text_seconds_per_page=0.05)
    latest = calibration.ocr_calibration_latest(conn)
    assert (latest.seconds_per_page, latest.slowdown) == (None, 1.0)
    rates = forecast.learned_rates(conn, "docs")
    assert rates.seconds_base == pytest.approx(0.2 + RUN_OVERHEAD_SECONDS)
    assert (rates.ocr_seconds_per_page, rates.ocr_prior) == (STATIC_OCR_SECONDS_PER_PAGE, "static")


@pytest.mark.parametrize("measure", [
    {"seconds_per_page": None},                                               # nothing measured
    {"seconds_per_page": None, "cpu_seconds_per_page": 1.0, "text_seconds_base": 0.1,
     "text_seconds_per_page": 0.1},                                           # CPU time of no OCR
    {"seconds_per_page": 2.0, "cpu_seconds_per_page": 0},
    {"seconds_per_page": 2.0, "text_seconds_base": 0.1},                      # half a text line
    {"seconds_per_page": 2.0, "text_seconds_base": -0.1, "text_seconds_per_page": 0.1},
])
def test_a_measure_is_refused_unless_whole_and_positive(conn, measure):
    with pytest.raises(InvalidArgument):
        calibration.ocr_calibration_upsert(conn, host="h", dpi=300, **measure)
    assert calibration.ocr_calibration_latest(conn) is None


def test_the_first_text_runs_move_the_base_from_the_prior_towards_what_they_took(conn):
    make_agent(conn, max_concurrent_tasks=1)
    calibration.ocr_calibration_upsert(conn, host="worker-1", seconds_per_page=4.0, cpu_seconds_per_page=4.0,
                                       dpi=300, text_seconds_base=0.0, text_seconds_per_page=0.5)
    prior = forecast.learned_rates(conn, "docs").seconds_base
    assert prior == pytest.approx(RUN_OVERHEAD_SECONDS)
    start = _clock(conn) - timedelta(hours=1)
    # A 2-page document took 11 s: 10 s beyond its pages, where the prior said RUN_OVERHEAD_SECONDS.
    _run(conn, pages=2, seconds=11, scanned=False, start=start)
    rates = forecast.learned_rates(conn, "docs")
    assert rates.seconds_base == pytest.approx((10 + prior * PRIOR_WEIGHT) / (1 + PRIOR_WEIGHT))
    assert rates.seconds_per_page == pytest.approx(0.5)
    assert rates.ocr_seconds_base == pytest.approx(rates.seconds_base)
