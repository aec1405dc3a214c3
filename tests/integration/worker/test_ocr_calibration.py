"""The worker's measure of OCR: a real page through Tesseract, taken once the worker has no run,
recorded for its host, and not measured again while fresh."""

import asyncio

import pytest

from agents.ocr import ocr_available
from schema import calibration, db
from schema.settings import Settings
from tests.factories import make_agent, make_task
from tests.waiting import wait_until_async
from tests.worker_helpers import counts_by_status
from worker import ocr_calibration
from worker.daemon import WorkerDaemon

pytestmark = pytest.mark.skipif(not ocr_available(), reason="Tesseract is not installed")


def test_a_worker_measures_ocr_once_and_records_it_for_its_host(db_dsn, conn):
    # A fresh measure from before text was measured too: taken again.
    calibration.ocr_calibration_upsert(conn, host="host-a", seconds_per_page=9.0, dpi=ocr_calibration.reading_dpi())
    pool = db.make_pool(db_dsn, min_size=1, max_size=2, name="calibration-test")
    try:
        seconds = ocr_calibration.calibrate(pool, "w-test", host="host-a")
        assert seconds is not None and seconds > 0
        latest = calibration.ocr_calibration_latest(conn)
        assert (latest.host, latest.dpi) == ("host-a", ocr_calibration.reading_dpi())
        assert latest.seconds_per_page == pytest.approx(seconds)
        assert latest.cpu_seconds_per_page is not None and latest.cpu_seconds_per_page > 0
        assert latest.slowdown >= 1.0
        assert latest.text_seconds_base is not None and latest.text_seconds_base >= 0
        assert latest.text_seconds_per_page is not None and latest.text_seconds_per_page >= 0
        # Fresh, at the same resolution: not measured again.
        assert ocr_calibration.calibrate(pool, "w-test", host="host-a") is None
    finally:
        pool.close()


def test_no_readable_page_measures_nothing(tmp_path):
    assert ocr_calibration.measure_seconds_per_page([tmp_path / "missing.pdf"]) is None
    assert ocr_calibration.measure_ocr([tmp_path / "missing.pdf"]) is None


def test_the_measured_page_is_a_scan_without_a_text_layer():
    import pypdfium2

    scan = ocr_calibration.as_scan((ocr_calibration.SAMPLES / ocr_calibration.PAGES[0]).read_bytes())
    pdf = pypdfium2.PdfDocument(scan)
    try:
        assert len(pdf) == 1 and pdf[0].get_textpage().get_text_range().strip() == ""
    finally:
        pdf.close()


def test_a_worker_with_runs_in_flight_measures_once_it_has_none(db_dsn, conn, tmp_path, monkeypatch):
    # The measure takes seconds of CPU: a worker measures after its runs, not beside them. Runs of
    # 30 s outlast a measure taken at start-up (5 to 15 s here), so this tells the two apart.
    # (At the lowest priority, beside the other tests' processes, the measure would take minutes:
    # here it runs at the tests' own; test_worker_daemon checks the priority.)
    monkeypatch.setattr(ocr_calibration, "LOWEST_PRIORITY", 0)
    make_agent(conn, "bench", executor="noop", settings={"delay_seconds": 30})
    for _ in range(2):
        make_task(conn, "bench")
    settings = Settings(data_dir=tmp_path, poll_seconds=300, sweep_seconds=300, reconcile_seconds=300,
                        ocr_calibration=True)
    daemon = WorkerDaemon(settings, db_dsn, worker_id="w-calibrate", concurrency=2)

    async def host() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(daemon.run(stop))
        await wait_until_async(lambda: counts_by_status(db_dsn) == {"completed": 2}, blocking=True, timeout=120,
                               message="the runs")
        await wait_until_async(lambda: calibration.ocr_calibration_latest(conn) is not None, blocking=True,
                               timeout=120, message="the measure of OCR")
        stop.set()
        await asyncio.wait_for(running, 30)

    asyncio.run(host())
    last_finished = conn.execute("SELECT max(finished_at) AS f FROM task_attempts").fetchone()["f"]
    assert calibration.ocr_calibration_latest(conn).measured_at > last_finished

