"""A batch's forecast before it runs (tokens, LLM and compute cost, ETA), and batches held or released."""

from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from schema import customers, queue
from schema.errors import InvalidArgument, InvalidTransition, NotFound
from schema.models import MAX_PRIORITY, MIN_PRIORITY, is_priority
from schema.rates import CALIBRATED_SPREAD, LEARN_MIN, LEARNED_MARGIN, STATIC_SPREAD, Rates, learned_rates
from schema.sql import fetch_all, fetch_one, fetch_row, require_idle

# Work ahead is read up to this many queued tasks; past it, the count is the planner's estimate.
AHEAD_BOUND = 20_000
# Until a cascade agent has run anything: the share of the LLM extractor's tokens it is expected
# to spend (bench/cascade.py: 0.92 on the real-world corpus at the default threshold 0.8).
STATIC_CASCADE_LLM_SHARE = 0.9


@dataclass(frozen=True)
class FileFacts:
    """What the forecast knows of one file before it runs."""

    pages: int | None = None
    document_bytes: int | None = None
    einvoice: bool = False      # read from its XML: no model tokens, whatever the extractor
    scanned: bool = False       # no text layer: its pages go through OCR
    ocr_work: float | None = None  # a scan's OCR work in standard pages (agents/scanwork.py; None: its pages)


@dataclass(frozen=True)
class Forecast:
    """The figures shown before a batch runs, and kept with it to compare with what it took."""

    agent: str
    priority: int
    documents: int
    pages: int
    tokens: int
    llm_cost_usd: float | None  # None: the agent has no prices (unpriced)
    compute_cost_usd: float
    work_seconds: float         # the batch's own run time, summed over its documents
    eta_seconds: float          # from now until its last document should be done
    ahead_tasks: int            # queued at its priority or above, and in flight
    ahead_exact: bool
    concurrency: float
    max_tpm: int | None
    basis: str                  # where the rates came from, in words
    warning: str | None = None  # the agent cannot run, or a Retry-After pauses it: said before upload
    scanned_pages: int = 0      # pages without a text layer (read through OCR)
    eta_low_seconds: float | None = None   # likely range: 10th-90th percentile, at least x0.65-x1.35
    eta_high_seconds: float | None = None
    budget_warning: str | None = None      # the batch would take its customer past the monthly budget
    cpu_seconds: float | None = None       # the CPU its local runs need, summed (None: not local, or unknown)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def file_tokens(conn: psycopg.Connection, agent: str, files: list[FileFacts], rates: Rates,
                cascade: bool = False) -> list[float]:
    """Each file's expected tokens: the agent's learned line (quire_learned_tokens, without its 10%
    reservation margin) once it has one, else the static estimate scaled by what attempts used (for
    a cascade agent that has learned nothing yet, the share the model is expected to read). An
    e-invoice costs none."""
    learned = fetch_all(conn, "agent_learned_tokens_list", {
        "agent": agent, "pages": [f.pages for f in files], "bytes": [f.document_bytes for f in files]})
    share = STATIC_CASCADE_LLM_SHARE if cascade and not rates.learned_from else 1.0
    return [0.0 if f.einvoice
            else r["tokens"] / LEARNED_MARGIN if r["tokens"] is not None
            else queue.estimate_tokens(pages=f.pages, document_bytes=f.document_bytes) * rates.token_scale * share
            for f, r in zip(files, learned)]


def effective_concurrency(agent_cap: int | None, workers: int, observed: float | None = None) -> float:
    """Tasks of the agent that run at once: its limit, no more than the workers' slots, and no more
    than the overlap its recent attempts achieved (when that is known)."""
    limit = max(1, min(agent_cap or workers, workers))
    return max(1.0, min(limit, observed)) if observed else float(limit)


def finish_time(durations: list[float], concurrency: float, busy_seconds: float = 0.0) -> float:
    """When the last of these runs ends, if they start in this order, each as soon as a slot frees.

    The slots are `concurrency` rounded up; where the overlap achieved is below that (gaps between
    one run and the next), each run counts as longer by the ratio, so that many short runs take
    their summed time over `concurrency`, as before. `busy_seconds`, the work ahead of them (runs
    in flight and tasks queued before), is spread over the slots first. Where one long run comes
    last, the batch ends with it alone; where it comes first, the rest run beside it.
    """
    slots = max(1, math.ceil(concurrency - 1e-9))
    stretch = slots / concurrency
    free = [busy_seconds * stretch / slots] * slots
    for seconds in durations:
        heapq.heappush(free, heapq.heappop(free) + seconds * stretch)
    return max(free)


