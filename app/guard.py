"""Checks each HTTP request before anything reads its body: where a state change comes from,
who is asking on routes that need someone, and how many bytes the route may receive."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import auth
from schema.settings import Settings

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CALLBACK_MAX_BYTES = 1_000_000      # a signed report or heartbeat
SOCKET_MAX_BYTES = 1_000_000        # the pages' Socket.IO long-polling (python-socketio's own default)
SMALL_MAX_BYTES = 64_000            # every other route: sign-in, retry, cancel, queries
MULTIPART_OVERHEAD = 1_000_000      # form fields and part headers around the files of one upload
DOCS_PAGES = frozenset({"/docs", "/docs/oauth2-redirect"})
OPENAPI = "/openapi.json"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SIGNED = re.compile(r"^/api/(?:callbacks/[^/]+|attempts/[^/]+/heartbeat)/?$")
_PAGE_UPLOAD = re.compile(r"^/_nicegui/client/[^/]+/upload/[^/]+/?$")


# On every response: no other site may frame a page (clickjacking), and no browser may guess a
# type other than the one declared (a stored file sniffed as HTML).
SECURITY_HEADERS = [(b"content-security-policy", b"frame-ancestors 'self'"),
                    (b"x-content-type-options", b"nosniff")]
UPLOAD_RETRY_SECONDS = 5


@dataclass(frozen=True)
class Rule:
    """What a route needs before its body is read."""

    max_bytes: int
    needs_identity: bool
    signed: bool = False  # authenticated by a signature over the body, never by a cookie
    submits: bool = False  # an upload: the caller must be allowed to submit, and uploads at once are few


def upload_max_bytes(settings: Settings) -> int:
    """The largest upload request: the request limit, or every file of the largest batch at the
    largest size when that is less."""
    files = settings.max_upload_mb * 1_000_000 * settings.max_batch_files
    return min(files, settings.max_request_mb * 1_000_000) + MULTIPART_OVERHEAD


def rule_for(method: str, path: str, settings: Settings) -> Rule:
    if _SIGNED.match(path):
        return Rule(CALLBACK_MAX_BYTES, needs_identity=False, signed=True)
    if (method == "POST" and path.rstrip("/") == "/api/tasks") or _PAGE_UPLOAD.match(path):
        return Rule(upload_max_bytes(settings), needs_identity=True, submits=True)
    if path.startswith("/_nicegui_ws/"):
        return Rule(SOCKET_MAX_BYTES, needs_identity=False)  # the sign-in page has a socket too
    needs = path.startswith("/api/") or path in DOCS_PAGES or path == OPENAPI \
        or (path == "/metrics" and not settings.metrics_public)
    return Rule(SMALL_MAX_BYTES, needs_identity=needs)


def origin_of(url: str | None) -> tuple[str, str, int] | None:
    """(scheme, host, port) of a URL, the default port filled in; None when it is no web origin."""
    try:
        parts = urlsplit(url or "")
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        if scheme not in _DEFAULT_PORTS or not host:
            return None
        return scheme, host, parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        return None


def own_origins(request: Request, settings: Settings, *, databricks: bool) -> set[tuple[str, str, int]]:
    """The origins this request may come from: its own Host, the public URL, the Apps proxy's host."""
    headers = request.headers
    candidates = [f"{request.url.scheme}://{headers.get('host', '')}", settings.public_url]
    if databricks:
        # The Apps proxy ends TLS: the browser's scheme is https whatever this process sees.
        candidates.append(f"https://{headers.get('host', '')}")
        if headers.get("x-forwarded-host"):
            proto = (headers.get("x-forwarded-proto") or "https").split(",")[0].strip()
            candidates.append(f"{proto}://{headers['x-forwarded-host'].split(',')[0].strip()}")
    return {o for o in map(origin_of, candidates) if o}


def foreign_reason(request: Request, settings: Settings, *, databricks: bool) -> str | None:
    """Why a state change may not have come from this app's own pages, or None if it did.

    A browser never attaches a bearer header by itself, so such a request is a script's, not a
    forged one; anything else must name this app as its origin (or carry no cookie of ours).
    """
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credential.strip():
        return None
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source:
        if auth.SESSION_COOKIE in request.cookies:
            return "a change sent with a session cookie must come from Quire's own pages (no Origin or Referer)"
        return None
    if origin_of(source) in own_origins(request, settings, databricks=databricks):
        return None
    return f"cross-origin change refused: {source[:200]} is not this app"


