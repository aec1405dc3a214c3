"""Forecasts that know the work: seconds per page learned apart for scans and for text, per agent
and extractor, with the spread shown; a budget warning; edit and retry recorded on the task."""

from datetime import timedelta

import pytest

from schema import calibration, customers, forecast, positions, queue
from schema.errors import InvalidArgument, InvalidTransition, UnknownAgent
from schema.rates import LEARNED_SPREAD_FLOOR
from tests.factories import make_agent, make_task


def _clock(conn):
    return conn.execute("SELECT now() AS n").fetchone()["n"]


def _run(conn, agent, *, pages, seconds, scanned, start, cost=None, ocr_work=None):
    """One task of `pages` that ran `seconds`, completed at `start` + seconds."""
    task = make_task(conn, agent, pages=pages, scanned=scanned, now=start, ocr_work=ocr_work)
    (claim,) = queue.claim(conn, agent=agent, worker_id="w", now=start)
    assert claim.task.id == task.id
    report = {"status": "completed", "result": {"ok": True}, "confidence": 0.9,
              "input_tokens": 1000, "output_tokens": 100}
    if cost is not None:
        report["llm_cost_usd"] = cost
    queue.apply_callback(conn, claim.attempt_id, report, now=start + timedelta(seconds=seconds))
    return task


def test_scans_learn_their_own_seconds_per_page_and_the_forecast_counts_them(conn):
    make_agent(conn, max_concurrent_tasks=1, settings={"extractor": "offline"})
    start = _clock(conn) - timedelta(hours=2)
    # Text: 1 s + 0.5 s a page; scans: 2 s + 10 s a page (OCR), one after the other.
    for i, pages in enumerate([1, 2, 4, 8]):
        _run(conn, "docs", pages=pages, seconds=1 + 0.5 * pages, scanned=False, start=start + timedelta(minutes=i))
    for i, pages in enumerate([1, 3, 5]):
        _run(conn, "docs", pages=pages, seconds=2 + 10 * pages, scanned=True,
             start=start + timedelta(minutes=10 + i))
    rates = forecast.learned_rates(conn, "docs")
    assert rates.seconds_per_page == pytest.approx(0.5, rel=1e-3)
    assert rates.ocr_seconds_per_page == pytest.approx(10, rel=1e-3) and rates.ocr_learned_from == 3
    text = forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=12)],
                                   workers=1, compute_rate_usd_per_hour=0)
    scan = forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=12, scanned=True)],
                                   workers=1, compute_rate_usd_per_hour=0)
    assert text.work_seconds == pytest.approx(1 + 0.5 * 12, rel=1e-3)
    assert scan.work_seconds == pytest.approx(2 + 10 * 12, rel=1e-3)
    assert scan.scanned_pages == 12 and "learned from 3 scans" in scan.basis
    # The lines fit exactly: the range is the floor a shared machine's load leaves around the figure.
    assert scan.eta_low_seconds == pytest.approx(scan.eta_seconds * LEARNED_SPREAD_FLOOR[0], rel=1e-3)
    assert scan.eta_high_seconds == pytest.approx(scan.eta_seconds * LEARNED_SPREAD_FLOOR[1], rel=1e-3)
    # A scan queued ahead counts its OCR time in the next batch's ETA.
    make_task(conn, "docs", pages=12, scanned=True)
    behind = forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=1)],
                                     workers=1, compute_rate_usd_per_hour=0)
    assert behind.eta_seconds == pytest.approx(2 + 10 * 12 + 1 + 0.5, rel=1e-3)


