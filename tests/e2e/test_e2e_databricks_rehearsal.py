"""A deployment rehearsal: the app as a Databricks App (a `quire serve` process behind a fake Apps
proxy), its agents as job runs of a fake workspace (Jobs, Files on a Volume, secrets, OAuth, a SQL
warehouse that executes the billing query), and one redeploy in the middle of a batch: SIGTERM,
SIGKILL 15 s later if the app is still alive, then a new app. Every result arrives once, nothing is
lost or run twice, and every job run's compute ends final from the billing tables."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from agents.durable import report_path
from schema import db, queue
from tests.e2e.app_harness import AppServer, clone_database
from tests.integration.worker.fake_apps_proxy import FakeAppsProxy
from tests.integration.worker.fake_databricks import FakeDatabricks, FakeRun, serverless_job_env
from tests.waiting import wait_until

pytestmark = pytest.mark.slow

WORKSPACE_ID = "424242"
SHARED_KEY = "rehearsal-callback-key"
APP_SP = ("sp-quire-app", "app-sp-secret", "quire-app@sp.example.com")
JOB_SP = ("sp-quire-job", "job-sp-secret", "quire-job@sp.example.com")
OPERATOR = ("user-operator", "operator-secret", "operator@example.com")
VOLUME = "/Volumes/main/quire/documents"
VOLUME_NAME = "main.quire.documents"
EXPERIMENT = "/Shared/quire-rehearsal"
RUNTIME_TOKEN = "runtime-token-of-the-job-runs"
SAMPLES = sorted((Path(__file__).parents[2] / "app" / "samples").glob("*.pdf"))[:4]
KILL_AFTER_SECONDS = 15  # Databricks Apps: SIGKILL 15 s after SIGTERM
# What the fake bills each job run: one DBU an hour's record, corrected for every other run.
DBUS, RESTATED = 1.0, 0.75
PRICE, PROMOTION = 0.40, 0.30


def public_address() -> str:
    """This machine's address on its network: jobs are never given a loopback callback URL."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
        address = probe.getsockname()[0]
    assert not address.startswith("127."), "the rehearsal needs a non-loopback address for the app's URL"
    return address


def bill(warehouse, run: FakeRun) -> None:
    """What the billing tables get for a run that ended: its DBUs in this workspace (corrected by a
    retraction and a restatement for every other run), and a record of another workspace's run
    with the same id, which is not ours."""
    start = datetime.now(UTC).replace(tzinfo=None, microsecond=0) - timedelta(minutes=5)
    run_id = str(run.run_id)
    warehouse.add_usage(run_id, DBUS, workspace_id=WORKSPACE_ID, start=start)
    if run.run_id % 2:
        warehouse.add_usage(run_id, -DBUS, workspace_id=WORKSPACE_ID, start=start, record_type="RETRACTION")
        warehouse.add_usage(run_id, RESTATED, workspace_id=WORKSPACE_ID, start=start, record_type="RESTATEMENT")
    warehouse.add_usage(run_id, 40.0, workspace_id="999", start=start)


@pytest.fixture
def workspace(tmp_path):
    with FakeDatabricks() as server:
        ws = server.workspace
        ws.host = server.host
        for client in (APP_SP, JOB_SP, OPERATOR):
            ws.add_client(*client)
        # What the bundle and docs/DATABRICKS.md grant: the job's principal reads the scope (the
        # callback key and its own OAuth client), uses the app, reads and writes the Volume; the
        # app's principal writes the documents there and reads the reports; the operator uses the app.
        ws.secrets[("quire", "callback-key")] = SHARED_KEY.encode()
        ws.secrets[("quire", "agent-client-id")] = JOB_SP[0].encode()
        ws.secrets[("quire", "agent-client-secret")] = JOB_SP[1].encode()
        ws.scope_readers["quire"] = {JOB_SP[0]}
        ws.app_users |= {JOB_SP[0], OPERATOR[0]}
        ws.grant_volume(JOB_SP[0], VOLUME_NAME, "READ_VOLUME", "WRITE_VOLUME")
        ws.grant_volume(APP_SP[0], VOLUME_NAME, "READ_VOLUME", "WRITE_VOLUME")
        ws.experiments[EXPERIMENT] = "4000"
        ws.runtime_tokens[RUNTIME_TOKEN] = JOB_SP[0]  # the job's run-as principal's native token
        ws.bundle_values = {"workspace.host": server.host, "resources.experiments.traces.name": EXPERIMENT,
                            "resources.secret_scopes.quire.name": "quire"}
        ws.agent_cwd = str(tmp_path)
        ws.agent_env = serverless_job_env(server.host, RUNTIME_TOKEN, QUIRE_HEARTBEAT_SECONDS="0.5",
                                          QUIRE_CALLBACK_RETRIES="1")
        ws.file_delay_seconds = 1.5  # each run reads its document from a slow Volume: runs overlap the redeploy
        now = datetime.now(UTC).replace(tzinfo=None)
        ws.warehouse.billing_readers = {APP_SP[0]}  # SELECT on system.billing: the app's principal only
        ws.warehouse.add_price("JOBS_SERVERLESS_COMPUTE", PRICE, start=now - timedelta(days=30),
                               promotional=PROMOTION)
        ws.run_ended.append(lambda run: bill(ws.warehouse, run))
        yield server


