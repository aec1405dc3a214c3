"""The shared fake HTTP server: JSON and raw replies, any method, headers, and no reply at all."""

import httpx
import pytest

from bench.fake_http import FakeHttpServer


def _echo(request):
    if request.path == "/raw":
        return 200, b"<p>hi</p>", {"Content-Type": "text/html"}
    if request.path == "/silent":
        return None
    return 201, {"method": request.method, "path": request.path, "body": request.json(),
                 "auth": request.headers.get("Authorization")}, {"Retry-After": "3"}


def test_answers_json_raw_bytes_and_headers_for_any_method():
    with FakeHttpServer(_echo) as server:
        posted = httpx.post(f"{server.url}/v1/x?q=1", json={"a": 1}, headers={"Authorization": "Bearer t"})
        assert posted.status_code == 201 and posted.headers["retry-after"] == "3"
        assert posted.headers["content-type"] == "application/json"
        assert posted.json() == {"method": "POST", "path": "/v1/x?q=1", "body": {"a": 1}, "auth": "Bearer t"}
        assert httpx.get(f"{server.url}/y").json()["body"] is None
        assert httpx.delete(f"{server.url}/z").json()["method"] == "DELETE"
        raw = httpx.get(f"{server.url}/raw")
        assert raw.text == "<p>hi</p>" and raw.headers["content-type"] == "text/html"
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{server.url}/silent", timeout=10)


def test_stopped_server_refuses_connections():
    server = FakeHttpServer(_echo).start()
    url = server.url
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=5)
