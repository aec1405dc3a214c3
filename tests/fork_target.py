"""What a run forked by the agent fork server does in tests: `python -m tests.fork_target ACTION ...`.

    describe             prints its pid, process group, session, working directory, stdin and
                         QUIRE_TEST_VALUE as JSON
    burn SECONDS CODE    spends SECONDS of CPU, then exits with CODE
    sleep SECONDS        sleeps
    wait-for PATH        waits until PATH exists
    family               starts `sleep 60` and waits for it (a run with a child of its own)
    fail                 raises an exception
    thread SECONDS PATH  starts a thread that writes PATH after SECONDS, and returns at once
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    action, *rest = argv
    if action == "describe":
        print(json.dumps({"pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0), "cwd": os.getcwd(),
                          "stdin": sys.stdin.read(), "value": os.environ.get("QUIRE_TEST_VALUE"),
                          "argv": sys.argv[1:]}))
        return 0
    if action == "burn":
        seconds, code = float(rest[0]), int(rest[1])
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass
        return code
    if action == "sleep":
        time.sleep(float(rest[0]))
        return 0
    if action == "wait-for":
        path = Path(rest[0])
        while not path.exists():
            time.sleep(0.02)
        return 0
    if action == "family":
        child = subprocess.Popen(["sleep", "60"])
        print(child.pid, flush=True)
        return child.wait()
    if action == "thread":
        seconds, path = float(rest[0]), Path(rest[1])
        threading.Thread(target=lambda: (time.sleep(seconds), path.write_text("written"))).start()
        return 0
    if action == "fail":
        raise RuntimeError("a run that fails on purpose")
    raise SystemExit(f"unknown action {action!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
