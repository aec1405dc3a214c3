"""A local HTTP server for fakes of JSON services (model endpoints, callback receivers, REST APIs),
shared by the benchmarks and the tests: one function answers every request."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
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
# None sends nothing: the connection closes without an answer.
Reply = tuple[int, Any] | tuple[int, Any, dict[str, str]] | None


class FakeHttpServer:
    """Serves `handle(request)` on 127.0.0.1 from a thread; a context manager, started on entry
    (or by start()) and stopped on exit (or by stop())."""

    def __init__(self, handle: Callable[[Request], Reply], *, port: int = 0):
        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                reply = handle(Request(self.command, self.path, self.headers, body))
                if reply is None:
                    return
                status, payload = reply[0], reply[1]
                headers = dict(reply[2]) if len(reply) > 2 else {}
                if not isinstance(payload, bytes):
                    payload = json.dumps(payload).encode()
                    headers.setdefault("Content-Type", "application/json")
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(payload))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
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

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
