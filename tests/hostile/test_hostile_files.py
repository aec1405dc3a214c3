"""Decompression and render bombs: refused by their cost, with bounded memory, before anything
parses them in full; OCR renders a page at a resolution bounded by its pixels."""

from __future__ import annotations

import asyncio

import pytest

from agents.errors import DocumentError
from agents.limits import Limits, TooCostly, check_page, check_streams, ocr_dpi
from app import submitting
from bench.hostile_pdfs import deflate_bomb, huge_page, page_pdf, text_pdf
from schema import db, queue
from schema.settings import Settings


def test_the_limits_refuse_a_deflate_bomb_and_a_huge_page_from_the_raw_bytes():
    limits = Limits()
    bomb = deflate_bomb(100)
    assert len(bomb) < 400_000
    with pytest.raises(TooCostly, match="inflate to over 64 MB"):
        check_streams(bomb, limits)
    check_streams(text_pdf(pad_mb=1), limits)  # an ordinary file passes
    with pytest.raises(TooCostly, match="200 × 200 inches"):
        check_page(1, 200 * 72, 200 * 72, limits)
    check_page(1, 841.89 * 1.41, 1190.55 * 1.41, limits)  # A0 passes


def test_ocr_resolution_is_bounded_by_pixels_per_page():
    limits = Limits(ocr_max_megapixels=40, ocr_min_dpi=100)
    assert ocr_dpi(612, 792, 300, limits) == 300  # a letter page is read at the wanted resolution
    dpi = ocr_dpi(40 * 72, 40 * 72, 300, limits)
    assert (40 * dpi) ** 2 <= 40e6 * 1.001 and dpi > 150
    with pytest.raises(TooCostly, match="too large to OCR"):
        ocr_dpi(200 * 72, 200 * 72, 300, limits)


def test_the_agent_refuses_a_bomb_before_parsing_it(monkeypatch):
    from agents.pdf import parse_pdf

    monkeypatch.setenv("QUIRE_MAX_INFLATED_MB", "5")
    with pytest.raises(DocumentError, match="inflate to over 5 MB"):
        parse_pdf(deflate_bomb(10), "bomb.pdf")
    with pytest.raises(DocumentError, match="over the 2 m² page limit"):
        parse_pdf(huge_page(200), "huge.pdf")
    assert "Invoice" in parse_pdf(text_pdf(), "fine.pdf").text


def test_ocr_renders_a_large_scanned_page_under_the_pixel_limit(monkeypatch):
    """A 40-inch blank page (under the area limit) has no text: OCR reads it at a lowered resolution."""
    pytesseract = pytest.importorskip("pytesseract")
    from agents import ocr
    from agents.pdf import parse_pdf

    sizes = []

    def read(image, **_):
        sizes.append(image.size)
        return {k: [] for k in ("text", "conf", "block_num", "par_num", "line_num", "left", "top", "width", "height")}

    monkeypatch.setattr(pytesseract, "image_to_data", read)
    monkeypatch.setattr(ocr, "ocr_problem", lambda: None)
    monkeypatch.setattr(ocr, "_languages", lambda cmd, wanted: "eng")
    monkeypatch.setenv("QUIRE_OCR_MAX_MEGAPIXELS", "40")
    with pytest.raises(DocumentError, match="no extractable text"):
        parse_pdf(page_pdf(b"", width=40 * 72, height=40 * 72, deflate=False), "big-scan.pdf")
    [(width, height)] = sizes
    # Rendered at about 158 dpi (40 megapixels, not the 144 of 300 dpi); straightening by up to 3°
    # enlarges the canvas by at most 11 %.
    assert width * height <= 40e6 * 1.11, f"read {width} × {height} pixels"


@pytest.fixture
def pool(db_dsn):
    with db.make_pool(db_dsn, max_size=2) as pool:
        yield pool


def _submit(pool, settings, uploads):
    return asyncio.run(submitting.submit(pool, settings, uploads, submitting.SubmitOptions(agent="docs"),
                                         submitted_by="alice"))


def test_upload_refuses_bombs_with_a_reason_and_stores_nothing(pool, conn, tmp_path):
    queue.configure_agent(conn, "docs")
    settings = Settings(data_dir=tmp_path)
    results = {r.name: r for r in _submit(pool, settings, [
        submitting.Upload("bomb.pdf", deflate_bomb(100)), submitting.Upload("huge.pdf", huge_page(200)),
        submitting.Upload("fine.pdf", text_pdf())])}
    assert results["bomb.pdf"].outcome == "rejected" and "costs too much to read" in results["bomb.pdf"].error
    assert "inflate to over" in results["bomb.pdf"].error
    assert results["huge.pdf"].outcome == "rejected" and "page limit" in results["huge.pdf"].error
    assert results["fine.pdf"].outcome == "created"
    stored = [p for p in settings.files_path.rglob("*.pdf") if ".incoming" not in p.parts]
    assert [p.name for p in stored] == ["fine.pdf"]
    assert not any((settings.files_path / ".incoming").iterdir()), "spooled files are removed"


def test_a_file_past_the_checking_process_memory_is_refused_and_the_next_file_still_checked(
        pool, conn, tmp_path, monkeypatch):
    """With the inflated-size limit lifted, PDFium reads the bomb in the child, which its address-space
    cap stops; the app answers for that file and checks the following ones in a new child."""
    queue.configure_agent(conn, "docs")
    monkeypatch.setenv("QUIRE_MAX_INFLATED_MB", "100000")
    monkeypatch.setenv("QUIRE_CHECK_MEMORY_MB", "300")
    results = _submit(pool, Settings(data_dir=tmp_path), [submitting.Upload("bomb.pdf", deflate_bomb(100)),
                                                          submitting.Upload("fine.pdf", text_pdf())])
    assert results[0].outcome == "rejected" and "needs more than 300 MB" in results[0].error, results[0].error
    assert results[1].outcome == "created"


def test_an_agent_run_is_capped_in_memory_when_a_bomb_slips_past_the_limits(tmp_path):
    """With the inflated-size limit lifted, the run's own address-space cap (QUIRE_AGENT_MEMORY_MB)
    ends it instead of letting PDFium take the 1.4 GB the bomb asks for."""
    import os
    import subprocess
    import sys

    bomb = tmp_path / "bomb.pdf"
    bomb.write_bytes(deflate_bomb(100))
    env = {**os.environ, "QUIRE_AGENT_MEMORY_MB": "500", "QUIRE_MAX_INFLATED_MB": "100000"}
    # The run is measured by a small parent of its own: a child forked from this test process
    # would count the test process's memory (hundreds of MB late in a full run) before its exec.
    measure = ("import resource, subprocess, sys\n"
               "run = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)\n"
               "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
               "sys.stdout.buffer.write(f'{run.returncode} {peak}\\n'.encode() + run.stdout)\n")
    proc = subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "agents", "run", "--document",
                           str(bomb)], env=env, capture_output=True, cwd=tmp_path, timeout=240)
    first, _, out = proc.stdout.partition(b"\n")
    returncode, peak_kb = (int(v) for v in first.split())
    assert returncode != 0 and b'"completed"' not in out
    assert peak_kb < 520 * 1024, f"the run peaked at {peak_kb // 1024} MB"
