"""The worker's measure of a text document: the agent's own path over the bundled samples, one by
one and merged, fitted as seconds a document and a page."""

import pytest

from worker import ocr_calibration


def test_the_bundled_samples_give_a_line_neither_part_negative():
    samples = ocr_calibration.text_samples()
    assert len(samples) >= 2
    line = ocr_calibration.measure_text_seconds(samples)
    assert line is not None
    base, per_page = line
    assert base >= 0 and per_page >= 0 and base + per_page > 0


def test_no_readable_document_measures_nothing(tmp_path):
    assert ocr_calibration.measure_text_seconds([tmp_path / "missing.pdf"]) is None


@pytest.mark.parametrize(("points", "line"), [
    ([], None),
    ([(1, 0.5), (1, 0.7)], (0.6, 0.0)),              # one page count: the mean is the base
    ([(1, 1.5), (2, 2.0), (10, 6.0)], (1.0, 0.5)),   # on the line exactly
    ([(1, 2.0), (10, 1.0)], (1.5, 0.0)),              # never a negative rate a page
    ([(1, 0.1), (10, 10.0)], (0.0, (0.1 + 100) / 101)),  # nor a negative base: through the origin
])
def test_a_line_is_fitted_by_least_squares_and_clipped_at_zero(points, line):
    fitted = ocr_calibration.fit_line(points)
    if line is None:
        assert fitted is None
    else:
        assert fitted == (pytest.approx(line[0]), pytest.approx(line[1]))
