"""Turns a PDF into an image-only "scan": pages rendered, greyed, tilted, speckled, JPEG-compressed.

Usage:
    python bench/realworld/scan.py SOURCE.pdf TARGET.pdf [--dpi 150] [--angle 0.8] [--seed 1]
"""

from __future__ import annotations

import argparse
import io
import random
import sys
from pathlib import Path


def scan_pdf(source: bytes, dpi: int = 150, angle: float = 0.8, seed: int = 1,
             quality: int = 60) -> bytes:
    """An image-only PDF of `source` as a desk scanner would make it."""
    import pypdfium2 as pdfium
    from PIL import Image, ImageFilter

    rng = random.Random(seed)
    pdf = pdfium.PdfDocument(source)
    images = []
    try:
        for index in range(len(pdf)):
            page = pdf[index]
            image = page.render(scale=dpi / 72).to_pil().convert("L")
            page.close()
            # A sheet never lies quite straight on the glass, and the optics soften edges.
            image = image.rotate(angle * (1 if index % 2 == 0 else -0.6), expand=True,
                                 fillcolor=255, resample=Image.BICUBIC)
            image = image.filter(ImageFilter.GaussianBlur(0.6))
            pixels = image.load()
            width, height = image.size
            for _ in range(width * height // 400):  # dust specks
                x, y = rng.randrange(width), rng.randrange(height)
                pixels[x, y] = rng.randrange(0, 120)
            images.append(image)
    finally:
        pdf.close()
    out = io.BytesIO()
    first, rest = images[0], images[1:]
    # JPEG inside the PDF, as scanners store pages.
    first.save(out, format="PDF", save_all=True, append_images=rest, resolution=float(dpi),
               quality=quality)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--dpi", type=int, default=150)
    parser.add_argument("--angle", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    data = scan_pdf(Path(args.source).read_bytes(), args.dpi, args.angle, args.seed)
    Path(args.target).write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
