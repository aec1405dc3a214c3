"""The claim loop: woken by LISTEN on new work (polling as a fallback), claims what throttling admits."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from datetime import UTC, datetime

import psycopg

from schema import db, queue, worker_queries
from schema.models import Agent, Claim, TaskStatus
from schema.stats_types import StreamEvent
from worker import logs
from worker.ahead import ClaimedAhead
from worker.claim_config import ClaimerConfig
from worker.counters import WorkerCounters
from worker.executors.base import Executor
from worker.metrics import observe_claim_latency
from worker.runs import RunTable


def wants_claim(events: Iterable[StreamEvent]) -> bool:
    """Whether task events may have made work claimable: new or re-enqueued tasks, freed capacity."""
    for event in events:
        if event.status is TaskStatus.ENQUEUED:
            return True
        if event.prev_status is TaskStatus.PROCESSING:  # a throttled agent has room again
            return True
    return False


# SQLSTATE classes of an error a statement's data caused (a value out of range, a division by zero,
# a violated constraint, an index row too large): the same data fails the same way next time.
_DATA_ERROR_CLASSES = ("22", "23", "54")


def _bad_data(exc: BaseException) -> bool:
    """Whether a claim failed on the data it read, rather than on an outage or a transient conflict."""
    state = getattr(exc, "sqlstate", None) or ""
    return state.startswith(_DATA_ERROR_CLASSES) and not db.is_outage(exc)


class Claimer:
    """Claims tasks for every agent with a backlog, up to the worker's free capacity.

    Agent configuration is cached: it is read again when the agents table notifies a change
    (agents_changed), when notifications may have been lost, and at least every poll interval.
    """

    def __init__(self, table: RunTable, executors: dict[str, Executor], config: ClaimerConfig):
        self.table = table
        self.executors = executors
        self.config = config
        self.paused = False
        self._turn = itertools.count()
        self._unknown_executors: set[tuple[str, str]] = set()
        self._agents: dict[str, Agent] = {}
        self._agents_read_at: float | None = None
        self._ran_dry = True
        # When a throttled agent's admission reopens with no run ending (its window frees, or a
        # Retry-After ends): nothing else would wake the claimer then.
        self._throttle_reopens_at: float | None = None
        # The claim loop's own connection: its claim statement stays planned on one backend.
        self._held = db.HeldConnection(table.pool, timeout=table.config.db_timeout_seconds)
        self.ahead = ClaimedAhead(config)
        self._local_executors = [e for e in executors.values() if e.local]  # the pool ahead claims wait for
        # Executors whose agents are not claimed for yet (their runs need what is still being set up).
        self._held_back: frozenset[str] = frozenset()

    def hold_back(self, executors: Iterable[str]) -> None:
        """Claims nothing for agents of these executors until `release`; the others go on."""
        self._held_back = frozenset(executors)

    def release(self) -> None:
        """Claims for every executor again."""
        self._held_back = frozenset()

    @property
    def worker_id(self) -> str:
        """The name claims are made under."""
        return self.table.config.worker_id

    def free(self, executor: Executor) -> int:
        """Slots this worker has left for runs of this executor."""
        return self._free_pools([executor])[executor.local]

    def _free_pools(self, executors: Iterable[Executor]) -> dict[bool, int]:
        """The slots left in the pools (local: True, remote: False) of these executors, from one
        look at the runs."""
        slots = {e.local: self.config.concurrency if e.local else self.config.max_remote_runs
                 for e in executors}
        # Runs that ended wait for the heartbeats to settle them, many at once, while the claimer
        # goes on: up to unsettled_runs of them, and never fewer than the slots.
        taken = self.table.pools_taken({pool: max(n, self.config.unsettled_runs) for pool, n in slots.items()})
        return {pool: n - taken[pool] for pool, n in slots.items()}

    @property
    def counters(self) -> WorkerCounters:
        """The worker's counters (shared with its run table)."""
        return self.table.counters

    def agents_changed(self) -> None:
        """The agents' configuration changed (or may have): read it again before the next claim."""
        self._agents_read_at = None

    def _agents_now(self, conn: psycopg.Connection) -> dict[str, Agent]:
        """The cached agent configuration, read again when stale."""
        read_at = self._agents_read_at
        if read_at is None or time.monotonic() - read_at > self.config.poll_seconds:
            self._agents_read_at = time.monotonic()
            self._agents = {a.name: a for a in queue.list_agents(conn)}
        return self._agents

    def run_once(self) -> int:
        """One round: the tasks claimed ahead start first, then each throttled agent claims in
        turn, then every other agent in one claim statement. Returns how many tasks it claimed or
        started from those claimed ahead."""
        if self.paused:
            self.hand_back_ahead()
            return 0
        with logs.batched():
            self._give_back_all(self.ahead.take_expired(), reason="claimed ahead, and no slot came free in time")
            extra = self.ahead.extra()
            self.ahead.round_begins()
            started = self._start_ahead()
            if len(self.ahead):  # every local slot is taken
                return started
            free = self._free_pools(self._used(self._agents).values())
            if not any(n > 0 for n in free.values()):
                return started
            return started + self._claim_round(free, extra)

    def _claim_round(self, free: dict[bool, int], extra: int) -> int:
        """Claims with `free` slots per pool, as counted when the round began (slots only free up
        meanwhile: this round alone starts runs, and it counts again after it started some), and
        `extra` tasks more for the local pool, which wait for their slots (see ClaimedAhead)."""
        with self._held.connection() as conn:
            agents = self._agents_now(conn)
        claimed = self._claim_throttled(agents)
        if self.paused:
            return claimed
        used = self._used(agents)
        if claimed or not {e.local for e in used.values()} <= free.keys():
            free = self._free_pools(used.values())
        slots = {name: ("local" if e.local else "remote",
                        min(free[e.local] + (extra if e.local and free[e.local] > 0 else 0), self.config.max_batch))
                 for name, e in used.items()}
        pools = dict(slots.values())
        if sum(pools.values()) <= 0:
            return claimed
        with self._held.connection() as conn:
            try:
                claims = queue.claim_many(conn, worker_id=self.worker_id, slots=slots)
            except psycopg.DatabaseError as exc:
                if not _bad_data(exc):
                    raise  # an outage, a deadlock: the round is retried as before
                # One agent's data broke the statement that claims for all of them: claim agent by
                # agent, and halt the one whose own claim fails, so the others go on.
                logs.problem("claim for every agent", exc, worker=self.worker_id)
                claims = self._claim_each(conn, agents, slots)
            if any(c.task.agent not in agents or agents[c.task.agent].executor not in slots
                   for c in claims):  # an agent newer than the cache
                self.agents_changed()
                agents = self._agents_now(conn)
        taken = {pool: 0 for pool in pools}
        for c in claims:
            pool = slots.get(agents[c.task.agent].executor, (None,))[0]
            if pool in taken:
                taken[pool] += 1
        # A pool left with free slots ran out of work: look for the next backoff before waiting.
        self._ran_dry = any(taken[pool] < free for pool, free in pools.items())
        self.counters.add("claims", len(claims))
        observe_claim_latency(claims)
        self._log_claimed(claims)
        local_free = free.get(True, 0)
        now, later = [], []
        for c in claims:
            executor = self.executors.get(agents[c.task.agent].executor)
            local = executor is not None and executor.local
            if local and local_free <= 0:
                later.append(c)
            else:
                now.append(c)
                local_free -= local
        self._launch(now, agents)
        if later:
            self.ahead.wait(later)
            self._start_ahead()
        self._skip_unknown(agents)
        return claimed + len(claims)

    def _claim_each(self, conn: psycopg.Connection, agents: dict[str, Agent],
                    slots: dict[str, tuple[str, int]]) -> list:
        """Claims for each unthrottled agent alone within its pool's slots; an agent whose claim
        fails on its data is halted (its tasks wait, the dashboard says why)."""
        left = dict(slots.values())
        claims: list = []
        for name, agent in sorted(agents.items()):
            if agent.throttled or agent.cannot_run or agent.executor not in slots:
                continue
            pool = slots[agent.executor][0]
            if left[pool] <= 0:
                continue
            try:
                mine = queue.claim(conn, agent=name, worker_id=self.worker_id, limit=left[pool])
            except psycopg.DatabaseError as exc:
                if not _bad_data(exc):
                    raise
                self._halt(conn, name, exc)
                continue
            left[pool] -= len(mine)
            claims += mine
        return claims

    def _halt(self, conn: psycopg.Connection, agent: str, exc: Exception) -> None:
        """Stops claiming for an agent whose own claim failed on its data."""
        reason = f"claiming its tasks failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
        if queue.halt_agent(conn, agent, reason):
            logs.change("agent", "halted", agent=agent, reason=reason, worker=self.worker_id)
        self.agents_changed()

    def _start_ahead(self) -> int:
        """Starts tasks claimed ahead while local slots are free (looking again after each batch:
        runs that end within their start free their slots at once); returns how many started."""
        started = 0
        if len(self.ahead):  # an agent paused or halted since they were claimed: they go back
            with self._held.connection() as conn:
                self._agents_now(conn)
        while len(self.ahead) and not self.paused:
            free = self._free_pools(self._local_executors).get(True, 0)
            claims = self.ahead.take(free)
            if not claims:
                break
            started += self._launch(claims, self._agents, ahead=True)
        return started

    def hand_back_ahead(self) -> int:
        """Gives every task claimed ahead back to the queue (the worker pauses or stops)."""
        return self._give_back_all(self.ahead.take_all())

    def _give_back_all(self, claims: list, *, reason: str | None = None) -> int:
        handed = 0
        for claim in claims:
            try:
                handed += self._give_back(claim, reason=reason)
            except Exception as exc:  # the sweeper takes it back once its lease expires
                logs.problem("hand back", exc, attempt=claim.attempt_id, worker=self.worker_id)
        return handed

    def _claim_throttled(self, agents: dict[str, Agent]) -> int:
        """Claims for each throttled agent, admission serialised on its row; rotates who goes first."""
        now = datetime.now(UTC)
        used = self._used(agents)
        throttled = sorted(name for name, a in agents.items()
                           if a.throttled and a.executor in used and not a.cannot_run and not a.paused(now))
        if not throttled:
            return 0
        start = next(self._turn) % len(throttled)
        claimed = 0
        cut_short: list[str] = []
        for name in throttled[start:] + throttled[:start]:
            agent = agents[name]
            executor = self.executors[agent.executor]
            free = min(self.free(executor), self.config.max_batch)
            if free <= 0 or self.paused:
                continue
            with self._held.connection() as conn:
                try:
                    claims = queue.claim_throttled(conn, agent=name, worker_id=self.worker_id, limit=free)
                except psycopg.DatabaseError as exc:
                    if not _bad_data(exc):
                        raise
                    self._halt(conn, name, exc)  # its data broke its admission: the others go on
                    continue
            self.counters.add("claims", len(claims))
            observe_claim_latency(claims)
            self._log_claimed(claims)
            if len(claims) < free:
                cut_short.append(name)
            self._launch(claims, agents)
            claimed += len(claims)
        if cut_short:
            self._count_throttled(cut_short)
        return claimed

    def _note_reopening(self, agents: list[str]) -> None:
        """Remembers when the first of these throttled agents may admit again without a run ending."""
        waits = []
        with self._held.connection() as conn:
            for name in agents:
                wait = queue.admission_reopens_in(conn, name)
                if wait is not None:
                    waits.append(wait)
        if waits:
            self._throttle_reopens_at = time.monotonic() + min(waits)

    def _launch(self, claims: list, agents: dict[str, Agent], *, ahead: bool = False) -> int:
        """Starts each claimed attempt on its agent's executor, or hands it back (the worker paused,
        the agent gone; for claims that waited `ahead`, the agent paused, halted or misconfigured
        since); returns how many it handed on to the executors."""
        started = []
        now = datetime.now(UTC)
        for claim in claims:
            agent = agents.get(claim.task.agent)
            if agent is None:  # claimed ahead, and the agent is gone from the configuration since
                self._give_back(claim, reason="the agent is no longer configured")
                continue
            stopped = ahead and (agent.cannot_run or ("an operator paused the agent" if agent.paused(now) else None))
            if stopped:
                # Claimed ahead, and since then halted (its endpoint refused it), misconfigured or
                # paused by an operator: nothing new of it starts; the task waits as its others do.
                self._give_back(claim, reason=f"claimed ahead, and then: {stopped}")
                continue
            executor = self.executors.get(agent.executor)
            if self.paused or executor is None:
                self._give_back(claim, reason=None if self.paused else "this worker has no such executor")
                continue
            started.append(self.table.launch(claim, agent, executor))
        self.ahead.started(started)
        return len(started)

    def _log_claimed(self, claims: list) -> None:
        """One log line for each claimed task, as it is claimed (before it starts or waits)."""
        for claim in claims:
            logs.change("task", "claimed", task=claim.task.id, attempt=claim.attempt_id, agent=claim.task.agent,
                        priority=claim.task.priority, attempt_no=claim.attempt_no, worker=self.worker_id)

    def _skip_unknown(self, agents: dict[str, Agent]) -> None:
        """Logs, once per agent, the agents whose executor this worker lacks."""
        for name, agent in agents.items():
            if agent.executor not in self.executors:
                self._skip(name, agent.executor)

    def _count_throttled(self, agents: list[str]) -> None:
        """Counts the throttled agents whose claim fell short while work was left: their limits held it."""
        try:
            with self._held.connection() as conn:
                backlog = set(queue.agents_with_backlog(conn))
        except Exception as exc:  # a figure for /metrics must not fail a round that claimed
            logs.problem("count throttled claims", exc, worker=self.worker_id)
            return
        held = [name for name in agents if name in backlog]
        self.counters.add("throttled_claims", len(held))
        try:
            self._note_reopening(held)
        except Exception as exc:  # the poll interval still bounds the wait
            logs.problem("throttled admission reopening", exc, worker=self.worker_id)

    def _skip(self, agent: str, executor: str | None) -> None:
        """Logs, once per agent, an agent whose executor this worker lacks."""
        key = (agent, executor or "")
        if key not in self._unknown_executors:
            self._unknown_executors.add(key)
            logs.change("agent", "skipped", agent=agent, executor=executor,
                        reason="this worker has no such executor", worker=self.worker_id)

    def _give_back(self, claim: Claim, *, reason: str | None = None) -> bool:
        """Hands a claimed task that will not start here straight back to the queue."""
        with self._held.connection() as conn:
            if not queue.hand_back(conn, claim.attempt_id, reason=reason):
                return False
        self.counters.add("runs_handed_back")
        logs.change("task", "handed_back", task=claim.task.id, attempt=claim.attempt_id,
                    reason=reason or "the worker is stopping", worker=self.worker_id)
        return True

    def gather_seconds(self) -> float:
        """How long to let wake-ups gather before the next round: none while the last round found
        less work than slots (a new task is claimed at once) or no run is left running, else a
        moment, for more slots to free."""
        if self._ran_dry or not self.table.any_running():  # nothing that could free a slot soon
            return 0.0
        return self.config.gather_seconds

    def next_wait(self) -> float:
        """How long to wait for a wake-up before looking again: the poll, the next backoff, when a
        throttled agent's admission reopens, or when a task claimed ahead has waited too long."""
        wait = self._next_wait()
        reopens_at, self._throttle_reopens_at = self._throttle_reopens_at, None
        if reopens_at is not None:
            wait = min(wait, max(0.0, reopens_at - time.monotonic()) + 0.01)
        expiry = self.ahead.next_expiry_in()
        if expiry is not None:
            wait = min(wait, expiry + 0.01)
        resumes = self._pause_ends_in()
        if resumes is not None:
            wait = min(wait, resumes + 0.01)
        return wait

    def _pause_ends_in(self) -> float | None:
        """Seconds until the first agent paused until a time resumes by itself (nothing notifies then)."""
        now = datetime.now(UTC)
        ends = [(a.paused_until - now).total_seconds() for a in self._agents.values()
                if a.paused(now) and a.paused_until is not None]
        return max(0.0, min(ends)) if ends else None

    def _next_wait(self) -> float:
        if not self._ran_dry:  # every slot was filled: the end of a run wakes the claimer
            return self.config.poll_seconds
        try:
            with self._held.connection() as conn:
                due = worker_queries.task_next_due_one(conn)
        except Exception:  # without the database, the poll interval is as good as anything
            return self.config.poll_seconds
        return self.config.poll_seconds if due is None else min(self.config.poll_seconds, due + 0.01)

    def round(self) -> float:
        """Claims while rounds claim and slots stay free, for up to `burst_seconds` in this thread
        (no trip back to the event loop between them); returns how long to wait before the next
        round (0 when the burst ended with work and slots left)."""
        burst_ends = time.monotonic() + self.config.burst_seconds
        while True:
            claimed = self.run_once()
            if not (claimed and self.free_any()):
                return self.next_wait()
            if self.paused or time.monotonic() >= burst_ends:
                return 0.0

    def free_any(self) -> bool:
        """Whether any executor that an agent uses has a free slot."""
        return any(n > 0 for n in self._free_pools(self._used(self._agents).values()).values())

    def _used(self, agents: dict[str, Agent]) -> dict[str, Executor]:
        """The executors claimed for now: those some agent runs on (all of them before the agents
        were first read), less those held back."""
        held = self._held_back
        if self._agents_read_at is None:
            return {name: e for name, e in self.executors.items() if name not in held}
        names = {a.executor for a in agents.values()}
        return {name: e for name, e in self.executors.items() if name in names and name not in held}
