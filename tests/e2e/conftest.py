"""Fixtures of the end-to-end tests: a running app on a database of its own, and Debian's Chromium.

A test module that needs the app started differently defines its own `app_server`.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import sync_playwright

from schema import queue
from tests.e2e.app_harness import launch_browser, start_app


@pytest.fixture(scope="module")
def app_server(pg_server_dsn, template_db, tmp_path_factory):
    """One app per test module, with the default agent configured; yields (server, connection)."""
    server, conn, teardown = start_app(pg_server_dsn, template_db, tmp_path_factory)
    queue.configure_agent(conn, "documents")
    yield server, conn
    teardown()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = launch_browser(playwright)
        yield chromium
        chromium.close()
