"""One agent run: read, classify, extract under a trace, and shape the callback payload."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from agents.cascade import CascadeExtractor
from agents.classify import Classification, classify
from agents.errors import DocumentError
from agents.fields import Extractor, Usage
from agents.llm_extractor import LLMExtractor
from agents.offline import OfflineExtractor
from agents.pdf import read_document
from agents.report import ReportStatus
from agents.tracing import Tracer

log = logging.getLogger(__name__)

EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_DOCUMENT_ERROR = 2


def make_extractor(name: str) -> Extractor:
    """The extractor registered under `name` (offline, llm or cascade)."""
    if name == "offline":
        return OfflineExtractor()
    if name == "llm":
        return LLMExtractor()
    if name == "cascade":
        return CascadeExtractor()
    raise ValueError(f"unknown extractor {name!r} (expected offline, llm or cascade)")


@dataclass
class Outcome:
    """The payload to report and the exit code that goes with it."""

    payload: dict[str, Any]
    exit_code: int


def _payload(status: str, usage: Usage, pages: int | None, trace_id: str | None,
             result: dict | None = None, confidence: float | None = None,
             error: str | None = None, retryable: bool | None = None,
             cannot_run: bool = False) -> dict[str, Any]:
    return {
        "status": status,
        "result": result,
        "confidence": confidence,
        "error": error,
        "retryable": retryable if status == ReportStatus.FAILED else False,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "llm_cost_usd": usage.reported_cost_usd,
        "compute_cost_usd": None,
        "pages": pages,
        "run_id": None,
        "trace_id": trace_id,
        # Rate limits the model endpoint answered: the orchestrator backs this agent off.
        **({"rate_limited": usage.rate_limited, "retry_after_seconds": usage.retry_after_seconds,
            "rate_limited_at": usage.rate_limited_at,
            **({"rate_limit_tpm": usage.rate_limit_tpm} if usage.rate_limit_tpm else {})}
           if usage.rate_limited else {}),
        # The endpoint refused the agent itself: the orchestrator stops claiming for it.
        **({"agent_cannot_run": True} if cannot_run and status == ReportStatus.FAILED else {}),
    }


def run(document_path: str, extractor_name: str = "offline", attempt_id: int | None = None,
        tracer: Tracer | None = None, extractor: Extractor | None = None) -> Outcome:
    """Run the agent on one document; every failure becomes a `failed` payload, never a raise."""
    tracer = tracer or Tracer.from_env()
    usage = Usage()
    pages: int | None = None
    started = time.monotonic()
    tags = {"quire.agent": "document", "quire.extractor": extractor_name}
    if attempt_id is not None:
        tags["quire.attempt_id"] = str(attempt_id)
    try:
        with tracer.run("quire.agent.run", {"document": document_path,
                                            "extractor": extractor_name,
                                            "attempt_id": attempt_id}, tags) as root:
            extractor = extractor or make_extractor(extractor_name)
            with tracer.span("read", "PARSER", {"path": document_path}) as span:
                document = read_document(document_path)
                pages = document.page_count
                span.set_outputs({"pages": pages, "sha256": document.sha256,
                                  "bytes": document.size_bytes})
            with tracer.span("classify", "CHAIN") as span:
                # An e-invoice says what it is; its text, if any, need not be weighed.
                classification = Classification("invoice", 1.0, {"invoice": 1.0}) \
                    if document.einvoice else classify(document.text)
                span.set_outputs({"document_type": classification.document_type,
                                  "confidence": classification.confidence,
                                  "scores": classification.scores})
            if document.einvoice is not None and not isinstance(extractor, CascadeExtractor):
                # Exact data is read, not guessed: no extractor spends tokens on an e-invoice.
                extractor = CascadeExtractor(use_llm=False, name=extractor.name)
            extraction = extractor.extract(document, classification, usage, tracer)
            result = extraction.result(pages)
            root.set_outputs({"document_type": extraction.document_type,
                              "confidence": extraction.confidence,
                              "input_tokens": usage.input_tokens,
                              "output_tokens": usage.output_tokens,
                              "llm_cost_usd": usage.reported_cost_usd})
        outcome = Outcome(_payload(ReportStatus.COMPLETED.value, usage, pages, tracer.trace_id, result=result,
                                   confidence=extraction.confidence), EXIT_COMPLETED)
    except DocumentError as exc:
        log.info("document error: %s", exc)
        outcome = Outcome(_payload(ReportStatus.FAILED.value, usage, pages, tracer.trace_id, error=str(exc),
                                   retryable=False), EXIT_DOCUMENT_ERROR)
    except Exception as exc:  # anything unexpected may pass on a retry
        log.exception("agent run failed")
        message = f"{type(exc).__name__}: {exc}"
        retryable = getattr(exc, "retryable", True)
        outcome = Outcome(_payload(ReportStatus.FAILED.value, usage, pages, tracer.trace_id, error=message,
                                   retryable=retryable,
                                   cannot_run=getattr(exc, "agent_cannot_run", False)), EXIT_FAILED)
    finally:
        tracer.flush()
    log.info("run finished in %.2fs with status %s", time.monotonic() - started,
             outcome.payload["status"])
    return outcome
