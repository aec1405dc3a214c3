"""A rate-limited OpenAI-compatible chat endpoint: a tokens-per-minute quota over a sliding minute.

    python bench/fake_llm.py --tpm 40000 [--port 0]    # prints {"url": ...}, serves until killed

A request whose tokens (prompt estimated at 4 characters a token, plus a fixed completion) would
take the last 60 seconds past the quota is answered 429 with a Retry-After of the seconds until it
would fit. Answers are a valid extraction with no fields. Used by bench/ratelimit.py and by the
adaptive-throttle test.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fake_http import FakeHttpServer, Request

COMPLETION_TOKENS = 60
ANSWER = json.dumps({"document_type": "invoice", "fields": {}})


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt's tokens, at four characters a token."""
    chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    return max(1, chars // 4)


class RateLimitedChat:
    """The endpoint, served from a thread; counts what it answered."""

    def __init__(self, tpm: int, *, port: int = 0, latency_seconds: float = 0.05):
        self.tpm = tpm
        self.latency_seconds = latency_seconds
        self.window: collections.deque[tuple[float, int]] = collections.deque()
        self.lock = threading.Lock()
        self.ok = 0
        self.rate_limited = 0
        self.tokens = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.refusals: list[float] = []  # when each 429 was answered (time.monotonic)
        self.server = FakeHttpServer(self._serve, port=port)

    def _serve(self, request: Request) -> tuple[int, Any, dict[str, str]]:
        if request.method == "GET":
            return 200, self.stats(), {}
        return self.answer(request.json() or {})

    @property
    def url(self) -> str:
        return f"{self.server.url}/v1"

    def answer(self, body: dict[str, Any]) -> tuple[int, dict, dict]:
        """A completion if the request fits the quota of the last minute, else 429 with Retry-After."""
        need = prompt_tokens(body) + COMPLETION_TOKENS
        with self.lock:
            now = time.monotonic()
            while self.window and self.window[0][0] <= now - 60:
                self.window.popleft()
            used = sum(t for _, t in self.window)
            if used + need > self.tpm:
                # Seconds until enough of the window has expired for this request to fit.
                freed, wait = used, 1.0
                for at, tokens in self.window:
                    freed -= tokens
                    if freed + need <= self.tpm:
                        wait = max(1.0, at + 60 - now)
                        break
                self.rate_limited += 1
                self.refusals.append(now)
                return 429, {"error": {"message": "rate limit exceeded", "type": "rate_limit"}}, {
                    "Retry-After": str(math.ceil(wait))}
            self.window.append((now, need))
            self.ok += 1
            self.tokens += need
            self.first_at = self.first_at or now
            self.last_at = now
        time.sleep(self.latency_seconds)
        prompt = need - COMPLETION_TOKENS
        return 200, {"id": "chatcmpl-fake", "object": "chat.completion", "model": body.get("model", "fake"),
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": ANSWER}}],
                     "usage": {"prompt_tokens": prompt, "completion_tokens": COMPLETION_TOKENS,
                               "total_tokens": need}}, {}

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {"ok": self.ok, "rate_limited": self.rate_limited, "tokens": self.tokens, "tpm": self.tpm}

    def __enter__(self) -> RateLimitedChat:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tpm", type=int, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with RateLimitedChat(args.tpm, port=args.port) as server:
        print(json.dumps({"url": server.url}), flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