class Deployment:
    """The app as Databricks Apps runs it: one URL (the proxy) in front of whichever app process is up."""

    def __init__(self, workspace: FakeDatabricks, dsn: str, root: Path):
        self.workspace, self.dsn, self.root = workspace, dsn, root
        self.port = AppServer(dsn=dsn, data_dir=root).port
        self.proxy = FakeAppsProxy(workspace.workspace, f"http://127.0.0.1:{self.port}", host=public_address())
        workspace.workspace.apps["quire"] = self.proxy.url
        self.apps: list[AppServer] = []

    def start_app(self) -> AppServer:
        """Deploys: a new app process on the app's port, configured as the bundle configures it."""
        data_dir = self.root / f"app-{len(self.apps) + 1}"
        data_dir.mkdir(parents=True)
        (data_dir / "quire.toml").write_text(
            '[agents.documents]\nexecutor = "databricks"\nlease_seconds = 4\nsettings = { job_id = 42 }\n')
        ws = self.workspace
        app = AppServer(dsn=self.dsn, data_dir=data_dir, port=self.port, env={
            "QUIRE_WORKER": "on", "QUIRE_WORKER_CONCURRENCY": "3", "QUIRE_FILES_ROOT": VOLUME,
            "QUIRE_CALLBACK_KEY": SHARED_KEY, "QUIRE_OPERATORS": OPERATOR[2], "QUIRE_WAREHOUSE_ID": "wh-1",
            "QUIRE_BILLING_SECONDS": "1", "QUIRE_BILLING_FINAL_SECONDS": "3", "QUIRE_SWEEP_SECONDS": "0.5",
            "MLFLOW_TRACKING_URI": "databricks", "MLFLOW_EXPERIMENT_ID": "4000", "QUIRE_POLL_SECONDS": "1",
            "DATABRICKS_HOST": ws.host, "DATABRICKS_CLIENT_ID": APP_SP[0], "DATABRICKS_CLIENT_SECRET": APP_SP[1],
            "DATABRICKS_APP_NAME": "quire", "DATABRICKS_APP_PORT": str(self.port),
            "DATABRICKS_WORKSPACE_ID": WORKSPACE_ID, "DATABRICKS_CONFIG_FILE": "/nonexistent/.databrickscfg"})
        self.apps.append(app.start(timeout=90))
        return app

    def redeploy_stop(self, app: AppServer) -> bool:
        """Stops an app as Databricks Apps does; True if it stopped by itself before the SIGKILL."""
        app.process.send_signal(signal.SIGTERM)
        try:
            app.process.wait(timeout=KILL_AFTER_SECONDS)
            return True
        except subprocess.TimeoutExpired:
            app.process.kill()
            app.process.wait(timeout=10)
            return False

    def operator_token(self) -> str:
        response = httpx.post(f"{self.workspace.host}/oidc/v1/token", auth=(OPERATOR[0], OPERATOR[1]),
                              data={"grant_type": "client_credentials", "scope": "all-apis"})
        response.raise_for_status()
        return response.json()["access_token"]


