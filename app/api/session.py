"""Signing in and out with the local operator token (a session cookie for the browser)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from app import auth

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
async def sign_out() -> RedirectResponse:
    """Ends the browser session."""
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(auth.SESSION_COOKIE, path="/")
    return response
