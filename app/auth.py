"""Who is asking: Databricks Apps' forwarded identity there, the local operator token anywhere else."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request
from fastapi.responses import RedirectResponse

from schema.settings import Settings

SESSION_COOKIE = "quire_session"
SESSION_SECONDS = 7 * 86400
LOCAL_OPERATOR = "operator"
TOKEN_FILE = "operator_token"


class Role(IntEnum):
    """What a caller may do; each role may do everything the ones below it may."""

    VIEWER = 1    # reads every page and figure
    REVIEWER = 2  # also checks, corrects, approves and rejects extracted documents
    OPERATOR = 3  # also retries, cancels, releases held batches and changes budgets


@dataclass(frozen=True)
class Identity:
    """A caller: a name when known, and the role that says what it may do."""

    name: str | None
    role: Role
    via: str  # "databricks", "token", "session" or "anonymous"

    @property
    def authenticated(self) -> bool:
        return self.name is not None

    @property
    def actor(self) -> str:
        """The name a change is recorded under; an anonymous caller changes nothing."""
        if self.name is None:
            raise PermissionError("an anonymous caller cannot change anything")
        return self.name

    @property
    def operator(self) -> bool:
        return self.role >= Role.OPERATOR

    @property
    def reviewer(self) -> bool:
        return self.role >= Role.REVIEWER


ANONYMOUS = Identity(name=None, role=Role.VIEWER, via="anonymous")


def behind_databricks_apps() -> bool:
    """Databricks Apps sets DATABRICKS_APP_NAME; its proxy is then the only way in."""
    return bool(os.environ.get("DATABRICKS_APP_NAME"))


def load_operator_token(settings: Settings) -> str:
    """QUIRE_OPERATOR_TOKEN, else the token stored under the data dir (made on first start)."""
    if settings.operator_token:
        return settings.operator_token
    path = Path(settings.data_dir) / TOKEN_FILE
    if path.exists():
        token = path.read_text().strip()
        if token:
            return token
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(24)
    # Created owner-only from the start, so the token is never readable by others even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


@dataclass(frozen=True)
class Session:
    """What a session cookie says: who, until when, and the id that signing out revokes."""

    name: str
    session_id: str
    expires: int


class Authenticator:
    """Resolves identities from request headers and cookies, and signs session cookies."""

    def __init__(self, settings: Settings, *, databricks: bool | None = None) -> None:
        self.databricks = behind_databricks_apps() if databricks is None else databricks
        self.operators = settings.operator_emails
        self.reviewers = settings.reviewer_emails
        self.token = load_operator_token(settings)
        # Sessions are signed with a key derived from the token: a new token ends every session.
        self._session_key = hashlib.sha256(b"quire-session:" + self.token.encode()).digest()
        # Ids of sessions signed out (app.api.session keeps this in step with Postgres).
        self.revoked: set[str] = set()

    @property
    def storage_secret(self) -> str:
        """Signs the UI's per-browser storage cookie (remembered preferences such as dark mode)."""
        return hashlib.sha256(b"quire-ui-storage:" + self._session_key).hexdigest()

    def check_token(self, candidate: str | None) -> bool:
        if not candidate or self.token is None:
            return False
        return hmac.compare_digest(candidate.encode(), self.token.encode())

    def identify(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> Identity:
        if self.databricks:
            # Only Databricks Apps' proxy can set these there; anywhere else anyone could.
            user = (headers.get("x-forwarded-email") or headers.get("x-forwarded-user") or "").strip()
            if not user:
                return ANONYMOUS
            role = (Role.OPERATOR if user.lower() in self.operators
                    else Role.REVIEWER if user.lower() in self.reviewers else Role.VIEWER)
            return Identity(name=user, role=role, via="databricks")
        scheme, _, credential = (headers.get("authorization") or "").partition(" ")
        if scheme.lower() == "bearer" and self.check_token(credential.strip()):
            return Identity(name=LOCAL_OPERATOR, role=Role.OPERATOR, via="token")
        name = self.read_session(cookies.get(SESSION_COOKIE))
        if name:
            return Identity(name=name, role=Role.OPERATOR, via="session")
        return ANONYMOUS

    def make_session(self, name: str = LOCAL_OPERATOR, *, now: float | None = None) -> str:
        """A signed cookie value naming the caller, its expiry and an id of its own (for signing out)."""
        expires = int((now or time.time()) + SESSION_SECONDS)
        body = f"{name}|{expires}|{secrets.token_urlsafe(18)}"
        signature = hmac.new(self._session_key, body.encode(), hashlib.sha256).hexdigest()
        return base64.urlsafe_b64encode(f"{body}|{signature}".encode()).decode()

    def session_of(self, cookie: str | None, *, now: float | None = None) -> Session | None:
        """The session a cookie carries when its signature holds and it has not expired (revoked or not)."""
        if not cookie:
            return None
        try:
            name, expires, session_id, signature = base64.urlsafe_b64decode(cookie.encode()).decode().rsplit("|", 3)
            body = f"{name}|{expires}|{session_id}"
            expected = hmac.new(self._session_key, body.encode(), hashlib.sha256).hexdigest()
            if hmac.compare_digest(signature, expected) and int(expires) > (now or time.time()):
                return Session(name=name, session_id=session_id, expires=int(expires))
        except (ValueError, UnicodeDecodeError):
            pass
        return None

    def read_session(self, cookie: str | None, *, now: float | None = None) -> str | None:
        """The name of a valid session that was not signed out, or None."""
        session = self.session_of(cookie, now=now)
        if session is None or session.session_id in self.revoked:
            return None
        return session.name


@dataclass(frozen=True)
class SubmitRights:
    """For whom and how urgently a caller may submit documents."""

    customers: frozenset[str] | None  # None: any customer, and none
    max_priority: int

    def refusal(self, who: Identity, customer: str | None, priority: int) -> str | None:
        """Why this submission is not allowed, or None when it is."""
        if priority > self.max_priority:
            return (f"{who.name} may submit at priority {self.max_priority} at most; "
                    "higher priorities are for operators")
        if self.customers is not None and customer not in self.customers:
            allowed = ", ".join(sorted(self.customers)) or "no customer"
            named = f"customer {customer!r}" if customer else "documents without a customer"
            return f"{who.name} may not submit {named}; only for: {allowed}"
        return None


def submit_rights(who: Identity, settings: Settings) -> SubmitRights | None:
    """What a caller may submit: operators anything at any priority; a caller listed in quire.toml's
    [submitters] for its customers up to QUIRE_SUBMIT_MAX_PRIORITY; anyone else nothing (None)."""
    if not who.authenticated:
        return None
    if who.operator:
        return SubmitRights(customers=None, max_priority=9)
    customers = settings.submitters().get((who.name or "").lower())
    if customers is None:
        return None
    return SubmitRights(customers=None if "*" in customers else customers,
                        max_priority=settings.submit_max_priority)


def no_submit_reason(who: Identity) -> str:
    return (f"{who.name or 'an anonymous caller'} may not submit documents: "
            "an operator lists submitters and their customers in quire.toml's [submitters]")


_current: Authenticator | None = None


def install(authenticator: Authenticator) -> None:
    global _current
    _current = authenticator


def installed() -> Authenticator | None:
    """The installed authenticator, or None in a process that serves no one but agents."""
    return _current


def current() -> Authenticator:
    if _current is None:
        raise RuntimeError("no authenticator installed: app.main.run_app wires one at start")
    return _current


def identity_of(request: Request) -> Identity:
    """The identity behind an HTTP request (a page load or an API call)."""
    return current().identify(request.headers, request.cookies)


def sign_in_hint(headers: Mapping[str, str] | None = None) -> str:
    """What an anonymous caller is told to do; a bearer token that is not the operator's is named as such."""
    if current().databricks:
        return "no identity: reach Quire through its Databricks Apps URL"
    scheme, _, credential = ((headers or {}).get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and credential.strip():
        return "wrong token: the bearer token is not the operator token"
    return "sign in first: send the operator token as a bearer header"


def require_user(request: Request) -> Identity:
    """FastAPI dependency: any signed-in caller."""
    who = identity_of(request)
    if not who.authenticated:
        raise HTTPException(status_code=401, detail=sign_in_hint(request.headers),
                            headers={"WWW-Authenticate": "Bearer"})
    return who


def require_operator(who: Identity = Depends(require_user)) -> Identity:
    """FastAPI dependency: a caller with the operator role."""
    if not who.operator:
        raise HTTPException(status_code=403, detail=f"{who.name} does not have the operator role")
    return who


def require_reviewer(who: Identity = Depends(require_user)) -> Identity:
    """FastAPI dependency: a caller with the reviewer role (operators have it too)."""
    if not who.reviewer:
        raise HTTPException(status_code=403, detail=f"{who.name} does not have the reviewer role")
    return who


class PageGuard:
    """ASGI middleware: an anonymous request for any page goes to the sign-in page; the API's
    routes answer 401 themselves. A page reads its viewer with `viewer(request)`."""

    OPEN_PAGES = frozenset({"/login"})

    def __init__(self, app) -> None:
        self.app = app
        self._patterns: list | None = None

    def _is_page(self, path: str) -> bool:
        if self._patterns is None:
            from nicegui import Client
            from starlette.routing import compile_path

            # Pages are registered at import, before the first request arrives.
            self._patterns = [compile_path(p)[0] for p in set(Client.page_routes.values())]
        return path not in self.OPEN_PAGES and any(p.match(path) for p in self._patterns)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and self._is_page(scope["path"]):
            request = Request(scope)
            who = identity_of(request)
            if not who.authenticated:
                if current().databricks:
                    # Behind Databricks Apps the proxy always sends an identity; none means a bypassed proxy.
                    target = "/login?reason=proxy"
                else:
                    wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    target = f"/login?next={quote(wanted, safe='/')}"
                await RedirectResponse(target, status_code=303)(scope, receive, send)
                return
            scope.setdefault("state", {})["identity"] = who
        await self.app(scope, receive, send)


def viewer(request: Request) -> Identity:
    """The signed-in viewer of a page, as PageGuard found it."""
    return request.state.identity
