"""Part 2 of bench/dashboard.py: open dashboards beside a draining worker, and their Postgres time.

The pages (their refresh policy over the app's services and shared cache) run in a process of their
own; the worker is the real `quire worker` (noop executor) or two engine threads with a fold loop.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from schema import db, queue, rollups
from schema.stats import NEWEST_FIRST
from schema.stats_types import TaskFilter, page_touched

AGENTS = 4
CUSTOMERS = 50
DRAIN_TASKS = """
INSERT INTO tasks (agent, customer, document_uri, estimated_tokens)
SELECT 'drain', 'customer-' || lpad((g %% %(customers)s)::text, 2, '0'), 'file:///drain/' || g, 1000
FROM generate_series(1, %(n)s::int) g
"""



POLL_SECONDS = 10.0  # the pages' fallback poll (QUIRE_POLL_SECONDS' default)


class Page:
    """One open dashboard: the refresh policy of app/pages/dashboard.py over the services it calls.

    Events mark the counts, charts, table and budgets due as the page marks them; at most once a
    second the page asks for its summary (and its table's first page when events touch it) and the
    agents' adaptive limits; its charts at most every five seconds; its budgets after completions;
    filter options and agent problems on the 10-second poll. What was not read after the events it
    saw it asks for again a second later. Every ask goes through the process's shared cache
    (app.figure_cache), as the app's pages do.
    """

    def __init__(self, pool, flt: TaskFilter, subscription) -> None:
        self.pool, self.flt, self.sub = pool, flt, subscription
        self.counts_dirty = self.charts_dirty = self.table_dirty = self.budgets_dirty = True
        self.counts_at = self.charts_at = 0.0
        self.polled_at = self.changed_at = time.monotonic()
        self.shown: set[int] = set()
        self.refreshes = 0

    def on_events(self) -> None:
        events, lagged = self.sub.drain()
        self.counts_dirty = self.charts_dirty = True
        self.changed_at = time.monotonic()
        self.budgets_dirty |= lagged or any(e.status in ("completed", "failed") for e in events)
        self.table_dirty |= lagged or page_touched(self.flt, self.shown, events)

    async def run(self, stop: asyncio.Event) -> None:
        from app import foresight, services
        from app.figure_cache import CHART_MIN_SECONDS, REFRESH_MIN_SECONDS

        pool, flt = self.pool, self.flt
        while not stop.is_set():
            if self.sub.pending:
                self.on_events()
            now = time.monotonic()
            if now - self.polled_at >= POLL_SECONDS:
                self.polled_at = self.changed_at = now
                await services.live(pool, "filter_options", lambda: services.filter_options(pool))
                await services.live(pool, "agent_config_errors", lambda: services.agent_config_errors(pool))
                self.counts_dirty = self.table_dirty = self.charts_dirty = True
                self.charts_at = 0.0
            if self.counts_dirty and now - self.counts_at >= REFRESH_MIN_SECONDS:
                since, self.counts_dirty, self.counts_at = self.changed_at, False, now
                _, current = await services.live_summary(pool, flt, since=since)
                if self.table_dirty:
                    self.table_dirty = False
                    (rows, _), table_current = await services.live_task_page(
                        pool, flt, sort=NEWEST_FIRST, descending=True, after=None, per_page=25, since=since)
                    self.shown = {r.id for r in rows}
                    self.table_dirty = not table_current
                    current = current and table_current
                await services.live(pool, "adaptive_limits", lambda: services.adaptive_limits(pool), since=since)
                self.counts_dirty = not current
                self.refreshes += 1
            if self.charts_dirty and now - self.charts_at >= CHART_MIN_SECONDS:
                _, current = await services.live_charts(pool, flt, since=self.changed_at)
                self.charts_at, self.charts_dirty = time.monotonic(), not current
            if self.budgets_dirty:
                _, current = await services.live(pool, "budgets", lambda: foresight.budgets(pool),
                                                 since=self.changed_at)
                self.budgets_dirty = not current
            await asyncio.sleep(0.25)  # the page's timer


async def open_dashboards(dsn: str, n_pages: int, flts: list[TaskFilter], stop) -> dict:
    """N pages in one process: its one LISTEN connection (app.live) and its one pool and cache."""
    from app import figure_cache, live
    from worker.listener import Listener

    pool = db.make_pool(dsn, min_size=1, max_size=4, name="bench-dashboards")
    broadcaster = live.Broadcaster(Listener(dsn, config=live.LISTENER_CONFIG))
    await broadcaster.start()
    halt = asyncio.Event()
    pages = [Page(pool, flts[i % len(flts)], broadcaster.subscribe()) for i in range(n_pages)]
    tasks = [asyncio.create_task(page.run(halt)) for page in pages]
    while not stop.is_set():
        await asyncio.sleep(0.1)
    halt.set()
    await asyncio.gather(*tasks)
    await broadcaster.stop()
    reads = dict(figure_cache.for_pool(pool).reads)
    pool.close()
    return {"bursts": broadcaster.notifications, "refreshes": sum(p.refreshes for p in pages), "reads": reads}


def drain(dsn: str, stop: threading.Event, clock: dict) -> None:
    """A worker: claims ten at a time and applies a completed report with usage for each."""
    with db.connect(dsn) as conn:
        while True:
            started = time.perf_counter()
            claims = queue.claim(conn, agent="drain", worker_id="bench", limit=10)
            for claim in claims:
                queue.apply_callback(conn, claim.attempt_id, {
                    "status": "completed", "result": {"ok": True}, "confidence": 0.9,
                    "input_tokens": 1200, "output_tokens": 150, "llm_cost_usd": 0.0058})
            clock["seconds"] += time.perf_counter() - started
            if not claims:
                return


def fold_loop(dsn: str, stop: threading.Event, clock: dict) -> None:
    """The worker's maintenance loop folding the rollups every two seconds."""
    with db.connect(dsn) as conn:
        while not stop.wait(2.0):
            started = time.perf_counter()
            rollups.rollup_fold(conn)
            clock["seconds"] += time.perf_counter() - started


def real_worker(dsn: str, concurrency: int) -> tuple[subprocess.Popen, Path]:
    """`quire worker` with the noop executor, as a user runs it: its claims, settlements, sweeps and
    its own rollup folds, all under its role."""
    data_dir = Path(tempfile.mkdtemp(prefix="quire-dash-worker-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUIRE_", "MLFLOW_"))}
    env.update(QUIRE_DATABASE_URL=dsn, QUIRE_DATA_DIR=str(data_dir), QUIRE_CONFIG=str(data_dir / "quire.toml"),
               QUIRE_RECONCILE_SECONDS="3600", PYTHONUNBUFFERED="1")
    log = open(data_dir / "worker.log", "w")  # noqa: SIM115 - the worker writes it while it runs
    process = subprocess.Popen([str(Path(sys.executable).with_name("quire")), "worker", "--concurrency",
                                str(concurrency)], env=env, stdout=log, stderr=log)
    return process, data_dir