class RequestGuard:
    """Pure ASGI middleware: nothing is buffered, and a refused body is never read."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.uploads = 0  # upload requests being served

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and scope["path"].startswith("/_nicegui_ws/"):
            reason = self._foreign_socket(scope)
            if reason:
                await send({"type": "websocket.close", "code": 1008, "reason": reason[:120]})
                return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = with_security_headers(send)
        request = Request(scope)  # headers and cookies only: the body stays unread
        method, path = scope["method"], scope["path"]
        rule = rule_for(method, path, self.settings)
        authenticator = auth.installed()  # None where only agents are served (app.callback_server)
        if path.startswith("/_nicegui_ws/") and authenticator is not None:
            reason = self._foreign_socket(scope)
            if reason:
                await JSONResponse({"detail": reason}, status_code=403)(scope, receive, send)
                return
        if method in UNSAFE_METHODS and not rule.signed and authenticator is not None:
            reason = foreign_reason(request, self.settings, databricks=authenticator.databricks)
            if reason:
                await JSONResponse({"detail": reason}, status_code=403)(scope, receive, send)
                return
        if rule.needs_identity and authenticator is not None \
                and not authenticator.identify(request.headers, request.cookies).authenticated:
            await self._anonymous(path, authenticator, request.headers)(scope, receive, send)
            return
        if rule.submits and authenticator is not None:
            who = authenticator.identify(request.headers, request.cookies)
            if auth.submit_rights(who, self.settings) is None:
                await JSONResponse({"detail": auth.no_submit_reason(who)}, status_code=403)(scope, receive, send)
                return
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await JSONResponse({"detail": "Content-Length is not a number"}, status_code=400)(scope, receive, send)
                return
            if int(declared) > rule.max_bytes:
                await _too_large(rule)(scope, receive, send)
                return
        if not rule.submits:
            await self._capped(rule, scope, receive, send)
            return
        if self.uploads >= self.settings.uploads_at_once:
            await JSONResponse({"detail": f"{self.uploads} uploads are being received already; "
                                          f"send this one again in a few seconds (QUIRE_UPLOADS_AT_ONCE)"},
                               status_code=429, headers={"Retry-After": str(UPLOAD_RETRY_SECONDS)})(scope, receive, send)
            return
        self.uploads += 1
        held = [True]

        def release() -> None:
            if held[0]:
                held[0] = False
                self.uploads -= 1

        async def sending(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                release()  # answered: the slot is free even while the server tidies up after it

        try:
            await self._capped(rule, scope, receive, sending)
        finally:
            release()

    def _foreign_socket(self, scope: Scope) -> str | None:
        """Why a page socket may not come from this app's own pages: a browser always sends the
        Origin of a WebSocket, and of a cross-origin long-poll."""
        authenticator = auth.installed()
        if authenticator is None:
            return None
        if scope["type"] == "websocket":  # read as the HTTP request that opened it
            scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "ws"), "http")
            scope = {**scope, "type": "http", "scheme": scheme, "method": "GET"}
        request = Request(scope)
        source = request.headers.get("origin")
        if source and origin_of(source) not in own_origins(request, self.settings,
                                                            databricks=authenticator.databricks):
            return f"socket refused: {source[:200]} is not this app"
        return None

    @staticmethod
    def _anonymous(path: str, authenticator: auth.Authenticator, headers):
        if path in DOCS_PAGES and not authenticator.databricks:
            return RedirectResponse(f"/login?next={quote(path)}", status_code=303)
        return JSONResponse({"detail": auth.sign_in_hint(headers)}, status_code=401,
                            headers={"WWW-Authenticate": "Bearer"})

    async def _capped(self, rule: Rule, scope: Scope, receive: Receive, send: Send) -> None:
        """Runs the app, counting the bytes of a body sent without a length (chunked)."""
        state = {"received": 0, "exceeded": False, "started": False}

        async def counted() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > rule.max_bytes:
                    state["exceeded"] = True
                    raise BodyTooLarge()
            return message

        async def sending(message: Message) -> None:
            if state["exceeded"]:
                return  # the app's answer to a body cut short is replaced by the 413 below
            state["started"] = True
            await send(message)

        try:
            await self.app(scope, counted, sending)
        except Exception:
            if not state["exceeded"]:
                raise
        if state["exceeded"] and not state["started"]:
            await _too_large(rule)(scope, receive, send)


def with_security_headers(send: Send) -> Send:
    """`send` adding SECURITY_HEADERS to a response that does not set them itself."""
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {name.lower() for name, _ in headers}
            headers += [(name, value) for name, value in SECURITY_HEADERS if name not in present]
            message = {**message, "headers": headers}
        await send(message)
    return sending


class BodyTooLarge(Exception):
    """A streamed body went past its route's limit."""


def _too_large(rule: Rule) -> JSONResponse:
    return JSONResponse({"detail": f"request body too large: this route accepts at most {rule.max_bytes:,} bytes"},
                        status_code=413)


def install(app, settings: Settings) -> None:
    """Puts the guard in front of every route, and answers a database outage with a quick 503."""
    import psycopg
    from psycopg_pool import PoolTimeout

    from app.api.common import database_unavailable

    app.add_middleware(RequestGuard, settings=settings)
    for error in (psycopg.OperationalError, PoolTimeout):
        app.add_exception_handler(error, database_unavailable)
