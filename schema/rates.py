"""An agent's rates, as forecasts and ETAs use them: tokens, and seconds per document and page
learned apart for text and for scans, with priors until there is enough to learn from."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import psycopg

from schema import calibration, queue
from schema.sql import fetch_all, fetch_row

# Completed attempts an agent's rates are learned from, newest first.
LEARN_WINDOW = 500
# Fewer completed attempts than this and the static rates stand.
LEARN_MIN = 3
# Until an agent has run anything: seconds per document and per page, and the output token share.
# (For a local agent, once a worker measured its machine, the priors below stand instead.)
STATIC_SECONDS_BASE = 6.0
STATIC_SECONDS_PER_PAGE = 1.5
# A local run beside the agent's own work: its launch from the fork server, its report and its
# settlement. Forked text runs took 0.6 to 0.7 s a document in all, their model answering in
# 0.06 s, on a quiet 2-core machine (docs/BENCHMARKS.md); on a busy one, slowed as much as the
# worker's measure of OCR was (wall over CPU seconds).
RUN_OVERHEAD_SECONDS = 0.5
# The model's answer to one document, until the agent's runs say: a fast hosted model's answer to
# an extraction prompt. A slower model shows in the first runs, and the range reaches STATIC_SPREAD's
# top until then.
MODEL_SECONDS_PRIOR = 1.0
# Model calls a document costs by extractor (cascade: the share the rules pass on to the model).
MODEL_CALLS = {"llm": 1.0, "cascade": 0.9}
# A scanned page goes through OCR (Tesseract at 300 dpi): about 10 s a page on a small machine.
STATIC_OCR_SECONDS_PER_PAGE = 8.0
# Until attempts teach the spread: a forecast reads from this share of its figure to this one.
STATIC_SPREAD = (0.5, 2.0)
# OCR's page rate measured by a worker at start-up (one page, nothing else running in it) is a
# prior, not a measure of runs: a range made on it reads at least from this share to this one.
CALIBRATED_SPREAD = (0.6, 1.6)
# However well the runs fit their lines, a forecast on a shared machine moves with the load between
# what it learned from and what it forecasts (docs/BENCHMARKS.md: 0.63 to 1.39 of actual over
# forecast): the range reads at least from this share of the figure to this one.
LEARNED_SPREAD_FLOOR = (0.65, 1.35)
# Fewer scans than this (LEARN_MIN): their seconds per page are their pages' share of the time
# beyond the document base, pulled towards the prior as if the prior were PRIOR_WEIGHT pages read.
SCAN_LINE_MIN = LEARN_MIN
PRIOR_WEIGHT = 2
STATIC_OUTPUT_SHARE = 0.15
# quire_learned_tokens reserves 10% over the learned line; a forecast wants the line itself.
LEARNED_MARGIN = 1.1


@dataclass(frozen=True)
class Rates:
    """An agent's rates: learned from its completed attempts where there are enough, else static."""

    token_scale: float          # actual tokens per statically estimated token
    output_share: float
    seconds_base: float         # wall seconds of one attempt = base + per_page * pages
    seconds_per_page: float
    compute_share: float        # compute seconds billed per wall second
    learned_from: int           # completed attempts behind the figures (0: static)
    parallelism: float | None = None  # work that ran at once while any ran, observed (None: unknown)
    # A document without a text layer goes through OCR: its own line, learned apart.
    ocr_seconds_base: float = STATIC_SECONDS_BASE
    ocr_seconds_per_page: float = STATIC_OCR_SECONDS_PER_PAGE
    ocr_learned_from: int = 0
    # How far actual run times strayed from the line: the 10th and 90th percentile of actual over
    # predicted (a forecast shows its figure times these as its range).
    spread: tuple[float, float] = STATIC_SPREAD
    ocr_prior: str = "static"   # where OCR's page rate came from before scans ran: "static" or "measured"
    text_prior: str = "static"  # where the text line came from before text ran: "static" or "measured"
    mean_seconds: float | None = None  # wall seconds of its recent attempts on average (None: too few)
    # CPU seconds of a local run = base + per_page * pages, for text and for scans (None: unknown,
    # as for a remote executor): what a batch needs of the machine's cores, whatever the slots.
    text_cpu: tuple[float, float] | None = None
    ocr_cpu: tuple[float, float] | None = None
    spread_runs: int = 0        # runs the spread was learned from (0: a prior's range)

    def batch_spread(self, documents: int) -> tuple[float, float]:
        """The range of a batch of `documents`: a learned spread is each run's straying from its line,
        and over many runs the independent part of it evens out, so the part beyond
        LEARNED_SPREAD_FLOOR (what the machine's load moves all runs by at once) narrows with the
        square root of the documents. A prior's range stays whole: all documents share its error."""
        if not self.spread_runs or documents <= 1:
            return self.spread
        shrink = 1 / math.sqrt(documents)
        low, high = self.spread
        return (min(1 - (1 - low) * shrink, LEARNED_SPREAD_FLOOR[0]),
                max(1 + (high - 1) * shrink, LEARNED_SPREAD_FLOOR[1]))

    def seconds(self, pages: float, documents: float = 1, ocr_pages: float = 0, ocr_documents: float = 0) -> float:
        """Wall seconds of documents with text (`pages` over `documents`) and of scans."""
        return (self.seconds_base * documents + self.seconds_per_page * pages
                + self.ocr_seconds_base * ocr_documents + self.ocr_seconds_per_page * ocr_pages)

    def cpu_seconds(self, pages: float, documents: float = 1, ocr_pages: float = 0,
                    ocr_documents: float = 0) -> float | None:
        """CPU seconds of documents with text and of scans, as seconds() counts wall seconds; None
        where a kind they hold has no CPU line."""
        total = 0.0
        for line, n, p in ((self.text_cpu, documents, pages), (self.ocr_cpu, ocr_documents, ocr_pages)):
            if n or p:
                if line is None:
                    return None
                total += line[0] * n + line[1] * p
        return total