def forecast_batch(conn: psycopg.Connection, *, agent: str, priority: int, files: list[FileFacts],
                   workers: int, compute_rate_usd_per_hour: float, batch_id: int | None = None,
                   customer: str | None = None, cores: int | None = None) -> Forecast:
    """Tokens, LLM cost at the agent's prices, compute cost at the rate, and ETA behind the queue
    (the batch's own tasks, if already enqueued as `batch_id`, are not ahead of it).

    `cores`: the cores the workers' local runs share (the app's machine, when it co-hosts the worker;
    None: unknown). With more slots than cores, runs slow each other down: the ETA is then at least
    the CPU seconds of the work ahead and of the batch over the cores."""
    if not files:
        raise InvalidArgument("A forecast needs at least one file")
    if not is_priority(priority):
        raise InvalidArgument(f"The priority must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY}, not {priority!r}")
    spec = queue.get_agent(conn, agent)
    rates = learned_rates(conn, agent)

    def pages_of(f: FileFacts) -> int:
        if f.pages is not None:
            return max(f.pages, 1)
        if f.document_bytes is not None:
            return max(1, math.ceil(f.document_bytes / queue.BYTES_PER_PAGE))
        return queue.DEFAULT_ESTIMATE_PAGES

    def work_of(f: FileFacts, pages: int) -> tuple[float, float, float, float]:
        """A file as Rates.seconds and Rates.cpu_seconds count it: text pages and documents, and a
        scan's OCR work (its standard pages where measured, else its pages)."""
        return (0, 0, f.ocr_work if f.ocr_work is not None else pages, 1) if f.scanned else (pages, 1, 0, 0)

    pages = [pages_of(f) for f in files]
    cascade = (spec.settings or {}).get("extractor") == "cascade"
    tokens = round(sum(file_tokens(conn, agent, files, rates, cascade)))
    llm_cost = None  # an agent without prices: its tokens are unpriced, never $0
    if spec.price_input_per_mtok is not None and spec.price_output_per_mtok is not None:
        price_in, price_out = float(spec.price_input_per_mtok), float(spec.price_output_per_mtok)
        llm_cost = tokens * ((1 - rates.output_share) * price_in + rates.output_share * price_out) / 1e6
    each = [rates.seconds(*work_of(f, p)) for f, p in zip(files, pages)]
    work = sum(each)
    compute_cost = work * rates.compute_share * compute_rate_usd_per_hour / 3600

    ahead = fetch_row(conn, "task_work_ahead_bounded", {
        "agent": agent, "priority": priority, "bound": AHEAD_BOUND, "batch_id": batch_id,
        "base": rates.seconds_base, "per_page": rates.seconds_per_page,
        "ocr_base": rates.ocr_seconds_base, "ocr_per_page": rates.ocr_seconds_per_page})
    queued, exact = ahead["n"], ahead["n"] < AHEAD_BOUND
    scale_ahead = 1.0
    if not exact:
        plan = fetch_row(conn, "task_work_ahead_estimate", {"agent": agent, "priority": priority})
        queued_estimate = int(plan["QUERY PLAN"][0]["Plan"]["Plan Rows"])
        scale_ahead = max(queued_estimate, queued) / max(queued, 1)
        queued = max(queued_estimate, queued)
    ahead_work = (ahead["text_pages"] * scale_ahead, (ahead["n"] - ahead["ocr_n"]) * scale_ahead,
                  ahead["ocr_pages"] * scale_ahead, ahead["ocr_n"] * scale_ahead)
    ahead_seconds = rates.seconds(*ahead_work)
    ahead_tokens = ahead["tokens"] * scale_ahead * rates.token_scale
    in_flight = ahead["in_flight"]
    concurrency = effective_concurrency(spec.concurrency_limit, workers, rates.parallelism)
    # Tasks in flight are on average half done; the batch's documents start in their order (the
    # queue's, within one priority) as slots free.
    in_flight_seconds = ahead["in_flight_seconds"] / 2
    eta = finish_time(each, concurrency, ahead_seconds + in_flight_seconds)
    # The agent's own work ahead and the batch's, in CPU seconds (None: a kind without a CPU line).
    own_cpu = [rates.cpu_seconds(*work_of(f, p)) for f, p in zip(files, pages)]
    batch_cpu = None if None in own_cpu else sum(c or 0.0 for c in own_cpu)
    if cores and batch_cpu is not None:
        ahead_cpu = rates.cpu_seconds(*ahead_work)
        if ahead_cpu is not None:
            eta = max(eta, (ahead_cpu + batch_cpu) / cores)
    if spec.tpm_limit:  # the stricter of the configured and the adaptive limit
        eta = max(eta, (ahead_tokens + tokens) / spec.tpm_limit * 60)
    basis = (f"rates learned from {rates.learned_from} completed attempts" if rates.learned_from
             else "text time as measured on the worker's machine, with a prior for the model's answer "
                  "(no completed attempts yet)" if rates.text_prior == "measured"
             else "static estimates (no completed attempts yet)")
    scanned = sum(p for f, p in zip(files, pages) if f.scanned)
    spread = rates.batch_spread(len(files))
    if scanned:
        if rates.ocr_learned_from:
            basis += f"; OCR time learned from {rates.ocr_learned_from} scans"
        elif rates.ocr_prior == "measured":
            basis += "; OCR time as measured on the worker's machine (no scans run yet)"
        else:
            basis += "; OCR time estimated (no scans run yet)"
        # A page rate no scan has confirmed yet: the range is a prior's, whatever text taught.
        if rates.ocr_learned_from < LEARN_MIN:
            wide = CALIBRATED_SPREAD if rates.ocr_prior == "measured" else STATIC_SPREAD
            spread = (min(spread[0], wide[0]), max(spread[1], wide[1]))
    warning = None
    if spec.cannot_run:
        warning = (f"Agent {agent} cannot run: {spec.cannot_run}. Its documents wait until that is fixed, "
                   "so this ETA does not hold.")
    elif spec.throttled_until is not None:
        paused = (spec.throttled_until - datetime.now(UTC)).total_seconds()
        if paused > 0:
            eta += paused
            warning = f"The model endpoint paused agent {agent} for {paused:,.0f} s more (Retry-After)."
    budget_warning = None
    if customer and llm_cost:
        budget = next((b for b in customers.customer_budget_list(conn) if b.customer == customer), None)
        if budget is not None and budget.monthly_llm_budget_usd is not None:
            left = max(float(budget.monthly_llm_budget_usd - budget.month_llm_cost_usd), 0.0)
            if llm_cost > left:
                budget_warning = (f"This batch would cost about ${llm_cost:,.2f} in LLM calls, but {customer} has "
                                  f"${left:,.2f} left of its ${budget.monthly_llm_budget_usd:,.2f} monthly budget. "
                                  "Its documents wait once the budget is spent.")
    return Forecast(agent=agent, priority=priority, documents=len(files), pages=sum(pages), tokens=tokens,
                    llm_cost_usd=None if llm_cost is None else round(llm_cost, 6), compute_cost_usd=round(compute_cost, 6),
                    work_seconds=round(work, 3), eta_seconds=round(eta, 3), ahead_tasks=queued + in_flight,
                    ahead_exact=exact, concurrency=concurrency, max_tpm=spec.tpm_limit, basis=basis,
                    warning=warning, scanned_pages=scanned,
                    eta_low_seconds=round(eta * spread[0], 3), eta_high_seconds=round(eta * spread[1], 3),
                    budget_warning=budget_warning,
                    cpu_seconds=None if batch_cpu is None else round(batch_cpu, 3))


