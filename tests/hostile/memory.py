"""The resident memory of a running process, read from /proc: now, and at its peak since a reset."""

from __future__ import annotations

from pathlib import Path

MB = 1_000_000


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak(pid: int) -> int:
    """Resets the process's peak resident set (VmHWM) to its current one; returns that, in bytes."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return _status_kb(pid, "VmRSS") * 1024


def peak(pid: int) -> int:
    """The process's peak resident set since the last reset, in bytes."""
    return _status_kb(pid, "VmHWM") * 1024
