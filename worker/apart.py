"""Work the worker starts in a process of its own, at a lower CPU priority than its claims."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Any


async def start_apart(module: str, *args: str, nice: int, **options: Any) -> asyncio.subprocess.Process:
    """`python -m module args` at CPU priority `nice` (it and what it starts), in a session of its
    own: a Ctrl-C to the worker's terminal does not reach it, and its process group can be killed
    whole. `options` go to asyncio.create_subprocess_exec (stdin is /dev/null)."""
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", module, *args,
                                                   stdin=asyncio.subprocess.DEVNULL, start_new_session=True,
                                                   **options)
    # Ended already, or refused by this system: it runs at the worker's priority.
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, process.pid, nice)
    return process