def test_a_scans_seconds_follow_its_ocr_work_not_its_pages(conn):
    """Two-page scans that took 2 s + 10 s a standard page of OCR work, whatever their pages: the
    line is learned on the work, and a dense scan is forecast longer than a sparse one of as many
    pages, in a batch, ahead of one, and in its own ETA."""
    make_agent(conn, max_concurrent_tasks=1, settings={"extractor": "offline"})
    start = _clock(conn) - timedelta(hours=2)
    for i, work in enumerate([0.5, 1.5, 3.0, 4.0]):
        _run(conn, "docs", pages=2, seconds=2 + 10 * work, scanned=True, ocr_work=work,
             start=start + timedelta(minutes=i))
    rates = forecast.learned_rates(conn, "docs")
    assert rates.ocr_seconds_base == pytest.approx(2, rel=1e-3)
    assert rates.ocr_seconds_per_page == pytest.approx(10, rel=1e-3) and rates.ocr_learned_from == 4

    def plan(*files):
        return forecast.forecast_batch(conn, agent="docs", priority=0, files=list(files), workers=1,
                                       compute_rate_usd_per_hour=0)

    sparse = plan(forecast.FileFacts(pages=2, scanned=True, ocr_work=0.6))
    dense = plan(forecast.FileFacts(pages=2, scanned=True, ocr_work=3.6))
    assert sparse.work_seconds == pytest.approx(2 + 6, rel=1e-3)
    assert dense.work_seconds == pytest.approx(2 + 36, rel=1e-3)
    assert sparse.scanned_pages == dense.scanned_pages == 2
    # Unmeasured (an API caller that gave pages only): its pages stand as its work.
    assert plan(forecast.FileFacts(pages=2, scanned=True)).work_seconds == pytest.approx(2 + 20, rel=1e-3)
    # Queued ahead, its work counts in the next batch's ETA; and in its own ETA.
    queued = make_task(conn, "docs", pages=2, scanned=True, ocr_work=3.6)
    behind = plan(forecast.FileFacts(pages=2, scanned=True, ocr_work=0.6))
    assert behind.eta_seconds == pytest.approx(2 + 36 + 2 + 6, rel=1e-3)
    spot = positions.task_positions(conn, [queued.id])[queued.id]
    assert spot.ocr_work == pytest.approx(3.6)
    pace = forecast.agent_pace(conn, "docs", workers=1)
    assert pace.eta_seconds(0, 2, scanned=True, ocr_work=spot.ocr_work) == pytest.approx(2 + 36, rel=1e-3)


def test_a_scans_ocr_work_must_be_a_number_of_pages(conn):
    make_agent(conn)
    for bad in (-1, float("nan"), float("inf"), "3", True):
        with pytest.raises(InvalidArgument, match="ocr_work"):
            make_task(conn, "docs", pages=2, scanned=True, ocr_work=bad)
    assert conn.execute("SELECT count(*) AS n FROM tasks").fetchone()["n"] == 0


def test_each_documents_eta_knows_whether_it_is_a_scan(conn):
    make_agent(conn, max_concurrent_tasks=1)
    start = _clock(conn) - timedelta(hours=2)
    for i, pages in enumerate([1, 2, 4]):
        _run(conn, "docs", pages=pages, seconds=1 + pages, scanned=False, start=start + timedelta(minutes=i))
        _run(conn, "docs", pages=pages, seconds=1 + 9 * pages, scanned=True, start=start + timedelta(minutes=5 + i))
    scan = make_task(conn, "docs", pages=6, scanned=True)
    text = make_task(conn, "docs", pages=6)
    where = positions.task_positions(conn, [scan.id, text.id])
    pace = forecast.agent_pace(conn, "docs", workers=1)
    assert where[scan.id].scanned and not where[text.id].scanned
    own_scan = pace.eta_seconds(0, 6, scanned=True)
    assert own_scan == pytest.approx(1 + 9 * 6, rel=1e-3)
    assert pace.eta_seconds(0, 6) == pytest.approx(1 + 6, rel=1e-3)


