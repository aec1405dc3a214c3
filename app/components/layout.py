"""The page frame (header, navigation, live indicator, identity) and the live-refresh hookup."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

from nicegui import app, ui

from app import auth, live
from schema.stats_types import StreamEvent

PAGE_CSS = """
body { background: #f5f7fa; }
.q-header { background: #15263f; }
.quire-nav a { color: #c9d4e3; text-decoration: none; padding: 6px 12px; border-radius: 6px; font-weight: 500; }
.quire-nav a:hover { background: rgba(255,255,255,0.08); color: #fff; }
.quire-nav a.active { background: rgba(255,255,255,0.14); color: #fff; }
.quire-card { background: #fff; border: 1px solid #e3e8ef; border-radius: 10px; box-shadow: none; }
.quire-kpi-label { font-size: 0.72rem; letter-spacing: 0.06em; text-transform: uppercase; color: #64748b; }
.quire-kpi-value { font-size: 1.55rem; font-weight: 600; color: #0f172a; font-variant-numeric: tabular-nums; }
.quire-muted { color: #64748b; }
.quire-mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.82rem; }
.quire-section-title { font-size: 1rem; font-weight: 600; color: #0f172a; }
.q-table th { font-weight: 600; color: #475569; }
.q-table td { font-variant-numeric: tabular-nums; }
.q-timeline__title { font-size: 0.95rem; font-weight: 600; margin-bottom: 0; }
.q-timeline__subtitle { font-size: 0.72rem; opacity: 0.8; text-transform: none; letter-spacing: 0; }
.q-uploader__subtitle { display: none; }
.q-timeline__content { padding-bottom: 14px; font-size: 0.85rem; color: #475569; }
.quire-dot { width: 8px; height: 8px; border-radius: 50%; display: inline-block; }
.q-uploader { width: 100%; box-shadow: none; border: 2px dashed #b6c2d2; border-radius: 10px; }
.q-uploader__list { min-height: 150px; background: #fbfcfe; }
.q-uploader__list:empty::before, .q-uploader__list:not(:has(*))::before {
  content: "Drop PDF files here, or press + to choose them"; display: block; text-align: center;
  color: #64748b; padding: 52px 0; font-size: 0.95rem; }
/* A file dragged over the drop zone lights it up; Quasar's default grey overlay reads as disabled. */
.q-uploader--dnd { border-color: #2563eb; }
.q-uploader__dnd { background: rgba(37, 99, 235, 0.10); outline: 2px dashed #2563eb; outline-offset: -6px; }
/* A disabled action fades to grey, so it never looks like a live red or blue button. An !important in
   the first cascade layer outranks Quasar's own (opacity 0.7, in NiceGUI's last layer). */
@layer theme {
  .q-btn.disabled, .q-btn[disabled] { color: #94a3b8 !important; opacity: 0.45 !important; }
  /* The brand's dark blue is unreadable on the dark theme: links and outlines turn light blue. */
  .body--dark .text-primary { color: #93c5fd !important; }
  /* Toasts appear below the header, never over it. */
  .q-notifications__list--top { top: 60px !important; }
}
.quire-nowrap { white-space: nowrap; }
/* NiceGUI's "connection lost" popup: a blip shorter than this (as at start-up) never shows it. */
#popup[aria-hidden="false"] { transition-delay: 4s; }
.body--dark { background: #0b1220; }
.body--dark .quire-card { background: #111a2b; border-color: #23324a; }
.body--dark .text-slate-900, .body--dark .quire-kpi-value, .body--dark .quire-section-title { color: #e2e8f0; }
.body--dark .quire-muted, .body--dark .quire-kpi-label { color: #94a3b8; }
.body--dark .q-uploader__list { background: #0f1829; }
.body--dark .q-table th { color: #cbd5e1; }
.body--dark .q-timeline__content { color: #cbd5e1; }
/* The header's parts never wrap: the nav and the live pill stay one line each. */
.quire-header-phone { display: none; }
.quire-nav a, .quire-live { white-space: nowrap; flex-shrink: 0; }
@media (max-width: 640px) {
  .quire-header-name, .quire-header-title { display: none; }
  .quire-header-phone { display: inline-flex; }
  .quire-nav { flex-wrap: nowrap; }
  .quire-nav a { padding: 4px 6px; font-size: 0.85rem; }
  .quire-live { padding: 2px 8px !important; flex-wrap: nowrap; }
  /* The name is hidden already; its icon and role badge make room for the links. */
  .quire-header-account, .quire-role { display: none; }
  /* Four links do not fit a phone's header beside the indicator: the API docs are a desktop matter. */
  .quire-nav a.quire-nav-api { display: none; }
}
"""


def live_indicator() -> Callable[[], None]:
    """A `live` / `polling` badge that follows the process's LISTEN health; returns its updater."""
    broadcaster = live.current()
    with ui.element("div").classes("quire-live flex items-center gap-2 px-3 py-1 rounded-full no-wrap") \
            .style("background: rgba(255,255,255,0.08)") as box:
        dot = ui.element("span").classes("quire-dot")
        label = ui.label().classes("text-sm text-white").props('data-testid="live-indicator"')
        tip = ui.tooltip()

    def show() -> None:
        healthy = broadcaster.healthy
        text = "live" if healthy else "polling"
        if label.text != text:
            label.text = text
            dot.style(f"background: {'#4ade80' if healthy else '#fbbf24'}")
            tip.text = ("Changes arrive as they happen (LISTEN/NOTIFY)." if healthy else
                        "The live connection is down; figures refresh every "
                        f"{app.state.settings.poll_seconds:g} s until it is back.")
    show()
    box.props('aria-live="polite"')
    return show


def _dark_toggle(dark: ui.dark_mode) -> None:
    """A light/dark switch, remembered for this browser in the user storage."""
    def icon() -> str:
        return "light_mode" if dark.value else "dark_mode"

    def flip() -> None:
        dark.set_value(not dark.value)
        app.storage.user["dark"] = dark.value
        button.props(f"icon={icon()}")
        tip.text = "Switch to light mode" if dark.value else "Switch to dark mode"

    with ui.button(icon=icon(), on_click=flip).props('flat round dense color=white data-testid="dark-toggle"') \
            as button:
        tip = ui.tooltip("Switch to light mode" if dark.value else "Switch to dark mode")


@contextmanager
def frame(who: auth.Identity, *, active: str) -> Iterator[ui.column]:
    """The header and the content column of every signed-in page; build all content inside it."""
    ui.add_css(PAGE_CSS)
    ui.colors(primary="#1e3a5f", secondary="#475569", accent="#2563eb", positive="#15803d",
              negative="#b91c1c", warning="#d97706", info="#0369a1")
    dark = ui.dark_mode(bool(app.storage.user.get("dark", False)))
    with ui.header().classes("items-center px-3 sm:px-6 py-2 gap-2 sm:gap-6 no-wrap"):
        with ui.link(target="/").classes("flex items-center gap-2 no-underline"):
            ui.icon("auto_stories", size="26px").classes("text-white")
            ui.label("Quire").classes("text-xl font-semibold text-white tracking-tight quire-header-title")
        with ui.element("nav").classes("quire-nav flex gap-1 no-wrap"):
            for path, name in (("/", "Upload"), ("/dashboard", "Dashboard"), ("/review", "Review")):
                ui.link(name, path).classes("active" if name.lower() == active else "")
            ui.link("API", "/docs", new_tab=True).classes("quire-nav-api")
        ui.space()
        show_health = live_indicator()
        _dark_toggle(dark)
        with ui.row().classes("items-center gap-2 text-white no-wrap"):
            ui.icon("account_circle", size="22px").classes("quire-header-account")
            ui.label(who.name or "").classes("text-sm quire-header-name").props('data-testid="identity"')
            role = who.role.name.lower()
            # The local operator is named "operator": the badge would only repeat it.
            if who.name != role:
                ui.badge(role, color="teal-7" if who.operator else "grey-7").classes("text-xs quire-role") \
                    .props('data-testid="role"')
            if who.via == "session":
                ui.link("Sign out", "/auth/logout").classes("text-sm text-blue-200 ml-2 quire-nowrap quire-header-name")
                # On a phone, an icon: the words would push the header past the screen's edge.
                with ui.link(target="/auth/logout").classes("quire-header-phone text-blue-200") \
                        .props('aria-label="Sign out"'):
                    ui.icon("logout", size="20px")
    with ui.column().classes("w-full max-w-[1400px] mx-auto px-3 sm:px-6 py-6 gap-6") as content:
        yield content
    # Timers wait for the browser's connection, which makes NiceGUI send the page at once: they
    # start only after the page's content is built, so the first paint already has the figures.
    ui.timer(0.5, show_health)


def watch(on_events: Callable[[list[StreamEvent], bool], Awaitable[None]],
          on_poll: Callable[[], Awaitable[None]], *, min_gap: float = 0.2) -> None:
    """Calls `on_events` soon after task events arrive, and `on_poll` on the fallback interval.

    Bursts coalesce: one call handles everything queued, at most every `min_gap` seconds.
    The poll runs whether or not push works, so a page is never more than one interval stale.
    """
    broadcaster = live.current()
    sub = broadcaster.subscribe(max_events=2_000)
    client = ui.context.client
    client.on_delete(sub.close)
    poll_every = app.state.settings.poll_seconds
    state = {"last_run": 0.0, "last_poll": time.monotonic(), "busy": False}

    async def tick() -> None:
        if state["busy"]:
            return
        now = time.monotonic()
        due_poll = now - state["last_poll"] >= poll_every
        due_events = sub.pending and now - state["last_run"] >= min_gap
        if not (due_poll or due_events):
            return
        state["busy"] = True
        try:
            if due_events:
                events, lagged = sub.drain()
                state["last_run"] = now
                await on_events(events, lagged)
            if due_poll:
                state["last_poll"] = now
                await on_poll()
        finally:
            state["busy"] = False

    ui.timer(0.1, tick)
