"""Dashboard figures at a million tasks: rollups against the direct aggregates, and live cost.

    python bench/dashboard.py            # 1,000,000 tasks, 2,000,000 attempts, 10,000 drained
    python bench/dashboard.py --quick    # 20,000 tasks, a drain of 1,000: a smoke run
    QUIRE_DATABASE_URL=postgresql://... python bench/dashboard.py   # another server

Part 1 loads the tasks and attempts with ordinary INSERTs of --batch rows (generate_series), every
trigger on (events, notifications, rollup marks), as a user's load runs; times the first reads of
each filter right after the load (they answer from what is folded, "catching up"); folds the backlog
in the folder's bounded steps; runs VACUUM ANALYZE; then times p50 of --runs for the summary, the
charts and the first table page (with its total) under single and combined filters, as a page
opening or an API call reads them (schema.stats), and through the direct aggregates they replace
(--baseline-runs 0 skips them). Each filter's counts and total are checked against a recount.
--triggers-off loads with the triggers off, then marks every task and folds the marks in bounded steps.

Part 2 opens 10 dashboards in one process, as the app holds them: one LISTEN connection (app.live),
one pool and the shared cache of app.figure_cache, and per page the refresh policy of
app/pages/dashboard.py over the services it calls (figures at most once a second after events,
charts at most every five, budgets after completions, the 10-second poll). Meanwhile the real
`quire worker` (noop executor, --worker-concurrency 16, folding as it does) drains 10,000 tasks
(--worker-concurrency 0: two engine threads and a fold loop instead); the Postgres time of each side
comes from pg_stat_statements per role (the embedded server is restarted with it loaded).

    --reuse       measure again on the database an earlier run loaded (QUIRE_DATABASE_URL)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg
from psycopg import sql

from bench.dashboard_live import AGENTS, CUSTOMERS, live_cost
from bench.pgserver import bench_server, has_stat_statements
from schema import db, queue, rollups, stats
from schema.migrate import migrate
from schema.stats_types import TaskFilter

# The table's first page as the dashboard read it before: OFFSET paging and a count over tasks.
OLD_FIRST_PAGE = """SELECT t.* FROM task_list_rows t WHERE {task_filter} ORDER BY t.id DESC NULLS LAST, t.id DESC
                    LIMIT 25 OFFSET 0"""
OLD_COUNT = "SELECT count(*) AS n FROM tasks t WHERE {task_filter}"
LOAD_TASKS = """
INSERT INTO tasks (agent, customer, priority, status, document_uri, document_name, estimated_tokens, attempt_count,
                   confidence, error, created_at, updated_at, started_at, finished_at)
SELECT 'agent-' || (g %% %(agents)s), 'customer-' || lpad(floor(%(customers)s * power(x.r2, 2))::int::text, 2, '0'),
       g %% 10, s.status, 'file:///bench/' || g, 'doc-' || g || '.pdf', 2000,
       CASE WHEN s.status = 'enqueued' THEN 0 ELSE 2 END,
       CASE WHEN s.status = 'completed' THEN (0.5 + x.r3 / 2)::real END,
       CASE WHEN s.status = 'failed' THEN 'bench failure' END,
       c.created, c.created, CASE WHEN s.status <> 'enqueued' THEN c.created END,
       CASE WHEN s.status IN ('completed', 'failed', 'cancelled')
            THEN c.created + make_interval(secs => exp(x.r3 * 7)) END
FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g
CROSS JOIN LATERAL (SELECT random() + 0 * g AS r1, random() + 0 * g AS r2, random() + 0 * g AS r3) x
CROSS JOIN LATERAL (SELECT now() - make_interval(secs => (1 - g::float8 / %(n)s) * 365 * 86400) AS created) c
CROSS JOIN LATERAL (SELECT CASE WHEN g > %(n)s * 0.998 THEN (CASE WHEN x.r1 < 0.5 THEN 'enqueued' ELSE 'processing' END)
                                WHEN x.r1 < 0.90 THEN 'completed' WHEN x.r1 < 0.96 THEN 'failed'
                                ELSE 'cancelled' END::task_status AS status) s
