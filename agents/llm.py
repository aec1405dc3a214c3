"""Chat completions over HTTP against any OpenAI-compatible endpoint or Databricks serving."""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from agents.errors import ConfigurationError, EndpointRefused, ExtractionError
from agents.prompt import estimate_json, estimate_messages
from agents.tracing import cost_of, record_usage

log = logging.getLogger(__name__)

_RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504}
# Answers about the agent, not the document (bad key, no access, unknown model or path): final.
_REFUSED_STATUSES = {401, 403, 404}
_MAX_RETRIES = 3
_MAX_RETRY_AFTER = 120.0
# A 429 is the endpoint's quota speaking, not a fault: the call waits out each Retry-After within
# the attempt (the orchestrator learns of it from the report and slows the agent down), for at most
# this many seconds of waiting in all, before the attempt gives up.
_DEFAULT_RATE_LIMIT_WAIT = 300.0


@dataclass(frozen=True)
class ChatResult:
    """One completion: the message text and the tokens it cost."""

    content: str
    input_tokens: int
    output_tokens: int
    model: str
    usage_reported: bool


@dataclass
class Endpoint:
    """Where to send chat completions and how to authenticate (headers fetched per call)."""

    base_url: str
    model: str
    auth_headers: Callable[[], dict[str, str]]

    @classmethod
    def from_env(cls) -> Endpoint:
        """The endpoint from QUIRE_LLM_*, or the workspace's serving endpoints on Databricks."""
        model = os.environ.get("QUIRE_LLM_MODEL", "").strip()
        if not model:
            raise ConfigurationError(
                "QUIRE_LLM_MODEL is not set (the model or serving endpoint name)")
        base = os.environ.get("QUIRE_LLM_BASE_URL", "").strip()
        if base:
            key = os.environ.get("QUIRE_LLM_API_KEY", "").strip()
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            return cls(base.rstrip("/"), model, lambda: dict(headers))
        if os.environ.get("DATABRICKS_HOST") or os.environ.get("DATABRICKS_RUNTIME_VERSION"):
            # In a job the runtime's own credentials also name the workspace.
            from databricks.sdk import WorkspaceClient

            config = WorkspaceClient().config
            # Serving endpoints speak the OpenAI protocol under /serving-endpoints; the SDK's
            # headers are asked for on every call so OAuth tokens refresh during long runs.
            return cls(f"{config.host.rstrip('/')}/serving-endpoints", model, config.authenticate)
        raise ConfigurationError(
            "no LLM endpoint: set QUIRE_LLM_BASE_URL (OpenAI-compatible) or DATABRICKS_HOST "
            "(a job is given it by --workspace-host)")


