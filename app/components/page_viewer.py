"""A document page rendered on the server, with evidence boxes drawn over it and the word (or line)
under a click handed to the page that shows it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from nicegui import ui

from app import reviews
from app.page_images import SCALE

Box = tuple[float, float, float, float]


class PageViewer:
    """One page at a time: its image, every field's evidence box, the selected one stronger."""

    def __init__(self, task_id: int, uri: str, sha256: str | None, pages: int,
                 on_pick: Callable[[str, Box], Awaitable[None]]) -> None:
        self.task_id, self.uri, self.sha256 = task_id, uri, sha256
        self.pages = max(pages, 1)
        self.on_pick = on_pick
        self.page = 0
        self.view: reviews.PageView | None = None
        self.boxes: dict[str, tuple[int, Box]] = {}   # field -> (page, box)
        self.selected: str | None = None
        self.picked: Box | None = None
        with ui.column().classes("w-full gap-2 min-w-0"):
            with ui.row().classes("w-full items-center gap-2"):
                self.caption = ui.label().classes("text-sm quire-muted").props('data-testid="page-caption"')
                ui.space()
                self.prev = ui.button(icon="chevron_left", on_click=lambda: self.show(self.page - 1)) \
                    .props('flat dense round aria-label="previous page"')
                self.next = ui.button(icon="chevron_right", on_click=lambda: self.show(self.page + 1)) \
                    .props('flat dense round aria-label="next page"')
            with ui.element("div").classes("quire-page w-full"):
                self.image = ui.interactive_image(on_mouse=self._clicked, events=["click"], sanitize=False) \
                    .classes("w-full").props('data-testid="page-image"')
            self.problem = ui.label().classes("text-sm text-negative")
            self.problem.set_visibility(False)

    def set_boxes(self, boxes: dict[str, tuple[int, Box]]) -> None:
        self.boxes = boxes
        self._draw()

    async def show(self, page: int) -> None:
        """Shows page `page` (from 1)."""
        if not 1 <= page <= self.pages or (page == self.page and self.view is not None):
            return
        try:
            self.view = await reviews.page_view(self.task_id, self.uri, self.sha256, page)
        except (FileNotFoundError, IndexError, OSError, ValueError) as exc:
            self.problem.text = f"The page cannot be shown: {exc}"
            self.problem.set_visibility(True)
            return
        self.page = page
        self.picked = None
        self.image.set_source(self.view.url)
        self.image.props(f'data-page="{page}"')
        self.caption.text = f"Page {page} of {self.pages} · click text to fill the field (Shift: the whole line)"
        self.prev.set_enabled(page > 1)
        self.next.set_enabled(page < self.pages)
        self._draw()

    async def select(self, name: str | None) -> None:
        """Highlights a field's evidence, turning to its page."""
        self.selected = name
        target = self.boxes.get(name) if name else None
        if target and target[0] != self.page:
            await self.show(target[0])
        self._draw()

    def _draw(self) -> None:
        if self.view is None:
            return
        shapes: list[str] = []
        for name, (page, (x0, y0, x1, y1)) in self.boxes.items():
            if page != self.page:
                continue
            active = name == self.selected
            shapes.append(
                f'<rect x="{x0 * SCALE - 4:.1f}" y="{y0 * SCALE - 4:.1f}" width="{(x1 - x0) * SCALE + 8:.1f}" '
                f'height="{(y1 - y0) * SCALE + 8:.1f}" rx="4" data-field="{name}" '
                f'class="{"quire-box-active" if active else "quire-box"}" '
                f'fill="{"rgba(37,99,235,0.16)" if active else "rgba(245,158,11,0.08)"}" '
                f'stroke="{"#2563eb" if active else "#f59e0b"}" stroke-width="{4 if active else 2}" />')
        if self.picked:
            x0, y0, x1, y1 = self.picked
            shapes.append(f'<rect x="{x0 * SCALE - 3:.1f}" y="{y0 * SCALE - 3:.1f}" width="{(x1 - x0) * SCALE + 6:.1f}" '
                          f'height="{(y1 - y0) * SCALE + 6:.1f}" rx="3" fill="rgba(21,128,61,0.15)" '
                          f'stroke="#15803d" stroke-width="3" class="quire-box-picked" />')
        self.image.content = "".join(shapes)

    def word_at(self, x: float, y: float, *, line: bool) -> tuple[str, Box] | None:
        """The word under a point in page points (or its whole line), with its box."""
        if self.view is None:
            return None
        hits = [w for w in self.view.words if w["b"][0] - 2 <= x <= w["b"][2] + 2 and w["b"][1] - 2 <= y <= w["b"][3] + 2]
        if not hits:
            return None
        word = min(hits, key=lambda w: abs((w["b"][0] + w["b"][2]) / 2 - x))
        chosen: list[dict[str, Any]] = [w for w in self.view.words if w["l"] == word["l"]] if line else [word]
        box = (min(w["b"][0] for w in chosen), min(w["b"][1] for w in chosen),
               max(w["b"][2] for w in chosen), max(w["b"][3] for w in chosen))
        return " ".join(w["t"] for w in chosen), box

    async def _clicked(self, event) -> None:
        found = self.word_at(event.image_x / SCALE, event.image_y / SCALE, line=event.shift)
        if found is None:
            return
        self.picked = found[1]
        self._draw()
        await self.on_pick(*found)
