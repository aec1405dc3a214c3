"""A worker that went idle, then a backlog: does anything the worker does when idle slow the drain?

    python bench/idle_worker.py                                   # embedded PostgreSQL, 3 pairs
    python bench/idle_worker.py --dsn postgresql://postgres@127.0.0.1:5432/postgres --runs 4

A running `quire worker` (default `--concurrency 64`, the noop executor) sits idle for --idle
seconds on a fresh database, then --tasks no-op tasks are enqueued in batches of 1,000; the drain is
timed from the first batch's start to the settlement of the last task. Each run drains once with
the worker's idle-time measure of OCR on (the default) and once with it off
(QUIRE_OCR_CALIBRATION=false), in alternating order: the ratio off / on says what the measure,
which starts after 2 s without a run, costs a backlog that comes after it began.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.peers import ENQUEUE_BATCH, fresh_database, quire_env, scalar  # noqa: E402
from bench.pgserver import bench_server  # noqa: E402
from schema import db, queue  # noqa: E402
from schema.migrate import migrate  # noqa: E402


def drain_after_idle(server: str, *, measure: bool, tasks: int, idle: float, concurrency: int,
                     settings: dict[str, str] | None = None) -> float:
    """Tasks a second a worker idle for `idle` seconds drains, with its OCR measure on or off, and
    any other `QUIRE_` settings given."""
    dsn = fresh_database(server, "bench_idle_worker")
    with db.connect(dsn) as conn:
        migrate(conn)
        queue.configure_agent(conn, "bench", executor="noop")
    data_dir = Path(tempfile.mkdtemp(prefix="quire-idle-"))
    env = quire_env(dsn, data_dir) | (settings or {}) | {"QUIRE_OCR_CALIBRATION": "true" if measure else "false"}
    with open(data_dir / "worker.log", "w") as log:
        worker = subprocess.Popen([str(Path(sys.executable).with_name("quire")), "worker", "--concurrency",
                                   str(concurrency)], env=env, stdout=log, stderr=log)
        try:
            time.sleep(idle)
            if worker.poll() is not None:
                raise RuntimeError(f"quire worker exited: {(data_dir / 'worker.log').read_text()[-2000:]}")
            with db.connect(dsn) as conn:
                started = time.time()  # Postgres runs on this machine: its clock is this clock
                for first in range(0, tasks, ENQUEUE_BATCH):
                    queue.enqueue_many(conn, [dict(agent="bench", document_uri=f"/bench/{n}.pdf")
                                              for n in range(first, min(tasks, first + ENQUEUE_BATCH))])
                while scalar(conn, "SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'enqueued') "
                                   "OR EXISTS (SELECT 1 FROM tasks WHERE status = 'processing')"):
                    if worker.poll() is not None:
                        raise RuntimeError(f"quire worker exited: {(data_dir / 'worker.log').read_text()[-2000:]}")
                    time.sleep(0.02)
                last = float(scalar(conn, "SELECT extract(epoch FROM max(finished_at)) FROM task_attempts"))
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    return tasks / (last - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", help="the Postgres server (default: QUIRE_DATABASE_URL, else an embedded one)")
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--idle", type=float, default=4.0, help="seconds the worker waits before the backlog")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3, help="pairs of drains (measure on, measure off)")
    args = parser.parse_args()
    if args.tasks < 1 or args.runs < 1 or args.idle < 0 or args.concurrency < 1:
        parser.error("--tasks, --runs and --concurrency must be positive, --idle not negative")
    with bench_server(args.dsn) as pg:
        server = pg.dsn
        print(f"{args.tasks:,} no-op tasks after {args.idle:g} s idle, {os.cpu_count()} cores", flush=True)
        ratios = []
        for n in range(args.runs):
            order = (True, False) if n % 2 == 0 else (False, True)
            rates = {measure: drain_after_idle(server, measure=measure, tasks=args.tasks, idle=args.idle,
                                               concurrency=args.concurrency) for measure in order}
            ratios.append(rates[False] / rates[True])
            print(f"run {n + 1}: measure on {rates[True]:,.0f} tasks/s, off {rates[False]:,.0f} tasks/s, "
                  f"off / on {ratios[-1]:.2f} (load average {os.getloadavg()[0]:.2f})", flush=True)
        print(f"off / on by run: {', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
