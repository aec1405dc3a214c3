"""Backlog, approvals per day, correction rate per field, accuracy per agent, extractor and model, and
time to review equal a recount from the trail (reviews, corrections, results) under every filter."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from schema import review
from schema.review import ReviewStatus
from schema.stats_types import TaskFilter
from tests.factories import make_agent
from tests.review_fixtures import invoice_lines, make_reviewable

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _percentile(values: list[float], share: float) -> float | None:
    """Postgres' percentile_cont: linear between the two nearest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _null(value):
    return None if value is None else value


def recount(conn, flt: TaskFilter) -> dict:
    """The figures counted in Python straight from the trail's rows."""
    tasks = {t["id"]: t for t in conn.execute("SELECT id, agent, customer, created_at, result FROM tasks").fetchall()}
    reviews = conn.execute("SELECT * FROM reviews").fetchall()
    corrections = conn.execute("SELECT * FROM review_corrections ORDER BY id").fetchall()

    def selected(task) -> bool:
        return ((flt.date_from is None or task["created_at"] >= flt.date_from)
                and (flt.date_to is None or task["created_at"] < flt.date_to)
                and (not flt.agents or task["agent"] in flt.agents)
                and (not flt.customers or task["customer"] in flt.customers))

    chosen = [r for r in reviews if selected(tasks[r["task_id"]])]
    status = Counter(r["status"] for r in chosen)
    durations = [(r["decided_at"] - r["claimed_at"]).total_seconds() for r in chosen
                 if r["status"] in ("approved", "rejected")]
    per_day = Counter(r["decided_at"].astimezone(UTC).date() for r in chosen if r["status"] == "approved")
    rates: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    accuracy: dict[tuple, list] = defaultdict(lambda: [set(), 0, 0])
    for r in chosen:
        if r["status"] != "approved":
            continue
        task = tasks[r["task_id"]]
        extracted = {name: item.get("value") for name, item in task["result"]["fields"].items()}
        final = dict(extracted)
        touched = set()
        for c in corrections:
            if c["review_id"] == r["id"]:
                final[c["field"]] = c["new_value"]
                touched.add(c["field"])
        key = (task["agent"], task["result"].get("extractor") or "unknown", task["result"].get("model") or "none")
        for name in set(extracted) | touched:
            corrected = _null(extracted.get(name)) != _null(final.get(name))
            rates[name][0] += 1
            rates[name][1] += corrected
            accuracy[key][0].add(r["id"])
            accuracy[key][1] += 1
            accuracy[key][2] += not corrected
    return {"open": status["open"], "approved": status["approved"], "rejected": status["rejected"],
            "p50": _percentile(durations, 0.5), "p90": _percentile(durations, 0.9),
            "per_day": sorted(per_day.items()),
            "rates": {name: tuple(v) for name, v in rates.items()},
            "accuracy": {k: (len(v[0]), v[1], v[2]) for k, v in accuracy.items()}}


@pytest.fixture
def mixed(conn):
    """Forty documents across agents, customers, extractors, models and days; reviewers correcting
    (sometimes back to the extracted value, sometimes adding a field), approving and rejecting."""
    rng = random.Random(28)
    make_agent(conn, "alpha", settings={"review_sample": 0.0})
    make_agent(conn, "beta", settings={"review_sample": 0.0})
    now = conn.execute("SELECT now() AS n").fetchone()["n"]
    for n in range(1, 41):
        make_reviewable(conn, n, agent=rng.choice(["alpha", "beta"]), customer=rng.choice(["acme", "zenith", None]),
                        extractor=rng.choice(["offline", "llm"]), model=rng.choice([None, "m-small"]),
                        wrong={"total": 1.0} if rng.random() < 0.4 else None,
                        now=T0 + timedelta(days=n % 6, hours=n))
    # Three documents stay open: a reviewer holds them and never comes back.
    for entry in review.queue(conn, limit=3):
        review.claim_one(conn, entry.id, "zed", lease_seconds=10**8, now=now)
    reviewers = ["ann", "bob", "cyd"]
    clock = now
    while True:
        who = rng.choice(reviewers)
        clock += timedelta(seconds=rng.randint(5, 400))
        claim = review.claim_next(conn, who, now=clock)
        if claim is None:
            break
        item = review.read(conn, claim.review_id)
        n = int(item.document_name.split("-")[1].split(".")[0])
        truth = {name: value for name, _, value in invoice_lines(n)}
        changes = {}
        if item.values["total"] != truth["total"]:
            changes["total"] = truth["total"]
        if rng.random() < 0.3:
            changes["currency"] = "CHF"
        if rng.random() < 0.2:
            changes["due_date"] = "2024-05-01"  # a field the extraction did not have
        clock += timedelta(seconds=rng.randint(10, 900))
        if changes:
            review.save(conn, claim.review_id, claim.claim_token, who, changes, now=clock)
        if "currency" in changes and rng.random() < 0.5:
            review.save(conn, claim.review_id, claim.claim_token, who, {"currency": "EUR"}, now=clock)  # put back
        choice = rng.random()
        clock += timedelta(seconds=rng.randint(1, 60))
        status = ReviewStatus.REJECTED if choice < 0.15 else ReviewStatus.APPROVED
        review.decide(conn, claim.review_id, claim.claim_token, who, status, now=clock, note="x")
        clock += timedelta(days=rng.choice([0, 0, 1]))
    return conn


FILTERS = [TaskFilter(), TaskFilter(customers=("acme",)), TaskFilter(agents=("beta",)),
           TaskFilter(customers=("zenith",), agents=("alpha",)),
           TaskFilter(date_from=T0 + timedelta(days=2), date_to=T0 + timedelta(days=4)),
           TaskFilter(date_from=T0 + timedelta(days=1), customers=("acme", "zenith"), agents=("alpha",)),
           TaskFilter(customers=("nobody",))]


def test_figures_equal_a_recount_from_the_trail_under_every_filter(mixed):
    conn = mixed
    for flt in FILTERS:
        expected = recount(conn, flt)
        got = review.figures(conn, flt, now=datetime(2000, 1, 1, tzinfo=UTC))
        where = repr(flt.params())
        assert (got.open, got.approved, got.rejected) == (expected["open"], expected["approved"],
                                                          expected["rejected"]), where
        for value, wanted in ((got.review_p50_s, expected["p50"]), (got.review_p90_s, expected["p90"])):
            assert (value is None and wanted is None) or value == pytest.approx(wanted), where
        assert got.approved_per_day == expected["per_day"], where
        assert {r["field"]: (r["reviewed"], r["corrected"]) for r in got.field_rates} == expected["rates"], where
        assert {(r["agent"], r["extractor"], r["model"]): (r["documents"], r["fields"], r["right"])
                for r in got.accuracy} == expected["accuracy"], where
    # The mix exercises what the recount checks.
    whole = recount(conn, TaskFilter())
    assert whole["approved"] >= 10 and whole["rejected"] >= 2 and whole["open"] >= 1
    assert whole["rates"]["total"][1] >= 3 and "due_date" in whole["rates"]
    assert len(whole["accuracy"]) >= 4 and len(whole["per_day"]) >= 2
    # Some currencies were changed and put back: reviewed, not corrected.
    reverted = conn.execute("SELECT count(DISTINCT review_id) AS n FROM review_corrections "
                            "WHERE field = 'currency' AND new_value = '\"EUR\"'").fetchone()["n"]
    assert reverted >= 1
    assert recount(conn, TaskFilter(customers=("nobody",)))["approved"] == 0