"""
LOAD_ATTEMPTS = """
INSERT INTO task_attempts (task_id, attempt_no, agent, worker_id, executor, status, callback_secret, estimated_tokens,
                           input_tokens, output_tokens, llm_cost_usd, compute_cost_usd, compute_seconds,
                           usage_recorded_at, started_at, finished_at)
SELECT t.id, a.n, t.agent, 'bench', 'local',
       CASE WHEN a.n = 1 THEN 'failed' WHEN t.status = 'processing' THEN 'processing'
            WHEN t.status = 'completed' THEN 'completed' WHEN t.status = 'cancelled' THEN 'cancelled'
            ELSE 'failed' END::attempt_status,
       'bench', 2000, u.input_tokens, u.input_tokens / 10,
       round(u.input_tokens * 3e-6 + u.input_tokens / 10 * 15e-6, 6), round((random() * 0.002)::numeric, 6), 12.5,
       t.started_at, t.started_at, CASE WHEN a.n = 1 OR t.status <> 'processing' THEN coalesce(t.finished_at, t.started_at) END
FROM tasks t
CROSS JOIN generate_series(1, 2) a (n)
CROSS JOIN LATERAL (SELECT (500 + random() * 30000 + 0 * a.n)::bigint AS input_tokens) u
WHERE t.status <> 'enqueued' AND t.id BETWEEN %(lo)s AND %(hi)s
"""
def timed(fn, runs: int) -> float | None:
    """p50 in milliseconds of `runs` calls (None for no run)."""
    if runs <= 0:
        return None
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def _ms(value: float | None) -> str:
    return "    n/a" if value is None else f"{value:8.1f}"


def load(dsn: str, n: int, *, batch: int, triggers: bool) -> dict[str, Any]:
    """Loads n tasks (about 2n attempts) and vacuums; seconds per step.

    `triggers`: ordinary INSERTs of `batch` rows each with every trigger on (events, notifications,
    rollup marks), as a user's load would run; the first reads of each filter are timed right after
    (they answer from what is folded, catching up), then the backlog is folded in the folder's bounded
    steps. Else the tasks go in with the triggers off, every task is marked, and the marks are folded
    in the same bounded steps (one fold of ten million marks spilled over 50 GB of sort files)."""
    took: dict[str, Any] = {}
    with db.connect(dsn) as conn:
        for agent in range(AGENTS):
            queue.configure_agent(conn, f"agent-{agent}")
        queue.configure_agent(conn, "drain")
        started = time.perf_counter()
        if not triggers:
            conn.execute("ALTER TABLE tasks DISABLE TRIGGER USER")
            conn.execute("ALTER TABLE task_attempts DISABLE TRIGGER USER")
        for lo in range(1, n + 1, batch):
            hi = min(lo + batch - 1, n)
            conn.execute(LOAD_TASKS, {"lo": lo, "hi": hi, "n": n, "agents": AGENTS, "customers": CUSTOMERS})
            conn.execute(LOAD_ATTEMPTS, {"lo": lo, "hi": hi})
            if lo // batch % 20 == 0:
                print(f"  {hi:,} tasks loaded ({time.perf_counter() - started:.0f} s)", flush=True)
        if not triggers:
            conn.execute("ALTER TABLE tasks ENABLE TRIGGER USER")
            conn.execute("ALTER TABLE task_attempts ENABLE TRIGGER USER")
        took["load"] = time.perf_counter() - started
        if triggers:
            took["first_reads_ms"], took["catching_up"] = first_reads(conn)
            took.update(fold_steps(conn))
        else:
            conn.execute("INSERT INTO rollup_dirty (task_id) SELECT id FROM tasks")
            took.update(fold_steps(conn))
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE")
        took["vacuum"] = time.perf_counter() - started
        took["attempts"] = conn.execute("SELECT count(*) AS n FROM task_attempts").fetchone()["n"]
        took["rollup_rows"] = conn.execute("SELECT count(*) AS n FROM task_rollups").fetchone()["n"]
        took["bin_rows"] = conn.execute("SELECT count(*) AS n FROM task_rollup_bins").fetchone()["n"]
    return took


def first_reads(conn) -> tuple[dict[str, float], dict[str, bool]]:
    """Each filter's first read (summary, charts, first page and total together), ms, and whether
    it said it was catching up."""
    reads, catching_up = {}, {}
    for name, flt in filters().items():
        started = time.perf_counter()
        summary = stats.stats_summary_filtered(conn, flt)
        stats.stats_charts_filtered(conn, flt)
        stats.task_list_keyset(conn, flt, limit=25)
        stats.task_count(conn, flt)
        reads[name] = (time.perf_counter() - started) * 1000
        catching_up[name] = summary.catching_up
    return reads, catching_up


def fold_steps(conn) -> dict[str, Any]:
    """Folds the backlog in the folder's bounded steps (worker/folder.py); seconds, steps, longest."""
    started, step_times, tasks = time.perf_counter(), [], 0
    reported = started
    while True:
        step_started = time.perf_counter()
        folded = rollups.rollup_fold(conn, max_marks=rollups.FOLD_STEP_MARKS)
        step_times.append(time.perf_counter() - step_started)
        tasks += max(folded, 0)
        if folded <= 0 or rollups.rollup_backlog(conn).marks == 0:
            break
        if time.perf_counter() - reported >= 60:  # a long backlog shows its progress
            reported = time.perf_counter()
            print(f"  folding: {len(step_times)} steps of {rollups.FOLD_STEP_MARKS:,} marks in {reported - started:.0f} s "
                  f"({tasks:,} tasks folded, a task once per step), the last step {step_times[-1]:.1f} s", flush=True)
    return {"fold_s": time.perf_counter() - started, "steps": len(step_times), "longest_step_s": max(step_times)}


