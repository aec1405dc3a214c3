"""Sign-in with the local operator token; behind Databricks Apps, a pointer to the platform."""

from __future__ import annotations

import json

from fastapi import Query, Request
from fastapi.responses import RedirectResponse
from nicegui import ui

from app import auth
from app.api.session import set_session_cookie
from app.components.layout import PAGE_CSS


def _safe_next(path: str | None) -> str:
    # Only same-site paths: an open redirect would turn the sign-in link into a phishing tool.
    return path if path and path.startswith("/") and not path.startswith("//") else "/"


@ui.page("/login", title="Sign in · Quire")
async def login_page(request: Request, next_path: str = Query("/", alias="next"), token: str | None = None,
                     reason: str | None = None):
    authenticator = auth.current()
    target = _safe_next(next_path)
    if not authenticator.databricks:
        if token and authenticator.check_token(token):
            response = RedirectResponse(target, status_code=303)
            set_session_cookie(request, response)
            return response
        if auth.identity_of(request).authenticated:
            return RedirectResponse(target, status_code=303)
    ui.add_css(PAGE_CSS)
    ui.colors(primary="#1e3a5f")
    with ui.column().classes("w-full min-h-screen items-center justify-center"):
        with ui.card().classes("quire-card w-[420px] p-8 gap-4"):
            with ui.row().classes("items-center gap-2"):
                ui.icon("auto_stories", size="30px").classes("text-primary")
                ui.label("Quire").classes("text-2xl font-semibold")
            if authenticator.databricks:
                ui.label("Sign in through your Databricks workspace").classes("text-lg font-medium")
                ui.label("Quire runs as a Databricks App here: your identity comes from the workspace. "
                         "Open the app from its Databricks Apps URL.").classes("quire-muted")
                return
            ui.label("Sign in").classes("text-lg font-medium")
            ui.label("Paste the operator token that Quire printed when it started "
                     "(or the value of QUIRE_OPERATOR_TOKEN).").classes("quire-muted text-sm")
            field = ui.input("Operator token", password=True, password_toggle_button=True) \
                .props('outlined autofocus data-testid="login-token"').classes("w-full")
            error = ui.label("Wrong token." if token else "").classes("text-negative text-sm") \
                .props('data-testid="login-error"')

            async def sign_in() -> None:
                status = await ui.run_javascript(
                    "return (await fetch('/auth/session', {method: 'POST', credentials: 'same-origin', "
                    "headers: {'Content-Type': 'application/json'}, "
                    f"body: JSON.stringify({{token: {json.dumps(field.value or '')}}})}})).status", timeout=10)
                if status == 204:
                    ui.navigate.to(target)
                else:
                    error.text = "That is not the operator token."

            field.on("keydown.enter", sign_in)
            ui.button("Sign in", on_click=sign_in).props('unelevated color=primary data-testid="login-submit"') \
                .classes("w-full")
