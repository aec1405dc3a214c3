"""One counter mechanism for the app and the worker: prometheus-client counters and histograms per owner."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client import Metric

    from schema.models import Claim

try:  # `_created` samples are noise on a dashboard; older clients have no switch
    from prometheus_client import disable_created_metrics
    disable_created_metrics()
except ImportError:  # pragma: no cover
    pass

# Histograms operators expect, by name: help text and bucket bounds.
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "quire_claim_latency_seconds": (
        "Seconds from a task becoming claimable (created or backed off) to its claim.",
        (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60, 300, 1800, 3600, 21600)),
    "quire_callback_apply_seconds": (
        "Seconds to apply one agent report in the database (callback route or worker).",
        (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)),
    "quire_extraction_seconds": (
        "Run time of one attempt, from launch to exit.",
        (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600)),
    "quire_model_call_tokens": (
        "Tokens (input plus output) one attempt reported for its model calls.",
        (100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000)),
}


class Metrics:
    """Named counters (with fixed label names) and histograms of one owner, in a registry of its own.

    counters: {exported name without `_total`: (help, label names)}; histograms: names from HISTOGRAMS.
    """

    def __init__(self, counters: dict[str, tuple[str, tuple[str, ...]]], histograms: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._counters = {name: Counter(name, text, labels, registry=self.registry)
                          for name, (text, labels) in counters.items()}
        self._histograms = {name: Histogram(name, HISTOGRAMS[name][0], buckets=HISTOGRAMS[name][1],
                                            registry=self.registry) for name in histograms}

    def inc(self, name: str, amount: float = 1, **labels: str) -> None:
        """Adds `amount` to the counter `name`; KeyError for a name this owner does not have."""
        counter = self._counters[name]
        (counter.labels(**labels) if labels else counter).inc(amount)

    def observe(self, name: str, value: float) -> None:
        """Records one observation in the histogram `name`."""
        self._histograms[name].observe(value)

    def items(self) -> list[tuple[str, dict[str, str], float]]:
        """Every counter sample: (sample name, labels, value)."""
        return [(s.name, dict(s.labels), s.value) for counter in self._counters.values()
                for family in counter.collect() for s in family.samples if s.name.endswith("_total")]

    def histogram_count(self, name: str) -> int:
        """How many observations the histogram `name` holds."""
        return int(next(s.value for family in self._histograms[name].collect() for s in family.samples
                        if s.name.endswith("_count")))


# The process's histograms: the app's callback route and a co-hosted worker observe the same ones.
PROCESS = Metrics({}, histograms=tuple(HISTOGRAMS))


def observe_claim_latency(claims: Iterable[Claim]) -> None:
    """How long each claimed task waited after it became claimable (created, or its backoff ended)."""
    now = datetime.now(UTC)
    for claim in claims:
        ready = max(claim.task.created_at, claim.task.run_after)
        PROCESS.observe("quire_claim_latency_seconds", max((now - ready).total_seconds(), 0.0))


def observe_report(apply_seconds: float, payload: dict, usage_recorded: bool) -> None:
    """Histograms of one applied report: how long it took, and its tokens when it recorded spend."""
    PROCESS.observe("quire_callback_apply_seconds", apply_seconds)
    tokens = [payload.get(key) for key in ("input_tokens", "output_tokens")]
    if usage_recorded and any(isinstance(t, int) for t in tokens):
        PROCESS.observe("quire_model_call_tokens", sum(t for t in tokens if isinstance(t, int)))


class Union(Collector):
    """Collects from several registries at once: one exposition for the app, its worker and the database."""

    def __init__(self, *sources: Collector) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        for source in self.sources:
            yield from source.collect()