def test_rates_are_learned_per_extractor(conn):
    make_agent(conn, max_concurrent_tasks=1, settings={"extractor": "llm"})
    start = _clock(conn) - timedelta(hours=2)
    for i in range(3):
        _run(conn, "docs", pages=2, seconds=40, scanned=False, start=start + timedelta(minutes=i))
    assert forecast.learned_rates(conn, "docs").mean_seconds == pytest.approx(40)
    # The agent switches to the offline extractor: what the LLM runs took no longer stands.
    make_agent(conn, max_concurrent_tasks=1, settings={"extractor": "offline"})
    assert forecast.learned_rates(conn, "docs").mean_seconds is None


def test_the_forecast_warns_when_a_batch_would_pass_its_customers_remaining_budget(conn):
    make_agent(conn, price_input_per_mtok=3.0, price_output_per_mtok=15.0)
    customers.customer_budget_set(conn, "acme", 0.02, actor="op")
    files = [forecast.FileFacts(pages=12)] * 5
    plan = forecast.forecast_batch(conn, agent="docs", priority=0, files=files, workers=1,
                                   compute_rate_usd_per_hour=0, customer="acme")
    assert plan.llm_cost_usd > 0.02
    assert plan.budget_warning and "$0.02 left of its $0.02 monthly budget" in plan.budget_warning
    other = forecast.forecast_batch(conn, agent="docs", priority=0, files=files, workers=1,
                                    compute_rate_usd_per_hour=0, customer="unbudgeted")
    assert other.budget_warning is None
    small = forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=1)],
                                    workers=1, compute_rate_usd_per_hour=0, customer="acme")
    assert small.budget_warning is None


def test_edit_and_retry_runs_with_another_agent_extractor_model_and_priority_and_records_it(conn):
    make_agent(conn, "docs", settings={"extractor": "offline"}, model="small")
    make_agent(conn, "other", settings={"extractor": "offline"}, model="small")
    task = make_task(conn, "docs", priority=2)
    (claim,) = queue.claim(conn, agent="docs", worker_id="w")
    queue.apply_callback(conn, claim.attempt_id, {"status": "failed", "error": "bad read", "retryable": False})
    again = queue.retry(conn, task.id, actor="alice", agent="other", extractor="llm", model="large", priority=7)
    assert again.id == task.id and again.status.value == "enqueued"
    assert again.agent == "other" and again.priority == 7
    assert again.run_overrides == {"extractor": "llm", "model": "large"}
    (edit,) = again.edits
    assert edit["by"] == "alice" and edit["at"]
    assert edit["changes"] == {"agent": ["docs", "other"], "extractor": ["offline", "llm"],
                               "model": ["small", "large"], "priority": [2, 7]}
    (claim,) = queue.claim(conn, agent="other", worker_id="w")
    assert claim.task.run_overrides["extractor"] == "llm"
    attempt = conn.execute("SELECT extractor FROM task_attempts WHERE id = %s", [claim.attempt_id]).fetchone()
    assert attempt["extractor"] == "llm"
    queue.apply_callback(conn, claim.attempt_id, {"status": "completed", "result": {"ok": True}, "confidence": 0.9})
    # A completed task's edit and retry is a new child task that carries the edit.
    child = queue.retry(conn, task.id, actor="bob", extractor="cascade")
    assert child.id != task.id and child.parent_id == task.id and child.agent == "other"
    assert child.run_overrides == {"extractor": "cascade", "model": "large"}
    assert child.edits[0]["by"] == "bob" and child.edits[0]["changes"] == {"extractor": ["llm", "cascade"]}


def test_edit_and_retry_refuses_what_cannot_run(conn):
    make_agent(conn)
    task = make_task(conn)
    with pytest.raises(InvalidArgument):
        queue.retry(conn, task.id, actor="op", extractor="magic")
    with pytest.raises(UnknownAgent):
        queue.retry(conn, task.id, actor="op", agent="nope")
    with pytest.raises(InvalidTransition):  # still enqueued: nothing to retry
        queue.retry(conn, task.id, actor="op", extractor="llm")
    assert queue.get_task(conn, task.id).edits == []