def wait_drained(dsn: str, worker: subprocess.Popen, data_dir: Path) -> None:
    """Until no task of the drain agent waits or runs (read through the partial indexes)."""
    with db.connect(dsn) as conn:
        while conn.execute("SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'enqueued' AND agent = 'drain') "
                           "OR EXISTS (SELECT 1 FROM tasks WHERE status = 'processing' AND agent = 'drain') AS busy"
                           ).fetchone()["busy"]:
            if worker.poll() is not None:
                raise RuntimeError(f"quire worker exited: {(data_dir / 'worker.log').read_text()[-2000:]}")
            time.sleep(0.1)


def run_dashboards(dsn: str, n_pages: int, flts: list[TaskFilter], stop, results) -> None:
    """The dashboards in a process of their own, as in the app: their Python never slows the worker's."""
    results.put(asyncio.run(open_dashboards(dsn, n_pages, flts, stop)))


def live_cost(server: str, dsn_for, n_drain: int, n_pages: int, has_pgss: bool, flts: list[TaskFilter], *,
              concurrency: int = 0, top: int = 0) -> dict:
    """Postgres time of n_pages dashboards while a worker drains n_drain tasks, against the worker's.

    `concurrency`: the real `quire worker` (noop executor) at that concurrency, folding as it does;
    0: two threads that claim and report through the engine, and a fold loop of their own."""
    with db.connect(dsn_for("bench_worker")) as conn:
        queue.configure_agent(conn, "drain", executor="noop" if concurrency else "local")
        for agent in range(AGENTS):  # the loaded agents' waiting tasks are not the drain's to run
            if concurrency:
                queue.pause_agent(conn, f"agent-{agent}", actor="bench", reason="the drain runs alone")
            else:
                queue.resume_agent(conn, f"agent-{agent}")
        conn.execute(DRAIN_TASKS, {"n": n_drain, "customers": CUSTOMERS})
        rollups.rollup_fold(conn)
        if has_pgss:
            conn.execute("SELECT pg_stat_statements_reset()")
    stop = threading.Event()
    context = multiprocessing.get_context("spawn")
    page_stop, page_results = context.Event(), context.Queue()
    dashboards = context.Process(target=run_dashboards,
                                 args=(dsn_for("bench_dash"), n_pages, flts, page_stop, page_results))
    dashboards.start()
    time.sleep(3.0)  # the pages open before the work starts
    worker_clock, fold_clock = {"seconds": 0.0}, {"seconds": 0.0}
    started = time.perf_counter()
    if concurrency:
        worker, data_dir = real_worker(dsn_for("bench_worker"), concurrency)
        try:
            wait_drained(dsn_for("bench_worker"), worker, data_dir)
            with db.connect(dsn_for("bench_worker")) as conn:  # from its first claim, not its start-up
                wall = float(conn.execute(
                    "SELECT extract(epoch FROM max(a.finished_at) - min(a.started_at)) AS s FROM task_attempts a "
                    "WHERE a.agent = 'drain' AND a.started_at >= now() - make_interval(secs => %s)",
                    [time.perf_counter() - started + 1]).fetchone()["s"])
            time.sleep(1.5)  # the pages' last refresh after the last burst
        finally:
            worker.terminate()
            worker.wait(timeout=60)
            shutil.rmtree(data_dir, ignore_errors=True)
    else:
        folder = threading.Thread(target=fold_loop, args=(dsn_for("bench_fold"), stop, fold_clock))
        folder.start()
        workers = [threading.Thread(target=drain, args=(dsn_for("bench_worker"), stop, worker_clock))
                   for _ in range(2)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        wall = time.perf_counter() - started
        time.sleep(1.5)  # the pages' last refresh after the last burst
        stop.set()
        folder.join()
    page_stop.set()
    pages = page_results.get(timeout=120)
    dashboards.join()
    result = {"wall_s": wall, "bursts": pages["bursts"], "refreshes": pages["refreshes"], "reads": pages["reads"],
              "client_worker_s": worker_clock["seconds"], "client_fold_s": fold_clock["seconds"]}
    if has_pgss:
        with db.connect(dsn_for("bench_worker")) as conn:
            for row in conn.execute(
                    "SELECT r.rolname, sum(s.total_exec_time) / 1000 AS seconds FROM pg_stat_statements s "
                    "JOIN pg_roles r ON r.oid = s.userid GROUP BY 1").fetchall():
                result[f"pg_{row['rolname']}_s"] = float(row["seconds"])
            # The worker's own folds, within its time (the real worker folds; the threads do not).
            result["pg_worker_folds_s"] = float(conn.execute(
                "SELECT coalesce(sum(s.total_exec_time), 0) / 1000 AS seconds FROM pg_stat_statements s "
                "JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = 'bench_worker' "
                "AND s.query LIKE '%%quire_rollup_fold%%'").fetchone()["seconds"])
            # The dashboards' costliest statements, for a breakdown of their time.
            result["dash_top"] = conn.execute(
                "SELECT s.calls, s.total_exec_time AS ms, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 100) AS q "
                "FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = 'bench_dash' "
                "ORDER BY s.total_exec_time DESC LIMIT %s", [top]).fetchall()
    return result