# -- batches ------------------------------------------------------------------------------------

def batch_create(conn: psycopg.Connection, forecast: Forecast, *, customer: str | None, held: bool,
                 submitted_by: str | None, now: datetime | None = None) -> int:
    """Records an upload with its forecast; its tasks name it when they are enqueued."""
    row = fetch_row(conn, "batch_insert", {
        "agent": forecast.agent, "customer": customer, "priority": forecast.priority,
        "submitted_by": submitted_by, "forecast": Jsonb(forecast.as_json()), "held": held, "now": now})
    return row["id"]


def batch_delete_if_empty(conn: psycopg.Connection, batch_id: int) -> bool:
    """Removes an upload that holds no task; True if it did."""
    return fetch_one(conn, "batch_delete_if_empty", {"batch_id": batch_id}) is not None


def batch_get(conn: psycopg.Connection, batch_id: int) -> dict[str, Any]:
    """An upload, its forecast, and what it actually took so far."""
    row = fetch_one(conn, "batch_get", {"batch_id": batch_id})
    if row is None:
        raise NotFound(f"unknown batch {batch_id}")
    return row


def batch_release(conn: psycopg.Connection, batch_id: int, *, actor: str, now: datetime | None = None) -> int:
    """Makes a held upload's tasks claimable; returns how many were released (0: it was not held)."""
    require_idle(conn)
    batch_get(conn, batch_id)
    with conn.transaction():
        row = fetch_row(conn, "batch_release", {"batch_id": batch_id, "actor": actor, "now": now})
        if row["event_ids"]:
            fetch_all(conn, "task_events_notify", {"event_ids": row["event_ids"]})
    return len(row["event_ids"])


