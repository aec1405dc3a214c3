"""Fixtures of the end-to-end tests: a running app on a database of its own, and Debian's Chromium.

A test module that needs the app started differently defines its own `app_server`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from schema import queue
from tests.e2e.app_harness import launch_browser, start_app

# What a page shows is awaited up to 15 s rather than Playwright's 5: the suite runs four processes
# on two cores, and a busy machine is no failure. No test claims a time.
expect.set_options(timeout=15_000)


@pytest.fixture
def screenshots(tmp_path) -> Path:
    """Where a test saves what it shows: the test's own temporary folder, or QUIRE_SCREENSHOTS
    (`QUIRE_SCREENSHOTS=docs/img` refreshes the documentation's pictures). A test run leaves the
    checkout as it was."""
    folder = Path(os.environ.get("QUIRE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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