def test_held_batches_are_listed_and_a_discarded_one_holds_nothing(conn):
    make_agent(conn)
    plan = forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=2)] * 2,
                                   workers=1, compute_rate_usd_per_hour=0)
    kept = forecast.batch_create(conn, plan, customer="acme", held=True, submitted_by="op")
    dropped = forecast.batch_create(conn, plan, customer="acme", held=True, submitted_by="op")
    for batch in (kept, dropped):
        for _ in range(2):
            make_task(conn, batch_id=batch, held=True, pages=2)
    listed = forecast.batch_held_list(conn)
    assert [b["id"] for b in listed] == [dropped, kept]
    assert listed[0]["held_tasks"] == 2 and listed[0]["pages"] == 4
    assert forecast.batch_discard(conn, dropped, actor="alice") == 2
    assert [b["id"] for b in forecast.batch_held_list(conn)] == [kept]
    row = forecast.batch_get(conn, dropped)
    assert row["discarded_by"] == "alice" and row["held_tasks"] == 0
    tasks = forecast.batch_task_list(conn, dropped)
    assert {t["status"] for t in tasks} == {"cancelled"}
    events = queue.get_task(conn, tasks[0]["id"]).events
    assert events[-1].status.value == "cancelled" and events[-1].actor == "alice"
    with pytest.raises(InvalidTransition):
        forecast.batch_discard(conn, dropped, actor="alice")
    # A held batch whose documents were all cancelled one by one holds nothing to submit.
    for task in forecast.batch_task_list(conn, kept):
        queue.cancel(conn, task["id"], actor="op")
    assert forecast.batch_get(conn, kept)["held_tasks"] == 0



def test_local_runs_learn_their_cpu_seconds_apart_from_their_wall_seconds(conn):
    make_agent(conn, max_concurrent_tasks=3, executor="local", settings={"extractor": "offline"})
    start = _clock(conn) - timedelta(hours=2)
    for i, pages in enumerate([1, 2, 3]):
        # Each scan kept a core busy all along but for its first half second (its launch), and ran
        # longer than that beside others.
        task = _run(conn, "docs", pages=pages, seconds=2 + 14 * pages, scanned=True, start=start + timedelta(minutes=i))
        conn.execute("UPDATE task_attempts SET cpu_seconds = %s WHERE task_id = %s", [0.5 + 10 * pages, task.id])
    rates = forecast.learned_rates(conn, "docs")
    assert rates.ocr_seconds_per_page == pytest.approx(14, rel=1e-3)
    assert rates.ocr_cpu == pytest.approx((0.5, 10.0), rel=1e-6)
    assert rates.cpu_seconds(0, 0, 6, 1) == pytest.approx(60.5, rel=1e-6)
    assert rates.cpu_seconds(2) is None  # no text ran, and no worker measured its text path


def test_with_more_slots_than_cores_a_batch_is_forecast_no_faster_than_its_cpu_work_over_the_cores(conn):
    """Three slots on two cores: scans that each keep a core busy cannot run three at once at the
    speed one runs alone. Their CPU seconds bound the ETA: here the worker's start-up measure."""
    make_agent(conn, max_concurrent_tasks=3, executor="local", settings={"extractor": "offline"})
    calibration.ocr_calibration_upsert(conn, host="worker-1", seconds_per_page=10.0, dpi=300, text_seconds_base=0.2,
                                       text_seconds_per_page=0.05, cpu_seconds_per_page=10.0)
    rates = forecast.learned_rates(conn, "docs")
    assert rates.ocr_cpu == pytest.approx((0.2, 10.0)) and rates.text_cpu == pytest.approx((0.2, 0.05))
    scans = [forecast.FileFacts(pages=6, scanned=True)] * 6
    unknown = forecast.forecast_batch(conn, agent="docs", priority=0, files=scans, workers=3,
                                      compute_rate_usd_per_hour=0)
    one_run = rates.seconds(0, 0, 6, 1)
    assert unknown.eta_seconds == pytest.approx(2 * one_run, rel=1e-3)  # six runs on three slots
    two = forecast.forecast_batch(conn, agent="docs", priority=0, files=scans, workers=3,
                                  compute_rate_usd_per_hour=0, cores=2)
    assert two.eta_seconds == pytest.approx(6 * 60.2 / 2, rel=1e-3)  # their CPU over two cores
    assert two.eta_seconds > unknown.eta_seconds * 1.3
    # As many cores as slots or more: the slots are the limit, as before.
    four = forecast.forecast_batch(conn, agent="docs", priority=0, files=scans, workers=3,
                                   compute_rate_usd_per_hour=0, cores=4)
    assert four.eta_seconds == pytest.approx(unknown.eta_seconds, rel=1e-9)


