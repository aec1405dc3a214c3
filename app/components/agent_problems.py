"""A banner naming the agents that cannot run, and why: their tasks wait meanwhile. An agent halted
on what its runs showed (the model endpoint refused it) can be cleared by an operator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from nicegui import ui


class AgentProblems:
    """Shown only while some agent is misconfigured or halted."""

    def __init__(self, on_clear: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.box = ui.column().classes("w-full gap-1 rounded border border-red-300 bg-red-50 p-3") \
            .props('data-testid="agent-config-errors" role="alert"')
        self.box.set_visibility(False)
        self.shown: dict[str, str] = {}
        self.shown_halted: frozenset[str] = frozenset()
        self._on_clear = on_clear

    def update(self, problems: dict[str, str], halted: set[str] | frozenset[str] = frozenset()) -> None:
        halted = frozenset(halted)
        if problems == self.shown and halted == self.shown_halted:
            return
        self.shown, self.shown_halted = dict(problems), halted
        self.box.clear()
        with self.box:
            for name, error in sorted(problems.items()):
                if name not in halted:
                    ui.label(f"Agent {name} is not running: {error}. Its tasks wait until the configuration "
                             "is fixed.").classes("text-sm text-red-800")
                    continue
                with ui.row().classes("items-center gap-2").props(f'data-testid="agent-halted-{name}"'):
                    ui.label(f"Agent {name} needs attention: {error}. Its tasks wait until its configuration "
                             "changes or an operator clears it.").classes("text-sm text-red-800")
                    if self._on_clear is not None:
                        ui.button("Clear", on_click=lambda _, n=name: self._on_clear(n)) \
                            .props(f'dense flat color=negative data-testid="agent-clear-{name}"')
        self.box.set_visibility(bool(problems))
