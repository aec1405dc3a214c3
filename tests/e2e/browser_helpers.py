"""What the browser tests share: dropping files on the uploader, opening a page once it is live,
answering a confirmation, and measuring what a person sees."""

from __future__ import annotations

from playwright.sync_api import Page, expect

DROP_FILES = """async (files) => {
  const transfer = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.b64), c => c.charCodeAt(0));
    transfer.items.add(new File([bytes], f.name, {type: 'application/pdf'}));
  }
  const uploader = document.querySelector('.q-uploader');
  uploader.dispatchEvent(new DragEvent('dragover', {dataTransfer: transfer, bubbles: true, cancelable: true}));
  for (let i = 0; i < 50 && !document.querySelector('.q-uploader__dnd'); i++) {
    await new Promise(r => setTimeout(r, 20));
  }
  document.querySelector('.q-uploader__dnd')
    .dispatchEvent(new DragEvent('drop', {dataTransfer: transfer, bubbles: true, cancelable: true}));
}"""
# Widths a person uses: a desktop and a phone.
DESKTOP = {"width": 1440, "height": 1000}
PHONE = {"width": 390, "height": 844}


def visit(page: Page, url: str) -> None:
    """Opens a page and waits until its live connection is up and, on the dashboard, its charts are
    drawn and the browser is idle (Plotly's first render busies a fresh page for a moment)."""
    page.goto(url)
    page.wait_for_function("() => window.did_handshake === true")
    if url.endswith("/dashboard"):
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 5")
        page.evaluate("() => new Promise(done => requestIdleCallback(done, {timeout: 3000}))")


def confirm_dialog(page: Page, title: str, *, accept: bool = True) -> None:
    """Checks the confirmation's title, then accepts or declines it."""
    dialog = page.locator('[data-testid="confirm-dialog"]')
    expect(dialog.locator('[data-testid="confirm-title"]')).to_have_text(title)
    dialog.locator(f'[data-testid="confirm-{"yes" if accept else "no"}"]').click()
    expect(dialog).to_have_count(0)


def page_width(page: Page) -> int:
    """How wide the document is: wider than the viewport means the page scrolls sideways."""
    return page.evaluate("document.documentElement.scrollWidth")
