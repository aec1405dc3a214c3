"""A result is never lost on Databricks: the real agent runs as a serverless job's subprocess (the
bundle's command line, the runtime's own token, no OAuth secret in its environment) against a fake
workspace as strict as the platform (OAuth, Jobs, Files with Volume grants, secrets with scope
ACLs, MLflow, serving endpoints), reporting through a fake Apps proxy that takes only OAuth tokens
of principals with CAN USE, or through the signed report it leaves in the Volume."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from agents.durable import report_path
from app.api.callbacks import router
from schema import db, queue
from schema.settings import Settings
from tests.factories import make_agent, make_task
from tests.integration.worker.fake_apps_proxy import FakeAppsProxy
from tests.integration.worker.fake_databricks import PAT, WORKER, FakeDatabricks, serverless_job_env
from tests.worker_helpers import serve_in_thread, wait_until
from worker.claimer import Claimer, ClaimerConfig
from worker.executors import DatabricksConfig, LocalConfig, build_executors
from worker.heartbeats import Heartbeats
from worker.runs import RunTable, RunTableConfig

SHARED_KEY = "shared-key-for-the-agent-job"
SAMPLE = Path(__file__).parents[3] / "app" / "samples" / "invoice_harborline_INV-2024-0117.pdf"
DOCUMENT = "/Volumes/main/quire/documents/ab/invoice_harborline.pdf"
AGENT_SP = ("sp-agent-job", "agent-sp-secret", "agent-job@sp.example.com")
VOLUME = "main.quire.documents"
EXPERIMENT = "/Shared/quire-test"
RUNTIME_TOKEN = "runtime-token-of-the-job-run"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    for name in ("DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_CONFIG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    with FakeDatabricks() as server:
        ws = server.workspace
        ws.host = server.host
        monkeypatch.setenv("DATABRICKS_HOST", server.host)
        monkeypatch.setenv("DATABRICKS_TOKEN", PAT)
        monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/.databrickscfg")
        # What the bundle and docs/DATABRICKS.md set up: the job's principal has an OAuth client whose
        # id and secret sit in the scope beside the callback key; it may read the scope, use the app,
        # read and write the Volume, and query the endpoint; the app's principal reads the Volume.
        ws.add_client(*AGENT_SP)
        ws.secrets[("quire", "callback-key")] = SHARED_KEY.encode()
        ws.secrets[("quire", "agent-client-id")] = AGENT_SP[0].encode()
        ws.secrets[("quire", "agent-client-secret")] = AGENT_SP[1].encode()
        ws.scope_readers["quire"] = {AGENT_SP[0]}
        ws.app_users.add(AGENT_SP[0])
        ws.grant_volume(AGENT_SP[0], VOLUME, "READ_VOLUME", "WRITE_VOLUME")
        ws.grant_volume(WORKER, VOLUME, "READ_VOLUME", "WRITE_VOLUME")
        ws.endpoint_users["dbx-model"] = {AGENT_SP[0]}
        ws.experiments[EXPERIMENT] = "4000"
        ws.runtime_tokens[RUNTIME_TOKEN] = AGENT_SP[0]  # the run-as principal's native token
        ws.bundle_values = {"workspace.host": server.host, "resources.experiments.traces.name": EXPERIMENT,
                            "resources.secret_scopes.quire.name": "quire"}
        ws.files[DOCUMENT] = SAMPLE.read_bytes()
        ws.agent_cwd = str(tmp_path)
        ws.agent_env = serverless_job_env(server.host, RUNTIME_TOKEN, QUIRE_HEARTBEAT_SECONDS="0.3",
                                          QUIRE_CALLBACK_RETRIES="1")
        yield server


@pytest.fixture
def proxy(db_dsn, fake):
    app = FastAPI()
    app.include_router(router)
    app.state.settings = Settings(callback_key=SHARED_KEY)
    app.state.pool = db.make_pool(db_dsn, max_size=3)
    try:
        with serve_in_thread(app) as base, FakeAppsProxy(fake.workspace, base) as front:
            yield front
    finally:
        app.state.pool.close()


@pytest.fixture
def worker(db_dsn, tmp_path, proxy):
    pool = db.make_pool(db_dsn, max_size=3)
    # The fake workspace and proxy run on this machine: the proxy's URL is a loopback one.
    executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs"), databricks=DatabricksConfig(
        callback_key=SHARED_KEY, allow_loopback_callbacks=True))
    table = RunTable(pool, executors, RunTableConfig(worker_id="w-agent", callback_base_url=proxy.url))
    yield table, Claimer(table, executors, ClaimerConfig(concurrency=1)), Heartbeats(table)
    pool.close()


def run_to_the_end(conn, worker, fake, *, max_attempts: int = 3):
    """Claims one task of a priced Databricks agent, and watches its job run until it is settled."""
    make_agent(conn, "remote", executor="databricks", lease_seconds=30, model="dbx-model",
               price_input_per_mtok=2.0, price_output_per_mtok=8.0, settings={"job_id": 42})
    task = make_task(conn, "remote", document_uri=DOCUMENT, max_attempts=max_attempts)
    table, claimer, heartbeats = worker
    assert claimer.run_once() == 1
    [run] = table.snapshot()

    def settled() -> bool:
        heartbeats.run_once(beat_all=True)
        return len(table) == 0

    wait_until(settled, timeout=90, interval=0.2, message="the job run to end and be settled")
    job_run = fake.jobs.runs[run.handle.run_id]
    return queue.get_task(conn, task.id), job_run


def expected_cost(attempt) -> float:
    return round(attempt.input_tokens * 2.0 / 1e6 + attempt.output_tokens * 8.0 / 1e6, 6)


def test_callback_reaches_the_app_through_the_apps_proxy_with_the_jobs_bearer(conn, worker, fake, proxy):
    done, job_run = run_to_the_end(conn, worker, fake)
    assert done.status.value == "completed", job_run.stderr
    [attempt] = done.attempts
    assert attempt.callbacks_received == 1 and attempt.input_tokens > 0
    # The agent's configured prices travelled with the run as job parameters.
    assert job_run.job_parameters["price_input_per_mtok"] == "2.000000"
    assert float(attempt.llm_cost_usd) == pytest.approx(expected_cost(attempt), rel=1e-4)
    assert not attempt.llm_unpriced and attempt.compute_state == "pending"
    [callback] = proxy.seen("/api/callbacks/")
    assert (callback.status, callback.principal) == (200, AGENT_SP[0])
    beats = proxy.seen("/heartbeat")
    assert beats and all(b.status == 200 and b.principal == AGENT_SP[0] for b in beats)
    # The signed report was also left beside the document, before the callback went out.
    assert report_path(DOCUMENT, attempt.id) in fake.workspace.files


def test_callback_refused_by_the_proxy_the_report_comes_from_the_volume(conn, worker, fake, proxy):
    proxy.refuse_with = 403
    done, job_run = run_to_the_end(conn, worker, fake)
    assert "HTTP 403" in job_run.stderr and "CAN_USE" in job_run.stderr
    assert done.status.value == "completed" and done.result["document_type"] == "invoice"
    [attempt] = done.attempts
    assert all(p.status == 403 for p in proxy.seen("/api/"))
    assert attempt.input_tokens > 0 and float(attempt.llm_cost_usd) == pytest.approx(expected_cost(attempt), rel=1e-4)
    assert attempt.callbacks_received == 1  # applied once, by the worker, from the Volume


def test_a_request_without_bearer_is_redirected_and_never_counted_as_delivered(conn, worker, fake, proxy):
    # Without the Databricks bearer the proxy answers 302 to its login page: a failure, not a delivery.
    response = httpx.post(proxy.url + "/api/callbacks/1", content=b"{}", follow_redirects=False)
    assert response.status_code == 302
    from agents.callback import CallbackClient, CallbackRejected

    client = CallbackClient("k", retries=0)
    with pytest.raises(CallbackRejected, match="302 redirect"):
        client.post(proxy.url + "/api/callbacks/1", {"status": "failed", "error": "x"})
    client.close()


def test_callback_and_volume_report_both_delivered_count_once(conn, worker, fake, proxy):
    done, job_run = run_to_the_end(conn, worker, fake)
    [attempt] = done.attempts
    table, _, _ = worker
    executor = table.executors["databricks"]
    from worker.executors.databricks import DatabricksHandle

    report = executor.volume_report(DatabricksHandle(attempt_id=attempt.id, run_id=job_run.run_id,
                                                     document=DOCUMENT))
    assert report is not None and report["input_tokens"] == attempt.input_tokens
    outcome = queue.apply_callback(conn, attempt.id, report)
    assert outcome.kind.value == "duplicate" and not outcome.usage_recorded
    again = queue.get_task(conn, done.id).attempts[0]
    assert (again.input_tokens, again.output_tokens, again.llm_cost_usd) == (
        attempt.input_tokens, attempt.output_tokens, attempt.llm_cost_usd)
    # A report file signed with another key is never applied.
    forged = json.loads(fake.workspace.files[report_path(DOCUMENT, attempt.id)])
    forged["body"] = forged["body"].replace('"completed"', '"failed"')
    fake.workspace.files[report_path(DOCUMENT, attempt.id)] = json.dumps(forged).encode()
    assert executor.volume_report(DatabricksHandle(attempt_id=attempt.id, run_id=job_run.run_id,
                                                   document=DOCUMENT)) is None


def test_run_terminated_without_report_fails_the_task_with_the_runs_message(conn, worker, fake):
    fake.workspace.agent_env = None  # the run never starts the agent: the cluster fails first
    make_agent(conn, "remote", executor="databricks", lease_seconds=30, settings={"job_id": 42})
    task = make_task(conn, "remote", document_uri=DOCUMENT, max_attempts=1)
    table, claimer, heartbeats = worker
    assert claimer.run_once() == 1
    [run] = table.snapshot()
    fake.jobs.set_state(run.handle.run_id, "TERMINATED", "FAILED",
                        message="Cluster terminated: spot instances were reclaimed")
    heartbeats.run_once(beat_all=True)
    done = queue.get_task(conn, task.id)
    assert done.status.value == "failed"
    assert "Cluster terminated: spot instances were reclaimed" in done.error
    assert done.attempts[0].compute_state == "pending"


def test_oauth_tokens_that_expire_mid_run_are_refreshed_by_the_sdk(conn, worker, fake, proxy):
    ws = fake.workspace
    # The SDK refreshes 40 s before the announced expiry: announced 41 s, a token lives 1.5 s here,
    # so a client that did not refresh would be refused within the run.
    ws.token_lifetime_seconds, ws.token_valid_seconds = 41, 1.5
    ws.file_delay_seconds = 4.0  # a slow Volume keeps the run going over several token lives
    done, job_run = run_to_the_end(conn, worker, fake)
    assert done.status.value == "completed", job_run.stderr
    tokens = ws.tokens_of(AGENT_SP[0])
    assert len(tokens) >= 3
    passages = proxy.seen("/api/")
    assert len(passages) >= 5 and all(p.status == 200 for p in passages)
    # The first token really expired: the proxy refuses it now.
    stale = httpx.post(proxy.url + "/api/attempts/1/heartbeat", content=b"{}",
                       headers={"Authorization": f"Bearer {tokens[0]}"})
    assert stale.status_code == 401
