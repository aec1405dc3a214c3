"""The agents and whether each runs: operators pause one (until a time, with a reason) or resume it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from nicegui import ui

from app.auth import Identity
from app.components import format as fmt
from schema.models import Agent

OnPause = Callable[[str, datetime | None, str | None], Awaitable[bool]]
OnResume = Callable[[str], Awaitable[bool]]


def pause_text(agent: Agent, now: datetime | None = None) -> str:
    """How a paused agent's state reads: until when, why and by whom."""
    now = now or datetime.now(UTC)
    until = f"until {fmt.exact(agent.paused_until)}" if agent.paused_until else "until resumed"
    why = f": {agent.paused_reason}" if agent.paused_reason else ""
    by = f" (by {agent.paused_by})" if agent.paused_by else ""
    return f"Paused {until}{why}{by}. Running tasks finish; nothing new starts."


def parse_until(text: str | None) -> datetime | None:
    """The optional time to resume, as typed (ISO 8601, UTC when no zone); ValueError in plain words."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace(" ", "T", 1) if len(text) > 10 else text)
    except ValueError:
        raise ValueError("Write the time to resume as 2026-01-31 18:00 (UTC), or leave it empty.") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    if moment <= datetime.now(UTC):
        raise ValueError("The time to resume must be in the future.")
    return moment


class AgentControls:
    """One line per agent: running or paused (until when, why); operators pause and resume here."""

    def __init__(self, who: Identity, on_pause: OnPause, on_resume: OnResume) -> None:
        self.who = who
        self._on_pause = on_pause
        self._on_resume = on_resume
        self.box = ui.row().classes("w-full items-center gap-2 flex-wrap").props('data-testid="agent-controls"')
        self.shown: list[tuple] | None = None

    def update(self, agents: list[Agent]) -> None:
        now = datetime.now(UTC)
        key = [(a.name, a.paused(now), a.paused_until, a.paused_reason, a.paused_by) for a in agents]
        if key == self.shown:
            return
        self.shown = key
        self.box.clear()
        with self.box:
            for agent in agents:
                self._agent(agent, now)

    def _agent(self, agent: Agent, now: datetime) -> None:
        paused = agent.paused(now)
        tone = "border-amber-300 bg-amber-50" if paused else "border-slate-200 bg-white"
        with ui.row().classes(f"items-center gap-1 no-wrap rounded border px-2 py-0.5 max-w-full {tone}") \
                .props(f'data-testid="agent-{agent.name}"'):
            ui.icon("pause_circle" if paused else "play_circle", size="18px") \
                .classes("text-amber-700" if paused else "text-positive")
            ui.label(agent.name).classes("text-sm font-medium truncate max-w-[12rem]").tooltip(agent.name)
            if paused:
                text = pause_text(agent, now)
                ui.label("paused").classes("text-xs text-amber-800").props(f'data-testid="agent-state-{agent.name}"') \
                    .tooltip(text)
            else:
                ui.label("running").classes("text-xs quire-muted").props(f'data-testid="agent-state-{agent.name}"')
            if self.who.operator:
                if paused:
                    ui.button("Resume", icon="play_arrow", on_click=lambda n=agent.name: self._on_resume(n)) \
                        .props(f'flat dense size=sm color=positive data-testid="agent-resume-{agent.name}"')
                else:
                    ui.button("Pause", icon="pause", on_click=lambda n=agent.name: self._ask_pause(n)) \
                        .props(f'flat dense size=sm color=warning data-testid="agent-pause-{agent.name}"')
        if paused:
            ui.label(f"{agent.name}: {pause_text(agent, now)}").classes("text-xs text-amber-800 w-full break-words") \
                .props(f'data-testid="agent-pause-text-{agent.name}"')

    async def _ask_pause(self, name: str) -> None:
        """Asks why and until when, then pauses."""
        with ui.dialog() as dialog, ui.card().classes("quire-card p-5 gap-3 w-[440px] max-w-full") \
                .props('data-testid="pause-dialog"'):
            ui.label(f"Pause agent {name}?").classes("text-lg font-semibold break-all")
            ui.label("Running tasks finish; nothing new starts until you resume it, or until the time "
                     "you set.").classes("text-sm quire-muted")
            reason = ui.input("Reason (shown to everyone)").props('outlined dense maxlength=500 '
                                                                  'data-testid="pause-reason"').classes("w-full")
            until = ui.input("Resume at (UTC, optional)", placeholder="2026-01-31 18:00") \
                .props('outlined dense data-testid="pause-until"').classes("w-full")
            error = ui.label("").classes("text-sm text-negative").props('data-testid="pause-error"')
            with ui.row().classes("w-full justify-end gap-2"):
                ui.button("Keep running", on_click=lambda: dialog.submit(False)) \
                    .props('flat color=secondary data-testid="pause-no"')

                async def submit() -> None:
                    try:
                        moment = parse_until(until.value)
                    except ValueError as exc:
                        error.set_text(str(exc))
                        return
                    if await self._on_pause(name, moment, (reason.value or "").strip() or None):
                        dialog.submit(True)

                ui.button("Pause", icon="pause", on_click=submit) \
                    .props('unelevated color=warning data-testid="pause-yes"')
        await dialog
        dialog.delete()
