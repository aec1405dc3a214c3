"""The worker daemon: starts, supervises and stops the claim loop, heartbeats, sweeper and cost reconciler,
each in worker.service.service_loop."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from schema import db, queue, worker_queries
from schema.settings import Settings
from worker import logs, ocr_calibration
from worker.agent_check import check_agents
from worker.billing import BillingConfig, BillingReconciler
from worker.claim_config import ClaimerConfig
from worker.claimer import Claimer, wants_claim
from worker.costs import CostConfig, CostReconciler
from worker.counters import WorkerCounters
from worker.executors import DatabricksConfig, LocalConfig, build_executors
from worker.executors.databricks import DatabricksExecutor, unreachable_reason
from worker.folder import FolderConfig, RollupFolder
from worker.heartbeats import Heartbeats
from worker.listener import Listener
from worker.public_url import public_url
from worker.reconciler import ReconcilerConfig, RunReconciler
from worker.runs import RunTable, RunTableConfig
from worker.service import service_loop
from worker.sweeper import Sweeper, SweeperConfig
from worker.tracking import locate_tracking, prepare_store, prepare_store_apart, tracking_store_state
from worker.wakeup import Wakeup, pause

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from worker.executors.base import Executor

# Threads for the blocking schema calls: one per service plus room for shutdown work.
THREADS = 10
# How long a stopping worker waits for MLflow's first set-up before it leaves the process to finish.
STORE_SETUP_STOP_SECONDS = 2.0
# Seconds without a run before the worker times OCR for the forecasts' prior.
IDLE_BEFORE_CALIBRATION = 2.0
# Seconds without a run before MLflow's first set-up starts when no traced agent has work; and how
# often, until then, the worker looks whether one has.
IDLE_BEFORE_TRACKING_SETUP = 1.0
TRACKING_SETUP_LOOK_SECONDS = 0.5


# Objects allocated between two collections of the youngest generation. The worker makes and drops
# many small objects for every claim and settlement, nearly all freed at once by their reference
# counts; Python's default (700) collected about every fifth of a task batch.
GC_YOUNG_THRESHOLD = 10_000


def settle_garbage_collection() -> None:
    """Tunes the cyclic garbage collector for a long-running worker, once its start-up is done.

    What start-up loaded (modules, configuration, clients) lives as long as the process: frozen, it
    is no longer walked by every full collection, which otherwise held the interpreter for tens to
    hundreds of milliseconds at a time in the middle of a drain. Collections of young objects come
    less often. Idempotent; what is frozen stays collectable by reference counting.
    """
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), middle, old)


class Quiet:
    """How long a worker has had no run: none in flight, and none started between two looks (a
    no-op run is over in a millisecond, between two looks)."""

    def __init__(self, table: RunTable, counters: WorkerCounters):
        self.table = table
        self.counters = counters
        self._started = counters.snapshot()["runs_started"]
        self._since = time.monotonic()

    def seconds(self) -> float:
        """Seconds without a run, as of this look."""
        started = self.counters.snapshot()["runs_started"]
        now = time.monotonic()
        if started != self._started or len(self.table):
            self._started, self._since = started, now
        return now - self._since


async def until_quiet(quiet: Quiet, seconds: float, stop: asyncio.Event, look: float,
                      ready: Callable[[], Awaitable[bool]] | None = None) -> bool:
    """Waits until the worker has had no run for `seconds`, or `ready()` says so first, looking
    every `look` seconds; False when stopped before."""
    while not stop.is_set():
        if quiet.seconds() >= seconds or (ready is not None and await ready()):
            return True
        await pause(stop, look)
    return False


def default_worker_id() -> str:
    """host-pid-random: unique across replicas and restarts, readable in the attempts table."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


