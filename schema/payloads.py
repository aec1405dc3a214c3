"""Validates callback bodies against the callback contract (docs/CONTRACTS.md)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from schema.errors import InvalidPayload

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_KNOWN = {"status", "result", "confidence", "error", "retryable", "input_tokens", "output_tokens",
          "llm_cost_usd", "compute_cost_usd", "run_id", "trace_id", "pages", "rate_limited",
          "retry_after_seconds"}
MAX_ERROR_CHARS = 4000


def is_sha256(value: Any) -> bool:
    return isinstance(value, str) and bool(_SHA256.match(value))


@dataclass(frozen=True)
class Report:
    """A validated callback."""

    status: str
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

    @property
    def has_usage(self) -> bool:
        return any(v is not None for v in (self.input_tokens, self.output_tokens,
                                            self.llm_cost_usd, self.compute_cost_usd))


def _count(payload: Mapping[str, Any], key: str) -> int | None:
    value = payload.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidPayload(f"{key} must be a non-negative integer, not {value!r}")
    return value


def _money(payload: Mapping[str, Any], key: str) -> float | None:
    value = payload.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InvalidPayload(f"{key} must be a non-negative number, not {value!r}")
    return float(value)


def _text(payload: Mapping[str, Any], key: str, limit: int = 512) -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidPayload(f"{key} must be a string, not {type(value).__name__}")
    return value[:limit]


def parse_callback(payload: Any) -> Report:
    """A Report, or InvalidPayload naming the first thing wrong."""
    if not isinstance(payload, Mapping):
        raise InvalidPayload("callback body must be a JSON object")
    unknown = set(payload) - _KNOWN
    if unknown:
        raise InvalidPayload(f"unknown callback fields: {', '.join(sorted(unknown))}")
    status = payload.get("status")
    if status not in ("completed", "failed"):
        raise InvalidPayload(f"status must be 'completed' or 'failed', not {status!r}")
    result = payload.get("result")
    if result is not None and not isinstance(result, dict):
        raise InvalidPayload("result must be a JSON object or null")
    if status == "completed" and result is None:
        raise InvalidPayload("a completed callback must carry a result")
    confidence = payload.get("confidence")
    if confidence is not None:
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 <= confidence <= 1:
            raise InvalidPayload(f"confidence must be a number from 0 to 1, not {confidence!r}")
        confidence = float(confidence)
    retryable = payload.get("retryable", False)
    if not isinstance(retryable, bool):
        raise InvalidPayload("retryable must be true or false")
    error = _text(payload, "error", MAX_ERROR_CHARS)
    if status == "failed" and not error:
        raise InvalidPayload("a failed callback must carry an error message")
    return Report(status=status, result=result, confidence=confidence, error=error,
                  retryable=retryable, input_tokens=_count(payload, "input_tokens"),
                  output_tokens=_count(payload, "output_tokens"),
                  llm_cost_usd=_money(payload, "llm_cost_usd"),
                  compute_cost_usd=_money(payload, "compute_cost_usd"),
                  run_id=_text(payload, "run_id"), trace_id=_text(payload, "trace_id"),
                  pages=_count(payload, "pages"), rate_limited=_count(payload, "rate_limited") or 0,
                  retry_after_seconds=_money(payload, "retry_after_seconds"))
