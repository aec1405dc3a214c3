"""Postgres's work per task of the worker's two statements, without the worker: claim, settle, fold.

    python bench/claim_settle_probe.py --dsn postgresql://postgres@127.0.0.1:5432/postgres
    python bench/claim_settle_probe.py --tasks 6400 --batch 64 --fold-every 20

On a fresh database of the server: enqueue --tasks no-op tasks, then claim --batch of them at a time
(the worker's claim statement), settle each claim's tasks as completed by the no-op executor (the
worker's settlement), and fold the rollups every --fold-every rounds. Printed: the CPU the backend
spent per task on each of the three (read from /proc, so the server must run on this machine), and,
where the server loads pg_stat_statements with track = all, the costliest statements inside them
(the triggers' included).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.peers import fresh_database  # noqa: E402
from bench.pgserver import bench_server, has_stat_statements  # noqa: E402
from schema import db, queue, rollups, settlement  # noqa: E402
from schema.migrate import migrate  # noqa: E402

TICKS = 100  # clock ticks a second (/proc)


def backend_cpu(pid: int) -> float:
    """Seconds of CPU a backend spent so far (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def noop_report() -> dict:
    return {"status": "completed", "confidence": 1.0, "pages": 0,
            "result": {"document_type": "other", "extractor": "noop", "model": None, "pages": 0, "fields": {}},
            "input_tokens": 0, "output_tokens": 0, "llm_cost_usd": 0.0}


def prepare_backlog(conn, tasks: int, setup: str | None) -> None:
    """A fresh database's schema, one no-op agent `bench` and `tasks` of its tasks; `setup`, SQL run
    before the tasks go in, is an experiment: what the work costs with a part changed."""
    migrate(conn)
    queue.configure_agent(conn, "bench", executor="noop")
    if setup:
        conn.execute(setup)
    for first in range(0, tasks, 1000):
        queue.enqueue_many(conn, [dict(agent="bench", document_uri=f"/bench/{n}.pdf")
                                  for n in range(first, min(tasks, first + 1000))])


def settle_as_noop(settler, claims) -> None:
    """The worker's settlement of `claims`, each completed as the no-op executor completes it."""
    settlement.settle_ended(settler, [settlement.Ended(c.attempt_id, report=noop_report(), compute_seconds=0.0,
                                                       compute_cost_usd=0.0, compute_state="measured")
                                      for c in claims])


def probe(server: str, tasks: int, batch: int, fold_every: int, top: int, setup: str | None = None) -> None:
    dsn = fresh_database(server, "claim_probe")
    with db.connect(dsn) as conn:
        prepare_backlog(conn, tasks, setup)
        rollups.rollup_fold(conn)
        stats = has_stat_statements(dsn)
        if stats:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("SELECT pg_stat_statements_reset()")
    spent = {"claim": 0.0, "settle": 0.0, "fold": 0.0}
    claimed = 0
    with db.connect(dsn) as claimer, db.connect(dsn) as settler, db.connect(dsn) as folder:
        pids = {"claim": claimer.info.backend_pid, "settle": settler.info.backend_pid,
                "fold": folder.info.backend_pid}
        started = time.perf_counter()
        rounds = 0
        while True:
            before = backend_cpu(pids["claim"])
            claims = queue.claim_many(claimer, worker_id="probe", slots={"noop": ("all", batch)})
            spent["claim"] += backend_cpu(pids["claim"]) - before
            if not claims:
                break
            claimed += len(claims)
            before = backend_cpu(pids["settle"])
            settle_as_noop(settler, claims)
            spent["settle"] += backend_cpu(pids["settle"]) - before
            rounds += 1
            if rounds % fold_every == 0:
                before = backend_cpu(pids["fold"])
                rollups.rollup_fold(folder, max_marks=rollups.FOLD_STEP_MARKS)
                spent["fold"] += backend_cpu(pids["fold"]) - before
        before = backend_cpu(pids["fold"])
        while rollups.rollup_fold(folder, max_marks=rollups.FOLD_STEP_MARKS) > 0:
            pass
        spent["fold"] += backend_cpu(pids["fold"]) - before
        wall = time.perf_counter() - started
    print(f"{claimed} tasks in {rounds} rounds of {batch}, {wall:.2f} s ({claimed / wall:,.0f} tasks/s); "
          "backend CPU per task: " + ", ".join(f"{k} {v / claimed * 1e6:.0f} µs" for k, v in spent.items())
          + f", all {sum(spent.values()) / claimed * 1e6:.0f} µs", flush=True)
    if stats and top:
        with db.connect(dsn) as conn:
            for r in conn.execute(
                    "SELECT calls, total_exec_time AS ms, left(regexp_replace(query, '\\s+', ' ', 'g'), 120) AS q "
                    "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
                    "WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT %s", [top]):
                print(f"  {r['calls']:>7} calls {r['ms'] / claimed * 1000:>7.1f} µs/task  {r['q']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="the server to measure (default: an embedded one)")
    parser.add_argument("--tasks", type=int, default=6400)
    parser.add_argument("--batch", type=int, default=64, help="tasks a claim takes (and a settlement settles)")
    parser.add_argument("--fold-every", type=int, default=20, help="rounds between two folds")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--top", type=int, default=0, help="costliest statements (pg_stat_statements)")
    parser.add_argument("--setup", help="SQL run on the fresh database before the tasks go in (experiments)")
    args = parser.parse_args()
    with bench_server(args.dsn, stat_statements=args.top > 0) as server:
        for _ in range(args.runs):
            probe(server.dsn, args.tasks, args.batch, args.fold_every, args.top, args.setup)


if __name__ == "__main__":
    main()
