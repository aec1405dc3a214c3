"""The app co-hosting the worker: an uploaded sample is extracted by a local agent run that
reports to the app's own callback route, and the worker stops with the app."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from schema import queue
from tests.e2e.app_harness import start_app

SAMPLES = Path(__file__).resolve().parents[2] / "app" / "samples"


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory,
                                       QUIRE_WORKER="on", QUIRE_WORKER_CONCURRENCY="2")
    yield server, conn
    teardown()


def test_a_sample_is_extracted_by_the_cohosted_worker(app_server):
    server, conn = app_server
    sample = SAMPLES / "invoice_harborline_INV-2024-0117.pdf"
    with server.operator() as http:
        created = http.post("/api/tasks", data={"customer": "Worker Co"},
                            files=[("files", (sample.name, sample.read_bytes(), "application/pdf"))])
        task_id = created.json()["files"][0]["task_id"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            detail = http.get(f"/api/tasks/{task_id}").json()
            if detail["status"] in ("completed", "failed"):
                break
            time.sleep(0.25)
    assert detail["status"] == "completed", detail.get("error") or server.log()
    assert detail["result"]["fields"]["invoice_number"]["value"] == "INV-2024-0117"
    [attempt] = detail["attempts"]
    assert attempt["status"] == "completed" and attempt["worker_id"] and attempt["executor"] == "local"
    assert queue.get_attempt(conn, attempt["id"]).callbacks_received >= 1, "the agent reported to the app"
    server.stop()
    assert server.process.returncode is not None
    assert queue.get_task(conn, task_id).status.value == "completed"
