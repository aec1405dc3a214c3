"""CPU time a workload spent, read from /proc: one process (a worker) and the Postgres backends of
one database, for the bench scripts. On a shared machine a drain's rate moves with the load; the
CPU each task cost moves far less, and it is what decides the rate on a quiet machine."""

from __future__ import annotations

import os
import threading
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (not its children), or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def _backends_of(database: str, skip: set[int]) -> list[int]:
    """The server processes that name `database` in their title (backends, autovacuum workers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres: ") and f" {database} ".encode() in title:
            pids.append(int(entry.name))
    return pids


class CpuSampler:
    """Samples, every `interval` seconds until stopped, the CPU time of one process and of the
    backends of one database (the last reading of each, so processes that exit are counted up to
    their last sample: sample often). `skip`: backend pids not to count (the bench's own)."""

    def __init__(self, pid: int, database: str, *, skip: set[int] = frozenset(), interval: float = 0.05):
        self.pid, self.database, self.skip, self.interval = pid, database, set(skip), interval
        self.worker = 0.0
        self._start: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._stop = threading.Event()
        # Backends already there (and the worker's own start) count from now on, not from their start.
        for backend in _backends_of(database, self.skip):
            self._start[backend] = _cpu_seconds(backend) or 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self, rescan: bool = True) -> None:
        worker = _cpu_seconds(self.pid)
        if worker is not None:
            self.worker = worker
        # Looking through /proc for new backends costs about 4 ms of this process's CPU (200
        # processes), taken from the cores being measured: done every fifth sample only; the
        # backends already found are read every time.
        backends = _backends_of(self.database, self.skip) if rescan else list(self._last)
        for backend in backends:
            seconds = _cpu_seconds(backend)
            if seconds is not None:
                self._last[backend] = seconds

    def _run(self) -> None:
        ticks = 0
        while not self._stop.wait(self.interval):
            self._sample(rescan=ticks % 5 == 0)
            ticks += 1

    def stop(self) -> tuple[float, float]:
        """(the process's CPU seconds, its database's backends' CPU seconds) since the start."""
        self._sample()
        self._stop.set()
        self._thread.join()
        return self.worker, sum(s - self._start.get(pid, 0.0) for pid, s in self._last.items())
