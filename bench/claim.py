"""Claim-and-complete throughput by claimer count, and claim latency by backlog depth.

    python bench/claim.py                 # 1/4/8 claimers; depths 10k, 100k, 1M
    python bench/claim.py --quick         # small sizes, for a smoke run
    QUIRE_DATABASE_URL=postgresql://... python bench/claim.py   # another server

Every Quire figure is measured with its NOTIFY triggers on. The peers in the same run are the
bare pattern most queues start from: one `UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP
LOCKED)` and a guarded completion on a table without attempts or events, once without
notifications and once with a per-row NOTIFY trigger. The ratios show what Quire's bookkeeping (an
attempt row, the event log, fenced completion with spend) and its notifications cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.pgserver import bench_server
from schema import db, queue
from schema.migrate import migrate

DONE = {"status": "completed", "result": {"ok": True}, "confidence": 1.0, "input_tokens": 10, "output_tokens": 5}
BARE_SETUP = """
DROP TABLE IF EXISTS bare_jobs;
CREATE TABLE bare_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, priority int NOT NULL,
                        status text NOT NULL DEFAULT 'queued', created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON bare_jobs (priority DESC, created_at, id) WHERE status = 'queued';
CREATE OR REPLACE FUNCTION bare_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('bare_jobs', json_build_object('id', NEW.id, 's', NEW.status)::text);
    RETURN NULL;