def least_squares(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Seconds on pages by least squares over (pages, seconds) points: a base a document and a rate
    a page, the rate never negative (one page count only: the mean as the base, no rate). The base
    may come out negative; each caller says what stands instead. At least one point."""
    n = len(points)
    sp = sum(p for p, _ in points)
    ss = sum(s for _, s in points)
    spp = sum(p * p for p, _ in points)
    sps = sum(p * s for p, s in points)
    denominator = n * spp - sp ** 2
    slope = max((n * sps - sp * ss) / denominator if denominator > 1e-9 else 0.0, 0.0)
    return (ss - slope * sp) / n, slope


def _line(rows: list[dict[str, Any]], base: float, per_page: float, seconds: str = "wall_s") -> tuple[float, float, int]:
    """Least squares of wall seconds (or the rows' other `seconds`) on pages (with one page count
    only, the mean per document; a base below zero read as zero); the given line until there are
    LEARN_MIN rows."""
    n = len(rows)
    if n < LEARN_MIN:
        return base, per_page, 0
    fitted_base, slope = least_squares([(r["pages"], r[seconds]) for r in rows])
    return max(fitted_base, 0.0), slope, n


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def _overlap_while_queued(runs: list[dict[str, Any]]) -> float | None:
    """How many runs went at once while work was waiting: within each stretch of back-to-back runs,
    from its first start to its last (after the last start nothing waited, and the tail would read
    as lost overlap). None when no stretch had two starts apart in time."""
    spans = sorted((r["started_at"], r["finished_at"]) for r in runs)
    stretches: list[list[tuple]] = []
    busy_until = None
    for start, end in spans:
        if busy_until is None or start > busy_until:
            stretches.append([])
        stretches[-1].append((start, end))
        busy_until = end if busy_until is None or start > busy_until else max(busy_until, end)
    ran = window = 0.0
    for stretch in stretches:
        first, last = stretch[0][0], max(s for s, _ in stretch)
        length = (last - first).total_seconds()
        if len(stretch) < 2 or length <= 0:
            continue
        window += length
        ran += sum(max(0.0, (min(e, last) - max(s, first)).total_seconds()) for s, e in stretch)
    return ran / window if window > 0 else None


def learned_rates(conn: psycopg.Connection, agent: str) -> Rates:
    """The one place forecasts read an agent's rates from: tokens from its completed attempts, and
    seconds per document and page learned apart for text and for scans, per agent and extractor."""
    spec = queue.get_agent(conn, agent)
    extractor = (spec.settings or {}).get("extractor")
    runs = fetch_all(conn, "agent_learned_seconds_list", {"agent": agent, "extractor": extractor,
                                                          "window": LEARN_WINDOW})
    text_runs = [r for r in runs if not r["ocr"]]
    scan_runs = [r for r in runs if r["ocr"]]
    r = fetch_row(conn, "agent_learned_rates_one", {"agent": agent, "window": LEARN_WINDOW})
    n = r["n"]
    scale, share = 1.0, STATIC_OUTPUT_SHARE
    if r["n_usage"] >= LEARN_MIN and r["estimated_tokens"] > 0:
        scale = r["tokens"] / r["estimated_tokens"]
        share = r["output_tokens"] / r["tokens"] if r["tokens"] else STATIC_OUTPUT_SHARE
    measured = calibration.ocr_calibration_latest(conn)
    text_prior = _text_prior(measured, spec.executor, extractor)
    base, per_page, text_n = _text_line(text_runs, text_prior)
    ocr_base, ocr_per_page, ocr_n, prior = _scan_line(measured, scan_runs, base, per_page,
                                                      anchored=bool(text_n) or text_prior.source == "measured")
    if not text_n and ocr_n >= SCAN_LINE_MIN:  # only scans ran so far: their base stands for text too
        base = ocr_base
    # A few slow runs (a cold start, a busy moment) pull a least-squares line up: each kind's line is
    # scaled by the median of its runs' actual over predicted (text and scans apart: one kind's
    # cold start says nothing of the other's), and the range is the 10th to the 90th percentile of
    # every run around its kind's median, and at least LEARNED_SPREAD_FLOOR.
    spread = STATIC_SPREAD
    if text_prior.source == "measured":  # a measured line; the model's share only a prior
        spread = (CALIBRATED_SPREAD[0], STATIC_SPREAD[1] if text_prior.model_calls else CALIBRATED_SPREAD[1])
    relative: list[float] = []
    for scans, line in ((False, (base, per_page)), (True, (ocr_base, ocr_per_page))):
        ratios = [run["wall_s"] / predicted for run in runs if bool(run["ocr"]) == scans
                  and (predicted := line[0] + line[1] * run["pages"]) > 0]
        if len(ratios) < LEARN_MIN:
            continue
        median = _quantile(ratios, 0.5)
        if median <= 0:
            continue
        relative += [x / median for x in ratios]
        if scans:
            ocr_base, ocr_per_page = ocr_base * median, ocr_per_page * median
        else:
            base, per_page = base * median, per_page * median
    spread_runs = 0
    if len(relative) >= LEARN_MIN:
        spread = (min(_quantile(relative, 0.1), LEARNED_SPREAD_FLOOR[0]),
                  max(_quantile(relative, 0.9), LEARNED_SPREAD_FLOOR[1]))
        spread_runs = len(relative)
    compute_share = r["compute_s"] / r["compute_wall_s"] if r["compute_wall_s"] > 0 else 1.0
    # Observed overlap: it folds in what slots lose between runs (dispatch, reports, a busy machine).
    parallelism = _overlap_while_queued(runs) if len(runs) >= LEARN_MIN else None
    if parallelism is None:
        parallelism = r["sum_s"] / r["busy_s"] if n >= LEARN_MIN and r["busy_s"] else None
    text_cpu, ocr_cpu = _cpu_lines(measured, spec.executor, text_runs, scan_runs)
    return Rates(scale, share, base, per_page, compute_share, n if n >= LEARN_MIN else 0, parallelism,
                 ocr_seconds_base=ocr_base, ocr_seconds_per_page=ocr_per_page, ocr_learned_from=ocr_n,
                 spread=spread, ocr_prior=prior, text_prior=text_prior.source,
                 mean_seconds=sum(x["wall_s"] for x in runs) / len(runs) if len(runs) >= LEARN_MIN else None,
                 text_cpu=text_cpu, ocr_cpu=ocr_cpu, spread_runs=spread_runs)


def _cpu_lines(measured: calibration.OcrCalibration | None, executor: str, text_runs: list[dict[str, Any]],
               scan_runs: list[dict[str, Any]]) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """A local agent's CPU seconds a run, text and scans apart: a least-squares line of its runs'
    CPU on pages from LEARN_MIN runs of a kind on; before that, the worker's start-up measure (the
    agent's text path, and OCR's CPU a page, above the text base). A run's CPU does not grow when
    other runs share the cores, where its wall seconds do: it is what a batch asks of the cores."""
    if executor != "local":
        return None, None

    def fitted(rows: list[dict[str, Any]]) -> tuple[float, float] | None:
        base, slope, n = _line([r for r in rows if r["cpu_s"] is not None], 0.0, 0.0, seconds="cpu_s")
        return (base, slope) if n else None

    text = fitted(text_runs)
    if text is None and measured is not None and measured.text_seconds_base is not None \
            and measured.text_seconds_per_page is not None:
        text = (measured.text_seconds_base, measured.text_seconds_per_page)
    ocr = fitted(scan_runs)
    if ocr is None and text is not None and measured is not None and measured.cpu_seconds_per_page is not None:
        ocr = (text[0], measured.cpu_seconds_per_page)
    return text, ocr




@dataclass(frozen=True)
class TextPrior:
    """A text document's seconds before an agent has run enough to learn them."""

    base: float
    per_page: float
    source: str           # "static", or "measured" on a worker's machine
    model_calls: float = 0.0


