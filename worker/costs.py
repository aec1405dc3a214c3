"""The cost reconciler: reads token usage and LLM cost from MLflow traces and records them once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from schema import worker_queries
from worker import logs

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool


@dataclass(frozen=True)
class CostConfig:
    """How often traces are read, how many per round, and how far back attempts are reconciled."""

    interval_seconds: float = 30.0
    batch: int = 50
    window_seconds: float = 86_400.0
    verify: bool = False  # also compare spend reported by callback with the trace

    def __post_init__(self) -> None:
        if self.interval_seconds <= 0 or self.batch < 1 or self.window_seconds <= 0:
            raise ValueError("interval and window must be positive, batch at least 1")


@dataclass(frozen=True)
class TraceUsage:
    """What a trace says was spent."""

    input_tokens: int
    output_tokens: int
    llm_cost_usd: float | None


def trace_reader(tracking_uri: str | None) -> Callable[[str], Any]:
    """Reads one trace by id from the given tracking store; None when the store has no such trace.

    Through MLflow's tracing client, which the lightweight mlflow-tracing package (all the app
    installs on Databricks) has as well as full MLflow.
    """
    from mlflow.exceptions import MlflowException
    from mlflow.tracing.client import TracingClient

    client = TracingClient(tracking_uri=tracking_uri)

    def get_trace(trace_id: str) -> Any:
        """The trace, or None when the store has no trace of that id."""
        try:
            return client.get_trace(trace_id)
        except MlflowException as exc:
            if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise

    return get_trace


def trace_usage(trace_id: str, get_trace: Callable[[str], Any]) -> TraceUsage | None:
    """Token usage and cost of one trace; None if the trace is not there or names no usage."""
    trace = get_trace(trace_id)
    if trace is None:
        return None
    usage = trace.info.token_usage
    if not usage:
        return None
    cost = trace.info.cost or {}
    total = cost.get("total_cost")
    return TraceUsage(input_tokens=int(usage.get("input_tokens") or 0),
                      output_tokens=int(usage.get("output_tokens") or 0),
                      llm_cost_usd=float(total) if total is not None else None)


def priced(usage: TraceUsage, price_input_per_mtok: Decimal | None,
           price_output_per_mtok: Decimal | None) -> float | None:
    """The trace's own cost, or the agent's two prices applied to its tokens; None when either is missing."""
    if usage.llm_cost_usd is not None:
        return round(usage.llm_cost_usd, 6)
    if price_input_per_mtok is None or price_output_per_mtok is None:
        return None  # one side without a price: the whole usage is unpriced, not half of it $0
    cost = (Decimal(usage.input_tokens) * price_input_per_mtok
            + Decimal(usage.output_tokens) * price_output_per_mtok) / Decimal(1_000_000)
    return round(float(cost), 6)


class CostReconciler:
    """Fills in the spend of attempts that named a trace but reported none; checks reported spend."""

    def __init__(self, pool: ConnectionPool, worker_id: str, tracking_uri: str | None, config: CostConfig | None = None,
                 db_timeout_seconds: float = 10.0):
        self.pool = pool
        self.worker_id = worker_id
        self.tracking_uri = tracking_uri
        self.config = config or CostConfig()
        self._get_trace: Callable[[str], Any] | None = None
        self.db_timeout_seconds = db_timeout_seconds
        # Traces read without usage to record: not read again by this process.
        self._nothing_to_record: set[int] = set()
        self._verified_up_to = 0

    def _read(self, trace_id: str) -> TraceUsage | Exception | None:
        """The trace's usage; None if it has none; the exception if the store could not be read."""
        try:
            if self._get_trace is None:
                self._get_trace = trace_reader(self.tracking_uri)
            return trace_usage(trace_id, self._get_trace)
        except Exception as exc:  # an unreachable tracking store: try again next round
            logs.problem("read trace", exc, trace_id=trace_id)
            return exc

    def run_once(self) -> int:
        """One round; returns how many attempts had their spend recorded from their trace."""
        if not self.tracking_uri:
            return 0
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            pending = worker_queries.attempt_list_unreconciled_batch(
                conn, window_seconds=self.config.window_seconds, skip=sorted(self._nothing_to_record),
                batch=self.config.batch)
        recorded = 0
        for attempt in pending:
            usage = self._read(attempt.trace_id)
            if isinstance(usage, Exception):
                continue
            if usage is None:
                self._nothing_to_record.add(attempt.id)
                continue
            cost = priced(usage, attempt.price_input_per_mtok, attempt.price_output_per_mtok)
            with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
                done = worker_queries.attempt_record_trace_usage_once(
                    conn, attempt.id, input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens, llm_cost_usd=cost)
            if done:
                recorded += 1
                logs.change("attempt", "usage_recorded", attempt=attempt.id, trace_id=attempt.trace_id,
                            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                            llm_cost_usd=cost, source="trace", worker=self.worker_id)
        if self.config.verify:
            self.verify_once()
        return recorded

    def verify_once(self) -> int:
        """Compares reported spend with the traces of attempts not checked yet; returns mismatches."""
        if not self.tracking_uri:
            return 0
        with self.pool.connection(timeout=self.db_timeout_seconds) as conn:
            recorded = worker_queries.attempt_list_recorded_batch(
                conn, after_id=self._verified_up_to, batch=self.config.batch)
        mismatches = 0
        for attempt in recorded:
            usage = self._read(attempt.trace_id)
            if isinstance(usage, Exception):
                break
            self._verified_up_to = max(self._verified_up_to, attempt.id)
            if usage is None:
                continue
            if (usage.input_tokens, usage.output_tokens) != (attempt.input_tokens, attempt.output_tokens):
                mismatches += 1
                logs.problem("verify usage", f"reported {attempt.input_tokens}/{attempt.output_tokens} "
                             f"tokens, trace says {usage.input_tokens}/{usage.output_tokens}",
                             attempt=attempt.id, trace_id=attempt.trace_id)
        return mismatches