def batch_held_list(conn: psycopg.Connection, *, limit: int = 200) -> list[dict[str, Any]]:
    """The batches held for review, newest first."""
    return fetch_all(conn, "batch_held_list", {"limit": limit})


def batch_task_list(conn: psycopg.Connection, batch_id: int) -> list[dict[str, Any]]:
    """A batch's files and their tasks, in upload order."""
    return fetch_all(conn, "batch_task_list", {"batch_id": batch_id})


def batch_discard(conn: psycopg.Connection, batch_id: int, *, actor: str, now: datetime | None = None) -> int:
    """Discards a held upload: its queued documents are cancelled; returns how many (the batch must
    be held: NotFound for an unknown one, InvalidTransition for one that is not held)."""
    require_idle(conn)
    batch_get(conn, batch_id)
    with conn.transaction():
        conn.execute("SELECT set_config('quire.actor', %s, true)", [actor])
        row = fetch_row(conn, "batch_discard", {"batch_id": batch_id, "actor": actor, "now": now})
    if not row["batches"]:
        raise InvalidTransition(f"batch {batch_id} is not held: only a held batch can be discarded")
    return row["tasks"]


@dataclass(frozen=True)
class Pace:
    """How fast an agent's queue moves: seconds a task takes on average, and how many run at once."""

    mean_task_seconds: float
    concurrency: float
    max_tpm: int | None
    mean_task_tokens: float
    rates: Rates

    def eta_seconds(self, ahead: int, pages: int | None, scanned: bool = False,
                    ocr_work: float | None = None) -> float:
        """Seconds until a task with `ahead` tasks before it is done (a scan's OCR work in standard
        pages, where measured)."""
        pages = max(pages or queue.DEFAULT_ESTIMATE_PAGES, 1)
        own = (self.rates.seconds(0, 0, pages if ocr_work is None else ocr_work, 1) if scanned
               else self.rates.seconds(pages))
        eta = ahead * self.mean_task_seconds / self.concurrency + own
        if self.max_tpm:
            eta = max(eta, (ahead + 1) * self.mean_task_tokens / self.max_tpm * 60)
        return eta


def agent_pace(conn: psycopg.Connection, agent: str, *, workers: int) -> Pace:
    """The pace queue positions turn into ETAs with."""
    spec = queue.get_agent(conn, agent)
    rates = learned_rates(conn, agent)
    pages = queue.DEFAULT_ESTIMATE_PAGES
    # The tasks ahead: as long as the agent's recent ones took on average (scans and text mixed).
    mean_seconds = (rates.mean_seconds if rates.mean_seconds is not None
                    else rates.seconds_base + rates.seconds_per_page * pages)
    tokens = queue.estimate_tokens(pages=pages) * rates.token_scale
    concurrency = effective_concurrency(spec.concurrency_limit, workers, rates.parallelism)
    return Pace(mean_seconds, concurrency, spec.tpm_limit, tokens, rates)


def batch_set_forecast(conn: psycopg.Connection, batch_id: int, forecast: Forecast) -> None:
    """Replaces an upload's forecast once all its files are known (uploads arrive a slice at a time)."""
    fetch_all(conn, "batch_set_forecast", {"batch_id": batch_id, "forecast": Jsonb(forecast.as_json())})
