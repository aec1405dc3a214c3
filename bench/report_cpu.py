"""CPU time a report costs, in the Postgres backend and in the client, on each path that applies one.

    python bench/report_cpu.py            # 1,500 reports per row, two rounds
    python bench/report_cpu.py --quick    # 300 reports per row, one round

Both paths run the same SQL function (quire_apply_reports): the callback's `apply_callback` a batch
of one, the worker's `settle_ended` batches of 64 completions. CPU time (the backend's from /proc,
the client's from the process) is what a report costs whatever else runs on the machine, where
wall time here mostly measures the other work sharing its two cores. Commits do not wait for the
disk (synchronous_commit off), so the figures are the work itself.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.claim import bench_database
from bench.pgserver import bench_server
from schema import db, queue, settlement
from schema.models import Claim

DONE = {"status": "completed", "result": {"ok": True}, "confidence": 1.0, "input_tokens": 10, "output_tokens": 5}
FAILED = {"status": "failed", "error": "timeout", "retryable": True}
BATCH = 64


def backend_cpu_seconds(pid: int) -> float:
    """User and system CPU of a local process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def claimed(conn: psycopg.Connection, n: int, tag: str) -> list[Claim]:
    """n fresh tasks, enqueued and claimed."""
    queue.enqueue_many(conn, [dict(agent="bench", document_uri=f"/bench/{tag}/{i}") for i in range(n)])
    out: list[Claim] = []
    while len(out) < n:
        out += queue.claim(conn, agent="bench", worker_id="bench", limit=100)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer reports, one round")
    args = parser.parse_args()
    n, rounds = (300, 1) if args.quick else (1500, 2)
    with bench_server() as pg:
        if not pg.embedded:
            print("the backend's CPU is read from /proc: run against the embedded server")
            return 1
        dsn = bench_database(pg.dsn)
        with db.connect(dsn) as conn:
            conn.execute("SET synchronous_commit = off")
            pid = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
            queue.configure_agent(conn, "bench")
            print(f"{'path':<38} {'backend ms':>10} {'client ms':>10}   (CPU per report, {n} reports)")
            for r in range(rounds):
                for label, payload in (("completed", DONE), ("failed, retried", FAILED)):
                    todo = claimed(conn, n, f"{label}{r}")
                    b0, c0 = backend_cpu_seconds(pid), time.process_time()
                    for c in todo:
                        queue.apply_callback(conn, c.attempt_id, payload)
                    b1, c1 = backend_cpu_seconds(pid), time.process_time()
                    print(f"{'apply_callback, ' + label:<38} {1000 * (b1 - b0) / n:>10.3f} "
                          f"{1000 * (c1 - c0) / n:>10.3f}")
                todo = claimed(conn, n, f"settled{r}")
                b0, c0 = backend_cpu_seconds(pid), time.process_time()
                for i in range(0, n, BATCH):
                    settlement.settle_ended(conn, [settlement.Ended(c.attempt_id, report=DONE, compute_seconds=1.0)
                                                   for c in todo[i:i + BATCH]])
                b1, c1 = backend_cpu_seconds(pid), time.process_time()
                print(f"{f'settle_ended, {BATCH} completions':<38} {1000 * (b1 - b0) / n:>10.3f} "
                      f"{1000 * (c1 - c0) / n:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
