"""A local HTTP server for fakes of JSON services (model endpoints, callback receivers, REST APIs,
the Databricks workspace and its Apps proxy), shared by the benchmarks and the tests: one function
answers every request."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    """One request as the fake received it."""

    method: str
    path: str
    headers: Message
    body: bytes

    def json(self) -> Any:
        """The body as JSON (None when empty)."""
        return json.loads(self.body or b"null")


# A reply is (status, body) or (status, body, headers); a body that is not bytes is sent as JSON.
# Its headers win over the ones the server sets (a HEAD reply names the Content-Length of the body it
# leaves out). None sends nothing: the connection closes without an answer.
Reply = tuple[int, Any] | tuple[int, Any, dict[str, str]] | None


METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")  # HEAD only where a fake asks for it


class FakeHttpServer:
    """Serves `handle(request)` from a thread; a context manager, started on entry (or by start())
    and stopped on exit (or by stop()).

    `host`: the address it listens on (a non-loopback one for a fake that must look public).
    `keep_alive`: HTTP/1.1 with persistent connections, as the services the SDKs talk to speak it.
    `methods`: the methods `handle` is asked about; any other is refused with 501, as http.server does.
    """

    def __init__(self, handle: Callable[[Request], Reply], *, port: int = 0, host: str = "127.0.0.1",
                 keep_alive: bool = False, methods: Collection[str] = METHODS) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def _serve(self) -> None:
                if self.command not in methods:
                    self.send_error(501, f"Unsupported method ({self.command!r})")
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                reply = handle(Request(self.command, self.path, self.headers, body))
                if reply is None:
                    self.close_connection = True
                    return
                status, payload = reply[0], reply[1]
                headers = dict(reply[2]) if len(reply) > 2 else {}
                if not isinstance(payload, bytes):
                    payload = json.dumps(payload).encode()
                    headers.setdefault("Content-Type", "application/json")
                self.send_response(status)
                for name, value in {"Content-Length": str(len(payload)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD" and status not in (204, 304):
                    self.wfile.write(payload)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHttpServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> FakeHttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