class WorkerDaemon:
    """Runs one worker inside an asyncio loop until its stop event is set.

    WorkerDaemon(settings, dsn, *, worker_id=None, concurrency=None, callback_base_url=None, listener=None):
      settings           schema.settings.Settings (grace, sweep and reconcile intervals, rates, ...)
      dsn                the queue's database, already migrated (schema.bootstrap.prepare_database)
      worker_id          how attempts name this worker; default QUIRE_WORKER_ID or host-pid-random
      concurrency        local runs at once; default QUIRE_WORKER_CONCURRENCY or the CPU count
      callback_base_url  where agents report (the app's URL); default QUIRE_PUBLIC_URL, else the
                         Databricks App's URL; when unset, local runs hand their report to the
                         worker, which applies it itself, and the Jobs executor refuses to start
      listener           the process's worker.listener.Listener, run by its owner; the daemon only
                         registers on it. Without one the daemon runs a Listener of its own.
      settle_gc          the process lives for this daemon (`quire worker`, the app): once started,
                         tune the process's garbage collector (settle_garbage_collection)

    Co-hosting in another asyncio program (the app does this unless QUIRE_WORKER=off):
        stop = asyncio.Event()
        task = asyncio.create_task(WorkerDaemon(settings, dsn).run(stop))
        ...
        stop.set(); await task   # stops claiming, lets runs finish within the grace, hands back the rest
    Schema calls run in the daemon's own threads over its own connection pool; the LISTEN
    connection is the Listener's async connection, one per process.
    """

    def __init__(self, settings: Settings, dsn: str, *, worker_id: str | None = None,
                 concurrency: int | None = None, callback_base_url: str | None = None,
                 listener: Listener | None = None, settle_gc: bool = False):
        self.settings = settings
        self.dsn = dsn
        self.worker_id = worker_id or settings.worker_id or default_worker_id()
        self.concurrency = concurrency or settings.worker_concurrency or os.cpu_count() or 1
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.callback_base_url = callback_base_url or public_url(settings)
        self.grace_seconds = settings.shutdown_grace_seconds
        self.table: RunTable | None = None
        self._owns_listener = listener is None
        self.listener = listener or Listener(dsn, name=self.worker_id)
        self.settle_gc = settle_gc
        self._counters = WorkerCounters()
        self._hurry = asyncio.Event()
        self.measure_pid: int | None = None  # the last measure of OCR's process (ocr_calibration.measure_apart)
        self.tracking_setup: asyncio.Future | None = None  # MLflow's first set-up, once begun

    @property
    def metrics(self) -> WorkerCounters:
        """This worker's prometheus-client counters, exported by the app's /metrics."""
        return self._counters

    @property
    def counters(self) -> Mapping[str, int]:
        """What this worker did since it was made, by name (claims, throttled_claims, ...), for /metrics."""
        return self._counters.snapshot()

    def hurry(self) -> None:
        """Cuts the shutdown grace short: runs still in flight are handed back at once."""
        self._hurry.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Works until `stop` is set, then shuts down gracefully; returns when everything stopped."""
        loop = asyncio.get_running_loop()
        threads = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="quire-worker")

        def call(fn: Callable[..., Any], *args: Any) -> asyncio.Future:
            """Runs a blocking function in the daemon's threads."""
            return loop.run_in_executor(threads, functools.partial(fn, *args))

        queue.set_backoff(self.settings.backoff_base_seconds, self.settings.backoff_cap_seconds)
        pool = db.make_pool(self.dsn, min_size=1, max_size=THREADS, name=f"quire-worker-{self.worker_id}")
        try:
            tracking_uri, store_setup, first_setup = await self._tracking(call)
            setups = [store_setup] if store_setup is not None else []  # the set-ups begun, to wait for at the end
        except BaseException:  # cancelled while starting: release what was opened
            pool.close()
            threads.shutdown(wait=False, cancel_futures=True)
            raise
        databricks = DatabricksConfig(callback_key=self.settings.callback_key)
        executors = build_executors(LocalConfig(runs_dir=self.settings.data_dir / "runs",
                                                tracking_uri=tracking_uri,
                                                preload=self.settings.agent_preload), databricks=databricks)
        if self.settle_gc:
            settle_garbage_collection()
        refused = unreachable_reason(self.callback_base_url, databricks)
        if refused and any(c.executor == "databricks" for c in self._agent_configs()):
            # Its runs would end unheard: every attempt for these agents fails with this reason.
            logs.problem("start the Databricks Jobs executor", refused, worker=self.worker_id)
        try:
            await call(self._check_agents, pool, executors)
        except Exception as exc:  # the claim still skips agents already found misconfigured
            logs.problem("check agents", exc, worker=self.worker_id)
        claim_wake, beat_wake, drained = Wakeup(loop), Wakeup(loop), Wakeup(loop)

        def settled() -> None:
            """A run ended: there is room to claim, and perhaps nothing left to drain."""
            claim_wake.set()
            drained.set()

        self.table = table = RunTable(pool, executors, RunTableConfig(
            worker_id=self.worker_id, callback_base_url=self.callback_base_url,
            compute_rate_usd_per_hour=self.settings.compute_rate_usd_per_hour), on_exit=beat_wake.set,
            counters=self._counters)
        claimer = Claimer(table, executors, ClaimerConfig(concurrency=self.concurrency,
                                                          poll_seconds=self.settings.poll_seconds,
                                                          claim_ahead=self.settings.worker_claim_ahead))
        tracing = self._hold_tracing_runs(claimer, executors) if first_setup is not None else []
        heartbeats = Heartbeats(table, on_settled=settled)
        sweeper = Sweeper(pool, self.worker_id, SweeperConfig(interval_seconds=self.settings.sweep_seconds),
                          counters=self._counters)
        costs = CostReconciler(pool, self.worker_id, tracking_uri,
                               CostConfig(interval_seconds=self.settings.reconcile_seconds))
        folder = RollupFolder(pool, self.worker_id, FolderConfig(interval_seconds=self.settings.rollup_fold_seconds,
                                                            drain_seconds=self.settings.rollup_drain_fold_seconds))
        unregister = [
            self.listener.on_events(lambda events: claim_wake.set() if wants_claim(events) else None),
            # A cancel stops its run now, not at the run's next heartbeat.
            self.listener.on_events(lambda events: beat_wake.set() if table.note_cancelled(events) else None),
            # Notifications may have been lost (a reconnect): look for work at once.
            self.listener.on_missed(claim_wake.set),
            self.listener.on_missed(claimer.agents_changed),
            # A changed agent may have work it could not claim before (a raised limit, an executor).
            self.listener.on_agents_changed(claimer.agents_changed),
            self.listener.on_agents_changed(claim_wake.set),
        ]
        logs.change("worker", "started", worker=self.worker_id, concurrency=self.concurrency,
                    callback_base_url=self.callback_base_url, tracking=bool(tracking_uri),
                    executors=sorted(executors))

        claim_stop, services_stop = asyncio.Event(), asyncio.Event()
        services: dict[str, Callable[[], Any]] = {
            "claimer": lambda: service_loop("claim", claimer.round, claimer.config.poll_seconds, claim_stop,
                                            claim_wake, run=call, worker_id=self.worker_id,
                                            gather_seconds=claimer.gather_seconds),
            "heartbeats": lambda: service_loop("heartbeat", heartbeats.round, heartbeats.config.tick_seconds,
                                               services_stop, beat_wake, run=call, worker_id=self.worker_id,
                                               gather_seconds=heartbeats.gather_seconds),
            "sweeper": lambda: service_loop("sweep", sweeper.run_once, sweeper.config.interval_seconds,
                                            services_stop, run=call, worker_id=self.worker_id),
            "costs": lambda: service_loop("reconcile costs", costs.run_once, costs.config.interval_seconds,
                                          services_stop, run=call, worker_id=self.worker_id),
            # Its first fold one interval after the start, not beside the first claims: a backlog
            # waiting at the start is mostly claimed and settled by then, and folds once, settled.
            "rollups": lambda: service_loop("rollup fold", folder.run_once, folder.config.interval_seconds,
                                            services_stop, run=call, worker_id=self.worker_id,
                                            first_wait=folder.config.interval_seconds),
        }
        if "databricks" in executors:
            # The sweeper's counterpart for job runs, at the same pace: it settles runs that ended
            # unwatched (after a redeploy, say), which the sweeper leaves alone.
            runs = RunReconciler(pool, self.worker_id, cast(DatabricksExecutor, executors["databricks"]),
                                 ReconcilerConfig(interval_seconds=self.settings.sweep_seconds),
                                 counters=self._counters)
            services["runs"] = lambda: service_loop("reconcile job runs", runs.run_once,
                                                    runs.config.interval_seconds, services_stop, run=call,
                                                    worker_id=self.worker_id)
        if self.settings.warehouse_id:
            billing = BillingReconciler(pool, self.worker_id, BillingConfig(
                warehouse_id=self.settings.warehouse_id, workspace_id=self.settings.workspace_id,
                interval_seconds=self.settings.billing_seconds,
                final_seconds=self.settings.billing_final_seconds,
                unbilled_seconds=self.settings.billing_unbilled_seconds))
            services["billing"] = lambda: service_loop("reconcile billing", billing.run_once,
                                                       billing.config.interval_seconds, services_stop, run=call,
                                                       worker_id=self.worker_id)
        if self._owns_listener:
            services["listener"] = lambda: self.listener.run(services_stop)
        tasks = {name: asyncio.create_task(make(), name=f"quire-{name}") for name, make in services.items()}
        setting_up = (asyncio.create_task(self._set_up_tracking_when_due(
            first_setup, tracing, table, pool, call, services_stop, setups,
            lambda future: self._release_tracing_runs(claimer, tracing, future, claim_wake)),
            name="quire-tracking-setup") if first_setup is not None else None)
        calibrating = (asyncio.create_task(self._calibrate_ocr_when_idle(table, pool, call, services_stop),
                                           name="quire-ocr-calibration")
                       if self.settings.ocr_calibration else None)
        try:
            await self._supervise(stop, tasks, services)
            claimer.paused = True
            table.stopping = True
            beat_wake.set()  # reports already written are applied now, not after their grace
            claim_stop.set()
            await asyncio.gather(tasks.pop("claimer"), return_exceptions=True)
            await call(claimer.hand_back_ahead)  # tasks claimed ahead that never started
            await self._drain(table, drained)
            handed = await call(table.hand_back_all)
            logs.change("worker", "drained", worker=self.worker_id, handed_back=handed)
        finally:
            for remove in unregister:
                remove()
            services_stop.set()
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            for helper in (calibrating, setting_up):  # a measure under way is killed
                if helper is not None:
                    helper.cancel()
                    await asyncio.gather(helper, return_exceptions=True)
            for setup in setups:
                if first_setup is not None:
                    # MLflow's first set-up, in a process of its own: it finishes by itself if the
                    # worker stops first (on a busy machine, at its lower priority, that takes a while).
                    await asyncio.wait([setup], timeout=STORE_SETUP_STOP_SECONDS)
                    setup.cancel()
                else:
                    await asyncio.gather(setup, return_exceptions=True)
            await call(pool.close)
            for executor in executors.values():
                executor.close()
            threads.shutdown(wait=False, cancel_futures=True)
            logs.change("worker", "stopped", worker=self.worker_id)

    def _check_agents(self, pool: ConnectionPool, executors: Mapping[str, Any]) -> None:
        """Marks agents this worker cannot run as configured: nothing is claimed for them."""
        with pool.connection(timeout=10) as conn:
            check_agents(conn, executors=executors, worker_id=self.worker_id)

    async def _calibrate_ocr_when_idle(self, table: RunTable, pool: ConnectionPool,
                                       call: Callable[..., asyncio.Future], stop: asyncio.Event) -> None:
        """Times OCR and text on this machine for the forecasts' priors once the worker has had no
        run for IDLE_BEFORE_CALIBRATION seconds, unless this host has a fresh measure.

        The measure takes tens of seconds of CPU. It runs in a process of its own at the lowest
        priority (ocr_calibration.measure_apart), and work never waits on it: a run that starts
        meanwhile ends the measure, which is taken again at the next idle moment. Taken beside the
        work, it made a backlog that came just after the worker went idle take 1.4 to 1.8 times as
        long, and the work made the measure wrong. A failure changes nothing but the priors.
        """
        quiet = Quiet(table, self._counters)
        while await until_quiet(quiet, IDLE_BEFORE_CALIBRATION, stop, IDLE_BEFORE_CALIBRATION / 4):
            try:
                if await call(ocr_calibration.is_fresh, pool):
                    return
                measured = await ocr_calibration.measure_apart(lambda: quiet.seconds() == 0.0,
                                                               started=self._measure_started)
                if measured is not None:
                    await call(ocr_calibration.record, pool, self.worker_id, measured)
                    return
            except Exception as exc:
                logs.problem("measure OCR", exc, worker=self.worker_id)
                return
            # Work came first: measured at the next idle moment.

    def _measure_started(self, pid: int) -> None:
        """Notes the process of a measure of OCR under way (tests look for it)."""
        self.measure_pid = pid

    def _agent_configs(self) -> list:
        """The configured agents, or none when the configuration cannot be read here."""
        try:
            return list(self.settings.agent_configs().values())
        except ValueError:
            return []

    async def _tracking(self, call: Callable[..., Any]) -> tuple[
            str | None, asyncio.Future | None, Callable[[], asyncio.Future] | None]:
        """The tracking URI agents get, the set-up of its store if that goes on in the background,
        and, when MLflow's tables are still to be made, what starts that first set-up.

        The set-up never holds up the claims: the first time (seconds: MLflow's import and its
        migrations), it starts once an agent whose runs trace has work, or once the worker idles
        (_set_up_tracking_when_due), and those runs wait until it is done (agents starting
        together would race through MLflow's migrations) while the others start at once; later,
        it only checks the experiment. Once the tables and the experiment are there, nothing is
        set up and MLflow is not loaded.
        """
        try:
            uri, ours = await call(locate_tracking, self.dsn, self.settings.mlflow_tracking_uri)
            state = await call(tracking_store_state, self.dsn) if ours else None
            if state in (None, "ready"):
                return uri, None, None
            artifacts = self.settings.data_dir / "mlflow-artifacts"
            if state == "empty":  # MLflow's tables are made in a process of its own, beside the work
                return uri, None, lambda: asyncio.ensure_future(prepare_store_apart(
                    self.dsn, uri, worker_id=self.worker_id, artifact_root=artifacts))
            return uri, call(functools.partial(prepare_store, self.dsn, uri, worker_id=self.worker_id,
                                               artifact_root=artifacts)), None
        except Exception as exc:  # tracing is optional, the work is not
            logs.problem("locate MLflow tracking", exc, worker=self.worker_id)
            return None, None, None

    async def _set_up_tracking_when_due(self, start: Callable[[], asyncio.Future], tracing: list[Executor],
                                        table: RunTable, pool: ConnectionPool, call: Callable[..., asyncio.Future],
                                        stop: asyncio.Event, setups: list[asyncio.Future],
                                        started: Callable[[asyncio.Future], None]) -> None:
        """Starts MLflow's first set-up once an agent whose runs trace has a task waiting, or once
        the worker has had no run for IDLE_BEFORE_TRACKING_SETUP seconds, whichever comes first.

        The set-up takes seconds of CPU at a lower priority, and the statements of MLflow's
        migrations on the queue's server: a worker's first start on a backlog of work that does not
        trace drained it at about two thirds of the speed with the set-up beside it.
        """
        names = [executor.name for executor in tracing]

        async def traced_work() -> bool:
            try:
                return bool(names) and await call(self._traced_work_waiting, pool, names)
            except Exception as exc:  # the database is away: look again
                logs.problem("look for traced work", exc, worker=self.worker_id)
                return False

        if not await until_quiet(Quiet(table, self._counters), IDLE_BEFORE_TRACKING_SETUP, stop,
                                 TRACKING_SETUP_LOOK_SECONDS, traced_work):
            return
        future = self.tracking_setup = start()
        setups.append(future)
        started(future)

    @staticmethod
    def _traced_work_waiting(pool: ConnectionPool, executors: list[str]) -> bool:
        """Whether an agent of these executors has a task in the queue."""
        with pool.connection(timeout=10) as conn:
            return worker_queries.work_waiting_for(conn, executors)

    @staticmethod
    def _hold_tracing_runs(claimer: Claimer, executors: Mapping[str, Executor]) -> list[Executor]:
        """Claims nothing for agents whose runs trace until MLflow's first set-up is done
        (_release_tracing_runs); returns their executors."""
        tracing = [executor for executor in executors.values() if executor.traces]
        if tracing:
            claimer.hold_back(executor.name for executor in tracing)
        return tracing

    @staticmethod
    def _release_tracing_runs(claimer: Claimer, tracing: list[Executor], setup: asyncio.Future,
                              claim_wake: Wakeup) -> None:
        """Once MLflow's first set-up is done, the runs that trace are claimed again, and trace to
        the store; if it failed, they run without tracing."""
        def done(future: asyncio.Future) -> None:
            if future.cancelled() or future.exception() is not None or not future.result():
                for executor in tracing:
                    executor.stop_tracing()
            claimer.release()
            claim_wake.set()

        setup.add_done_callback(done)

    async def _supervise(self, stop: asyncio.Event, tasks: dict[str, asyncio.Task],
                         services: dict[str, Callable[[], Any]]) -> None:
        """Waits for the stop event; a service that ends on its own is logged and started again."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                await asyncio.wait([stopping, *tasks.values()], return_when=asyncio.FIRST_COMPLETED)
                for name, task in list(tasks.items()):
                    if task.done() and not stop.is_set():
                        error = task.exception() if not task.cancelled() else None
                        logs.problem(f"service {name}", error or "ended", worker=self.worker_id)
                        tasks[name] = asyncio.create_task(services[name](), name=f"quire-{name}")
        finally:
            stopping.cancel()

    async def _drain(self, table: RunTable, drained: Wakeup) -> None:
        """Lets runs in flight finish within the grace period (heartbeats keep their leases).

        Job runs are not waited for: they live on without this worker and are let go of."""
        logs.change("worker", "stopping", worker=self.worker_id, in_flight=len(table),
                    grace_seconds=self.grace_seconds)
        deadline = asyncio.get_running_loop().time() + self.grace_seconds
        while table.attached() and not self._hurry.is_set():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            await pause(self._hurry, min(left, 1.0), drained)


def run_worker(settings: Settings, dsn: str, *, concurrency: int | None = None) -> int:
    """`quire worker`: runs a daemon until SIGTERM or SIGINT (a second one hurries it); returns 0."""
    logs.configure_stderr_logging(logging.getLevelNamesMapping()[settings.log_level])
    early: list[int] = []
    # A signal that arrives before the loop runs is remembered, not fatal: the worker then stops
    # at once, having claimed nothing.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: early.append(signum))

    async def main() -> None:
        """Runs one daemon with SIGTERM and SIGINT wired to its stop event."""
        stop = asyncio.Event()
        daemon = WorkerDaemon(settings, dsn, concurrency=concurrency, settle_gc=True)
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            """First signal: stop gracefully; a second: hand back at once."""
            if stop.is_set():
                daemon.hurry()
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        if early:
            stop.set()
        await daemon.run(stop)

    asyncio.run(main())
    return 0
