"""A local stand-in for the Databricks Apps proxy: only requests with a valid workspace OAuth token of
a principal with CAN USE on the app reach it, without their Authorization header and with the
caller's forwarded identity. PATs and a job's runtime token are not OAuth tokens: refused (401)."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from bench import fake_http
from tests.integration.worker.fake_databricks import FakeWorkspace

# Headers the proxy sets itself: whatever a caller sends under these names is dropped.
FORWARDED = ("x-forwarded-email", "x-forwarded-user", "x-forwarded-preferred-username",
             "x-forwarded-access-token", "x-forwarded-host", "x-real-ip", "x-request-id")
HOP_BY_HOP = ("host", "authorization", "connection", "content-length", "transfer-encoding")


@dataclass
class Passage:
    """One request as the proxy saw it: who sent it and what it answered."""

    method: str
    path: str
    principal: str | None
    status: int


class FakeAppsProxy:
    """Serves on 127.0.0.1 in front of `upstream`; `refuse_with` makes it answer every request so."""

    def __init__(self, workspace: FakeWorkspace, upstream: str, *, host: str = "127.0.0.1") -> None:
        """`host`: the address it listens on and jobs reach it by (a non-loopback one for a
        deployment the Jobs executor must accept as public)."""
        self.workspace = workspace
        self.upstream = upstream.rstrip("/")
        self.refuse_with: int | None = None
        self.passages: list[Passage] = []
        self.lock = threading.Lock()
        self._http = httpx.Client(timeout=30)
        # The app behind it serves GET and POST; the proxy refuses any other method (501).
        self.server = fake_http.FakeHttpServer(self.serve, host=host, keep_alive=True, methods=("GET", "POST"))
        self.url = self.server.url

    def __enter__(self) -> FakeAppsProxy:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
        self._http.close()

    def seen(self, path_part: str) -> list[Passage]:
        """The requests that passed with `path_part` in their path."""
        with self.lock:
            return [p for p in self.passages if path_part in p.path]

    def _forward(self, method: str, path: str, headers: Any, body: bytes, principal: str) -> httpx.Response:
        sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP + FORWARDED}
        email = self.workspace.emails.get(principal, principal)
        sent.update({"X-Forwarded-Email": email, "X-Forwarded-User": f"{principal}@424242",
                     "X-Forwarded-Preferred-Username": email, "X-Forwarded-Host": self.url.split("//", 1)[1],
                     "X-Real-Ip": "10.0.0.7", "X-Request-Id": uuid.uuid4().hex})
        return self._http.request(method, self.upstream + path, content=body, headers=sent)

    def serve(self, request: fake_http.Request) -> fake_http.Reply:
        """Refuses what the real proxy refuses, and forwards the rest as the caller's principal."""
        authorization = request.headers.get("Authorization")
        # Only OAuth access tokens count: a PAT or a job's runtime token is no principal here.
        principal = self.workspace.oauth_principal(authorization)
        headers: dict[str, str] = {}
        if self.refuse_with is not None:
            status, answer = self.refuse_with, b"Forbidden"
        elif authorization is None:
            # Like the real proxy: no credentials, off to the workspace's login page.
            status, answer = 302, b""
            headers = {"Location": f"{self.workspace_host}/oidc/oauth2/v2.0/authorize?redirect_uri=app"}
        elif principal is None:
            status, answer = 401, b"Unauthorized: not a valid OAuth token"
        elif principal not in self.workspace.app_users:
            status, answer = 403, b"Forbidden: the caller does not have CAN USE on the app"
        else:
            try:
                response = self._forward(request.method, request.path, request.headers, request.body, principal)
                status, answer = response.status_code, response.content
                headers = {"Content-Type": response.headers.get("content-type", "application/json")}
            except httpx.TransportError:  # the app is down (a redeploy): the proxy says so
                status, answer = 502, b"Bad Gateway: the app is not running"
        with self.lock:
            self.passages.append(Passage(request.method, request.path, principal, status))
        return status, answer, headers

    @property
    def workspace_host(self) -> str:
        return getattr(self.workspace, "host", "https://workspace.example")
