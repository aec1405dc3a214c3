"""The one way tests wait: poll a condition until it holds, failing the test at a generous deadline."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.05,
               message: str = "condition") -> Any:
    """Polls `condition` until it returns something truthy, and returns that; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message} (last value {value!r})")
        time.sleep(interval)


async def wait_until_async(condition: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.02,
                           message: str = "condition", blocking: bool = False) -> Any:
    """`wait_until` inside an event loop: `condition` may be a coroutine function, or with
    `blocking=True` a function that blocks (it then runs in a thread so the loop keeps going)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await asyncio.to_thread(condition) if blocking else condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message} (last value {value!r})")
        await asyncio.sleep(interval)
