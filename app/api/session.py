"""Signing in and out with the local operator token (a session cookie for the browser)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from app import auth
from app.figure_cache import in_thread
from schema import sessions

log = logging.getLogger("quire.app")
REVOCATIONS_SECONDS = 5.0

router = APIRouter(prefix="/auth", tags=["session"])


class TokenIn(BaseModel):
    token: str


def set_session_cookie(request: Request, response: Response) -> None:
    response.set_cookie(auth.SESSION_COOKIE, auth.current().make_session(), max_age=auth.SESSION_SECONDS,
                        httponly=True, samesite="lax", secure=request.url.scheme == "https", path="/")


@router.post("/session", status_code=204, responses={401: {"description": "wrong token"}})
async def sign_in(body: TokenIn, request: Request) -> Response:
    """Exchanges the operator token for a session cookie."""
    authenticator = auth.current()
    if authenticator.databricks:
        raise HTTPException(status_code=400, detail="behind Databricks Apps, identity comes from the platform")
    if not authenticator.check_token(body.token.strip()):
        raise HTTPException(status_code=401, detail="that is not the operator token")
    response = Response(status_code=204)
    set_session_cookie(request, response)
    return response


@router.get("/logout")
async def sign_out(request: Request) -> RedirectResponse:
    """Ends the browser session, on the server too: the cookie is refused from now on, even if kept."""
    authenticator = auth.current()
    session = authenticator.session_of(request.cookies.get(auth.SESSION_COOKIE))
    if session is not None:
        authenticator.revoked.add(session.session_id)
        expires = datetime.fromtimestamp(session.expires, UTC)
        await in_thread(request.app.state.pool, sessions.session_revoke, session.session_id, expires)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(auth.SESSION_COOKIE, path="/")
    return response


async def keep_revocations(pool, *, every_seconds: float = REVOCATIONS_SECONDS) -> None:
    """Keeps this process's set of signed-out sessions in step with Postgres, where every app
    process records the sign-outs it serves (read at start, then every few seconds)."""
    authenticator = auth.current()
    while True:
        try:
            authenticator.revoked |= await in_thread(pool, sessions.session_revoked_list)
        except Exception:  # an outage: the revocations known so far stay in force
            log.warning("could not read revoked sessions", exc_info=True)
        await asyncio.sleep(every_seconds)