END $$;
"""
BARE_NOTIFY_ON = """CREATE TRIGGER bare_jobs_notify AFTER UPDATE ON bare_jobs
    FOR EACH ROW EXECUTE FUNCTION bare_jobs_notify()"""
BARE_NOTIFY_OFF = "DROP TRIGGER IF EXISTS bare_jobs_notify ON bare_jobs"
BARE_CLAIM = """UPDATE bare_jobs SET status = 'running' WHERE id = (
    SELECT id FROM bare_jobs WHERE status = 'queued' ORDER BY priority DESC, created_at, id
    LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id"""
BARE_DONE = "UPDATE bare_jobs SET status = 'done' WHERE id = %s AND status = 'running'"


def fill(conn, agent: str, n: int, chunk: int = 100_000) -> None:
    """Bulk-enqueues n tasks over ten priorities, in statements of `chunk` rows."""
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        conn.execute(
            "INSERT INTO tasks (agent, document_uri, estimated_tokens, priority) "
            "SELECT %s, 'file:///bench/' || g, 1000, g %% 10 FROM generate_series(1, %s) g", [agent, size])


def reset(conn) -> None:
    conn.execute("TRUNCATE tasks, task_attempts, task_events RESTART IDENTITY CASCADE")


def run_claimers(dsn: str, claimers: int, seconds: float, work) -> float:
    """Runs `work(conn)` in a loop on `claimers` connections; returns completed tasks per second."""
    stop = threading.Event()
    counts = [0] * claimers
    errors: list[BaseException] = []
    ready = threading.Barrier(claimers + 1)

    def loop(i: int) -> None:
        with db.connect(dsn) as conn:
            ready.wait()
            try:
                while not stop.is_set():
                    done = work(conn, i)
                    if done == 0:
                        return
                    counts[i] += done
            except BaseException as exc:  # reported after the run
                errors.append(exc)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(claimers)]
    for t in threads:
        t.start()
    ready.wait()
    started = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


def quire_work(batch: int, agent: str):
    def work(conn, i: int) -> int:
        claims = queue.claim(conn, agent=agent, worker_id=f"bench-{i}", limit=batch)
        for c in claims:
            queue.apply_callback(conn, c.attempt_id, DONE)
        return len(claims)
    return work


def bare_work(conn, i: int) -> int:
    row = conn.execute(BARE_CLAIM).fetchone()
    if row is None:
        return 0
    conn.execute(BARE_DONE, [row["id"]])
    return 1


def throughput(dsn: str, claimer_counts: list[int], seconds: float, backlog: int) -> list[dict]:
    rows = []
    with db.connect(dsn) as conn:
        queue.configure_agent(conn, "bench")
        queue.configure_agent(conn, "bench-capped", max_concurrent_tasks=64, max_tpm=10**12)
        conn.execute(BARE_SETUP)
    variants = [("quire claim 1", "bench", 1), ("quire claim 10", "bench", 10),
                ("quire throttled claim 10", "bench-capped", 10)]
    for claimers in claimer_counts:
        row = {"claimers": claimers}
        for label, trigger in (("bare SKIP LOCKED", BARE_NOTIFY_OFF), ("bare + row NOTIFY", BARE_NOTIFY_ON)):
            with db.connect(dsn) as conn:
                conn.execute(BARE_NOTIFY_OFF)
                conn.execute("TRUNCATE bare_jobs")
                conn.execute("INSERT INTO bare_jobs (priority) SELECT g %% 10 FROM generate_series(1, %s) g", [backlog])
                conn.execute(trigger)
            row[label] = run_claimers(dsn, claimers, seconds, bare_work)
        for label, agent, batch in variants:
            with db.connect(dsn) as conn:
                reset(conn)
                fill(conn, agent, backlog)
                conn.execute("ANALYZE tasks")
            row[label] = run_claimers(dsn, claimers, seconds, quire_work(batch, agent))
        rows.append(row)
    return rows


def latency_at_depth(dsn: str, depth: int, samples: int) -> dict:
    with db.connect(dsn) as conn:
        reset(conn)
        t0 = time.perf_counter()
        fill(conn, "bench", depth)
        conn.execute("VACUUM ANALYZE tasks")
        fill_seconds = time.perf_counter() - t0
        timings = []
        for _ in range(samples):
            start = time.perf_counter()
            (c,) = queue.claim(conn, agent="bench", worker_id="bench")
            timings.append((time.perf_counter() - start) * 1000)
            queue.apply_callback(conn, c.attempt_id, DONE)
    timings.sort()
    return {"depth": depth, "p50_ms": statistics.median(timings),
            "p99_ms": timings[min(len(timings) - 1, int(len(timings) * 0.99))], "fill_s": fill_seconds}


def bench_database(server_dsn: str) -> str:
    with db.connect(server_dsn) as admin:
        admin.execute("DROP DATABASE IF EXISTS quire_bench WITH (FORCE)")
        admin.execute("CREATE DATABASE quire_bench")
    dsn = db.with_database(server_dsn, "quire_bench")
    with db.connect(dsn) as conn:
        migrate(conn)
    return dsn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke run")
    parser.add_argument("--seconds", type=float, default=None, help="duration of each throughput run")
    parser.add_argument("--depths", default=None, help="comma-separated backlog depths")
    parser.add_argument("--claimers", default=None, help="comma-separated claimer counts")
    args = parser.parse_args()
    seconds = args.seconds or (1.0 if args.quick else 5.0)
    depths = [int(d) for d in (args.depths or ("1000,10000" if args.quick else "10000,100000,1000000")).split(",")]
    claimer_counts = [int(c) for c in (args.claimers or ("1,4" if args.quick else "1,4,8")).split(",")]
    backlog = 5_000 if args.quick else 50_000

    import os

    with bench_server() as pg:
        server = pg.dsn
        dsn = bench_database(server)
        with db.connect(dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()["server_version"]
        print(f"PostgreSQL {version}, {os.cpu_count()} cores; notifications on; {seconds:.0f} s per run\n")
        rows = throughput(dsn, claimer_counts, seconds, backlog)
        labels = [k for k in rows[0] if k != "claimers"]
        print("claim-and-complete throughput (tasks/s; ratio to bare SKIP LOCKED in brackets)")
        print(f"{'claimers':>8}  " + "  ".join(f"{label:>24}" for label in labels))
        for row in rows:
            base = row["bare SKIP LOCKED"]
            cells = [f"{row[label]:>10,.0f} ({row[label] / base:4.2f}x)" for label in labels]
            print(f"{row['claimers']:>8}  " + "  ".join(f"{c:>24}" for c in cells))
        print("\nclaim latency by backlog depth (one claim of one task, with its attempt row)")
        print(f"{'depth':>10} {'p50 ms':>8} {'p99 ms':>8} {'fill s':>8}")
        with db.connect(dsn) as conn:
            queue.configure_agent(conn, "bench")
        for depth in depths:
            r = latency_at_depth(dsn, depth, samples=200 if args.quick else 1000)
            print(f"{r['depth']:>10,} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['fill_s']:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
