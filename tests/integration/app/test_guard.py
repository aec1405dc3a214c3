"""The request guard's decisions from headers alone, and the upload page reading no more than the limit."""

from __future__ import annotations

import asyncio

from nicegui.elements.upload_files import LargeFileUpload
from starlette.requests import Request

from app import auth
from app.guard import CALLBACK_MAX_BYTES, SMALL_MAX_BYTES, foreign_reason, origin_of, rule_for, upload_max_bytes
from app.submitting import spool
from schema.settings import Settings


def request(host: str = "127.0.0.1:8080", scheme: str = "http", **headers: str) -> Request:
    raw = [(b"host", host.encode())] + [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "scheme": scheme, "path": "/api/tasks/1/cancel",
                    "server": ("127.0.0.1", 8080), "headers": raw, "query_string": b""})


def test_origins_compare_scheme_host_and_port():
    assert origin_of("http://127.0.0.1:8080/x") == ("http", "127.0.0.1", 8080)
    assert origin_of("https://Quire.Example.com") == ("https", "quire.example.com", 443)
    assert origin_of("null") is None and origin_of("file:///x") is None and origin_of("http://h:99999") is None


def test_same_origin_only_for_cookie_requests(tmp_path):
    settings = Settings(data_dir=tmp_path)
    cookie = f"{auth.SESSION_COOKIE}=anything"
    assert foreign_reason(request(origin="http://127.0.0.1:8080"), settings, databricks=False) is None
    assert foreign_reason(request(origin="http://127.0.0.1:8081", cookie=cookie), settings, databricks=False)
    assert foreign_reason(request(origin="https://127.0.0.1:8080", cookie=cookie), settings, databricks=False)
    assert foreign_reason(request(referer="http://localhost:8080/", cookie=cookie), settings, databricks=False)
    assert foreign_reason(request(cookie=cookie), settings, databricks=False)  # neither header, a cookie
    assert foreign_reason(request(), settings, databricks=False) is None  # a script: nothing to forge
    assert foreign_reason(request(origin="http://evil:1", authorization="Bearer t"), settings, databricks=False) is None
    # The Apps proxy's public host is this app's origin there, and only there.
    proxied = dict(origin="https://quire-123.aws.databricksapps.com", x_forwarded_host="quire-123.aws.databricksapps.com")
    assert foreign_reason(request(**proxied), settings, databricks=True) is None
    assert foreign_reason(request(**proxied), settings, databricks=False)
    public = Settings(data_dir=tmp_path, public_url="https://quire.example.com/")
    assert foreign_reason(request(origin="https://quire.example.com"), public, databricks=False) is None


def test_body_caps_by_route(tmp_path):
    settings = Settings(data_dir=tmp_path, max_upload_mb=2, max_batch_files=10)
    assert rule_for("POST", "/api/callbacks/7", settings).max_bytes == CALLBACK_MAX_BYTES
    assert rule_for("POST", "/api/attempts/7/heartbeat", settings).signed
    assert rule_for("POST", "/api/tasks", settings).max_bytes == upload_max_bytes(settings) == 21_000_000
    # The request limit caps a request below every file of the largest batch at the largest size.
    capped = Settings(data_dir=tmp_path, max_upload_mb=50, max_batch_files=1000, max_request_mb=500)
    assert rule_for("POST", "/api/tasks", capped).max_bytes == 501_000_000
    assert rule_for("POST", "/_nicegui/client/c1/upload/5", settings).needs_identity
    assert rule_for("POST", "/api/tasks/7/cancel", settings).max_bytes == SMALL_MAX_BYTES
    assert rule_for("GET", "/openapi.json", settings).needs_identity
    assert not rule_for("POST", "/auth/session", settings).needs_identity


def test_upload_page_spools_at_most_one_byte_past_the_limit(tmp_path):
    path = tmp_path / "big.pdf"
    path.write_bytes(b"%PDF-" + b"x" * 3_000_000)
    big = LargeFileUpload("big.pdf", "application/pdf", path)
    assert asyncio.run(spool(big.iterate(), tmp_path / "cut.pdf", 1_000_000)) == 1_000_001
    assert (tmp_path / "cut.pdf").stat().st_size == 1_000_001
    assert asyncio.run(spool(big.iterate(), tmp_path / "whole.pdf", 5_000_000)) == path.stat().st_size
    assert (tmp_path / "whole.pdf").read_bytes() == path.read_bytes()


def test_the_callback_server_refuses_a_huge_report_before_reading_it(db_dsn, tmp_path):
    from urllib.parse import urlsplit

    from app.callback_server import create_app
    from tests.e2e.app_harness import raw_request
    from tests.worker_helpers import serve_in_thread

    with serve_in_thread(create_app(db_dsn, Settings(data_dir=tmp_path))) as url:
        port = urlsplit(url).port
        status, text = raw_request(port, f"POST /api/callbacks/1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                                         "Content-Type: application/json\r\nContent-Length: 50000000\r\n")
        assert status == 413 and "1,000,000 bytes" in text
        status, _ = raw_request(port, f"POST /api/callbacks/1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                                      "Content-Length: 2\r\n", b"{}")
        assert status == 404  # small reports still reach the route: unknown attempt