def test_a_remote_executors_runs_have_no_cpu_line_and_no_core_bound(conn):
    make_agent(conn, max_concurrent_tasks=3, executor="databricks", settings={"extractor": "offline"})
    calibration.ocr_calibration_upsert(conn, host="worker-1", seconds_per_page=10.0, dpi=300, text_seconds_base=0.2,
                                       text_seconds_per_page=0.05, cpu_seconds_per_page=10.0)
    rates = forecast.learned_rates(conn, "docs")
    assert rates.text_cpu is None and rates.ocr_cpu is None
    files = [forecast.FileFacts(pages=2)] * 6
    without = forecast.forecast_batch(conn, agent="docs", priority=0, files=files, workers=3,
                                      compute_rate_usd_per_hour=0)
    with_cores = forecast.forecast_batch(conn, agent="docs", priority=0, files=files, workers=3,
                                         compute_rate_usd_per_hour=0, cores=1)
    assert with_cores.eta_seconds == without.eta_seconds


def test_a_batchs_range_narrows_with_its_documents_where_the_spread_was_learned(conn):
    """Runs that strayed far from their line: one document's range is their whole 10th to 90th
    percentile; a batch of a hundred evens the independent part out, down to the floor the
    machine's load leaves, and never narrower."""
    make_agent(conn, max_concurrent_tasks=1)
    start = _clock(conn) - timedelta(hours=2)
    for i, seconds in enumerate([2, 2, 2, 2, 4, 4, 8, 8, 8, 16]):  # 2-page documents, 2 to 16 s
        _run(conn, "docs", pages=2, seconds=seconds, scanned=False, start=start + timedelta(minutes=i))
    rates = forecast.learned_rates(conn, "docs")
    assert rates.spread_runs == 10 and rates.spread[0] < 0.6 and rates.spread[1] > 2

    def plan(n):
        p = forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=2)] * n,
                                    workers=1, compute_rate_usd_per_hour=0)
        return p.eta_low_seconds / p.eta_seconds, p.eta_high_seconds / p.eta_seconds

    one, four, hundred = plan(1), plan(4), plan(100)
    assert one == pytest.approx(rates.spread, rel=1e-3)
    assert four[1] == pytest.approx(1 + (rates.spread[1] - 1) / 2, rel=1e-3)
    assert four[0] == pytest.approx(min(1 - (1 - rates.spread[0]) / 2, LEARNED_SPREAD_FLOOR[0]), rel=1e-3)
    assert hundred == pytest.approx(LEARNED_SPREAD_FLOOR, rel=1e-3)


def test_a_priors_range_stays_whole_however_many_documents(conn):
    make_agent(conn, max_concurrent_tasks=1)
    rates = forecast.learned_rates(conn, "docs")
    assert rates.spread_runs == 0
    p = forecast.forecast_batch(conn, agent="docs", priority=0, files=[forecast.FileFacts(pages=2)] * 100,
                                workers=1, compute_rate_usd_per_hour=0)
    assert (p.eta_low_seconds / p.eta_seconds, p.eta_high_seconds / p.eta_seconds) == pytest.approx(rates.spread,
                                                                                                   rel=1e-3)
