"""Job runs outlive the worker that started them: a stopping worker lets go of them, the sweeper
leaves them alone, and any worker's run reconciler settles them once they end, from their signed
Volume report or, without one, with the run's own state message."""

from __future__ import annotations

import threading

import pytest

from agents.callback import derive_attempt_secret
from agents.durable import report_file, report_path
from schema import db, queue
from tests.factories import make_agent, make_task
from tests.integration.worker.fake_databricks import PAT, WORKER, FakeDatabricks
from tests.waiting import wait_until
from worker.claimer import Claimer, ClaimerConfig
from worker.executors import DatabricksConfig, LocalConfig, build_executors
from worker.reconciler import RunReconciler
from worker.runs import RunTable, RunTableConfig
from worker.sweeper import Sweeper

KEY = "shared-key-for-jobs"
DOCUMENT = "/Volumes/main/quire/documents/invoice.pdf"
REPORT = {"status": "completed", "confidence": 0.8, "input_tokens": 900, "output_tokens": 150,
          "llm_cost_usd": 0.002, "result": {"document_type": "invoice", "fields": {}}}


@pytest.fixture
def fake(monkeypatch):
    for name in ("DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET", "DATABRICKS_CONFIG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    with FakeDatabricks() as server:
        monkeypatch.setenv("DATABRICKS_HOST", server.host)
        monkeypatch.setenv("DATABRICKS_TOKEN", PAT)
        monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/.databrickscfg")
        yield server


@pytest.fixture
def pool(db_dsn):
    pool = db.make_pool(db_dsn, max_size=4)
    yield pool
    pool.close()


def worker(pool, tmp_path, name: str):
    executors = build_executors(LocalConfig(runs_dir=tmp_path / name), databricks=DatabricksConfig(callback_key=KEY))
    table = RunTable(pool, executors, RunTableConfig(worker_id=name,
                                                     callback_base_url="https://quire-1.example.databricksapps.com"))
    return table, Claimer(table, executors, ClaimerConfig(concurrency=2)), executors["databricks"]


def start_run(conn, pool, tmp_path, fake, *, max_attempts: int = 3):
    make_agent(conn, "remote", executor="databricks", lease_seconds=1, settings={"job_id": 42})
    task = make_task(conn, "remote", document_uri=DOCUMENT, max_attempts=max_attempts)
    table, claimer, _executor = worker(pool, tmp_path, "w-old")
    assert claimer.run_once() == 1
    [run] = table.snapshot()
    fake.jobs.set_state(run.handle.run_id, "RUNNING")
    return task, run, table


def lease_expired(conn, task_id: int) -> bool:
    lease = queue.get_task(conn, task_id).lease_expires_at
    return lease is not None and conn.execute("SELECT %s < now() AS expired", (lease,)).fetchone()["expired"]


def test_a_stopped_worker_lets_go_of_its_job_run_and_another_settles_it_from_the_volume(conn, pool, tmp_path, fake):
    task, run, old_table = start_run(conn, pool, tmp_path, fake)
    assert old_table.hand_back_all() == 0  # nothing handed back, nothing cancelled
    assert len(old_table) == 0 and old_table.counters.snapshot()["runs_detached"] == 1
    assert not any("cancel" in p for p in fake.jobs.paths())
    assert fake.jobs.runs[run.handle.run_id].life_cycle_state == "RUNNING"

    # The lease runs out while the run goes on: the sweeper leaves it, the reconciler keeps it.
    _, _, executor = worker(pool, tmp_path, "w-new")
    reconciler = RunReconciler(pool, "w-new", executor)
    sweeper = Sweeper(pool, "w-new")
    wait_until(lambda: lease_expired(conn, task.id), timeout=10, message="the lease to expire")
    assert sweeper.run_once() == 0
    assert reconciler.run_once() == 0
    assert not lease_expired(conn, task.id)  # extended: Databricks says the run is alive
    assert queue.get_task(conn, task.id).status.value == "processing"

    # The run ends; its callback never arrived, but its signed report is in the Volume.
    attempt_id = run.attempt_id
    fake.workspace.files[report_path(DOCUMENT, attempt_id)] = report_file(
        attempt_id, REPORT, derive_attempt_secret(KEY, attempt_id))
    fake.jobs.set_state(run.handle.run_id, "TERMINATED", "SUCCESS", duration_ms=7000)
    wait_until(lambda: lease_expired(conn, task.id), timeout=10, message="the lease to expire")
    assert sweeper.run_once() == 0
    # The worker's principal may not read the Volume yet: the run is left for later, not failed.
    assert reconciler.run_once() == 0
    assert queue.get_task(conn, task.id).attempts[0].status.value == "processing"
    fake.workspace.grant_volume(WORKER, "main.quire.documents", "READ_VOLUME")
    # Two workers reconcile at once: the report counts once.
    others = [RunReconciler(pool, f"w-{n}", worker(pool, tmp_path, f"w-{n}")[2]) for n in range(2)]
    threads = [threading.Thread(target=r.run_once) for r in others]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    done = queue.get_task(conn, task.id)
    assert done.status.value == "completed" and done.result["document_type"] == "invoice"
    [attempt] = done.attempts
    assert attempt.status.value == "completed" and attempt.input_tokens == 900
    assert float(attempt.llm_cost_usd) == 0.002
    assert attempt.compute_state == "pending" and attempt.compute_seconds == pytest.approx(7.0)
    assert [e.status.value for e in done.events].count("completed") == 1
    assert reconciler.run_once() == 0  # nothing left to settle
    assert len(fake.jobs.runs) == 1  # nothing ran twice


def test_an_unwatched_run_that_ended_without_a_valid_report_fails_with_its_own_message(conn, pool, tmp_path, fake):
    task, run, old_table = start_run(conn, pool, tmp_path, fake, max_attempts=1)
    fake.workspace.grant_volume(WORKER, "main.quire.documents", "READ_VOLUME")
    old_table.hand_back_all()
    # A report signed with another key is not the attempt's: it is never applied.
    fake.workspace.files[report_path(DOCUMENT, run.attempt_id)] = report_file(
        run.attempt_id, REPORT, derive_attempt_secret("another key", run.attempt_id))
    fake.jobs.set_state(run.handle.run_id, "INTERNAL_ERROR", "FAILED",
                        message="Cluster terminated: spot instances were reclaimed")
    _, _, executor = worker(pool, tmp_path, "w-new")
    reconciler = RunReconciler(pool, "w-new", executor)
    wait_until(lambda: lease_expired(conn, task.id), timeout=10, message="the lease to expire")
    assert reconciler.run_once() == 1
    done = queue.get_task(conn, task.id)
    assert done.status.value == "failed"
    assert "Cluster terminated: spot instances were reclaimed" in done.attempts[0].error
    assert f"job run {run.handle.run_id}" in done.attempts[0].error and done.attempts[0].input_tokens is None


def test_a_worker_that_loses_contact_with_a_run_lets_go_of_it_instead_of_failing_it(conn, pool, tmp_path, fake):
    make_agent(conn, "remote", executor="databricks", lease_seconds=1, settings={"job_id": 42})
    task = make_task(conn, "remote", document_uri=DOCUMENT)
    executors = build_executors(LocalConfig(runs_dir=tmp_path / "runs"),
                                databricks=DatabricksConfig(callback_key=KEY, max_poll_failures=1))
    table = RunTable(pool, executors, RunTableConfig(worker_id="w", callback_base_url="https://quire.example"))
    assert Claimer(table, executors, ClaimerConfig(concurrency=1)).run_once() == 1
    [run] = table.snapshot()
    fake.jobs.broken = True  # the Jobs API fails
    from worker.heartbeats import Heartbeats

    Heartbeats(table).run_once(beat_all=True)
    assert len(table) == 0 and table.counters.snapshot()["runs_detached"] == 1
    attempt = queue.get_task(conn, task.id).attempts[0]
    assert attempt.status.value == "processing" and attempt.error is None
    assert not any("cancel" in p for p in fake.jobs.paths())
    fake.jobs.broken = False
    fake.workspace.grant_volume(WORKER, "main.quire.documents", "READ_VOLUME")
    fake.jobs.set_state(run.handle.run_id, "TERMINATED", "SUCCESS")
    wait_until(lambda: lease_expired(conn, task.id), timeout=10, message="the lease to expire")
    assert RunReconciler(pool, "w", executors["databricks"]).run_once() == 1
    assert queue.get_task(conn, task.id).status.value == "enqueued"  # SUCCESS, but no report: retried
