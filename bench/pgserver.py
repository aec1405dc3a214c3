"""The Postgres a bench script measures: the server named (`--dsn`, else QUIRE_DATABASE_URL), or an
embedded one in a temporary directory, stopped and removed when the script ends."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
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
def bench_server(dsn: str | None = None, *, stat_statements: bool = False) -> Iterator[BenchServer]:
    """Yields the server to measure. `stat_statements`: an embedded server is started with
    pg_stat_statements loaded (a named server is used as it is; check before reading the view)."""
    named = dsn or os.environ.get("QUIRE_DATABASE_URL")
    if named:
        yield BenchServer(named)
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


def has_stat_statements(dsn: str) -> bool:
    """Whether the server loads pg_stat_statements (per-statement Postgres time can be read)."""
    with db.connect(dsn) as conn:
        return "pg_stat_statements" in conn.execute("SHOW shared_preload_libraries").fetchone()[
            "shared_preload_libraries"]
