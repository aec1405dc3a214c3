"""Extraction as a library call, without tracing or callbacks: for benchmarks and notebooks."""

from __future__ import annotations

from typing import Any

from agents.errors import DocumentError
from agents.report import ReportStatus
from agents.runner import run
from agents.tracing import Tracer


def extract_document(path: str, extractor: str = "offline") -> dict[str, Any]:
    """The result of one document (see docs/CONTRACTS.md); DocumentError or RuntimeError on failure."""
    outcome = run(path, extractor, tracer=Tracer())
    payload = outcome.payload
    if payload["status"] != ReportStatus.COMPLETED:
        error = payload["error"] or "extraction failed"
        raise DocumentError(error) if payload["retryable"] is False else RuntimeError(error)
    result = dict(payload["result"])
    result["usage"] = {"input_tokens": payload["input_tokens"], "output_tokens": payload["output_tokens"]}
    return result
