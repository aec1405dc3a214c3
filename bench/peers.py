"""The real `quire worker` against pgqueuer and procrastinate: one no-op workload, one Postgres, one run.

    python bench/peers.py                      # 5,000 tasks; embedded PostgreSQL with pg_stat_statements
    python bench/peers.py --quick --runs 4     # pgqueuer batch 10 and Quire only, four runs in a row
    python bench/peers.py --quick --running-first 4   # each worker started first, the backlog 4 s later
    python bench/peers.py --quick --busy 1     # a process spinning on one core beside each run
    python bench/peers.py --quick --dsn postgresql://postgres@127.0.0.1:5432/postgres   # any server
    python bench/peers.py --quick --bin /usr/lib/postgresql/15/bin   # a new cluster of any binaries here
                                               # (no statement figures unless it loads pg_stat_statements)

For each queue, on a fresh database of the same server: enqueue N no-op jobs in batches of 1,000
(enqueue tasks/s), then start its worker process on that backlog and time it from the moment the
process is started (its imports, connections and set-up included, as a user waits for them) to the
end of the last job: the drain, in tasks/s. For Quire the end is the settlement that marked the last
task done; the peers do not say when a job ended, so theirs is the last job's start (which favours
them). The steady rate, from the first job's start to that end, is printed beside it. Then, with the
worker idle, jobs go in one at a time 20 ms apart (enqueue -> start p50/p95). Quire runs as the real
`quire worker` command (default `--concurrency 64`) with the noop executor and its default settings;
each peer runs in its own venv under bench/.venvs/ (made here with pip on first use; the peers are
not Quire's dependencies), driven by bench/peer_jobs.py. Ratios are against pgqueuer at batch 10,
measured in the same run. The full run also measures pgqueuer with the Quire worker's cap on jobs
in flight (its concurrency_limit), since pgqueuer by default runs as many at once as it dequeues.
`--busy N` keeps N processes spinning on the CPU throughout each run, as another test on the
machine would: on 2 cores the queues then share what is left, and each one's CPU per task decides
more of its rate than how well it overlaps its client with Postgres.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from bench.cpu import CpuSampler  # noqa: E402
from bench.pgserver import bench_server, has_stat_statements  # noqa: E402
from schema import db, queue  # noqa: E402
from schema.migrate import migrate  # noqa: E402
from worker.tracking import DEFAULT_DATABASE as TRACKING_DATABASE  # noqa: E402
from worker.tracking import locate_tracking, prepare_store, tracking_store_state  # noqa: E402

PEERS = {"pgqueuer": ["pgqueuer==1.6.0", "asyncpg>=0.29", "psycopg[binary]>=3.1"],
         "procrastinate": ["procrastinate==3.10.0", "psycopg[binary,pool]>=3.1"]}
ENQUEUE_BATCH = 1000


def peer_python(peer: str) -> str:
    """The peer's venv interpreter, made and filled with pip on first use."""
    home = BENCH / ".venvs" / peer
    python = home / "bin" / "python"
    marker = home / ".installed"
    if not marker.exists():
        print(f"making {home} ...", flush=True)
        venv.create(home, with_pip=True, clear=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEERS[peer]], check=True)
        marker.write_text(" ".join(PEERS[peer]))
    return str(python)


