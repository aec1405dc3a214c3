"""A PDF submitted with `quire submit` is extracted by a `quire worker` process end to end."""

from __future__ import annotations

import re
import signal

import pytest

from schema import db, queue
from tests.waiting import wait_until
from tests.worker_helpers import (
    Proc,
    counts_by_status,
    drop_tracking_store,
    free_port,
    make_invoice_pdf,
    quire,
    quire_env,
    wait_for_http,
)
from worker.tracking import DEFAULT_DATABASE, DEFAULT_EXPERIMENT, tracking_uri_beside


@pytest.mark.slow
def test_e2e_worker_submit_to_completed_with_fields_tokens_cost_and_trace(db_dsn, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = quire_env(db_dsn, tmp_path, public_url=base, compute_rate_usd_per_hour=3.6, poll_seconds=60)
    env["QUIRE_DATA_DIR"] = "data"  # relative, as the default is: agents run in directories of their own
    # The agent's prices are its configuration: they reach the agent process with the run.
    (tmp_path / "quire.toml").write_text('[agents.documents]\nmodel = "m"\n'
                                         'price_input_per_mtok = 2.0\nprice_output_per_mtok = 8.0\n')
    env["QUIRE_LLM_PRICE_INPUT_PER_MTOK"] = "99"  # the worker's own environment never prices a run
    server = Proc.callback_server(env, tmp_path, port)
    worker = None
    try:
        wait_for_http(f"{base}/healthz")
        pdf = make_invoice_pdf(tmp_path / "in" / "invoice-0042.pdf")
        assert quire("migrate", env=env, cwd=tmp_path).returncode == 0  # configures the agent; submit only reads
        submitted = quire("submit", str(pdf), "--customer", "acme", "--priority", "5", env=env, cwd=tmp_path)
        assert submitted.returncode == 0, submitted.stderr
        task_id = int(re.match(r"task (\d+):", submitted.stdout).group(1))
        worker = Proc.worker(env, tmp_path)
        with db.connect(db_dsn) as conn:
            def finished():
                task = queue.get_task(conn, task_id)
                # Compute is recorded once the process has exited, just after its callback.
                return task.status.value == "failed" or (
                    task.status.value == "completed" and task.attempts[-1].compute_seconds is not None)

            wait_until(finished, timeout=90, interval=0.1, message="the task to finish")
            task = queue.get_task(conn, task_id)
        assert task.status.value == "completed", (task.error, worker.log_text()[-3000:])
        assert task.customer == "acme" and task.pages == 1
        fields = task.result["fields"]
        assert task.result["document_type"] == "invoice"
        assert fields["invoice_number"]["value"] == "INV-2024-0042"
        assert fields["total"]["value"] == 1200.0 and fields["currency"]["value"] == "GBP"
        assert 0 < task.confidence <= 1
        [attempt] = task.attempts
        assert attempt.status.value == "completed" and attempt.executor == "local"
        assert attempt.callbacks_received >= 1  # it came through the signed HTTP callback
        assert attempt.input_tokens > 0 and attempt.output_tokens > 0 and not attempt.llm_unpriced
        assert float(attempt.llm_cost_usd) == pytest.approx(
            attempt.input_tokens * 2.0 / 1e6 + attempt.output_tokens * 8.0 / 1e6, rel=1e-4)
        assert attempt.compute_seconds > 0 and attempt.compute_cost_usd > 0
        assert attempt.pid and attempt.trace_id

        from mlflow.tracking import MlflowClient

        trace = MlflowClient(tracking_uri_beside(db_dsn)).get_trace(attempt.trace_id, display=False)
        assert trace is not None
        assert trace.info.token_usage["input_tokens"] == attempt.input_tokens
        assert trace.info.token_usage["output_tokens"] == attempt.output_tokens

        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
        events = worker.events()
        for entity, event in [("worker", "started"), ("task", "claimed"), ("attempt", "started"),
                              ("attempt", "ended"), ("worker", "stopped")]:
            assert any(e["entity"] == entity and e["event"] == event for e in events), (entity, event)
    finally:
        server.stop()
        if worker is not None:
            worker.stop()


@pytest.mark.slow
def test_a_first_start_claims_at_once_and_runs_that_trace_wait_for_mlflow_tables(db_dsn, tmp_path):
    # A worker's first start on a server makes MLflow's tables beside the queue (seconds). Work
    # that does not trace starts meanwhile; agent runs, which trace there, start once it is done.
    drop_tracking_store(db_dsn)
    env = quire_env(db_dsn, tmp_path, poll_seconds=60)
    (tmp_path / "quire.toml").write_text('[agents.documents]\n[agents.quick]\nexecutor = "noop"\n')
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
    pdf = make_invoice_pdf(tmp_path / "in" / "invoice.pdf")
    with db.connect(db_dsn) as conn:
        traced = queue.enqueue(conn, agent="documents", document_uri=str(pdf)).id
        quick = [queue.enqueue(conn, agent="quick", document_uri=f"/q/{n}.pdf").id for n in range(20)]
    worker = Proc.worker(env, tmp_path)
    try:
        with db.connect(db_dsn) as conn:
            wait_until(lambda: queue.get_task(conn, traced).status.value in ("completed", "failed"), timeout=120,
                       interval=0.1, message="the agent run to finish")
            task = queue.get_task(conn, traced)
            assert task.status.value == "completed", (task.error, worker.log_text()[-3000:])
            assert task.attempts[-1].trace_id  # it traced to the store set up meanwhile
            quick_done = max(queue.get_task(conn, t).attempts[-1].finished_at for t in quick)
            traced_started = task.attempts[-1].started_at
        with db.connect(db.with_database(db_dsn, DEFAULT_DATABASE)) as store:
            made = store.execute("SELECT to_timestamp(creation_time / 1000.0) AS at FROM experiments "
                                 "WHERE name = %s", [DEFAULT_EXPERIMENT]).fetchone()["at"]
        assert quick_done < made <= traced_started
    finally:
        worker.stop()


def test_a_worker_at_log_level_warning_does_its_work_without_a_line_per_task(db_dsn, tmp_path):
    (tmp_path / "quire.toml").write_text('[agents.bulk]\nexecutor = "noop"\n')
    env = quire_env(db_dsn, tmp_path, log_level="warning")
    assert quire("migrate", env=env, cwd=tmp_path).returncode == 0
    with db.connect(db_dsn) as conn:
        queue.enqueue_many(conn, [{"agent": "bulk", "document_uri": f"noop://{n}"} for n in range(5)])
    worker = Proc.worker(env, tmp_path)
    try:
        wait_until(lambda: counts_by_status(db_dsn) == {"completed": 5}, timeout=60, message="the five tasks done")
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
    finally:
        worker.stop()
    assert worker.events() == [], worker.log_text()[-2000:]
