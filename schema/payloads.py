"""Validates callback bodies against the callback contract (docs/CONTRACTS.md)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import isfinite
from typing import Any

from agents.report import ReportStatus
from schema.errors import InvalidPayload
from schema.models import assemble

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_KNOWN = {"status", "result", "confidence", "error", "retryable", "input_tokens", "output_tokens",
          "llm_cost_usd", "compute_cost_usd", "run_id", "trace_id", "pages", "rate_limited",
          "retry_after_seconds", "rate_limited_at", "rate_limit_tpm", "agent_cannot_run"}
MAX_ERROR_CHARS = 4000
# Bounds of the contract, each well inside its column: a report beyond them is malformed (422).
# Tokens: one run of one document. A 10,000-page document read three times over at about 1,000
# tokens a page is 3 * 10^7; a model's context is at most a few million tokens a call. 10^8 each
# is far above any real run and far below what the learned figures could not hold.
MAX_TOKENS = 10**8           # per attempt, input_tokens and output_tokens each
MAX_PAGES = 1_000_000        # pages is integer
MAX_USD = 10**7              # per attempt; the cost columns are numeric(14, 6)
MAX_DEPTH = 64               # nesting of the body; results are a few levels deep
MAX_RATE_LIMITS = 100_000    # 429s one attempt met: an attempt waits them out for minutes at most
MAX_RETRY_AFTER_SECONDS = 86_400   # a Retry-After of a day at most (a daily quota) is accepted...
MAX_PAUSE_SECONDS = 3_600          # ...but one report pauses its agent for an hour at most
MAX_STATED_TPM = 10**12      # the tokens a minute an endpoint says it allows


def is_sha256(value: Any) -> bool:
    return isinstance(value, str) and bool(_SHA256.match(value))


@dataclass(frozen=True)
class Report:
    """A validated callback."""

    status: ReportStatus
    result: dict[str, Any] | None
    confidence: float | None
    error: str | None
    retryable: bool
    input_tokens: int | None
    output_tokens: int | None
    llm_cost_usd: float | None
    compute_cost_usd: float | None
    run_id: str | None
    trace_id: str | None
    pages: int | None
    rate_limited: int = 0                      # HTTP 429s the model endpoint answered this attempt
    retry_after_seconds: float | None = None   # the longest Retry-After among them
    rate_limited_at: float | None = None       # when the first came, in Unix seconds
    rate_limit_tpm: int | None = None          # the tokens a minute the endpoint said it allows
    # A failure that is the agent's, not the document's: the model endpoint refused the agent
    # itself (HTTP 401, 403, 404); every task of the agent would fail alike.
    agent_cannot_run: bool = False

    @property
    def pause_seconds(self) -> float | None:
        """How long the Retry-After pauses the agent: as asked, up to MAX_PAUSE_SECONDS."""
        if self.retry_after_seconds is None:
            return None
        return min(self.retry_after_seconds, MAX_PAUSE_SECONDS)

    @property
    def unpriced(self) -> bool:
        """Tokens were reported with no LLM cost: the agent had no price for them."""
        return bool(self.input_tokens or self.output_tokens) and self.llm_cost_usd is None

    @property
    def has_usage(self) -> bool:
        return any(v is not None for v in (self.input_tokens, self.output_tokens,
                                            self.llm_cost_usd, self.compute_cost_usd))


def _count(payload: Mapping[str, Any], key: str, high: int) -> int | None:
    value = payload.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise InvalidPayload(f"{key} must be an integer from 0 to {high:,}, not {str(value)[:40]}")
    return value


def _number(payload: Mapping[str, Any], key: str, low: float, high: float, what: str) -> float | None:
    """The finite number from low to high at `key` as a float, None if absent; else InvalidPayload
    saying it must be `what`."""
    value = payload.get(key)
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not low <= value <= high):
        raise InvalidPayload(f"{key} must be {what}, not {str(value)[:40]}")
    return float(value)


def _money(payload: Mapping[str, Any], key: str) -> float | None:
    return _number(payload, key, 0, MAX_USD, f"a number from 0 to {MAX_USD:,}")


# Unix seconds from 2000 to 2200: a time an agent's clock could give (a millisecond or a
# nanosecond count would be out of range).
MIN_UNIX_SECONDS, MAX_UNIX_SECONDS = 946_684_800, 7_258_118_400


def _unix_time(payload: Mapping[str, Any], key: str) -> float | None:
    return _number(payload, key, MIN_UNIX_SECONDS, MAX_UNIX_SECONDS, "a time in Unix seconds (2000 to 2200)")


def nesting_depth(body: bytes) -> int:
    """How deeply a JSON text nests arrays and objects, found without parsing it."""
    # Strings may hold brackets: blank them out first, then count what is left.
    text = re.sub(rb'"(?:[^"\\]|\\.)*"', b'""', body)
    depth = deepest = 0
    for byte in text.translate(None, _NOT_BRACKETS):
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def check_storable(value: Any, where: str = "body") -> None:
    """InvalidPayload for what Postgres cannot store: NUL characters, invalid Unicode, NaN or
    infinite numbers, or nesting deeper than MAX_DEPTH."""
    if not _storable(value, 0):
        _explain_unstorable(value, where)


# Types whose every value is storable.
_SCALARS = frozenset({int, bool, type(None)})


def _storable(item: Any, depth: int) -> bool:
    """Whether the value can be stored; a fast walk that names nothing (see _explain_unstorable)."""
    if depth > MAX_DEPTH:
        return False
    kind = type(item)
    if kind is str:
        if "\x00" in item:
            return False
        if item.isascii():
            return True
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if kind is float:
        return math.isfinite(item)
    if kind is int or kind is bool or item is None:
        return True
    if kind is dict or isinstance(item, Mapping):
        depth += 1
        shallow = depth <= MAX_DEPTH
        for key in item:
            # ASCII keys (nearly all) are checked here rather than by a call.
            if not ((shallow and type(key) is str and key.isascii() and "\x00" not in key)
                    or _storable(key, depth)):
                return False
        return _all_storable(item.values(), depth)
    if kind is list or kind is tuple or isinstance(item, (list, tuple)):
        return _all_storable(item, depth + 1)
    if isinstance(item, str):  # a str subclass
        return _storable(str(item), depth)
    return not isinstance(item, float) or math.isfinite(item)


def _all_storable(values: Iterable[Any], depth: int) -> bool:
    """Whether every one of a container's values, at `depth`, can be stored. Scalars and ASCII
    strings (most of a body) are checked here rather than by a call."""
    shallow = depth <= MAX_DEPTH
    for inner in values:
        inner_kind = type(inner)
        if not ((shallow and (inner_kind in _SCALARS or (inner_kind is float and isfinite(inner))
                             or (inner_kind is str and inner.isascii() and "\x00" not in inner)))
                or _storable(inner, depth)):
            return False
    return True


def _explain_unstorable(value: Any, where: str) -> None:
    """Raises InvalidPayload naming the first thing in `value` that cannot be stored."""
    stack = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidPayload(f"{path} nests deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            if "\x00" in item:
                raise InvalidPayload(f"{path} contains a NUL character (\\u0000)")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidPayload(f"{path} is not valid Unicode (a lone surrogate)") from None
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidPayload(f"{path} is {item}: JSON numbers must be finite")
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                stack.append((key, f"{path} key", depth + 1))
                stack.append((inner, f"{path}.{str(key)[:40]}", depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((inner, f"{path}[{n}]", depth + 1) for n, inner in enumerate(item))
    raise InvalidPayload(f"{where} cannot be stored")


def _text(payload: Mapping[str, Any], key: str, limit: int = 512) -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidPayload(f"{key} must be a string, not {type(value).__name__}")
    return value[:limit]


_REPORT_STATUSES = {status.value: status for status in ReportStatus}


def parse_callback(payload: Any) -> Report:
    """A Report, or InvalidPayload naming the first thing wrong."""
    if not isinstance(payload, Mapping):
        raise InvalidPayload("callback body must be a JSON object")
    check_storable(payload)
    if not _KNOWN.issuperset(payload):
        unknown = set(payload) - _KNOWN
        raise InvalidPayload(f"unknown callback fields: {', '.join(sorted(unknown))}")
    status = payload.get("status")
    if status not in _REPORT_STATUSES:
        raise InvalidPayload(f"status must be 'completed' or 'failed', not {status!r}")
    result = payload.get("result")
    if result is not None and not isinstance(result, dict):
        raise InvalidPayload("result must be a JSON object or null")
    if status == ReportStatus.COMPLETED and result is None:
        raise InvalidPayload("a completed callback must carry a result")
    confidence = payload.get("confidence")
    if confidence is not None:
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
            raise InvalidPayload(f"confidence must be a number from 0 to 1, not {confidence!r}")
        confidence = float(confidence)
    retryable = payload.get("retryable", False)
    if not isinstance(retryable, bool):
        raise InvalidPayload("retryable must be true or false")
    cannot_run = payload.get("agent_cannot_run", False)
    if not isinstance(cannot_run, bool):
        raise InvalidPayload("agent_cannot_run must be true or false")
    if cannot_run and status != ReportStatus.FAILED:
        raise InvalidPayload("agent_cannot_run is for failed callbacks only")
    error = _text(payload, "error", MAX_ERROR_CHARS)
    if status == ReportStatus.FAILED and not error:
        raise InvalidPayload("a failed callback must carry an error message")
    # Built without the frozen dataclass's __init__ (Report's fields, in order); the checks run in
    # this order, so the first thing wrong is named.
    return assemble(Report, {
        "status": _REPORT_STATUSES[status], "result": result, "confidence": confidence, "error": error,
        "retryable": retryable, "input_tokens": _count(payload, "input_tokens", MAX_TOKENS),
        "output_tokens": _count(payload, "output_tokens", MAX_TOKENS),
        "llm_cost_usd": _money(payload, "llm_cost_usd"),
        "compute_cost_usd": _money(payload, "compute_cost_usd"),
        "run_id": _text(payload, "run_id"), "trace_id": _text(payload, "trace_id"),
        "pages": _count(payload, "pages", MAX_PAGES),
        "rate_limited": _count(payload, "rate_limited", MAX_RATE_LIMITS) or 0,
        "retry_after_seconds": _number(payload, "retry_after_seconds", 0, MAX_RETRY_AFTER_SECONDS,
                                       f"a number of seconds from 0 to {MAX_RETRY_AFTER_SECONDS:,}"),
        "rate_limited_at": _unix_time(payload, "rate_limited_at"),
        "rate_limit_tpm": _count(payload, "rate_limit_tpm", MAX_STATED_TPM) or None,
        "agent_cannot_run": cannot_run})
