"""Extraction results that carry evidence (page, box, text), on real PDFs, so the review tests do
not depend on what today's extractor reports."""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Any

from schema import queue

AMOUNT_FIELDS = ("subtotal", "tax", "total")


def invoice_lines(n: int) -> list[tuple[str, str, Any]]:
    """(field, text on the page, value) for invoice number n: German style amounts."""
    net = 1000 + n
    return [("issuer", f"Kessler Maschinenbau GmbH {n}", f"Kessler Maschinenbau GmbH {n}"),
            ("invoice_number", f"Rechnungsnr. RE-2024-{n:03d}", f"RE-2024-{n:03d}"),
            ("issue_date", f"Datum: 2024-03-{1 + n % 28:02d}", f"2024-03-{1 + n % 28:02d}"),
            ("currency", "Waehrung: EUR", "EUR"),
            ("subtotal", f"Netto: {_german(net)}", float(net)),
            ("tax", f"MwSt: {_german(net * 0.19)}", round(net * 0.19, 2)),
            ("total", f"Gesamt: {_german(net * 1.19)}", round(net * 1.19, 2))]


def _german(amount: float) -> str:
    return f"{amount:,.2f}".replace(",", "X").replace(".", ",").replace("X", ".")


@functools.lru_cache(maxsize=512)
def invoice_pdf(n: int) -> bytes:
    """A one-page invoice whose lines are the ones invoice_lines names."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(0, 12, f"RECHNUNG {n}", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 12)
    for _, text, _ in invoice_lines(n):
        pdf.cell(0, 9, text, new_x="LMARGIN", new_y="NEXT")
    buffer = io.BytesIO()
    pdf.output(buffer)
    return buffer.getvalue()


@functools.lru_cache(maxsize=512)
def _boxes(pdf_bytes: bytes, texts: tuple[str, ...]) -> tuple[dict[str, list[float]], list[list[float]]]:
    """Each text's box on page 1, in points from the top-left, and the page sizes."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf_bytes)
    try:
        page = doc[0]
        width, height = page.get_size()
        textpage = page.get_textpage()
        found: dict[str, list[float]] = {}
        for text in texts:
            searcher = textpage.search(text, match_case=True)
            hit = searcher.get_next()
            if hit is None:
                continue
            index, count = hit
            boxes = [textpage.get_charbox(i) for i in range(index, index + count)]
            left, bottom = min(b[0] for b in boxes), min(b[1] for b in boxes)
            right, top = max(b[2] for b in boxes), max(b[3] for b in boxes)
            found[text] = [round(left, 1), round(height - top, 1), round(right, 1), round(height - bottom, 1)]
        return found, [[round(width, 1), round(height, 1)]]
    finally:
        doc.close()


def invoice_result(n: int, pdf_bytes: bytes, *, confidence: float = 0.9, low: tuple[str, ...] = (),
                   wrong: dict[str, Any] | None = None, extractor: str = "offline",
                   model: str | None = None, findings: list | None = None) -> dict[str, Any]:
    """A result with evidence for every field; `low` fields get confidence 0.3, `wrong` values replace
    the page's (what a reviewer then has to correct)."""
    lines = invoice_lines(n)
    boxes, sizes = _boxes(pdf_bytes, tuple(text for _, text, _ in lines))
    fields = {}
    for name, text, value in lines:
        fields[name] = {"value": (wrong or {}).get(name, value), "confidence": 0.3 if name in low else confidence,
                        "stage": "rules",
                        "evidence": {"page": 1, "bbox": boxes[text], "text": text} if text in boxes else None}
    result = {"document_type": "invoice", "extractor": extractor, "model": model, "pages": 1,
              "fields": fields, "page_sizes": sizes}
    if findings:
        result["findings"] = findings
        result["needs_review"] = True
    return result


def complete_with(conn, task_id: int, agent: str, result: dict[str, Any], confidence: float) -> None:
    """Claims the (only enqueued) task and reports `result` for it, as an agent would."""
    claims = queue.claim(conn, agent=agent, worker_id="review-tests", limit=1)
    assert [c.task.id for c in claims] == [task_id], "complete_with needs the task to be the only one queued"
    queue.apply_callback(conn, claims[0].attempt_id, {
        "status": "completed", "result": result, "confidence": confidence,
        "input_tokens": 1000, "output_tokens": 200, "llm_cost_usd": 0.001})


def make_reviewable(conn, n: int, *, agent: str = "docs", customer: str | None = None, confidence: float = 0.9,
                    low: tuple[str, ...] = ("total",), wrong: dict[str, Any] | None = None,
                    directory: Path | None = None, extractor: str = "offline", model: str | None = None,
                    findings: list | None = None, now=None) -> int:
    """A completed invoice task whose result carries evidence; returns its task id. With
    `directory`, the PDF is written there so the page can be rendered."""
    pdf = invoice_pdf(n)
    uri = f"file:///docs/review-{n}.pdf"
    if directory is not None:
        path = Path(directory) / f"review-{n}.pdf"
        path.write_bytes(pdf)
        uri = f"file://{path}"
    task = queue.enqueue(conn, agent=agent, customer=customer, document_uri=uri, document_name=f"rechnung-{n}.pdf",
                         estimated_tokens=1000, pages=1, **({"now": now} if now else {}))
    result = invoice_result(n, pdf, confidence=confidence, low=low, wrong=wrong, extractor=extractor, model=model,
                            findings=findings)
    complete_with(conn, task.id, agent, result, confidence)
    return task.id
