"""The worker's end of the agent fork server (agents/forkserver.py): runs forked from a loaded process."""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO


class ForkServerGone(Exception):
    """The fork server ended, or stopped answering; runs start the ordinary way."""


@dataclass
class Child:
    """A run the fork server started; `done` is set once it ended.

    `status` is its wait status and `cpu_seconds` its CPU time, both None when the server ended
    before the run did (the run was then watched through its pid).
    """

    pid: int
    done: threading.Event = field(default_factory=threading.Event)
    status: int | None = None
    cpu_seconds: float | None = None

    def ended(self, status: int | None, cpu_seconds: float | None) -> None:
        self.status, self.cpu_seconds = status, cpu_seconds
        self.done.set()


class ForkServer:
    """`python -m agents.forkserver`, started at once; it loads in the background.

    Its stderr is the worker's: a server that fails to load says why where the worker logs.
    """

    def __init__(self, python: str, env: dict[str, str], cwd: Path):
        self.process = subprocess.Popen(
            [python, "-m", "agents.forkserver"], cwd=cwd, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True)  # a Ctrl-C meant for the worker is the worker's to handle
        assert self.process.stdin is not None and self.process.stdout is not None  # both are pipes
        self._requests: IO[bytes] = self.process.stdin
        self._messages: IO[bytes] = self.process.stdout
        self._loaded = threading.Event()   # set when ready, or when the server ended first
        self.ready = False
        self._gone = threading.Event()
        self._replies: queue.Queue[dict] = queue.Queue()
        self._children: dict[int, Child] = {}
        self._children_lock = threading.Lock()
        self._request_lock = threading.Lock()  # one request and its reply at a time
        threading.Thread(target=self._read, daemon=True, name="quire-forkserver").start()

    @property
    def gone(self) -> bool:
        return self._gone.is_set()

    def wait_ready(self, timeout: float) -> bool:
        """Waits until the server has loaded; False if it ended first or is not ready in time."""
        self._loaded.wait(timeout)
        return self.ready and not self.gone

    def spawn(self, module: str, argv: list[str], env: dict[str, str], cwd: Path, stdout: Path,
              stderr: Path, timeout: float = 10.0) -> Child:
        """Starts `python -m module *argv`; raises ForkServerGone when the server cannot start it."""
        request = json.dumps({"module": module, "argv": argv, "env": env, "cwd": str(cwd),
                              "stdout": str(stdout), "stderr": str(stderr)}) + "\n"
        with self._request_lock:
            if self.gone:
                raise ForkServerGone("the fork server has ended")
            try:
                self._requests.write(request.encode())
                self._requests.flush()
                reply = self._replies.get(timeout=timeout)
            except (OSError, ValueError) as exc:
                self.close(kill=True)
                raise ForkServerGone(f"the fork server cannot be reached: {exc}") from exc
            except queue.Empty:
                # A late answer would be taken for the next request's: this server is done with.
                self.close(kill=True)
                raise ForkServerGone(f"the fork server did not answer within {timeout:g} s") from None
        if "started" in reply:
            return reply["started"]
        raise ForkServerGone(reply.get("refused") or "the fork server has ended")

    def _read(self) -> None:
        """Reads the server's messages until it ends; then watches its runs by their pids."""
        try:
            for line in self._messages:
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if message.get("ready"):
                    self.ready = True
                    self._loaded.set()
                elif "started" in message:
                    child = Child(pid=int(message["started"]))
                    with self._children_lock:
                        self._children[child.pid] = child
                    self._replies.put({"started": child})
                elif "refused" in message:
                    self._replies.put(message)
                elif "exited" in message:
                    with self._children_lock:
                        gone: Child | None = self._children.pop(int(message["exited"]), None)
                    if gone is not None:
                        gone.ended(int(message["status"]), float(message["cpu"]))
        except (OSError, ValueError):
            pass
        self._gone.set()
        self._loaded.set()
        self._replies.put({"refused": "the fork server has ended"})
        with self._children_lock:
            orphans, self._children = list(self._children.values()), {}
        for child in orphans:
            threading.Thread(target=_watch, args=(child,), daemon=True,
                             name=f"quire-orphan-{child.pid}").start()
        self.process.wait()

    def close(self, kill: bool = False) -> None:
        """Lets go of the server: it exits once its stdin closes (runs under way go on)."""
        self._gone.set()
        try:
            if kill:
                self.process.kill()
            self._requests.close()
        except OSError:
            pass


def _watch(child: Child) -> None:
    """Waits for a run whose fork server ended; its exit status and CPU time are not known."""
    try:
        fd = os.pidfd_open(child.pid)
    except ProcessLookupError:
        child.ended(None, None)
        return
    except (AttributeError, OSError):  # no pidfd here: look for the process now and then
        while _exists(child.pid):
            time.sleep(0.5)
        child.ended(None, None)
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)
    child.ended(None, None)


def _exists(pid: int) -> bool:
    """Whether a process of this pid is there and not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
