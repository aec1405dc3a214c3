"""MLflow tracing of an agent run, or a no-op tracer when no tracking URI is configured."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "quire"
USAGE_ATTRIBUTE = "mlflow.chat.tokenUsage"
COST_ATTRIBUTE = "mlflow.llm.cost"
MODEL_ATTRIBUTE = "mlflow.llm.model"


class NullSpan:
    """Accepts everything a span accepts and keeps nothing."""

    trace_id = None

    def set_inputs(self, inputs: Any) -> None:
        pass

    def set_outputs(self, outputs: Any) -> None:
        pass

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        pass


class Tracer:
    """Opens spans for one run; `trace_id` is set once the root span starts (None when off)."""

    def __init__(self, mlflow_module: Any = None):
        self._mlflow = mlflow_module
        self.trace_id: str | None = None

    @property
    def enabled(self) -> bool:
        return self._mlflow is not None

    @classmethod
    def from_env(cls) -> Tracer:
        """Trace to MLFLOW_TRACKING_URI / MLFLOW_EXPERIMENT_NAME, or not at all when unset."""
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            return cls()
        if not database_reachable(uri):
            # MLflow would retry an unreachable database for minutes before giving up.
            log.warning("MLflow tracing disabled: tracking database not reachable")
            return cls()
        # Export each trace as its span ends, so a short-lived job loses nothing at exit.
        os.environ.setdefault("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
        if is_databricks_uri(uri) and not experiment.startswith("/"):
            # The workspace's MLflow refuses it (INVALID_PARAMETER_VALUE): said plainly here.
            log.warning("MLflow tracing disabled: on Databricks the experiment must be an absolute "
                        "workspace path such as /Shared/quire, not %r (set MLFLOW_EXPERIMENT_NAME)", experiment)
            return cls()
        try:
            import mlflow

            mlflow.set_tracking_uri(uri)
            mlflow.set_experiment(experiment)
        except Exception as exc:  # tracing must never cost the extraction itself
            log.warning("MLflow tracing disabled: %s", exc)
            return cls()
        return cls(mlflow)

    @contextlib.contextmanager
    def run(self, name: str, inputs: dict[str, Any], tags: dict[str, str]) -> Iterator[Any]:
        """The root span of a run; its trace id becomes `self.trace_id`."""
        if not self.enabled:
            yield NullSpan()
            return
        with self._mlflow.start_span(name=name, span_type="AGENT") as span:
            self.trace_id = span.trace_id
            span.set_inputs(inputs)
            try:
                self._mlflow.update_current_trace(tags=tags)
            except Exception as exc:
                log.debug("could not tag trace: %s", exc)
            yield span

    @contextlib.contextmanager
    def span(self, name: str, span_type: str = "CHAIN",
             inputs: dict[str, Any] | None = None) -> Iterator[Any]:
        """A child span (types: PARSER, CHAIN, CHAT_MODEL, ...)."""
        if not self.enabled:
            yield NullSpan()
            return
        with self._mlflow.start_span(name=name, span_type=span_type) as span:
            if inputs is not None:
                span.set_inputs(inputs)
            yield span

    def flush(self) -> None:
        """Wait until every finished trace is exported."""
        if not self.enabled:
            return
        try:
            self._mlflow.flush_trace_async_logging(terminate=False)
        except Exception as exc:
            log.warning("could not flush MLflow traces: %s", exc)


def is_databricks_uri(uri: str) -> bool:
    """Whether traces go to a Databricks workspace's MLflow ("databricks" or "databricks://profile")."""
    return uri == "databricks" or uri.startswith("databricks://")


def database_reachable(uri: str, timeout: float = 3.0) -> bool:
    """For database tracking URIs, whether the server accepts a TCP connection."""
    parsed = urlsplit(uri)
    scheme = parsed.scheme.split("+")[0]
    ports = {"postgresql": 5432, "postgres": 5432, "mysql": 3306, "mssql": 1433}
    if scheme not in ports or not parsed.hostname:
        return True  # file stores, sqlite, http(s) and databricks are checked by MLflow itself
    try:
        with socket.create_connection((parsed.hostname, parsed.port or ports[scheme]), timeout):
            return True
    except OSError:
        return False


def record_usage(span: Any, input_tokens: int, output_tokens: int, cost: tuple[float, float] | None,
                 model: str | None = None, estimated: bool = False) -> None:
    """Token usage and, when priced, cost on a span, in the attributes MLflow sums into the trace."""
    span.set_attribute(USAGE_ATTRIBUTE, {
        "input_tokens": int(input_tokens),
        "output_tokens": int(output_tokens),
        "total_tokens": int(input_tokens) + int(output_tokens),
    })
    if cost is not None:
        input_cost, output_cost = cost
        span.set_attribute(COST_ATTRIBUTE, {
            "input_cost": float(input_cost),
            "output_cost": float(output_cost),
            "total_cost": float(input_cost) + float(output_cost),
        })
        span.set_attribute("quire.llm_cost_usd", float(input_cost) + float(output_cost))
    else:
        span.set_attribute("quire.unpriced", True)
    span.set_attribute("quire.tokens_estimated", bool(estimated))
    if model:
        span.set_attribute(MODEL_ATTRIBUTE, model)


def prices() -> tuple[float, float] | None:
    """The agent's USD per million input and output tokens, as the run was given them; None unless both are set.

    The worker sets QUIRE_LLM_PRICE_*_PER_MTOK from the agent's configuration (or passes them as
    job parameters); a run with usage and a missing price is unpriced, never $0 for that side.
    """
    def read(name: str) -> float | None:
        raw = os.environ.get(name, "").strip()
        return float(raw) if raw else None
    price_in, price_out = read("QUIRE_LLM_PRICE_INPUT_PER_MTOK"), read("QUIRE_LLM_PRICE_OUTPUT_PER_MTOK")
    if price_in is None or price_out is None:
        return None
    return price_in, price_out


def cost_of(input_tokens: int, output_tokens: int) -> tuple[float, float] | None:
    """Input and output cost in USD at the configured prices; None when no price is configured."""
    configured = prices()
    if configured is None:
        return None
    price_in, price_out = configured
    return input_tokens * price_in / 1e6, output_tokens * price_out / 1e6
