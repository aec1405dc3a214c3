"""Peak memory per upload: the app process while it receives large documents and bombs.

    python bench/upload_memory.py                 # the figures of docs/BENCHMARKS.md
    python bench/upload_memory.py --files 5 --mb 10   # a smaller request

Starts the app (`quire serve`, worker off) on QUIRE_DATABASE_URL or an embedded Postgres. For each
request below it resets the app's peak resident set (/proc/PID/clear_refs) and reads it back after
the answer (VmHWM). Each line: what was sent, the answer, the app's resident memory before, its
peak during, and the growth. Then the checking child (`python -m agents.limits`) runs alone on
each kind of file, and the peak it reports (its VmHWM) is printed: the memory an upload costs
outside the app, capped by QUIRE_CHECK_MEMORY_MB.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.events import TOKEN, start_server  # noqa: E402
from bench.hostile_pdfs import deflate_bomb, huge_page, text_pdf  # noqa: E402
from schema import db, queue  # noqa: E402

MB = 1_000_000


def _kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def measure(url: str, pid: int, label: str, files: list[tuple[str, bytes]], **form: str) -> None:
    """Sends one upload request and prints the app's memory around it."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=600) as http:
        http.get("/api/tasks")
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        before = _kb(pid, "VmRSS") * 1024
        started = time.monotonic()
        answer = http.post("/api/tasks", files=[("files", (n, d, "application/pdf")) for n, d in files], data=form)
        seconds = time.monotonic() - started
        peak = _kb(pid, "VmHWM") * 1024
    sent = sum(len(d) for _, d in files)
    body = answer.json()
    outcome = f"{answer.status_code} ({body.get('created', 0)} created, {body.get('rejected', 0)} rejected)" \
        if isinstance(body, dict) and "files" in body else str(answer.status_code)
    print(f"{label:<40} {sent / MB:8.1f} MB  {outcome:<28} app {before / MB:6.0f} -> {peak / MB:6.0f} MB "
          f"(+{(peak - before) / MB:4.0f} MB)  {seconds:5.1f} s", flush=True)


def measure_at_once(url: str, pid: int, label: str, requests: int, files: list[tuple[str, bytes]]) -> None:
    """Sends `requests` upload requests at once and prints the app's memory around them."""
    from concurrent.futures import ThreadPoolExecutor

    def send(_: int) -> int:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=600) as http:
            return http.post("/api/tasks", files=[("files", (n, d, "application/pdf")) for n, d in files]).status_code

    Path(f"/proc/{pid}/clear_refs").write_text("5")
    before = _kb(pid, "VmRSS") * 1024
    started = time.monotonic()
    with ThreadPoolExecutor(requests) as pool:
        codes = list(pool.map(send, range(requests)))
    seconds = time.monotonic() - started
    peak = _kb(pid, "VmHWM") * 1024
    sent = requests * sum(len(d) for _, d in files)
    print(f"{label:<40} {sent / MB:8.1f} MB  {' '.join(map(str, codes)):<28} app {before / MB:6.0f} -> "
          f"{peak / MB:6.0f} MB (+{(peak - before) / MB:4.0f} MB)  {seconds:5.1f} s", flush=True)


def measure_child(label: str, data: bytes, workdir: Path) -> None:
    """Runs the checking child on one file and prints its answer and its peak resident memory."""
    import json
    import subprocess

    path = workdir / "checked.pdf"
    path.write_bytes(data)
    done = subprocess.run([sys.executable, "-m", "agents.limits", str(path)], cwd=ROOT, capture_output=True,
                          check=False)
    answer = json.loads(done.stdout) if done.stdout.strip() else {"ok": False, "error": f"exit {done.returncode}"}
    verdict = "accepted" if answer.get("ok") else f"refused ({answer.get('error')})"
    peak = answer.get("peak_mb")
    print(f"{'child: ' + label:<40} {len(data) / MB:8.1f} MB  {verdict:<28} child peak "
          f"{'?' if peak is None else f'{peak:6.0f}'} MB", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=25, help="files in the large request")
    parser.add_argument("--mb", type=float, default=45, help="size of each file of the large request")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="quire-bench-upload-") as tmp:
        tmp_dir = Path(tmp)
        os.chmod(tmp_dir, 0o755)
        server_dsn = os.environ.get("QUIRE_DATABASE_URL") or db.start_embedded(tmp_dir / "pg-home")
        name = f"quire_bench_upload_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        dsn = db.with_database(server_dsn, name)
        process, url = start_server(dsn, tmp_dir)
        conn = db.connect(dsn)
        try:
            queue.configure_agent(conn, "documents")
            measure(url, process.pid, "one small PDF", [("small.pdf", text_pdf())])
            measure(url, process.pid, "deflate bomb (100 MB inflated)", [("bomb.pdf", deflate_bomb(100))])
            measure(url, process.pid, "200-inch page, no text", [("huge.pdf", huge_page(200))])
            large = [(f"large-{n}.pdf", text_pdf(f"Large {n}", pad_mb=args.mb - 0.01)) for n in range(args.files)]
            measure(url, process.pid, f"{args.files} x {args.mb:g} MB in one request", large)
            fits = int(1000 * MB // (args.mb * MB + 2000))  # the default QUIRE_MAX_REQUEST_MB
            if fits < args.files:
                measure(url, process.pid, f"{fits} x {args.mb:g} MB in one request", large[:fits])
            measure_at_once(url, process.pid, f"3 requests of 10 x {args.mb:g} MB at once", 3, large[:10])
            measure_child("one small PDF", text_pdf(), tmp_dir)
            measure_child("deflate bomb (100 MB inflated)", deflate_bomb(100), tmp_dir)
            measure_child("200-inch page, no text", huge_page(200), tmp_dir)
            measure_child(f"one {args.mb:g} MB PDF", large[0][1], tmp_dir)
            del large
        finally:
            conn.close()
            process.terminate()
            process.wait(15)
            with psycopg.connect(server_dsn, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if not os.environ.get("QUIRE_DATABASE_URL"):
                db.stop_embedded(tmp_dir / "pg-home")
    return 0


if __name__ == "__main__":
    sys.exit(main())
