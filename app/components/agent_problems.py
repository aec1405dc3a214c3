"""A banner naming the agents that cannot run as configured, and why: their tasks wait meanwhile."""

from __future__ import annotations

from nicegui import ui


class AgentProblems:
    """Shown only while some agent is misconfigured."""

    def __init__(self) -> None:
        self.box = ui.column().classes("w-full gap-1 rounded border border-red-300 bg-red-50 p-3") \
            .props('data-testid="agent-config-errors" role="alert"')
        self.box.set_visibility(False)
        self.shown: dict[str, str] = {}

    def update(self, problems: dict[str, str]) -> None:
        if problems == self.shown:
            return
        self.shown = dict(problems)
        self.box.clear()
        with self.box:
            for name, error in sorted(problems.items()):
                ui.label(f"Agent {name} is not running: {error}. Its tasks wait until the configuration "
                         "is fixed.").classes("text-sm text-red-800")
        self.box.set_visibility(bool(problems))
