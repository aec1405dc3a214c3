"""Signed callbacks and heartbeats against a local server that checks every signature."""

import hashlib
import hmac
import json
import socket

import pytest

from agents.callback import (
    CallbackClient,
    CallbackFailed,
    CallbackRejected,
    Heartbeat,
    derive_attempt_secret,
    encode,
    resolve_secret,
    sign,
)
from agents.errors import ConfigurationError
from tests.unit.agents.agents_fakes import CallbackServer

SECRET = "0f" * 32


def test_attempt_secret_follows_the_contract() -> None:
    expected = hmac.new(b"shared-key", b"quire-attempt:42", hashlib.sha256).hexdigest()
    assert derive_attempt_secret("shared-key", 42) == expected
    assert derive_attempt_secret(b"shared-key", 42) == expected
    assert derive_attempt_secret(b"shared-key", 43) != expected
    # A fixed vector, so that the app and the agent cannot drift apart unnoticed.
    assert derive_attempt_secret("k", 1) == (
        "73974e9e4987bebb01ade90b2cf713cda2e436b34aec2ecb36f8f192a6c65ed6")


def test_signature_is_sha256_hmac_of_the_raw_body() -> None:
    body = encode({"status": "completed", "pages": 3})
    assert body == b'{"status":"completed","pages":3}'
    assert sign(body, SECRET) == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def test_secret_resolution_order(monkeypatch) -> None:
    for name in ("QUIRE_CALLBACK_SECRET", "QUIRE_CALLBACK_KEY", "QUIRE_CALLBACK_KEY_SCOPE",
                 "QUIRE_CALLBACK_KEY_NAME"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError):
        resolve_secret(7)
    monkeypatch.setenv("QUIRE_CALLBACK_KEY", "shared")
    assert resolve_secret(7) == derive_attempt_secret("shared", 7)
    with pytest.raises(ConfigurationError, match="attempt-id"):
        resolve_secret(None)
    monkeypatch.setenv("QUIRE_CALLBACK_SECRET", "explicit")
    assert resolve_secret(7) == "explicit"


def test_post_delivers_a_signed_body() -> None:
    payload = {"status": "completed", "result": {"document_type": "invoice"}, "note": "€ ok"}
    with CallbackServer(SECRET) as server:
        client = CallbackClient(SECRET, retries=0)
        assert client.post(server.url + "/api/callbacks/1", payload) == 200
        client.close()
    [received] = server.received
    assert received["signature_valid"] and received["body"] == payload
    assert received["raw"] == encode(payload)


def test_server_errors_are_retried_until_delivered() -> None:
    with CallbackServer(SECRET, statuses=[500, 503]) as server:
        client = CallbackClient(SECRET, retries=4, backoff=0.01)
        assert client.post(server.url + "/cb", {"status": "failed"}) == 200
    assert len(server.received) == 3
    # Every attempt carries the same body and signature, so a replay changes nothing.
    assert len({r["raw"] for r in server.received}) == 1


@pytest.mark.parametrize("status", [409, 413, 422])
def test_client_errors_are_not_retried(status: int) -> None:
    # 422 is a report outside the contract and 413 one too large: sending it again cannot help.
    with CallbackServer(SECRET, statuses=[status]) as server:
        client = CallbackClient(SECRET, retries=4, backoff=0.01)
        with pytest.raises(CallbackRejected, match=str(status)):
            client.post(server.url + "/cb", {"status": "completed"})
    assert len(server.received) == 1


def test_wrong_secret_is_rejected_by_the_receiver() -> None:
    with CallbackServer(SECRET) as server:
        client = CallbackClient("wrong", retries=2, backoff=0.01)
        with pytest.raises(CallbackRejected, match="401"):
            client.post(server.url + "/cb", {"status": "completed"})
    assert server.received[0]["signature_valid"] is False


def test_connection_errors_are_retried_then_fail() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = CallbackClient(SECRET, retries=2, backoff=0.01)
    with pytest.raises(CallbackFailed, match="3 attempts"):
        client.post(f"http://127.0.0.1:{port}/cb", {"status": "completed"})


def test_heartbeat_posts_signed_empty_bodies_until_stopped() -> None:
    with CallbackServer(SECRET) as server:
        client = CallbackClient(SECRET)
        with Heartbeat(client, server.url + "/hb", interval=0.05) as beat:
            beats = server.wait_for("/hb", 3)
        count = len(server.posts("/hb"))
        assert len(beats) >= 3
        assert all(b["signature_valid"] and b["body"] == {} for b in beats)
        assert beat.sent >= 3 and beat.last_status == 200
        assert not beat._thread.is_alive()
        # Stopped means stopped: nothing more arrives after the context closes.
        server.event.wait(0.2)
        assert len(server.posts("/hb")) == count
        client.close()


def test_heartbeat_survives_an_unreachable_receiver() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = CallbackClient(SECRET)
    with Heartbeat(client, f"http://127.0.0.1:{port}/hb", interval=0.02) as beat:
        beat._stop.wait(0.1)
    assert beat.sent == 0 and not beat._thread.is_alive()
    assert json.loads(encode({})) == {}


def test_without_an_oauth_client_the_job_is_told_what_to_pass(monkeypatch):
    import pytest

    from agents.callback import app_bearer
    from agents.errors import ConfigurationError

    # A job's runtime token would be found by the SDK, but the Apps proxy does not take it: not used.
    for name in ("DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "client.4.9")
    with pytest.raises(ConfigurationError, match="--oauth-client-id-key"):
        app_bearer("quire", None, None)
