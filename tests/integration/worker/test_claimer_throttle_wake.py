"""A throttled agent's claimer wakes when its token window frees or its Retry-After ends, not at the next poll."""

from __future__ import annotations

import sys
import time
from datetime import timedelta

import pytest

from schema import queue
from tests.factories import make_agent, make_task
from worker.claim_config import ClaimerConfig
from worker.claimer import Claimer
from worker.executors import LocalConfig, build_executors
from worker.runs import RunTable, RunTableConfig

POLL = 3600.0  # no poll would come in time: only the claimer's own wake-up can claim


def db_now(conn):
    return conn.execute("SELECT now() AS now").fetchone()["now"]


def done(tokens: int) -> dict:
    return {"status": "completed", "result": {"document_type": "invoice"}, "confidence": 0.9,
            "input_tokens": tokens - 10, "output_tokens": 10}


def test_admission_reopens_when_the_window_frees_or_the_retry_after_ends(conn):
    make_agent(conn, max_tpm=1000)
    t0 = db_now(conn)
    make_task(conn, estimated_tokens=800, now=t0)
    make_task(conn, estimated_tokens=800, now=t0)
    [first] = queue.claim(conn, agent="docs", worker_id="w", now=t0)
    # While only a running attempt holds the window, only its end can make room.
    assert queue.admission_reopens_in(conn, "docs", now=t0) is None
    queue.apply_callback(conn, first.attempt_id, done(800), now=t0 + timedelta(seconds=5))
    assert queue.claim(conn, agent="docs", worker_id="w", now=t0 + timedelta(seconds=10)) == []
    # Its tokens leave the window a minute after it ended.
    assert queue.admission_reopens_in(conn, "docs", now=t0 + timedelta(seconds=10)) == pytest.approx(55)
    # A Retry-After pause that ends later is what admission waits for then.
    queue.throttle_back_off(conn, "docs", first.attempt_id, count=1, retry_after=80,
                            now=t0 + timedelta(seconds=10))
    assert queue.admission_reopens_in(conn, "docs", now=t0 + timedelta(seconds=10)) == pytest.approx(80)


@pytest.mark.timeout(300)
def test_claimer_claims_when_the_window_frees_without_waiting_for_a_poll(pool, conn, tmp_path):
    make_agent(conn, executor="noop", max_tpm=1000)
    now = db_now(conn)
    make_task(conn, estimated_tokens=800, now=now - timedelta(seconds=60))
    [first] = queue.claim(conn, agent="docs", worker_id="w-old", now=now - timedelta(seconds=60))
    # Ended 57 s ago: its tokens leave the window in about three seconds.
    queue.apply_callback(conn, first.attempt_id, done(800), now=now - timedelta(seconds=57))
    second = make_task(conn, estimated_tokens=800)
    executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs", python=sys.executable))
    table = RunTable(pool, executors, RunTableConfig(worker_id="w-wake"))
    claimer = Claimer(table, executors, ClaimerConfig(concurrency=4, poll_seconds=POLL))
    waits: list[float] = []
    deadline = time.monotonic() + 240
    while queue.get_task(conn, second.id).status.value == "enqueued" and time.monotonic() < deadline:
        wait = claimer.round()
        if queue.get_task(conn, second.id).status.value == "enqueued":
            waits.append(wait)  # the wait chosen while the task still waited for the window
        time.sleep(min(wait, 5.0))  # as the daemon pauses between rounds (bounded for the deadline)
    assert queue.get_task(conn, second.id).status.value != "enqueued", "claimed once the window freed"
    assert waits and all(w < POLL for w in waits), "the claimer woke itself, no poll was needed"
