"""The callback and heartbeat routes over real HTTP: signatures, malformed bodies, replays, fencing."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI

from agents.callback import derive_attempt_secret, sign
from app.api.callbacks import router
from schema import db, queue
from schema.settings import Settings
from tests.factories import make_agent, make_task
from tests.worker_helpers import serve_in_thread

SHARED_KEY = "shared-test-key"
REPORT = {"status": "completed", "confidence": 0.9, "pages": 1, "input_tokens": 700,
          "output_tokens": 200, "llm_cost_usd": 0.0123, "trace_id": "tr-abc",
          "result": {"document_type": "invoice", "extractor": "offline", "model": None, "pages": 1,
                     "fields": {"total": {"value": 1200.0, "confidence": 0.9}}}}


@pytest.fixture
def server(db_dsn):
    app = FastAPI()
    app.include_router(router)
    app.state.settings = Settings(callback_key=SHARED_KEY)
    app.state.pool = db.make_pool(db_dsn, max_size=4)
    try:
        with serve_in_thread(app) as base:
            yield base
    finally:
        app.state.pool.close()


def post(url: str, payload, secret: str | None, *, raw: bytes | None = None,
         signature: str | None = None) -> httpx.Response:
    body = raw if raw is not None else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if signature is not None:
        headers["X-Quire-Signature"] = signature
    elif secret is not None:
        headers["X-Quire-Signature"] = sign(body, secret)
    return httpx.post(url, content=body, headers=headers, timeout=10)


def claimed(conn, agent: str = "docs", **agent_settings):
    make_agent(conn, agent, **agent_settings)
    make_task(conn, agent)
    [claim] = queue.claim(conn, agent=agent, worker_id="w-test", limit=1)
    return claim


def test_worker_callback_rejects_unsigned_and_wrongly_signed_bodies(server, conn):
    claim = claimed(conn)
    other = claimed(conn, "other")
    url = f"{server}/api/callbacks/{claim.attempt_id}"
    assert post(url, REPORT, None).status_code == 401
    assert post(url, REPORT, None, signature="sha256=" + "0" * 64).status_code == 401
    assert post(url, REPORT, None, signature="not-a-signature").status_code == 401
    assert post(url, REPORT, other.callback_secret).status_code == 401
    # The signature covers the exact bytes: the same report re-serialised does not verify.
    body = json.dumps(REPORT).encode()
    assert post(url, None, None, raw=json.dumps(REPORT, indent=1).encode(),
                signature=sign(body, claim.callback_secret)).status_code == 401
    task = queue.get_task(conn, claim.task.id)
    assert task.status.value == "processing"
    assert task.attempts[0].callbacks_received == 0 and task.attempts[0].input_tokens is None


def test_worker_callback_malformed_body_is_422_and_changes_nothing(server, conn):
    claim = claimed(conn)
    url = f"{server}/api/callbacks/{claim.attempt_id}"
    assert post(url, None, claim.callback_secret, raw=b"{not json").status_code == 422
    assert post(url, [1, 2], claim.callback_secret).status_code == 422
    assert post(url, {**REPORT, "status": "done"}, claim.callback_secret).status_code == 422
    assert post(url, {**REPORT, "input_tokens": -1}, claim.callback_secret).status_code == 422
    assert httpx.post(f"{server}/api/callbacks/abc", content=b"{}").status_code == 422
    attempt = queue.get_attempt(conn, claim.attempt_id)
    assert attempt.callbacks_received == 0 and attempt.status.value == "processing"


def test_worker_callback_unknown_attempt_is_404(server, conn):
    claim = claimed(conn)
    assert post(f"{server}/api/callbacks/987654", REPORT, claim.callback_secret).status_code == 404
    assert post(f"{server}/api/callbacks/0", REPORT, claim.callback_secret).status_code == 404
    assert post(f"{server}/api/attempts/987654/heartbeat", {}, claim.callback_secret).status_code == 404


def test_worker_callback_applies_once_and_replays_answer_200(server, conn):
    claim = claimed(conn)
    url = f"{server}/api/callbacks/{claim.attempt_id}"
    first = post(url, REPORT, claim.callback_secret)
    assert first.status_code == 200, first.text
    assert first.json() == {"kind": "applied", "applied": True, "task_status": "completed",
                            "task_id": claim.task.id, "attempt_id": claim.attempt_id,
                            "usage_recorded": True}
    replay = post(url, REPORT, claim.callback_secret)
    assert replay.status_code == 200
    assert (replay.json()["kind"], replay.json()["applied"], replay.json()["task_status"]) == \
        ("duplicate", False, "completed")
    task = queue.get_task(conn, claim.task.id)
    assert task.status.value == "completed" and task.result["fields"]["total"]["value"] == 1200.0
    [attempt] = task.attempts
    assert (attempt.input_tokens, attempt.output_tokens, float(attempt.llm_cost_usd)) == (700, 200, 0.0123)
    assert attempt.callbacks_received == 2 and attempt.trace_id == "tr-abc"


def test_worker_heartbeat_route_extends_the_lease_until_the_attempt_ends(server, conn):
    make_agent(conn, "docs", lease_seconds=600)
    make_task(conn, "docs")
    [claim] = queue.claim(conn, agent="docs", worker_id="w-test", limit=1, lease_seconds=5)
    url = f"{server}/api/attempts/{claim.attempt_id}/heartbeat"
    assert post(url, {}, None).status_code == 401
    assert post(url, None, claim.callback_secret, raw=b"nope").status_code == 422
    response = post(url, {}, claim.callback_secret)
    assert response.status_code == 200 and response.json() == {"attempt_id": claim.attempt_id, "alive": True}
    task = queue.get_task(conn, claim.task.id)
    assert (task.lease_expires_at - claim.lease_expires_at).total_seconds() > 500
    assert task.attempts[0].heartbeat_at is not None
    assert post(f"{server}/api/callbacks/{claim.attempt_id}", REPORT, claim.callback_secret).status_code == 200
    assert post(url, {}, claim.callback_secret).json() == {"attempt_id": claim.attempt_id, "alive": False}


def test_worker_callback_of_a_databricks_attempt_uses_the_derived_key(server, conn):
    claim = claimed(conn, "remote", executor="databricks", settings={"job_id": 7})
    url = f"{server}/api/callbacks/{claim.attempt_id}"
    # The stored secret never left the database, so it does not sign a job's report.
    assert post(url, REPORT, claim.callback_secret).status_code == 401
    derived = derive_attempt_secret(SHARED_KEY, claim.attempt_id)
    assert post(f"{server}/api/attempts/{claim.attempt_id}/heartbeat", {}, derived).json()["alive"] is True
    response = post(url, REPORT, derived)
    assert response.status_code == 200 and response.json()["applied"] is True


def test_worker_callback_stale_failure_does_not_fail_a_newer_attempt(server, conn):
    make_agent(conn, "docs")
    task = make_task(conn, "docs")
    [old] = queue.claim(conn, agent="docs", worker_id="w-old", limit=1, lease_seconds=1)
    conn.execute("UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = %s", [task.id])
    queue.sweep(conn)
    conn.execute("UPDATE tasks SET run_after = now() WHERE id = %s", [task.id])
    [new] = queue.claim(conn, agent="docs", worker_id="w-new", limit=1)
    stale = post(f"{server}/api/callbacks/{old.attempt_id}",
                 {"status": "failed", "error": "boom", "retryable": False}, old.callback_secret)
    assert stale.status_code == 200 and stale.json()["kind"] == "recorded"
    assert stale.json()["task_status"] == "processing"
    assert queue.get_task(conn, task.id).current_attempt_id == new.attempt_id


def test_worker_callback_outcomes_are_counted_for_metrics(server, conn):
    from app.api.health import COUNTERS

    def counts():
        return {labels["outcome"]: value for name, labels, value in COUNTERS.items()
                if name == "quire_callback_outcomes_total"}

    before = counts()
    claim = claimed(conn)
    url = f"{server}/api/callbacks/{claim.attempt_id}"
    assert post(url, REPORT, "wrong-secret").status_code == 401
    assert post(url, REPORT, claim.callback_secret).status_code == 200
    assert post(url, REPORT, claim.callback_secret).status_code == 200
    after = counts()
    for outcome, delta in (("rejected", 1), ("applied", 1), ("duplicate", 1)):
        assert after.get(outcome, 0) - before.get(outcome, 0) == delta
