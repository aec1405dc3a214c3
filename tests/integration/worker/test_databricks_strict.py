"""The job's way back through a proxy as strict as the platform: only OAuth tokens of principals with
CAN USE pass; the job's environment is a serverless job's (runtime token, no OAuth secret, the
bundle's command line), and it still has its host, LLM endpoint and MLflow experiment; Volumes,
secrets and serving endpoints answer 403 without their grants."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI, Request

from agents.durable import report_path
from schema import queue
from tests.factories import make_agent, make_task
from tests.integration.worker.fake_apps_proxy import FakeAppsProxy
from tests.integration.worker.fake_databricks import PAT
from tests.integration.worker.test_worker_databricks_agent import (  # noqa: F401 (fixtures)
    AGENT_SP,
    DOCUMENT,
    EXPERIMENT,
    RUNTIME_TOKEN,
    VOLUME,
    fake,
    proxy,
    run_to_the_end,
    worker,
)
from tests.worker_helpers import serve_in_thread, wait_until


def oauth_token(fake, client_id: str, secret: str) -> str:
    response = httpx.post(f"{fake.host}/oidc/v1/token", auth=(client_id, secret),
                          data={"grant_type": "client_credentials", "scope": "all-apis"})
    assert response.status_code == 200
    return response.json()["access_token"]


def test_the_proxy_takes_only_oauth_tokens_of_principals_with_can_use(fake, proxy):
    ws = fake.workspace
    ws.add_client("sp-other", "other-secret", "other@sp.example.com")
    url = proxy.url + "/api/attempts/1/heartbeat"

    def status(token: str | None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(url, content=b"{}", headers=headers, follow_redirects=False).status_code

    assert status(None) == 302                     # off to the login page
    assert status(PAT) == 401                      # a personal access token is not an OAuth token
    assert status(RUNTIME_TOKEN) == 401            # nor is a job's runtime token
    assert status("made-up") == 401
    assert status(oauth_token(fake, "sp-other", "other-secret")) == 403  # OAuth, but no CAN USE
    # With CAN USE the request reaches the app (which checks the signature: 401 here, from the app).
    reached = status(oauth_token(fake, *AGENT_SP[:2]))
    assert reached not in (302, 403) and proxy.seen("/heartbeat")[-1].principal == AGENT_SP[0]


def test_the_app_never_sees_the_callers_authorization(fake, proxy):
    echo = FastAPI()

    @echo.post("/echo")
    async def headers(request: Request) -> dict:
        return dict(request.headers)

    token = oauth_token(fake, *AGENT_SP[:2])
    with serve_in_thread(echo) as base, FakeAppsProxy(fake.workspace, base) as front:
        seen = httpx.post(front.url + "/echo", headers={"Authorization": f"Bearer {token}",
                                                         "X-Forwarded-Email": "forged@example.com"}).json()
    assert "authorization" not in seen, seen
    assert seen["x-forwarded-email"] == AGENT_SP[2] and seen["x-request-id"] and seen["x-forwarded-host"]


def test_without_can_use_the_callbacks_are_refused_and_the_volume_report_settles_the_task(conn, worker, fake,
                                                                                          proxy):
    fake.workspace.app_users.clear()
    done, job_run = run_to_the_end(conn, worker, fake)
    assert "HTTP 403" in job_run.stderr and "CAN_USE" in job_run.stderr
    assert all(p.status == 403 for p in proxy.seen("/api/"))
    assert done.status.value == "completed" and done.attempts[0].callbacks_received == 1


def test_the_job_passes_no_oauth_secret_and_its_environment_is_a_serverless_jobs(conn, worker, fake, proxy):
    done, job_run = run_to_the_end(conn, worker, fake)
    assert done.status.value == "completed", job_run.stderr
    env = fake.workspace.agent_env
    assert env["DATABRICKS_RUNTIME_VERSION"] and not any(
        k in env for k in ("DATABRICKS_HOST", "DATABRICKS_TOKEN", "DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET"))
    [run_now] = [r for r in fake.jobs.requests if r.path == "/api/2.2/jobs/run-now"]
    assert AGENT_SP[1] not in run_now.body and "client_secret" not in run_now.body
    # The job read its OAuth client from the scope with its runtime token, then minted OAuth tokens.
    reads = [r for r in fake.jobs.requests if r.path == "/api/2.0/secrets/get"]
    assert {r.query["key"][0] for r in reads} == {"callback-key", "agent-client-id", "agent-client-secret"}
    assert all(r.headers["Authorization"] == f"Bearer {RUNTIME_TOKEN}" for r in reads)
    assert fake.workspace.tokens_of(AGENT_SP[0])


def test_a_job_that_may_not_read_the_scope_reports_nothing_and_says_why(conn, worker, fake, proxy):
    fake.workspace.scope_readers.clear()
    done, job_run = run_to_the_end(conn, worker, fake, max_attempts=1)
    assert "READ permission on scope quire" in job_run.stderr
    assert done.status.value == "failed" and not proxy.seen("/api/")


def test_volume_grants_are_enforced(conn, worker, fake, proxy):
    ws = fake.workspace
    ws.uc_grants = {g for g in ws.uc_grants if not (g[0] == AGENT_SP[0] and g[1] == "WRITE_VOLUME")}
    done, job_run = run_to_the_end(conn, worker, fake)
    # Read, not written: the report could not be kept beside the document; the callback delivered it.
    assert "could not write the report to the Volume" in job_run.stderr and "WRITE_VOLUME" in job_run.stderr
    assert done.status.value == "completed"
    [attempt] = done.attempts
    assert report_path(DOCUMENT, attempt.id) not in ws.files
    # Without READ VOLUME the document itself cannot be read.
    ws.uc_grants = {g for g in ws.uc_grants if g[0] != AGENT_SP[0] or g[1] != "READ_VOLUME"}
    stranger = httpx.get(f"{fake.host}/api/2.0/fs/files{DOCUMENT}", headers={"Authorization": f"Bearer {RUNTIME_TOKEN}"})
    assert stranger.status_code == 403 and "READ_VOLUME" in stranger.text


def run_llm_agent(conn, worker, fake, **agent):
    make_agent(conn, "remote", executor="databricks", lease_seconds=30, model="dbx-model",
               price_input_per_mtok=2.0, price_output_per_mtok=8.0, settings={"job_id": 42, "extractor": "llm"},
               **agent)
    task = make_task(conn, "remote", document_uri=DOCUMENT, max_attempts=1)
    table, claimer, heartbeats = worker
    assert claimer.run_once() == 1

    def settled() -> bool:
        heartbeats.run_once(beat_all=True)
        return len(table) == 0

    wait_until(settled, timeout=90, interval=0.2, message="the job run to end and be settled")
    [job_run] = fake.jobs.runs.values()
    return queue.get_task(conn, task.id), job_run


def test_the_llm_agent_calls_the_workspace_endpoint_and_its_trace_is_recorded(conn, worker, fake, proxy):
    done, job_run = run_llm_agent(conn, worker, fake)
    assert done.status.value == "completed", job_run.stderr
    [attempt] = done.attempts
    # The endpoint was found from --workspace-host and called with the job's runtime credentials.
    assert fake.workspace.completions and fake.workspace.completions[0] == (AGENT_SP[0], "dbx-model")
    assert attempt.input_tokens >= 1200 and attempt.output_tokens >= 40 and attempt.llm_cost_usd is not None
    # The trace went to the bundle's experiment (an absolute path), and the attempt names it.
    assert attempt.trace_id and attempt.trace_id in fake.workspace.traces
    trace = fake.workspace.traces[attempt.trace_id]
    assert trace["trace_location"]["mlflow_experiment"]["experiment_id"] == fake.workspace.experiments[EXPERIMENT]


def test_without_can_query_the_llm_agent_fails_with_the_endpoints_refusal(conn, worker, fake, proxy):
    fake.workspace.endpoint_users.clear()
    done, _job_run = run_llm_agent(conn, worker, fake)
    assert done.status.value == "failed" and "CAN_QUERY" in done.error


@pytest.mark.parametrize("name, refused", [("quire", True), ("/Shared/quire-test", False)])
def test_mlflow_refuses_a_relative_experiment_name(fake, monkeypatch, name, refused):
    import mlflow
    from mlflow.exceptions import MlflowException

    monkeypatch.setenv("DATABRICKS_HOST", fake.host)
    mlflow.set_tracking_uri("databricks")
    try:
        if refused:
            with pytest.raises(MlflowException, match="absolute"):
                mlflow.set_experiment(name)
        else:
            assert mlflow.set_experiment(name).experiment_id == fake.workspace.experiments[name]
    finally:
        mlflow.set_tracking_uri(None)


def test_the_tracer_says_why_a_relative_experiment_will_not_do(monkeypatch, caplog):
    from agents.tracing import Tracer

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "databricks")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    assert not Tracer.from_env().enabled
    assert "absolute workspace path" in caplog.text


def test_a_job_without_its_oauth_client_still_delivers_through_the_volume(conn, worker, fake, proxy):
    ws = fake.workspace
    del ws.secrets[("quire", "agent-client-secret")]
    done, job_run = run_to_the_end(conn, worker, fake)
    assert "no OAuth token for callbacks" in job_run.stderr and "the report goes to the Volume only" in job_run.stderr
    # Nothing reached the proxy with the runtime token: the job sent no request it would refuse.
    assert not proxy.seen("/api/")
    assert done.status.value == "completed" and done.attempts[0].callbacks_received == 1
