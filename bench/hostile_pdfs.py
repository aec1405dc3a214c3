"""Hostile PDFs made on the spot: deflate bombs, huge pages, large padded files."""

from __future__ import annotations

import zlib


def pdf(objects: list[bytes], *, root: int = 1) -> bytes:
    """A PDF of the numbered objects (1..n) with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root {root} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"", *, deflate: bool = True) -> bytes:
    body = zlib.compress(data, 9) if deflate else data
    filt = b" /Filter /FlateDecode" if deflate else b""
    return b"<< /Length %d%s %s >>\nstream\n" % (len(body), filt, extra) + body + b"\nendstream"


def page_pdf(content: bytes, *, width: float = 612, height: float = 792, deflate: bool = True,
             extra_objects: list[bytes] | None = None) -> bytes:
    """One page of the given size whose content stream is `content`."""
    return pdf([b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Contents 4 0 R "
                b"/Resources << /Font << /F1 5 0 R >> >> >>" % (width, height),
                _stream(content, deflate=deflate),
                b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"] + (extra_objects or []))


def deflate_bomb(inflated_mb: int = 100) -> bytes:
    """A few hundred KB whose content stream inflates to `inflated_mb` MB of text-drawing operators."""
    unit = b"BT /F1 12 Tf 72 720 Td (bomb) Tj ET\n"
    return page_pdf(unit * (inflated_mb * 1_000_000 // len(unit)))


def huge_page(inches: float = 200) -> bytes:
    """A tiny PDF with one blank page `inches` on each side and no text: what OCR would be asked to read."""
    return page_pdf(b"", width=inches * 72, height=inches * 72, deflate=False)


def text_pdf(text: str = "Invoice INV-1 Total EUR 10.00", *, pad_mb: float = 0) -> bytes:
    """A readable one-page PDF, padded with an unused incompressible stream to about `pad_mb` MB."""
    import os

    content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    extra = [_stream(os.urandom(int(pad_mb * 1_000_000)), deflate=False)] if pad_mb else []
    return page_pdf(content, deflate=False, extra_objects=extra)
