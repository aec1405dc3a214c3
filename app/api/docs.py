"""The API's interactive docs (Swagger UI) served from a Python package, so they work offline."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from swagger_ui_bundle import swagger_ui_path

if TYPE_CHECKING:
    from nicegui.app import App

ASSETS = "/docs-assets"
router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
async def swagger_ui() -> HTMLResponse:
    """Swagger UI for /openapi.json, with its script and styles from this server, never a CDN."""
    return get_swagger_ui_html(openapi_url="/openapi.json", title="Quire API",
                               swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                               swagger_css_url=f"{ASSETS}/swagger-ui.css",
                               swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")


def install(app: App, *, title: str, version: str, description: str) -> None:
    """Serves /openapi.json, /docs and the Swagger UI assets (FastAPI's own /docs loads them from a CDN)."""
    app.title, app.version, app.description = title, version, description
    app.openapi_url = "/openapi.json"
    app.setup()  # adds /openapi.json; docs_url and redoc_url stay unset
    app.include_router(router)
    app.add_static_files(ASSETS, str(swagger_ui_path))