def test_a_batch_goes_through_a_redeploy_with_every_result_once_and_its_cost_final(
        workspace, pg_server_dsn, template_db, tmp_path):
    dsn, drop = clone_database(pg_server_dsn, template_db)
    deployment = Deployment(workspace, dsn, tmp_path / "deploy")
    conn = db.connect(dsn)
    jobs = workspace.jobs
    try:
        with deployment.proxy:
            first = deployment.start_app()
            # An operator uploads the batch through the app's URL with their OAuth token.
            files = [("files", (p.name, p.read_bytes(), "application/pdf")) for p in SAMPLES]
            upload = httpx.post(f"{deployment.proxy.url}/api/tasks", files=files, timeout=60,
                                headers={"Authorization": f"Bearer {deployment.operator_token()}"})
            assert upload.status_code == 201, upload.text
            task_ids = [r["task_id"] for r in upload.json()["files"]]
            assert len(task_ids) == len(SAMPLES) and all(task_ids)
            # The documents went to the Volume through the Files API, with the app's credentials.
            assert all(queue.get_task(conn, t).document_uri.startswith(VOLUME + "/") for t in task_ids)
            assert all(queue.get_task(conn, t).document_uri in workspace.workspace.files for t in task_ids)

            def statuses() -> list[str]:
                return [queue.get_task(conn, t).status.value for t in task_ids]

            def unreported_runs() -> int:
                """Runs still running whose task has not had its result yet."""
                waiting = {queue.get_task(conn, t).document_uri for t in task_ids
                           if queue.get_task(conn, t).status.value == "processing"}
                with jobs.lock:
                    return sum(r.life_cycle_state == "RUNNING" and r.job_parameters["document"] in waiting
                               for r in jobs.runs.values())

            # Redeploy while a result is in and runs are in flight that have not reported yet.
            wait_until(lambda: "completed" in statuses() and unreported_runs() >= 1, timeout=90, interval=0.1,
                       message="a first result while runs are in flight")
            # The runs in flight are held (SIGSTOP) while the app stops, and go on once it is gone:
            # a run that ended while the app was still stopping would report to it by callback,
            # and the redeploy would then leave nothing for the next app to settle.
            with jobs.lock:
                in_flight = {r.run_id for r in jobs.runs.values() if r.life_cycle_state == "RUNNING"}
                for run_id in in_flight:
                    jobs.runs[run_id].process.send_signal(signal.SIGSTOP)
            stopped_in_time = deployment.redeploy_stop(first)
            for run_id in in_flight:
                jobs.runs[run_id].process.send_signal(signal.SIGCONT)
            assert not any("/runs/cancel" in p for p in jobs.paths()), f"an app cancelled a job run:\n{first.log()}"
            # The runs go on without an app and end: their callbacks are refused (502), their
            # reports stay in the Volume.
            wait_until(lambda: all(jobs.runs[r].life_cycle_state == "TERMINATED" for r in in_flight),
                       timeout=60, message="the runs in flight to end while the app is down")
            second = deployment.start_app()

            wait_until(lambda: statuses() == ["completed"] * len(task_ids), timeout=120, interval=0.2,
                       message=f"every task completed (app log:\n{second.log()})")

            # Every result arrived once: one attempt each, one job run each, one completion event.
            tasks = [queue.get_task(conn, t) for t in task_ids]
            assert len(jobs.runs) == len(task_ids)
            for task in tasks:
                [attempt] = task.attempts
                assert attempt.status.value == "completed" and attempt.error is None
                assert [e.status.value for e in task.events].count("completed") == 1
                document = jobs.runs[int(attempt.job_run_id)].job_parameters["document"]
                stored = json.loads(json.loads(workspace.workspace.files[report_path(document, attempt.id)])["body"])
                assert task.result == stored["result"]
            # Results before the redeploy came by callback through the proxy, as the job's principal.
            delivered = [p for p in deployment.proxy.seen("/api/callbacks/") if p.status == 200]
            assert delivered and all(p.principal == JOB_SP[0] for p in delivered)
            # Runs that ended during the redeploy were settled from their Volume reports.
            settled_by_reconciler = (second.data_dir / "server.log").read_text().count('"event":"reconciled"')
            assert settled_by_reconciler >= 1 and in_flight, (second.log(), in_flight)
            assert all(jobs.runs[r].life_cycle_state == "TERMINATED" for r in jobs.runs)

            # Cost rows end final, from this workspace's DBUs with their corrections, at the
            # effective (promotional) list price.
            def final() -> bool:
                attempts = [queue.get_task(conn, t).attempts[0] for t in task_ids]
                return all(a.compute_state == "final" for a in attempts) and attempts

            attempts = wait_until(final, timeout=60, interval=0.2, message="every job run's cost to be final")
            for attempt in attempts:
                dbus = RESTATED if int(attempt.job_run_id) % 2 else DBUS
                assert float(attempt.dbus) == pytest.approx(dbus)
                assert float(attempt.compute_cost_usd) == pytest.approx(dbus * PROMOTION)
            print(f"rehearsal: first app stopped by itself before the SIGKILL: {stopped_in_time}; "
                  f"{len(in_flight)} runs in flight at the redeploy; {settled_by_reconciler} settled from the Volume")
    finally:
        for app in deployment.apps:
            app.stop()
        conn.close()
        drop()