def filters() -> dict[str, TaskFilter]:
    week_ago = date.today() - timedelta(days=7)
    def day(d: date) -> datetime:
        return datetime.combine(d, datetime.min.time(), tzinfo=UTC)
    today = date.today()
    return {"none": TaskFilter(), "one agent": TaskFilter(agents=("agent-1",)),
            "one customer": TaskFilter(customers=("customer-20",)),
            "last week": TaskFilter(date_from=day(week_ago)),
            "failed only": TaskFilter(statuses=("failed",)), "needs review": TaskFilter(needs_review=True),
            "90 days": TaskFilter(date_from=day(today - timedelta(days=120)), date_to=day(today - timedelta(days=30))),
            "agent+completed+30d": TaskFilter(agents=("agent-2",), statuses=("completed",),
                                              date_from=day(today - timedelta(days=30))),
            "customer+failed+year": TaskFilter(customers=("customer-30",), statuses=("failed",),
                                               date_from=day(today - timedelta(days=365)))}


def _old(conn, query: str, flt: TaskFilter) -> list:
    where, params = stats.task_filter(flt.params())
    return conn.execute(sql.SQL(query).format(task_filter=where), params).fetchall()


def _timings(conn, flt: TaskFilter, direct, runs: int, baseline_runs: int) -> dict[str, float | None]:
    """p50 ms of each figure for one filter, new and old."""
    return {"summary": timed(lambda: stats.stats_summary_filtered(conn, flt), runs),
            "charts": timed(lambda: stats.stats_charts_filtered(conn, flt), runs),
            "first page": timed(lambda: (stats.task_list_keyset(conn, flt, limit=25),
                                         stats.task_count(conn, flt)), runs),
            "old summary": timed(lambda: stats.stats_summary_direct(conn, flt), baseline_runs),
            "old charts": timed(lambda: stats.stats_charts_direct(
                conn, flt, start=direct.first_created_at, end=direct.last_activity_at), baseline_runs),
            "old first page": timed(lambda: (_old(conn, OLD_FIRST_PAGE, flt), _old(conn, OLD_COUNT, flt)),
                                    baseline_runs)}


def figures(dsn: str, runs: int, baseline_runs: int) -> list[dict]:
    """p50 ms per filter and figure, through the rollups and through the direct aggregates."""
    rows = []
    with db.connect(dsn) as conn:
        for name, flt in filters().items():
            direct = stats.stats_summary_direct(conn, flt)
            row = {"filter": name, **_timings(conn, flt, direct, runs, baseline_runs)}
            count = stats.task_count(conn, flt)
            if not count.exact or count.n != direct.total:
                raise AssertionError(f"the table's total for {name} is {count}, the recount {direct.total}")
            new = stats.stats_summary_filtered(conn, flt)
            if new.counts != direct.counts or new.input_tokens != direct.input_tokens:
                raise AssertionError(f"rollups disagree with the recount for {name}: {new.counts} != {direct.counts}")
            print(f"  {name:<13} summary {row['summary']:7.1f} ms (was {_ms(row['old summary'])})  "
                  f"charts {row['charts']:7.1f} ms (was {_ms(row['old charts'])})  "
                  f"first page {row['first page']:6.1f} ms (was {_ms(row['old first page'])})", flush=True)
            rows.append(row)
    return rows