class ChatClient:
    """Sends chat completions with retries on throttling, server errors and lost connections."""

    def __init__(self, endpoint: Endpoint, timeout: float | None = None):
        self.endpoint = endpoint
        self.timeout = timeout or float(os.environ.get("QUIRE_LLM_TIMEOUT_SECONDS", "120"))
        self.max_output_tokens = int(os.environ.get("QUIRE_LLM_MAX_OUTPUT_TOKENS", "4096"))
        self._json_mode = True
        self._http = httpx.Client(timeout=self.timeout)

    @classmethod
    def from_env(cls) -> ChatClient:
        return cls(Endpoint.from_env())

    def close(self) -> None:
        self._http.close()

    def complete(self, messages: list[dict], tracer: Any, usage: Any) -> ChatResult:
        """One traced completion; its tokens and cost are added to `usage` and the span."""
        with tracer.span("chat_completion", "CHAT_MODEL",
                         {"model": self.endpoint.model, "messages": messages}) as span:
            result = self._post_with_retries(messages, usage)
            cost = cost_of(result.input_tokens, result.output_tokens)
            usage.add(result.input_tokens, result.output_tokens, cost)
            record_usage(span, result.input_tokens, result.output_tokens, cost,
                         model=result.model, estimated=not result.usage_reported)
            span.set_outputs({"content": result.content})
        return result

    def _body(self, messages: list[dict]) -> dict:
        body = {"model": self.endpoint.model, "messages": messages, "temperature": 0,
                "max_tokens": self.max_output_tokens}
        if self._json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def _post_with_retries(self, messages: list[dict], usage: Any = None) -> ChatResult:
        url = f"{self.endpoint.base_url}/chat/completions"
        last_error = "no attempt made"
        failures = 0          # errors other than rate limits, each retried with backoff
        rate_limited_wait = 0.0
        wait_budget = float(os.environ.get("QUIRE_LLM_RATE_LIMIT_WAIT_SECONDS", _DEFAULT_RATE_LIMIT_WAIT))
        while True:
            try:
                response = self._post(url, messages)
            except httpx.TransportError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                response = None
            if response is not None and response.status_code == 200:
                return self._parse(response, messages)
            if response is not None:
                last_error = f"HTTP {response.status_code}: {response.text[:500]}"
                if response.status_code in _REFUSED_STATUSES:
                    raise EndpointRefused(f"LLM endpoint answered {last_error} (model {self.endpoint.model!r})")
                if response.status_code not in _RETRY_STATUSES:
                    raise ExtractionError(f"LLM endpoint answered {last_error}")
            delay = _retry_after(response) if response is not None else None
            if response is not None and response.status_code == 429:
                if usage is not None:
                    usage.note_rate_limited(delay, _limit_tokens(response))
                # Waits a little past the Retry-After, spread out, so the calls that were refused
                # together do not all come back in the same instant.
                wait = (delay if delay is not None else 1.0) * (1.0 + 0.1 * random.random())
                if rate_limited_wait + wait > wait_budget:
                    raise ExtractionError(f"LLM endpoint still rate limited after {rate_limited_wait:.0f}s "
                                          f"of waiting: {last_error}")
                rate_limited_wait += wait
                log.warning("LLM endpoint rate limited the call; retrying in %.1fs", wait)
            else:
                failures += 1
                if failures > _MAX_RETRIES:
                    raise ExtractionError(f"LLM endpoint failed after {_MAX_RETRIES} retries: {last_error}")
                wait = delay if delay is not None else min(2.0 ** (failures - 1), _MAX_RETRY_AFTER)
                log.warning("LLM call failed (%s); retry %d in %.1fs", last_error, failures, wait)
            time.sleep(wait)

    def _post(self, url: str, messages: list[dict]) -> httpx.Response:
        response = self._http.post(url, json=self._body(messages),
                                   headers=self.endpoint.auth_headers())
        if response.status_code == 400 and self._json_mode and "response_format" in response.text:
            # Some servers do not know JSON mode; the prompt asks for JSON all the same.
            self._json_mode = False
            response = self._http.post(url, json=self._body(messages),
                                       headers=self.endpoint.auth_headers())
        return response

    def _parse(self, response: httpx.Response, messages: list[dict]) -> ChatResult:
        try:
            payload = response.json()
            content = payload["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ExtractionError(f"LLM endpoint returned an unexpected body: {exc}") from exc
        usage = payload.get("usage") or {}
        reported = "prompt_tokens" in usage and "completion_tokens" in usage
        if reported:
            input_tokens = int(usage["prompt_tokens"])
            output_tokens = int(usage["completion_tokens"])
        else:
            # Without a usage block the estimate keeps the ledger roughly right.
            input_tokens, output_tokens = estimate_messages(messages), estimate_json(content)
        return ChatResult(content, input_tokens, output_tokens,
                          payload.get("model") or self.endpoint.model, reported)


def _retry_after(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (or retry-after-ms), at most _MAX_RETRY_AFTER; None if absent."""
    raw_ms = response.headers.get("retry-after-ms")
    raw = response.headers.get("retry-after")
    try:
        if raw_ms:
            return min(max(float(raw_ms) / 1000.0, 0.0), _MAX_RETRY_AFTER)
        return min(max(float(raw), 0.0), _MAX_RETRY_AFTER) if raw else None
    except ValueError:
        return None


def _limit_tokens(response: httpx.Response) -> int | None:
    """The tokens a minute the endpoint says it allows (OpenAI's x-ratelimit-limit-tokens), if it says."""
    raw = response.headers.get("x-ratelimit-limit-tokens")
    try:
        value = int(raw) if raw else None
    except ValueError:
        return None
    return value if value is not None and 0 < value <= 10**12 else None


def parse_json_object(content: str) -> dict:
    """The JSON object in a model reply (code fences tolerated), or ValueError."""
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[4:] if text.lower().startswith("json") else text
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("the reply is JSON but not an object")
    return value
