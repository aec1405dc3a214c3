"""One attempt in flight on a worker: what the worker knows of its run, and the agent as its task
runs it."""

from __future__ import annotations

from dataclasses import dataclass, replace

from schema.models import Agent, Claim, Task
from worker.executors.base import Executor, Exit, Handle


@dataclass
class Run:
    """One attempt this worker started, watched until its executor says it ended."""

    claim: Claim
    agent: Agent
    executor: Executor
    handle: Handle
    next_beat: float
    stop_requested_at: float | None = None
    kill_after: float | None = None
    exit: Exit | None = None
    handing_back: bool = False
    report_seen_at: float | None = None
    # Its task was cancelled (the event came through LISTEN): the next look stops it.
    cancel_seen: bool = False

    @property
    def attempt_id(self) -> int:
        """The attempt this run belongs to."""
        return self.claim.attempt_id


def run_agent(agent: Agent, task: Task) -> Agent:
    """The agent as this task runs it: an edit-and-retry's extractor and model over its own."""
    overrides = task.run_overrides or {}
    if not overrides:
        return agent
    settings = dict(agent.settings or {})
    if overrides.get("extractor"):
        settings["extractor"] = overrides["extractor"]
    return replace(agent, settings=settings, model=overrides.get("model") or agent.model)
