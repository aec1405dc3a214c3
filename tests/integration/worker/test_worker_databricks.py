"""The databricks executor against a local fake of the Jobs API, driven by the real SDK client."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from agents.callback import derive_attempt_secret, sign
from app.api.callbacks import router
from schema import db, queue
from schema.settings import Settings
from schema.stats_types import StreamEvent
from tests.factories import make_agent, make_task
from tests.integration.worker.fake_databricks import FakeDatabricks
from tests.waiting import wait_until
from tests.worker_helpers import serve_in_thread
from worker.claim_config import ClaimerConfig
from worker.claimer import Claimer
from worker.executors import DatabricksConfig, LocalConfig, build_executors
from worker.heartbeats import Heartbeats
from worker.runs import RunTable, RunTableConfig

SHARED_KEY = "shared-key-for-jobs"
REPORT = {"status": "completed", "confidence": 0.8, "input_tokens": 900, "output_tokens": 150,
          "llm_cost_usd": 0.002, "result": {"document_type": "invoice", "fields": {}}}


@pytest.fixture
def fake(monkeypatch):
    for name in ("DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_CONFIG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    with FakeDatabricks() as server:
        monkeypatch.setenv("DATABRICKS_HOST", server.host)
        monkeypatch.setenv("DATABRICKS_TOKEN", "x")
        monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/.databrickscfg")
        yield server


@pytest.fixture
def callbacks(db_dsn):
    app = FastAPI()
    app.include_router(router)
    app.state.settings = Settings(callback_key=SHARED_KEY)
    app.state.pool = db.make_pool(db_dsn, max_size=3)
    try:
        with serve_in_thread(app) as base:
            yield base
    finally:
        app.state.pool.close()


@pytest.fixture
def worker(db_dsn, tmp_path, callbacks):
    pool = db.make_pool(db_dsn, max_size=3)
    # The fake workspace runs on this machine, so its jobs may be given a loopback URL.
    executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs"), databricks=DatabricksConfig(
        callback_key=SHARED_KEY, allow_loopback_callbacks=True))
    table = RunTable(pool, executors, RunTableConfig(worker_id="w-dbx", callback_base_url=callbacks))
    yield table, Claimer(table, executors, ClaimerConfig(concurrency=1)), Heartbeats(table)
    pool.close()


def start_one(conn, worker, fake):
    make_agent(conn, "remote", executor="databricks", lease_seconds=3, settings={"job_id": 42})
    task = make_task(conn, "remote", document_uri="/Volumes/main/quire/files/invoice.pdf")
    table, claimer, _heartbeats = worker
    assert claimer.run_once() == 1
    [run] = table.snapshot()
    return task, run, fake.jobs.runs[run.handle.run_id]


def secrets_never_sent(fake, conn, attempt_id: int) -> None:
    stored = queue.attempt_secret(conn, attempt_id)[0]
    derived = derive_attempt_secret(SHARED_KEY, attempt_id)
    for request in fake.jobs.requests:
        seen = json.dumps([request.path, request.query, request.headers, request.body])
        for secret in (stored, derived, SHARED_KEY):
            assert secret not in seen


def test_worker_databricks_run_is_triggered_watched_and_reports_by_callback(conn, worker, fake):
    task, run, job_run = start_one(conn, worker, fake)
    table, _claimer, heartbeats = worker
    attempt = queue.get_attempt(conn, run.attempt_id)
    assert (attempt.executor, attempt.job_run_id) == ("databricks", str(job_run.run_id))
    assert job_run.job_id == 42
    assert job_run.job_parameters == {
        "document": "/Volumes/main/quire/files/invoice.pdf", "attempt_id": str(run.attempt_id),
        "callback_url": f"{table.config.callback_base_url}/api/callbacks/{run.attempt_id}",
        "heartbeat_url": f"{table.config.callback_base_url}/api/attempts/{run.attempt_id}/heartbeat",
        "extractor": "offline", "callback_auth": "databricks", "model": "",
        "price_input_per_mtok": "", "price_output_per_mtok": ""}
    assert fake.jobs.tokens == {f"quire-attempt-{run.attempt_id}": job_run.run_id}
    # Starting the same attempt again joins the run already triggered.
    from worker.executors.base import Launch

    again = run.executor.start(Launch(attempt_id=run.attempt_id, task=run.claim.task, agent=run.agent,
                                      secret="unused", callback_url="http://x/cb"), lambda: None)
    assert again.run_id == job_run.run_id and len(fake.jobs.runs) == 1

    fake.jobs.set_state(job_run.run_id, "RUNNING")
    before = queue.get_task(conn, task.id).lease_expires_at
    heartbeats.run_once(beat_all=True)
    assert queue.get_task(conn, task.id).lease_expires_at > before
    assert "GET /api/2.2/jobs/runs/get" in fake.jobs.paths()

    # The job derives its key from the shared secret and reports to the callback URL it was given.
    body = json.dumps(REPORT).encode()
    secret = derive_attempt_secret(SHARED_KEY, int(job_run.job_parameters["attempt_id"]))
    response = httpx.post(job_run.job_parameters["callback_url"], content=body,
                          headers={"X-Quire-Signature": sign(body, secret)})
    assert response.status_code == 200 and response.json()["applied"] is True
    fake.jobs.set_state(job_run.run_id, "TERMINATED", "SUCCESS", duration_ms=4500)
    heartbeats.run_once(beat_all=True)
    assert len(table) == 0
    done = queue.get_task(conn, task.id)
    assert done.status.value == "completed"
    [attempt] = done.attempts
    assert attempt.status.value == "completed" and attempt.input_tokens == 900
    assert attempt.compute_seconds == pytest.approx(4.5)
    secrets_never_sent(fake, conn, run.attempt_id)


def test_worker_databricks_run_that_ends_without_report_fails_retryably(conn, worker, fake):
    task, run, job_run = start_one(conn, worker, fake)
    _, _, heartbeats = worker
    fake.jobs.set_state(job_run.run_id, "INTERNAL_ERROR", "FAILED", message="cluster lost")
    heartbeats.run_once(beat_all=True)
    done = queue.get_task(conn, task.id)
    assert done.status.value == "enqueued"
    assert "cluster lost" in done.attempts[0].error and done.attempts[0].status.value == "failed"
    secrets_never_sent(fake, conn, run.attempt_id)


def test_worker_databricks_run_is_cancelled_with_its_task(conn, worker, fake):
    task, run, job_run = start_one(conn, worker, fake)
    table, _, heartbeats = worker
    fake.jobs.set_state(job_run.run_id, "RUNNING")
    queue.cancel(conn, task.id, actor="operator@example.com")

    def cancelled() -> bool:
        heartbeats.run_once(beat_all=True)
        return len(table) == 0

    wait_until(cancelled, timeout=10, message="the job run to be cancelled and settled")
    assert "POST /api/2.2/jobs/runs/cancel" in fake.jobs.paths()
    assert fake.jobs.runs[job_run.run_id].result_state == "CANCELED"
    assert queue.get_task(conn, task.id).attempts[0].status.value == "cancelled"
    secrets_never_sent(fake, conn, run.attempt_id)


def test_worker_databricks_run_is_cancelled_when_the_cancel_event_arrives(conn, worker, fake):
    task, _run, job_run = start_one(conn, worker, fake)
    table, _, heartbeats = worker
    fake.jobs.set_state(job_run.run_id, "RUNNING")
    queue.cancel(conn, task.id, actor="operator@example.com")
    assert table.note_cancelled([StreamEvent.from_notify({"e": 1, "id": task.id, "a": "remote", "s": "cancelled",
                                                          "p": "processing"})])
    # One look, no heartbeat due: the event alone sends the Jobs API its cancel.
    heartbeats.run_once()
    assert "POST /api/2.2/jobs/runs/cancel" in fake.jobs.paths()
    assert fake.jobs.runs[job_run.run_id].result_state == "CANCELED"


def claimed_ago(conn, seconds: float):
    """The claim of the one task queued, as if it was made `seconds` ago."""
    [claim] = queue.claim(conn, agent="remote", worker_id="w-dbx", executor="databricks")
    expires = claim.lease_expires_at - timedelta(seconds=seconds)
    conn.execute("UPDATE tasks SET lease_expires_at = %s WHERE id = %s", (expires, claim.task.id))
    return dataclasses.replace(claim, lease_expires_at=expires)


def test_a_claim_taken_back_before_it_could_start_starts_no_job_run(conn, worker, fake):
    # A claim whose start came after its lease expired (the starts before it were slow): the
    # sweeper took its task back, and starting it would trigger a job run only to cancel it.
    agent = make_agent(conn, "remote", executor="databricks", lease_seconds=3, settings={"job_id": 42})
    task = make_task(conn, "remote", document_uri="/Volumes/main/quire/files/invoice.pdf")
    table, _claimer, _heartbeats = worker
    claim = claimed_ago(conn, 60)
    assert queue.sweep(conn) == 1
    assert table.launch(claim, agent, table.executors["databricks"]) is None
    assert fake.jobs.runs == {} and not any("/jobs/run" in p for p in fake.jobs.paths())
    assert len(table) == 0
    assert queue.get_task(conn, task.id).status.value == "enqueued"


def test_a_claim_that_waited_to_start_renews_its_lease_first(conn, worker, fake):
    agent = make_agent(conn, "remote", executor="databricks", lease_seconds=3, settings={"job_id": 42})
    task = make_task(conn, "remote", document_uri="/Volumes/main/quire/files/invoice.pdf")
    table, _claimer, _heartbeats = worker
    claim = claimed_ago(conn, 2)  # a second of its three-second lease is left
    run = table.launch(claim, agent, table.executors["databricks"])
    assert run is not None and list(fake.jobs.runs) == [run.handle.run_id]
    assert queue.get_task(conn, task.id).lease_expires_at > claim.lease_expires_at + timedelta(seconds=1)
    assert queue.sweep(conn, now=claim.lease_expires_at + timedelta(seconds=0.5)) == 0
