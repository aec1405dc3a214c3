"""The claim loop: woken by LISTEN on new work (polling as a fallback), claims what throttling admits."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterable

from schema import queue, worker_queries
from schema.models import TaskStatus
from worker import logs
from worker.counters import WorkerCounters
from worker.executors.base import Executor
from worker.runs import RunTable


@dataclass(frozen=True)
class ClaimerConfig:
    """How much one worker runs at once and how often it looks for work without being woken."""

    concurrency: int
    poll_seconds: float = 10.0
    max_batch: int = 16
    max_remote_runs: int = 100

    def __post_init__(self):
        if self.concurrency < 1 or self.max_batch < 1 or self.max_remote_runs < 0:
            raise ValueError("concurrency and max_batch must be at least 1, max_remote_runs not negative")
        if self.poll_seconds <= 0:
            raise ValueError("poll_seconds must be positive")


def wants_claim(events: Iterable[dict[str, Any]]) -> bool:
    """Whether task events may have made work claimable: new or re-enqueued tasks, freed capacity."""
    for event in events:
        if event.get("s") == TaskStatus.ENQUEUED.value:
            return True
        if event.get("p") == TaskStatus.PROCESSING.value:  # a throttled agent has room again
            return True
    return False


class Claimer:
    """Claims tasks for every agent with a backlog, up to the worker's free capacity."""

    def __init__(self, table: RunTable, executors: dict[str, Executor], config: ClaimerConfig):
        self.table = table
        self.executors = executors
        self.config = config
        self.paused = False
        self._turn = itertools.count()
        self._unknown_executors: set[tuple[str, str]] = set()

    @property
    def worker_id(self) -> str:
        """The name claims are made under."""
        return self.table.config.worker_id

    def free(self, executor: Executor) -> int:
        """Slots this worker has left for runs of this executor."""
        if executor.local:
            return self.config.concurrency - self.table.count(local=True)
        return self.config.max_remote_runs - self.table.count(local=False)

    @property
    def counters(self) -> WorkerCounters:
        """The worker's counters (shared with its run table)."""
        return self.table.counters

    def run_once(self) -> int:
        """One round over the agents with a backlog; returns how many tasks it claimed."""
        if self.paused or not self.free_any():
            return 0
        with self.table.connection() as conn:
            backlog = queue.agents_with_backlog(conn)
            agents = {a.name: a for a in queue.list_agents(conn)} if backlog else {}
        if not backlog:
            return 0
        # Each round starts from the next agent, so one busy agent cannot take every free slot.
        start = next(self._turn) % len(backlog)
        claimed = 0
        cut_short: list[str] = []
        for name in backlog[start:] + backlog[:start]:
            agent = agents.get(name)
            executor = self.executors.get(agent.executor) if agent else None
            if executor is None:
                self._skip(name, agent.executor if agent else None)
                continue
            free = min(self.free(executor), self.config.max_batch)
            if free <= 0 or self.paused:
                continue
            with self.table.connection() as conn:
                claims = queue.claim(conn, agent=name, worker_id=self.worker_id, limit=free)
            self.counters.add("claims", len(claims))
            if agent.throttled and len(claims) < free:
                cut_short.append(name)
            for claim in claims:
                logs.change("task", "claimed", task=claim.task.id, attempt=claim.attempt_id, agent=name,
                            priority=claim.task.priority, attempt_no=claim.attempt_no,
                            worker=self.worker_id)
                if self.paused:
                    self._give_back(claim)
                    continue
                self.table.launch(claim, agent, executor)
            claimed += len(claims)
        if cut_short:
            self._count_throttled(cut_short)
        return claimed

    def _count_throttled(self, agents: list[str]) -> None:
        """Counts the throttled agents whose claim fell short while work was left: their limits held it."""
        try:
            with self.table.connection() as conn:
                backlog = set(queue.agents_with_backlog(conn))
        except Exception as exc:  # a figure for /metrics must not fail a round that claimed
            logs.problem("count throttled claims", exc, worker=self.worker_id)
            return
        self.counters.add("throttled_claims", sum(name in backlog for name in agents))

    def _skip(self, agent: str, executor: str | None) -> None:
        """Logs, once per agent, an agent whose executor this worker lacks."""
        key = (agent, executor or "")
        if key not in self._unknown_executors:
            self._unknown_executors.add(key)
            logs.change("agent", "skipped", agent=agent, executor=executor,
                        reason="this worker has no such executor", worker=self.worker_id)

    def _give_back(self, claim) -> None:
        """Hands a task claimed while pausing straight back to the queue."""
        with self.table.connection() as conn:
            if queue.hand_back(conn, claim.attempt_id):
                self.counters.add("runs_handed_back")
                logs.change("task", "handed_back", task=claim.task.id, attempt=claim.attempt_id,
                            worker=self.worker_id)

    def next_wait(self) -> float:
        """How long to wait for a wake-up before looking again: the poll, or the next backoff."""
        try:
            with self.table.connection() as conn:
                due = worker_queries.task_next_due_one(conn)
        except Exception:  # without the database, the poll interval is as good as anything
            return self.config.poll_seconds
        return self.config.poll_seconds if due is None else min(self.config.poll_seconds, due + 0.01)

    def round(self) -> float:
        """Claims once; returns how long to wait before the next round (0 after a full round)."""
        claimed = self.run_once()
        if claimed and self.free_any():
            return 0.0
        return self.next_wait()

    def free_any(self) -> bool:
        """Whether any executor has a free slot."""
        return any(self.free(e) > 0 for e in self.executors.values())
