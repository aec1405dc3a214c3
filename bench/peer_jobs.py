"""The peers' side of bench/peers.py: runs inside a peer's own venv, never imports Quire.

    python peer_jobs.py pgqueuer install|enqueue|consume  --dsn DSN [...]
    python peer_jobs.py procrastinate install|enqueue|consume --dsn DSN [...]

`enqueue --count N --batch B` enqueues N no-op jobs B at a time and prints {"seconds": ...};
`enqueue --count N --trickle S` enqueues them one at a time, S seconds apart, each carrying its
enqueue time. `consume --count N` runs the peer's worker until it has started N jobs, then prints
{"starts": [...], "waits": [...]}: each job's start time, and start minus enqueue time where the
job carried one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time


def _payload(stamp: bool) -> bytes:
    return json.dumps({"t": time.time()} if stamp else {}).encode()


# -- pgqueuer -------------------------------------------------------------------------------------

async def _pgq_driver(dsn: str):
    import asyncpg
    from pgqueuer.db import AsyncpgDriver

    if "://" in dsn:  # asyncpg reads a URL itself: no psycopg import in the timed consumer
        return AsyncpgDriver(await asyncpg.connect(dsn))
    # libpq key=value pairs, which asyncpg does not read: through psycopg (its import is timed too)
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(dsn)
    return AsyncpgDriver(await asyncpg.connect(
        host=info.get("host"), port=int(info["port"]) if info.get("port") else None,
        user=info.get("user"), password=info.get("password") or None, database=info.get("dbname")))


async def pgq_install(args) -> dict:
    from pgqueuer import Queries

    await Queries(await _pgq_driver(args.dsn)).install()
    return {}


async def pgq_enqueue(args) -> dict:
    from pgqueuer import Queries

    queries = Queries(await _pgq_driver(args.dsn))
    started, start = time.time(), time.perf_counter()
    if args.trickle:
        for _ in range(args.count):
            await queries.enqueue("noop", _payload(True), 0)
            await asyncio.sleep(args.trickle)
    else:
        for first in range(0, args.count, args.batch):
            size = min(args.batch, args.count - first)
            await queries.enqueue(["noop"] * size, [_payload(False)] * size, [0] * size)
    return {"seconds": time.perf_counter() - start, "started": started}


async def pgq_consume(args) -> dict:
    # Its queue manager alone, as its own worker runs jobs: PgQueuer would run a scheduler beside it.
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    qm = QueueManager(Queries(await _pgq_driver(args.dsn)))
    starts: list[float] = []
    waits: list[float] = []

    @qm.entrypoint("noop", concurrency_limit=args.limit)
    async def noop(job) -> None:
        now = time.time()
        starts.append(now)
        sent = json.loads(job.payload or b"{}").get("t")
        if sent is not None:
            waits.append(now - sent)
        if len(starts) >= args.count:
            qm.shutdown.set()

    print(json.dumps({"ready": True}), flush=True)
    await qm.run(batch_size=args.batch, dequeue_timeout=__import__("datetime").timedelta(seconds=1))
    return {"starts": starts, "waits": waits, "done": time.time()}


# -- procrastinate --------------------------------------------------------------------------------

def _proc_app(dsn: str, record=None):
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

    @app.task(name="noop")
    async def noop(t: float | None = None) -> None:
        if record is not None:
            record(t)

    return app, noop


async def proc_install(args) -> dict:
    app, _ = _proc_app(args.dsn)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
    return {}


async def proc_enqueue(args) -> dict:
    app, noop = _proc_app(args.dsn)
    async with app.open_async():
        started, start = time.time(), time.perf_counter()
        if args.trickle:
            for _ in range(args.count):
                await noop.defer_async(t=time.time())
                await asyncio.sleep(args.trickle)
        else:
            for first in range(0, args.count, args.batch):
                size = min(args.batch, args.count - first)
                await noop.batch_defer_async(*[{} for _ in range(size)])
        return {"seconds": time.perf_counter() - start, "started": started}


async def proc_consume(args) -> dict:
    starts: list[float] = []
    waits: list[float] = []
    done = asyncio.Event()

    def record(sent: float | None) -> None:
        now = time.time()
        starts.append(now)
        if sent is not None:
            waits.append(now - sent)
        if len(starts) >= args.count:
            done.set()

    app, _ = _proc_app(args.dsn, record)
    async with app.open_async():
        print(json.dumps({"ready": True}), flush=True)
        worker = asyncio.create_task(app.run_worker_async(concurrency=args.concurrency, wait=True,
                                                          install_signal_handlers=False))
        await done.wait()
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await worker
    return {"starts": starts, "waits": waits, "done": time.time()}


COMMANDS = {("pgqueuer", "install"): pgq_install, ("pgqueuer", "enqueue"): pgq_enqueue,
            ("pgqueuer", "consume"): pgq_consume, ("procrastinate", "install"): proc_install,
            ("procrastinate", "enqueue"): proc_enqueue, ("procrastinate", "consume"): proc_consume}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=["pgqueuer", "procrastinate"])
    parser.add_argument("command", choices=["install", "enqueue", "consume"])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--limit", type=int, default=0, help="pgqueuer: jobs at once (0: no limit)")
    parser.add_argument("--trickle", type=float, default=0.0)
    args = parser.parse_args()
    result = asyncio.run(COMMANDS[(args.peer, args.command)](args))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
