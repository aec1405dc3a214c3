"""One JSON log line per state change the worker causes (task, attempt, agent, worker)."""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from json.encoder import encode_basestring_ascii as _quote
from typing import Any

log = logging.getLogger("quire.worker")

ENTITIES = frozenset({"task", "attempt", "agent", "worker"})


def _default(value: Any) -> Any:
    """JSON for values json cannot write itself."""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def change(entity: str, event: str, *, level: int = logging.INFO, **fields: Any) -> None:
    """Logs one state change as a JSON object: ts, entity, event, then the given fields."""
    if entity not in ENTITIES:
        raise ValueError(f"unknown log entity {entity!r}")
    if not log.isEnabledFor(level):
        return
    line = _line(entity, event, fields)
    lines = getattr(_batch, "lines", None)
    if lines is not None and level == logging.INFO:
        lines.append(line)
        return
    _emit(level, line)


def _emit(level: int, message: str) -> None:
    # The record is made here: Logger.log would walk the stack for a caller no line shows.
    log.handle(log.makeRecord(log.name, level, __file__, 0, message, (), None))


_batch = threading.local()


@contextmanager
def batched() -> Iterator[None]:
    """The INFO lines this thread logs inside are written together when it ends: one log record
    of many lines (still one JSON object per line), not one write per line."""
    if getattr(_batch, "lines", None) is not None:  # nested: the outer batch writes them
        yield
        return
    lines: list[str] = []
    _batch.lines = lines
    try:
        yield
    finally:
        _batch.lines = None
        if lines:
            _emit(logging.INFO, "\n".join(lines))


_encode = json.JSONEncoder(default=_default, separators=(",", ":")).encode


def _line(entity: str, event: str, fields: dict[str, Any]) -> str:
    """The JSON object {"ts", "entity", "event", then each field that is not None}, as _encode
    writes it; whole numbers, strings and finite floats (most fields) are written here, at a third
    of its cost (the worker logs three lines a task, one with its run's seconds)."""
    parts = [f'{{"ts":"{_timestamp()}","entity":{_quote(entity)},"event":{_quote(event)}']
    for key, value in fields.items():
        if value is None:
            continue
        kind = type(value)
        if kind is int:
            parts.append(f',{_quote(key)}:{value}')
        elif kind is str:
            parts.append(f',{_quote(key)}:{_quote(value)}')
        elif kind is float and math.isfinite(value):  # as the encoder writes it: repr
            parts.append(f',{_quote(key)}:{value!r}')
        else:
            parts.append(f',{_quote(key)}:{_encode(value)}')
    parts.append("}")
    return "".join(parts)


_second: tuple[int, str] = (-1, "")


def _timestamp() -> str:
    """Now as datetime.now(timezone.utc).isoformat(timespec="milliseconds") writes it; the date
    and time of day are formatted once a second."""
    global _second
    seconds, ns = divmod(time.time_ns(), 1_000_000_000)
    second = _second
    if second[0] != seconds:
        t = time.gmtime(seconds)
        second = _second = (seconds, f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"
                                     f"T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}")
    return f"{second[1]}.{ns // 1_000_000:03d}+00:00"


_last_problem: dict[tuple[str, str], float] = {}
PROBLEM_REPEAT_SECONDS = 5.0


def problem(what: str, exc: BaseException | str, **fields: Any) -> None:
    """Logs a failure that changed nothing (a database outage, an executor error) as JSON.

    The same kind of failure during the same activity is logged at most every few seconds, so an
    outage does not flood the log with one line per run and tick.
    """
    key = (what, exc if isinstance(exc, str) else type(exc).__name__)
    now = time.monotonic()
    if now - _last_problem.get(key, -PROBLEM_REPEAT_SECONDS) < PROBLEM_REPEAT_SECONDS:
        return
    _last_problem[key] = now
    error = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    _emit(logging.WARNING, _line("worker", "error", {"during": what, "error": error, **fields}))


def configure_stderr_logging(level: int = logging.INFO) -> None:
    """Plain message lines on stderr for the worker's loggers, unless logging is already set up."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("quire")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    # The pool warns at every failed reconnect; the worker logs outages itself, rate-limited.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
