"""The worker's start-up measure of OCR: a real page through Tesseract, recorded for its host, and
not measured again while fresh."""

import pytest

from agents.ocr import ocr_available
from schema import calibration, db
from worker import ocr_calibration

pytestmark = pytest.mark.skipif(not ocr_available(), reason="Tesseract is not installed")


def test_a_worker_measures_ocr_once_and_records_it_for_its_host(db_dsn, conn):
    pool = db.make_pool(db_dsn, min_size=1, max_size=2, name="calibration-test")
    try:
        seconds = ocr_calibration.calibrate(pool, "w-test", host="host-a")
        assert seconds is not None and seconds > 0
        latest = calibration.ocr_calibration_latest(conn)
        assert (latest.host, latest.dpi) == ("host-a", ocr_calibration.reading_dpi())
        assert latest.seconds_per_page == pytest.approx(seconds)
        # Fresh, at the same resolution: not measured again.
        assert ocr_calibration.calibrate(pool, "w-test", host="host-a") is None
    finally:
        pool.close()


def test_no_readable_page_measures_nothing(tmp_path):
    assert ocr_calibration.measure_seconds_per_page([tmp_path / "missing.pdf"]) is None


def test_the_measured_page_is_a_scan_without_a_text_layer():
    import pypdfium2

    scan = ocr_calibration.as_scan((ocr_calibration.SAMPLES / ocr_calibration.PAGES[0]).read_bytes())
    pdf = pypdfium2.PdfDocument(scan)
    try:
        assert len(pdf) == 1 and pdf[0].get_textpage().get_text_range().strip() == ""
    finally:
        pdf.close()