def _text_prior(measured: calibration.OcrCalibration | None, executor: str, extractor: str | None) -> TextPrior:
    """For a local agent, the agent's path as a worker timed it on its machine, plus a run's launch
    and report (slowed as the machine slowed OCR then) and the model's answer; else static."""
    if executor != "local" or measured is None or measured.text_seconds_base is None \
            or measured.text_seconds_per_page is None:
        return TextPrior(STATIC_SECONDS_BASE, STATIC_SECONDS_PER_PAGE, "static")
    calls = MODEL_CALLS.get(extractor or "offline", 0.0)
    base = measured.text_seconds_base + RUN_OVERHEAD_SECONDS * measured.slowdown + MODEL_SECONDS_PRIOR * calls
    return TextPrior(base, measured.text_seconds_per_page, "measured", calls)


def _text_line(runs: list[dict[str, Any]], prior: TextPrior) -> tuple[float, float, int]:
    """Text's document base and page rate, and how many runs taught them: from LEARN_MIN runs on a
    least-squares line; before that, the prior's page rate and a base moved from the prior towards
    what the runs took beyond it (as if the prior were PRIOR_WEIGHT runs): a batch's first
    documents teach the ETAs of the ones after them."""
    if len(runs) >= LEARN_MIN or not runs:
        return _line(runs, prior.base, prior.per_page)
    beyond = sum(max(r["wall_s"] - prior.per_page * r["pages"], 0.0) for r in runs)
    return (beyond + prior.base * PRIOR_WEIGHT) / (len(runs) + PRIOR_WEIGHT), prior.per_page, len(runs)


