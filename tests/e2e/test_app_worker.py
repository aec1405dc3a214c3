"""The app co-hosting the worker: an uploaded sample is extracted by a local agent run that
reports to the app's own callback route, and the worker stops with the app."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import httpx
import psycopg
import pytest

from schema import queue
from tests.e2e.app_harness import TOKEN, SseReader, start_app
from tests.waiting import wait_until

SAMPLES = Path(__file__).resolve().parents[2] / "app" / "samples"


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory,
                                       QUIRE_WORKER="on", QUIRE_WORKER_CONCURRENCY="2")
    yield server, conn
    teardown()


def listening_backends(server) -> list[int]:
    """Backends of the app's database that listen, or check a LISTEN (by name or by what they run)."""
    with psycopg.connect(server.dsn, autocommit=True) as admin:
        return [pid for (pid,) in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND (application_name = 'quire-listen' OR query ~* '^\\s*LISTEN\\M' "
            "OR query ILIKE '%%pg_listening_channels%%')")]


def worker_counter(server, name: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=5, headers={"Authorization": f"Bearer {TOKEN}"}).text
    found = re.search(rf"^quire_worker_{name}_total (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else -1


def test_the_page_feed_and_the_cohosted_worker_share_one_listen_connection(app_server):
    server, conn = app_server
    queue.configure_agent(conn, "quick", executor="noop")
    reader = SseReader(f"{server.url}/api/events", {"Authorization": f"Bearer {TOKEN}"})
    reader.start()
    try:
        assert reader.connected.wait(10)
        [pid] = wait_until(lambda: listening_backends(server), timeout=10, message="the LISTEN backend")
        claims_before = worker_counter(server, "claims")

        def round_trip(n: int) -> None:
            """The worker claims and completes new tasks, and the SSE subscriber sees them end."""
            ids = {queue.enqueue(conn, agent="quick", document_uri=f"/x/share-{n}-{i}.pdf").id for i in range(3)}
            wait_until(lambda: ids <= {e["task_id"] for e in reader.task_events() if e["status"] == "completed"},
                       timeout=20, message="the worker to complete the tasks and the stream to show it")

        round_trip(1)
        assert listening_backends(server) == [pid]
        with psycopg.connect(server.dsn, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)
        wait_until(lambda: httpx.get(f"{server.url}/healthz", timeout=5).json()["listen"] == "polling",
                   timeout=5, message="the app to notice the loss")
        wait_until(lambda: httpx.get(f"{server.url}/healthz", timeout=5).json()["listen"] == "live",
                   timeout=20, message="the app to listen again")
        [again] = listening_backends(server)
        assert again != pid
        round_trip(2)
        assert listening_backends(server) == [again]
        assert worker_counter(server, "claims") >= claims_before + 6
        assert worker_counter(server, "runs_started") >= 6
        for name in ("throttled_claims", "runs_handed_back", "sweeps_recovered"):
            assert worker_counter(server, name) == 0, name
    finally:
        reader.close()


def test_a_sample_is_extracted_by_the_cohosted_worker(app_server):
    server, conn = app_server
    sample = SAMPLES / "invoice_harborline_INV-2024-0117.pdf"
    with server.operator() as http:
        created = http.post("/api/tasks", data={"customer": "Worker Co"},
                            files=[("files", (sample.name, sample.read_bytes(), "application/pdf"))])
        task_id = created.json()["files"][0]["task_id"]
        detail = wait_until(lambda: (lambda d: d if d["status"] in ("completed", "failed") else None)(
            http.get(f"/api/tasks/{task_id}").json()), timeout=120, interval=0.25, message="the sample to finish")
    assert detail["status"] == "completed", detail.get("error") or server.log()
    assert detail["result"]["fields"]["invoice_number"]["value"] == "INV-2024-0117"
    # The API hands back where each value was read: page, box in points, and the printed text.
    evidence = detail["result"]["fields"]["invoice_number"]["evidence"]
    assert evidence["page"] == 1 and evidence["text"] == "INV-2024-0117"
    width, height = detail["result"]["page_sizes"][0]
    x0, top, x1, bottom = evidence["bbox"]
    assert 0 <= x0 < x1 <= width and 0 <= top < bottom <= height
    assert isinstance(detail["result"]["needs_review"], bool)
    [attempt] = detail["attempts"]
    assert attempt["status"] == "completed" and attempt["worker_id"] and attempt["executor"] == "local"
    assert queue.get_attempt(conn, attempt["id"]).callbacks_received >= 1, "the agent reported to the app"
    server.stop()
    assert server.process.returncode is not None
    assert queue.get_task(conn, task_id).status.value == "completed"


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_the_app_with_its_worker_shuts_down_cleanly(pg_server_dsn, template_db, tmp_path_factory, stop_signal):
    server, _conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory, QUIRE_WORKER="on")
    try:
        wait_until(lambda: '"event":"started"' in server.log(), timeout=60, message="the co-hosted worker to start")
        server.process.send_signal(stop_signal)
        # The server re-raises the signal once it has shut down, so its status may name it
        # (130 is the shell's convention for an interrupt).
        assert server.process.wait(timeout=40) in (0, -stop_signal, 128 + stop_signal), server.log()
        log = server.log()
        assert "shutdown failed" not in log and "Traceback" not in log, log
        assert '"event":"stopped"' in log  # the co-hosted worker stopped with the app
    finally:
        teardown()