def bulk_then_read(dsn: str, n: int) -> dict:
    """Loads n more tasks with every trigger on (as ordinary INSERTs: n marks wait), then times the
    first read of each filter: it answers from what is folded, says it is catching up, and never folds.
    Then folds the backlog in the folder's bounded steps and reads again."""
    with db.connect(dsn) as conn:
        top = conn.execute("SELECT coalesce(max(id), 0) AS n FROM tasks").fetchone()["n"]
        started = time.perf_counter()
        conn.execute(LOAD_TASKS.replace("FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g",
                                        "FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g0 "
                                        "CROSS JOIN LATERAL (SELECT g0 - %(top)s AS g) gg"),
                     {"lo": top + 1, "hi": top + n, "top": top, "n": n, "agents": AGENTS, "customers": CUSTOMERS})
        loaded = time.perf_counter() - started
        out = {"loaded_s": loaded}
        out["first_reads_ms"], out["catching_up"] = first_reads(conn)
        out.update(fold_steps(conn))
        summary = stats.stats_summary_filtered(conn, TaskFilter())
        out["after"] = (summary.catching_up, summary.total)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 tasks and a drain of 1,000: a smoke run")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--drain", type=int, default=None)
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=50_000, help="rows per INSERT of the load")
    parser.add_argument("--worker-concurrency", type=int, default=16,
                        help="the drain's `quire worker --concurrency` (noop executor); 0: two engine threads")
    parser.add_argument("--triggers-off", action="store_true",
                        help="load with the triggers off, then mark every task and fold in bounded steps")
    parser.add_argument("--baseline-runs", type=int, default=5)
    parser.add_argument("--bulk", type=int, default=0,
                        help="then load this many more tasks with every trigger on and time the first reads")
    parser.add_argument("--reuse", action="store_true",
                        help="keep the database loaded by an earlier run (QUIRE_DATABASE_URL) and measure again")
    parser.add_argument("--top", type=int, default=0, help="print the dashboards' N costliest statements")
    parser.add_argument("--live-only", action="store_true",
                        help="reuse the loaded database of an earlier run (QUIRE_DATABASE_URL) for part 2 only")
    args = parser.parse_args()
    n_tasks = args.tasks or (20_000 if args.quick else 1_000_000)
    n_drain = args.drain or (1_000 if args.quick else 10_000)

    with bench_server(stat_statements=True) as pg:
        server = pg.dsn
        has_pgss = has_stat_statements(server)
        name = "quire_bench_dashboard"
        with db.connect(server) as admin:
            if not (args.live_only or args.reuse):
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                admin.execute(f"CREATE DATABASE {name}")
            for role in ("bench_dash", "bench_worker", "bench_fold"):
                if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                    admin.execute(f"CREATE ROLE {role} LOGIN SUPERUSER")
            version = admin.execute("SHOW server_version").fetchone()["server_version"]
        dsn = db.with_database(server, name)
        with db.connect(dsn) as conn:
            migrate(conn)
            if has_pgss:
                try:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                except psycopg.Error:
                    has_pgss = False

        def dsn_for(role: str) -> str:
            from psycopg.conninfo import conninfo_to_dict, make_conninfo
            params = conninfo_to_dict(dsn)
            params["user"] = role
            params.pop("password", None) if role != params.get("user") else None
            return make_conninfo(**params)

        print(f"PostgreSQL {version}, {os.cpu_count()} cores (shared machine); "
              f"{'the loaded database' if args.live_only or args.reuse else f'{n_tasks:,} tasks'}", flush=True)
        if not args.live_only:
            if not args.reuse:
                took = load(dsn, n_tasks, batch=args.batch, triggers=not args.triggers_off)
                print(f"loaded in {took['load']:.0f} s ({took['attempts']:,} attempts, "
                      f"{'ordinary INSERTs of ' + format(args.batch, ',') + ' rows with every trigger on' if not args.triggers_off else 'triggers off'})",
                      flush=True)
                if "first_reads_ms" in took:
                    print("  first reads right after the load (summary, charts, first page and total) per filter: "
                          + ", ".join(f"{name} {ms:.0f} ms{' (catching up)' if took['catching_up'][name] else ''}"
                                      for name, ms in took["first_reads_ms"].items())
                          + f"; slowest {max(took['first_reads_ms'].values()):.0f} ms", flush=True)
                print(f"  folded in {took['steps']} bounded steps, {took['fold_s']:.0f} s (longest step "
                      f"{took['longest_step_s']:.1f} s)", flush=True)
                print(f"  {took['rollup_rows']:,} rollup rows, {took['bin_rows']:,} bin rows; VACUUM ANALYZE "
                      f"{took['vacuum']:.0f} s\n", flush=True)
            print(f"p50 of {args.runs} (baseline: p50 of {args.baseline_runs} of the direct aggregates)", flush=True)
            rows = figures(dsn, args.runs, args.baseline_runs)
            worst = max(max(r["summary"], r["charts"], r["first page"]) for r in rows)
            print(f"slowest figure through the rollups: {worst:.1f} ms\n", flush=True)
            if args.bulk:
                bulk = bulk_then_read(dsn, args.bulk)
                print(f"bulk load of {args.bulk:,} tasks with every trigger on: {bulk['loaded_s']:.0f} s; first reads "
                      "(summary, charts, first page and total) per filter: " + ", ".join(
                          f"{name} {ms:.0f} ms{' (catching up)' if bulk['catching_up'][name] else ''}"
                          for name, ms in bulk["first_reads_ms"].items()), flush=True)
                print(f"  folded in the background in {bulk['steps']} steps, {bulk['fold_s']:.0f} s (longest step "
                      f"{bulk['longest_step_s']:.1f} s); then catching up {bulk['after'][0]}, "
                      f"total {bulk['after'][1]:,}\n", flush=True)
        print(f"{args.pages} open dashboards while a worker drains {n_drain:,} tasks", flush=True)
        cost = live_cost(server, dsn_for, n_drain, args.pages, has_pgss, list(filters().values())[:5],
                         concurrency=args.worker_concurrency, top=args.top)
        print(f"  drained in {cost['wall_s']:.1f} s; {cost['bursts']:,} notifications; {cost['refreshes']} page refreshes")
        print("  reads of the pages' shared cache: " + ", ".join(f"{n} {kind}" for kind, n in sorted(cost["reads"].items())))
        for row in cost.get("dash_top", []):
            print(f"  {row['calls']:>6} calls {row['ms']:>8.1f} ms  {row['q']}")
        if not has_pgss:
            print(f"  the worker's client-side time {cost['client_worker_s']:.2f} s; the dashboards' Postgres time "
                  "needs pg_stat_statements (the embedded server loads it; this server does not)")
            return 0
        dash, worker, fold = (cost.get(f"pg_{r}_s", 0.0) for r in ("bench_dash", "bench_worker", "bench_fold"))
        if args.worker_concurrency:
            print(f"  Postgres time (pg_stat_statements): quire worker {worker:.2f} s (its own rollup folds "
                  f"{cost['pg_worker_folds_s']:.2f} s of it), dashboards {dash:.3f} s "
                  f"({dash / cost['wall_s'] * 1000:.1f} ms per second of the drain)")
            print(f"  dashboards / worker = {dash / worker:.1%}; without the worker's folds "
                  f"{dash / max(worker - cost['pg_worker_folds_s'], 1e-9):.1%}")
            return 0
        print(f"  Postgres time (pg_stat_statements): worker {worker:.2f} s, dashboards {dash:.3f} s "
              f"({dash / cost['wall_s'] * 1000:.1f} ms per second of the drain), rollup folds {fold:.2f} s")
        print(f"  dashboards / worker = {dash / worker:.1%}; dashboards and folds / worker = "
              f"{(dash + fold) / worker:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
