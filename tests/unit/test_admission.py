"""Admission decisions as a pure function: limits, budget fit, starvation."""

from datetime import UTC, datetime, timedelta

from schema.admission import Candidate, Load, admit, fits_budget

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def cands(*estimates, waiting=None, priority=0):
    return [Candidate(id=i + 1, priority=priority, estimated_tokens=e,
                      waiting_since=(waiting or {}).get(i + 1)) for i, e in enumerate(estimates)]


def run(candidates, *, limit=10, in_flight=0, reserved=0, cap=None, tpm=None, starvation=120):
    return admit(candidates, limit=limit, load=Load(in_flight, reserved), max_concurrent_tasks=cap,
                 max_tpm=tpm, starvation_seconds=starvation, now=NOW)


def test_fits_budget_rules():
    assert fits_budget(400, 600, 1000)
    assert not fits_budget(401, 600, 1000)
    assert fits_budget(5000, 0, 1000)          # larger than the budget: only alone
    assert not fits_budget(5000, 1, 1000)


def test_concurrency_cap_counts_in_flight():
    assert run(cands(1, 1, 1, 1), cap=3, in_flight=1).admitted == [1, 2]
    assert run(cands(1, 1), cap=3, in_flight=3).admitted == []


def test_limit_bounds_admission():
    assert run(cands(1, 1, 1), limit=2).admitted == [1, 2]


def test_budget_skips_big_task_and_admits_smaller_ones_behind_it():
    decision = run(cands(300, 900, 200, 600), tpm=1000)
    assert decision.admitted == [1, 3]
    assert decision.now_waiting == [2, 4]


def test_stricter_limit_wins():
    assert run(cands(100, 100, 100), cap=2, tpm=10_000).admitted == [1, 2]
    assert run(cands(600, 600, 600), cap=5, tpm=1000).admitted == [1]


def test_starving_task_reserves_the_budget():
    waited = {1: NOW - timedelta(seconds=121)}
    decision = run(cands(900, 100, 100, waiting=waited), reserved=500, tpm=1000)
    assert decision.admitted == []
    assert decision.blocked_by == 1


def test_task_within_starvation_bound_does_not_block():
    waited = {1: NOW - timedelta(seconds=119)}
    decision = run(cands(900, 100, 100, waiting=waited), reserved=500, tpm=1000)
    assert decision.admitted == [2, 3]
    assert decision.blocked_by is None
    assert decision.now_waiting == []  # already waiting: its clock is not restarted
