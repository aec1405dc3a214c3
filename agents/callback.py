"""Signed callbacks and heartbeats to the orchestrator, and the per-attempt secret they use."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents.errors import ConfigurationError

if TYPE_CHECKING:  # imported where a client is made: the worker loads this module only to sign
    import httpx

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Quire-Signature"
DEFAULT_HEARTBEAT_SECONDS = 10.0


def derive_attempt_secret(shared_key: bytes | str, attempt_id: int) -> str:
    """hex(HMAC-SHA256(shared_key, "quire-attempt:" + attempt_id)), per docs/CONTRACTS.md."""
    key = shared_key.encode() if isinstance(shared_key, str) else shared_key
    return hmac.new(key, f"quire-attempt:{int(attempt_id)}".encode(), hashlib.sha256).hexdigest()


def sign(body: bytes, secret: str) -> str:
    """The X-Quire-Signature value for raw body bytes: "sha256=" + hex HMAC keyed by the secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def encode(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent and signed for a payload."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def resolve_secret(attempt_id: int | None) -> str:
    """QUIRE_CALLBACK_SECRET, or the secret derived from the shared key (env or Databricks)."""
    secret = os.environ.get("QUIRE_CALLBACK_SECRET")
    if secret:
        return secret
    key = os.environ.get("QUIRE_CALLBACK_KEY")
    scope = os.environ.get("QUIRE_CALLBACK_KEY_SCOPE")
    name = os.environ.get("QUIRE_CALLBACK_KEY_NAME")
    if not key and not (scope and name):
        raise ConfigurationError(
            "no callback secret: set QUIRE_CALLBACK_SECRET, QUIRE_CALLBACK_KEY, or "
            "QUIRE_CALLBACK_KEY_SCOPE and QUIRE_CALLBACK_KEY_NAME")
    if attempt_id is None:
        raise ConfigurationError("--attempt-id is needed to derive the callback secret")
    if key:
        return derive_attempt_secret(key, attempt_id)
    assert scope and name  # checked above: without a key, both are set
    return derive_attempt_secret(read_secret(scope, name), attempt_id)


class CallbackRejected(Exception):
    """The orchestrator answered with a 3xx or 4xx: sending the same request again would not help."""


class CallbackFailed(Exception):
    """The callback could not be delivered within the retry budget."""


def read_secret(scope: str, key: str) -> bytes:
    """A secret's bytes from a Databricks secret scope, read with the job's own credentials."""
    from databricks.sdk import WorkspaceClient

    # The secrets API returns the value base64-encoded.
    return base64.b64decode(WorkspaceClient().secrets.get_secret(scope=scope, key=key).value or "")


def app_bearer(scope: str | None = None, client_id_key: str | None = None,
               client_secret_key: str | None = None) -> Callable[[], dict[str, str]]:
    """Authorization headers the Databricks Apps proxy accepts, asked for per request so they refresh.

    The proxy takes OAuth tokens of a principal with CAN USE on the app; a job's own runtime token
    is not one. So the job's service principal mints machine-to-machine OAuth tokens
    (client_credentials at {host}/oidc/v1/token) with its client id and secret, which the job reads
    from the secret scope (never from job parameters). Without a scope, an M2M client already in
    the environment (DATABRICKS_CLIENT_ID / DATABRICKS_CLIENT_SECRET) is used.
    """
    from databricks.sdk.core import Config

    try:
        if scope and client_id_key and client_secret_key:
            host = os.environ.get("DATABRICKS_HOST") or Config().host
            config = Config(host=host, client_id=read_secret(scope, client_id_key).decode().strip(),
                            client_secret=read_secret(scope, client_secret_key).decode().strip(),
                            auth_type="oauth-m2m")
        elif os.environ.get("DATABRICKS_CLIENT_ID") and os.environ.get("DATABRICKS_CLIENT_SECRET"):
            config = Config(auth_type="oauth-m2m")
        else:
            raise ConfigurationError(
                "no OAuth client for callbacks through the Databricks Apps proxy: pass --oauth-client-id-key "
                "and --oauth-client-secret-key (keys of --callback-key-scope holding the job principal's "
                "OAuth client), or set DATABRICKS_CLIENT_ID and DATABRICKS_CLIENT_SECRET")
        config.authenticate()  # fails now, with the SDK's reason, rather than at the first callback
        return config.authenticate
    except ConfigurationError:
        raise
    except Exception as exc:  # the SDK's own message names what is missing
        raise ConfigurationError(f"no OAuth token for callbacks: {exc}") from exc


def refusal(response: httpx.Response) -> str:
    """A readable account of a non-2xx answer, naming the likely cause for 3xx, 401 and 403."""
    status = response.status_code
    if 300 <= status < 400:
        where = response.headers.get("location", "?")
        return (f"HTTP {status} redirect to {where}: not delivered (a proxy sends requests without a "
                "valid bearer to its login page; on Databricks Apps send the job's OAuth token)")
    if status in (401, 403):
        return (f"HTTP {status}: not delivered (the bearer or the signature was refused; on Databricks "
                f"the job's principal needs CAN_USE on the app): {response.text[:300]}")
    return f"HTTP {status}: {response.text[:300]}"


class CallbackClient:
    """Posts signed JSON; only 2xx is delivered; retries connection errors and 5xx with backoff.

    Redirects are never followed: a proxy's redirect to a login page is a refusal, not a delivery.
    """

    def __init__(self, secret: str, retries: int | None = None, backoff: float = 0.5,
                 max_backoff: float = 30.0, timeout: float = 30.0,
                 auth_headers: Callable[[], dict[str, str]] | None = None):
        self.secret = secret
        self.retries = retries if retries is not None else int(
            os.environ.get("QUIRE_CALLBACK_RETRIES", "6"))
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.auth_headers = auth_headers
        import httpx

        self._http = httpx.Client(timeout=timeout, follow_redirects=False)

    def close(self) -> None:
        self._http.close()

    def post_once(self, url: str, payload: dict[str, Any]) -> httpx.Response:
        """One signed POST (with the bearer, when the client has credentials), no retry."""
        body = encode(payload)
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(body, self.secret)}
        if self.auth_headers is not None:
            headers.update(self.auth_headers())
        return self._http.post(url, content=body, headers=headers)

    def post(self, url: str, payload: dict[str, Any]) -> int:
        """Deliver a payload; the same body may arrive more than once, which the receiver allows."""
        import httpx

        last = "no attempt made"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff * 2 ** (attempt - 1), self.max_backoff))
            try:
                response = self.post_once(url, payload)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
                log.warning("callback to %s failed (%s), attempt %d", url, last, attempt + 1)
                continue
            if 200 <= response.status_code < 300:
                return response.status_code
            last = refusal(response)
            if response.status_code < 500:
                raise CallbackRejected(f"callback to {url} rejected: {last}")
            log.warning("callback to %s failed (%s), attempt %d", url, last, attempt + 1)
        raise CallbackFailed(f"callback to {url} failed after {self.retries + 1} attempts: {last}")


class Heartbeat:
    """A daemon thread posting a signed `{}` every interval while the run goes on."""

    def __init__(self, client: CallbackClient, url: str, interval: float | None = None):
        self.client = client
        self.url = url
        self.interval = interval if interval is not None else float(
            os.environ.get("QUIRE_HEARTBEAT_SECONDS", DEFAULT_HEARTBEAT_SECONDS))
        self.sent = 0
        self.last_status: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="quire-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)

    def _loop(self) -> None:
        # The first beat goes out at once: it tells the orchestrator the job has started.
        while not self._stop.is_set():
            try:
                response = self.client.post_once(self.url, {})
                self.last_status = response.status_code
                self.sent += 1
                if not 200 <= response.status_code < 300:
                    log.warning("heartbeat to %s not delivered: %s", self.url, refusal(response))
            except Exception as exc:  # transport errors, and a token the SDK could not refresh
                # A missed beat is harmless; the lease outlives several intervals.
                log.warning("heartbeat to %s failed: %s", self.url, exc)
            self._stop.wait(self.interval)