def peer_run(peer: str, command: str, dsn: str, **options) -> dict:
    """Runs one peer_jobs.py command to its end and returns its last JSON line."""
    argv = [peer_python(peer), str(BENCH / "peer_jobs.py"), peer, command, "--dsn", dsn]
    for key, value in options.items():
        argv += [f"--{key}", str(value)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{peer} {command} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class PeerConsumer:
    """A peer's worker process, running until it has started `count` jobs."""

    def __init__(self, peer: str, dsn: str, count: int, **options):
        self.spawned = time.time()  # the same clock as the job starts it reports
        argv = [peer_python(peer), str(BENCH / "peer_jobs.py"), peer, "consume", "--dsn", dsn,
                "--count", str(count)]
        for key, value in options.items():
            argv += [f"--{key}", str(value)]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line.startswith('{"ready"'):
            raise RuntimeError(f"{peer} consumer did not start: {line} {self.process.stderr.read()[-2000:]}")

    def result(self, timeout: float = 600) -> dict:
        out, err = self.process.communicate(timeout=timeout)
        if self.process.returncode != 0:
            raise RuntimeError(f"consumer failed: {err[-2000:]}")
        return json.loads(out.strip().splitlines()[-1])


def fresh_database(server: str, name: str) -> str:
    with db.connect(server) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    return db.with_database(server, name)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def bench_peer(server: str, label: str, peer: str, tasks: int, trickle: int, running_first: float | None = None,
               **options) -> dict:
    name = f"peer_{label.replace(' ', '_').replace('=', '')}"
    for mark in "(),":
        name = name.replace(mark, "")
    dsn = fresh_database(server, name)
    peer_run(peer, "install", dsn)
    if running_first is None:  # the backlog waits for the consumer: timed from its spawn
        enq = peer_run(peer, "enqueue", dsn, count=tasks, batch=ENQUEUE_BATCH)
        drainer = PeerConsumer(peer, dsn, tasks, **options)
        cpu = CpuSampler(drainer.process.pid, name)
        began = drainer.spawned
    else:  # the consumer waits for the backlog: timed from its first insert
        drainer = PeerConsumer(peer, dsn, tasks, **options)
        cpu = CpuSampler(drainer.process.pid, name)
        try:
            time.sleep(running_first)
            enq = peer_run(peer, "enqueue", dsn, count=tasks, batch=ENQUEUE_BATCH)
        except BaseException:
            drainer.process.kill()
            cpu.stop()
            raise
        began = enq["started"]
    starts = drainer.result()["starts"]
    consumer_cpu, backend_cpu = cpu.stop()
    consumer = PeerConsumer(peer, dsn, trickle, **options)
    peer_run(peer, "enqueue", dsn, count=trickle, trickle=0.02)
    waits = [w * 1000 for w in consumer.result()["waits"]]
    return {"label": label, "enqueue": tasks / enq["seconds"],
            "drain": tasks / (max(starts) - began), "steady": tasks / (max(starts) - min(starts)),
            "p50": statistics.median(waits), "p95": percentile(waits, 0.95),
            # Started first, the samplers would count the idle wait and the enqueue's own backend.
            "cpu": None if running_first is not None else (consumer_cpu / tasks * 1e6, backend_cpu / tasks * 1e6)}


def quire_env(dsn: str, data_dir: Path, claim_ahead: int | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUIRE_", "MLFLOW_"))}
    env.update(QUIRE_DATABASE_URL=dsn, QUIRE_DATA_DIR=str(data_dir), QUIRE_CONFIG=str(data_dir / "quire.toml"),
               QUIRE_RECONCILE_SECONDS="3600", PYTHONUNBUFFERED="1")
    if claim_ahead is not None:
        env["QUIRE_WORKER_CLAIM_AHEAD"] = str(claim_ahead)
    return env


def scalar(conn, sql: str, params=None):
    row = conn.execute(sql, params or ()).fetchone()
    return None if row is None else next(iter(row.values()))


def bench_quire(server: str, tasks: int, trickle: int, concurrency: int, stats: bool,
                top_statements: int = 0, claim_ahead: int | None = None, first_start: bool = False,
                running_first: float | None = None) -> dict:
    dsn = fresh_database(server, "peer_quire")
    data_dir = Path(tempfile.mkdtemp(prefix="quire-peers-"))
    # A worker's very first start on a server makes MLflow's tables beside the queue's database
    # (seconds, once per server, in a process of its own while the worker claims): made here
    # beforehand, so the drain times every later start; or dropped, to time a first start.
    if first_start:
        with db.connect(server) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{TRACKING_DATABASE}" WITH (FORCE)')
    else:
        tracking_uri, ours = locate_tracking(dsn, None)
        if ours and tracking_store_state(dsn) != "ready":
            prepare_store(dsn, tracking_uri, artifact_root=data_dir / "mlflow-artifacts")
    with db.connect(dsn) as conn:
        migrate(conn)
        queue.configure_agent(conn, "bench", executor="noop")
    log = open(data_dir / "worker.log", "w")  # noqa: SIM115 - the worker writes it until the finally below

    def spawn() -> tuple[subprocess.Popen, float]:
        spawned = time.time()  # Postgres runs on this machine: its clock is this clock
        return subprocess.Popen([str(Path(sys.executable).with_name("quire")), "worker", "--concurrency",
                                 str(concurrency)], env=quire_env(dsn, data_dir, claim_ahead),
                                stdout=log, stderr=log), spawned

    worker = None
    try:
        if running_first is not None:  # the worker waits for the backlog: timed from its first insert
            worker, _ = spawn()
            time.sleep(running_first)
        with db.connect(dsn) as conn:
            start, began = time.perf_counter(), time.time()
            for first in range(0, tasks, ENQUEUE_BATCH):
                queue.enqueue_many(conn, [dict(agent="bench", document_uri=f"/bench/{n}.pdf")
                                          for n in range(first, min(tasks, first + ENQUEUE_BATCH))])
            enqueue = tasks / (time.perf_counter() - start)
            single_start = time.perf_counter()
            for n in range(200):
                queue.enqueue(conn, agent="bench", document_uri=f"/bench/single-{n}.pdf")
            single = 200 / (time.perf_counter() - single_start)
            tasks += 200
            if stats:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute("SELECT pg_stat_statements_reset()")
        if worker is None:  # the backlog waits for the worker: timed from its spawn
            worker, began = spawn()
        with db.connect(dsn) as conn:
            cpu = CpuSampler(worker.pid, "peer_quire", skip={conn.info.backend_pid})
            # Whether any task is left, from the partial indexes of waiting and running tasks: a
            # count of the completed ones would scan them all, on the server being measured.
            while scalar(conn, "SELECT EXISTS (SELECT 1 FROM tasks WHERE status = 'enqueued') "
                               "OR EXISTS (SELECT 1 FROM tasks WHERE status = 'processing')"):
                if worker.poll() is not None:
                    raise RuntimeError(f"quire worker exited: {(data_dir / 'worker.log').read_text()[-2000:]}")
                time.sleep(0.05)
            worker_cpu, backend_cpu = cpu.stop()
            # The end: the settlement that marked the last task done (its transaction's time).
            first, last = (float(v) for v in conn.execute(
                "SELECT extract(epoch FROM min(started_at)) AS first, extract(epoch FROM max(finished_at)) AS last "
                "FROM task_attempts").fetchone().values())
            per_task = None
            if stats:
                row = conn.execute(
                    "SELECT sum(calls) AS calls, sum(total_exec_time) AS ms FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND query NOT LIKE '%%pg_stat_statements%%' "
                    "AND query NOT LIKE '%%EXISTS (SELECT 1 FROM tasks%%'"
                ).fetchone()
                per_task = (float(row["calls"]) / tasks, float(row["ms"]) / tasks)
                top = conn.execute(
                    "SELECT calls, total_exec_time AS ms, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS q "
                    "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
                    "WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT %s", [top_statements]
                ).fetchall()
                for r in top:
                    print(f"  {r['calls']:>7} calls {r['ms']:>9.1f} ms  {r['q']}", flush=True)
            # Latency: one task at a time into the idle worker; enqueue (its insert) -> its claim.
            first_id = scalar(conn, "SELECT max(id) FROM tasks")
            for n in range(trickle):
                queue.enqueue(conn, agent="bench", document_uri=f"/bench/late-{n}.pdf")
                time.sleep(0.02)
            deadline = time.monotonic() + 120
            while scalar(conn, "SELECT count(*) FROM tasks WHERE id > %s AND status = 'completed'",
                         [first_id]) < trickle:
                if time.monotonic() > deadline:
                    raise RuntimeError("quire worker did not take the trickled tasks")
                time.sleep(0.05)
            waits = [float(r["ms"]) for r in conn.execute(
                "SELECT extract(epoch FROM a.started_at - t.created_at) * 1000 AS ms "
                "FROM tasks t JOIN task_attempts a ON a.task_id = t.id WHERE t.id > %s", [first_id])]
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
        log.close()
    label = f"quire worker (noop, concurrency {concurrency}" + (
        f", claim ahead {claim_ahead})" if claim_ahead is not None else ")")
    return {"label": label, "enqueue": enqueue,
            "single": single, "drain": tasks / (last - began), "steady": tasks / (last - first),
            "cpu": None if running_first is not None else (worker_cpu / tasks * 1e6, backend_cpu / tasks * 1e6),
            "p50": statistics.median(waits),
            "p95": percentile(waits, 0.95), "per_task": per_task}


def bytecode_state() -> str:
    """Whether Quire's modules start from compiled bytecode: where PYTHONDONTWRITEBYTECODE is set and
    nothing compiled them (`make compile`), every worker start compiles them again, the ones it
    imports late in the middle of its first claims."""
    import importlib.util

    sources = [p for part in ("app", "worker", "schema", "agents") for p in (REPO / part).rglob("*.py")]
    stale = [p for p in sources if not (cached := Path(importlib.util.cache_from_source(str(p)))).exists()
             or cached.stat().st_mtime < p.stat().st_mtime]
    if not stale:
        return "compiled ahead"
    return (f"{len(stale)} of {len(sources)} modules without current bytecode"
            + (" (PYTHONDONTWRITEBYTECODE is set: run `make compile`)" if sys.dont_write_bytecode else ""))


@contextlib.contextmanager
def busy(cores: int):
    """`cores` processes that spin on the CPU until the block ends (none for 0)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes): the machine is shared, and figures move with it."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def one_run(server: str, args, stats: bool) -> list[dict]:
    """Every queue of one run, pgqueuer batch 10 first (the ratios' base), Quire last."""
    rows = [] if args.quire_only else [
        bench_peer(server, "pgqueuer (batch 10)", "pgqueuer", args.tasks, args.trickle, args.running_first,
                   batch=10)]
    if not args.quick and not args.quire_only:
        rows.append(bench_peer(server, "pgqueuer (batch 250)", "pgqueuer", args.tasks, args.trickle, batch=250))
        # The same cap on jobs in flight as the Quire worker's (pgqueuer has none by default).
        rows.append(bench_peer(server, f"pgqueuer (batch 10, at most {args.concurrency} at once)", "pgqueuer",
                               args.tasks, args.trickle, batch=10, limit=args.concurrency) | {"capped": True})
        rows.append(bench_peer(server, "procrastinate (concurrency 10)", "procrastinate", args.tasks,
                               args.trickle, concurrency=10))
    rows.append(bench_quire(server, args.tasks, args.trickle, args.concurrency, stats, args.top,
                            args.claim_ahead, args.first_start, args.running_first))
    return rows


def print_run(rows: list[dict]) -> None:
    base = rows[0]  # the first row the ratios are against (Quire itself with --quire-only)
    print(f"{'queue':<46} {'drain/s':>8} {'ratio':>6} {'steady/s':>9} {'CPU µs/task':>15} {'enqueue/s':>10} "
          f"{'ratio':>6} {'p50 ms':>7} {'p95 ms':>7}")
    for r in rows:
        cpu = f"{r['cpu'][0]:.0f} + {r['cpu'][1]:.0f}" if r["cpu"] else "n/a"
        print(f"{r['label']:<46} {r['drain']:>8,.0f} {r['drain'] / base['drain']:>5.2f}x {r['steady']:>9,.0f} "
              f"{cpu:>15} {r['enqueue']:>10,.0f} {r['enqueue'] / base['enqueue']:>5.2f}x {r['p50']:>7.1f} {r['p95']:>7.1f}")
    quire = rows[-1]
    print("(CPU: the worker or consumer process, its start-up included, + its database's Postgres processes)")
    print(f"\nquire: single enqueue (one round trip each) {quire['single']:,.0f} tasks/s")
    if quire["per_task"]:
        calls, ms = quire["per_task"]
        print(f"quire: {calls:.2f} statements and {ms:.3f} ms of Postgres time per task while draining")
    for r in rows[1:]:
        print(f"ratio to {base['label']}: {r['label']} drain {r['drain'] / base['drain']:.2f}x")
    capped = [r for r in rows if r.get("capped")]
    if capped:
        print(f"ratio to {capped[0]['label']}: {quire['label']} drain {quire['drain'] / capped[0]['drain']:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--trickle", type=int, default=200, help="tasks enqueued one at a time for latency")
    parser.add_argument("--concurrency", type=int, default=64, help="quire worker --concurrency")
    parser.add_argument("--runs", type=int, default=1, help="runs in a row; each run's ratio and the median")
    parser.add_argument("--quick", action="store_true", help="pgqueuer batch 10 only")
    parser.add_argument("--first-start", action="store_true",
                        help="time the worker's first start on the server (MLflow's tables not made yet)")
    parser.add_argument("--quire-only", action="store_true", help="no peers: Quire's figures alone")
    parser.add_argument("--running-first", type=float, default=None, metavar="SECONDS",
                        help="start each worker first, enqueue the backlog SECONDS later, and time the drain "
                             "from the first insert (default: the backlog first, timed from the worker's spawn)")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="keep N processes spinning on the CPU throughout each run (another test's load)")
    parser.add_argument("--top", type=int, default=0, help="print Quire's N costliest statements while draining")
    parser.add_argument("--claim-ahead", type=int, default=None,
                        help="QUIRE_WORKER_CLAIM_AHEAD for the worker (default: the worker's own)")
    parser.add_argument("--dsn", help="the Postgres server to measure on (default: QUIRE_DATABASE_URL, else an "
                        "embedded server started for the run)")
    parser.add_argument("--bin", type=Path, metavar="DIR",
                        help="start a new cluster of the server binaries in DIR for the run, with PostgreSQL's "
                             "default settings (any version installed here; not with --dsn)")
    args = parser.parse_args()
    if args.runs < 1 or args.tasks < 1 or args.concurrency < 1:
        parser.error("--runs, --tasks and --concurrency must be at least 1")
    if args.busy < 0:
        parser.error("--busy must not be negative")
    if args.bin and args.dsn:
        parser.error("--bin starts a server of its own: give --dsn or --bin, not both")
    with bench_server(args.dsn, bin_dir=args.bin, stat_statements=True) as pg:
        server = pg.dsn
        with db.connect(server) as conn:
            version = scalar(conn, "SHOW server_version")
            jit = scalar(conn, "SHOW jit")
        stats = has_stat_statements(server)
        print(f"PostgreSQL {version} (jit {jit}), {os.cpu_count()} cores, {args.tasks:,} no-op tasks; "
              f"Quire's modules: {bytecode_state()}\n", flush=True)
        ratios = []
        for n in range(args.runs):
            before = load()
            with busy(args.busy):
                rows = one_run(server, args, stats)
            print(f"\nrun {n + 1} of {args.runs}, load average {before} before, {load()} after"
                  + (f", {args.busy} busy process{'es' if args.busy > 1 else ''} beside" if args.busy else ""))
            print_run(rows)
            if len(rows) > 1:
                ratios.append((rows[-1]["drain"] / rows[0]["drain"], rows[-1]["steady"] / rows[0]["steady"]))
        if len(ratios) > 1:
            print(f"\nquire / pgqueuer batch 10, drain by run: {', '.join(f'{r:.2f}' for r, _ in ratios)} "
                  f"(median {statistics.median(r for r, _ in ratios):.2f}); steady: "
                  f"{', '.join(f'{s:.2f}' for _, s in ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
