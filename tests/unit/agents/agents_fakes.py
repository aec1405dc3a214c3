"""Local HTTP servers for agent tests: an OpenAI-compatible chat endpoint and a callback receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable

from bench.fake_http import FakeHttpServer, Request


class _Server(FakeHttpServer):
    """A fake whose handler takes the request (its path and headers) and the body."""

    def __init__(self, handler: Callable[[Request, bytes], tuple[int, dict, dict]]):
        self.lock = threading.Lock()
        super().__init__(lambda request: handler(request, request.body))


def completion(content: str, prompt_tokens: int = 120, completion_tokens: int = 30,
               model: str = "fake-model") -> dict:
    """A chat completion body as OpenAI-compatible servers send it."""
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class FakeChatServer(_Server):
    """Answers /chat/completions from a script of (status, body) replies; the last one repeats."""

    def __init__(self, replies: list[tuple | Callable[[dict], tuple]],
                 api_key: str | None = None):
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.requests_at: list[float] = []  # when each came (Unix seconds)
        self.auth_headers: list[str | None] = []
        self.api_key = api_key
        super().__init__(self._handle)

    def _handle(self, handler: Request, body: bytes) -> tuple[int, dict, dict]:
        if not handler.path.endswith("/chat/completions"):
            return 404, {"error": "not found"}, {}
        request = json.loads(body)
        with self.lock:
            self.requests.append(request)
            self.requests_at.append(time.time())
            self.auth_headers.append(handler.headers.get("Authorization"))
            reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if self.api_key and handler.headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"error": {"message": "bad key"}}, {}
        reply = reply(request) if callable(reply) else reply
        # A reply is (status, body) or (status, body, headers).
        return reply[0], reply[1], reply[2] if len(reply) > 2 else {}


def expected_signature(body: bytes, secret: str) -> str:
    """The signature a correct sender puts on `body`, computed independently of the agent."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class CallbackServer(_Server):
    """Records posts, checks their signature, and answers from a script of statuses (then 200)."""

    def __init__(self, secret: str, statuses: list[int] | None = None):
        self.secret = secret
        self.statuses = list(statuses or [])
        self.received: list[dict] = []
        self.event = threading.Event()
        super().__init__(self._handle)

    def _handle(self, handler: Request, body: bytes) -> tuple[int, dict, dict]:
        signature = handler.headers.get("X-Quire-Signature")
        valid = signature == expected_signature(body, self.secret)
        with self.lock:
            self.received.append({"path": handler.path, "body": json.loads(body or b"null"),
                                  "signature_valid": valid, "raw": body})
            status = self.statuses.pop(0) if self.statuses else 200
        self.event.set()
        if not valid:
            return 401, {"error": "bad signature"}, {}
        return status, {"ok": status < 400}, {}

    def posts(self, path: str) -> list[dict]:
        with self.lock:
            return [r for r in self.received if r["path"] == path]

    def wait_for(self, path: str, count: int, timeout: float = 10.0) -> list[dict]:
        """Posts to `path` once at least `count` arrived, or whatever came before the deadline."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.posts(path)
            if len(found) >= count:
                return found
            self.event.wait(0.05)
            self.event.clear()
        return self.posts(path)
