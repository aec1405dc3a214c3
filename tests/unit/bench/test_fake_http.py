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


def _files(request):
    if request.method == "PUT":
        return 204, b""
    return 200, b"" if request.method == "HEAD" else b"12345", {"Content-Length": "5", "Content-Type": "text/plain"}


def test_keeps_connections_alive_names_the_length_of_a_head_and_refuses_other_methods():
    with (FakeHttpServer(_files, keep_alive=True, methods=("GET", "HEAD", "PUT")) as server,
          httpx.Client(base_url=server.url, timeout=10) as client):
        head = client.head("/f")
        assert head.status_code == 200 and head.headers["content-length"] == "5" and head.content == b""
        assert client.get("/f").content == b"12345"
        assert client.put("/f", content=b"x").status_code == 204
        assert client.get("/f").http_version == "HTTP/1.1"
        refused = client.post("/f", json={})
        assert refused.status_code == 501 and "POST" in refused.text
    with FakeHttpServer(_files) as server:
        assert httpx.head(f"{server.url}/f", timeout=10).status_code == 501  # HEAD only where asked for