def ocr_prior(conn: psycopg.Connection) -> tuple[float, str]:
    """OCR's seconds per page before an agent has read scans: as the newest worker start-up measured
    it on its machine, at the resolution that worker reads pages at; else the static figure."""
    return _ocr_prior(calibration.ocr_calibration_latest(conn))


def _ocr_prior(measured: calibration.OcrCalibration | None) -> tuple[float, str]:
    if measured is None or measured.seconds_per_page is None:
        return STATIC_OCR_SECONDS_PER_PAGE, "static"
    return measured.seconds_per_page, "measured"


def _scan_line(measured: calibration.OcrCalibration | None, runs: list[dict[str, Any]], text_base: float,
               text_per_page: float, *, anchored: bool) -> tuple[float, float, int, str]:
    """Scans' document base and page rate, how many scans taught them, and the prior's source.

    From SCAN_LINE_MIN scans on, a line of their own. Before that, the text line's document base,
    and a page rate that starts at the prior and moves towards what the scans that ran took a
    page beyond that base: a batch's first scans teach its later documents' ETAs.
    """
    prior, source = _ocr_prior(measured)
    prior = max(prior, text_per_page)
    if len(runs) >= SCAN_LINE_MIN:
        base, per_page, n = _line(runs, text_base, prior)
        return base, per_page, n, source
    if not runs:
        return text_base, prior, 0, source
    pages = sum(r["pages"] for r in runs)
    beyond = sum(max(r["wall_s"] - text_base, 0.0) for r in runs)
    observed = max(beyond / pages, text_per_page) if pages else prior
    weight = PRIOR_WEIGHT if anchored else 0  # a static text base: the scans' own time stands alone
    per_page = (observed * pages + prior * weight) / (pages + weight)
    return text_base, per_page, len(runs), source
