"""Latency of live updates: from a state change's commit to SSE delivery and to the browser's DOM.

    python bench/events.py [--sse-events 300] [--dom-events 25] [--screenshots docs/img]

Starts the app (`quire serve`, worker off) on QUIRE_DATABASE_URL or an embedded Postgres, makes
state changes through schema.queue and times their arrival (p50, p95). Commit times are taken
when the engine call returns, arrival times on receipt; both read the same machine clock.
With --screenshots, runs a simulated workload and saves the upload page, the dashboard and a task's
detail at 1440 and 390 px, light and dark.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pgserver import bench_server  # noqa: E402
from schema import db, queue  # noqa: E402

TOKEN = "bench-events-token"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def percentiles(samples_ms: list[float]) -> str:
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):7.1f} ms   p95 {p95:7.1f} ms   (n={len(ordered)})"


def start_server(dsn: str, data_dir: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUIRE_", "DATABRICKS_"))}
    env.update(QUIRE_DATABASE_URL=dsn, QUIRE_DATA_DIR=str(data_dir), QUIRE_PORT=str(port),
               QUIRE_OPERATOR_TOKEN=TOKEN, QUIRE_WORKER="off")
    process = subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], cwd=data_dir, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).json().get("listen") == "live":
                return process, url
        except (httpx.HTTPError, ValueError):
            time.sleep(0.2)
    process.kill()
    raise SystemExit("the app did not start")


def measure_sse(url: str, conn, count: int, pace: float) -> tuple[list[float], list[float]]:
    """Enqueues `count` tasks one by one and times each event's arrival on an SSE stream.

    Returns latencies from the moment the engine call returned (the client saw the commit) and
    from the moment it began (an upper bound that includes the call's own round trips).
    """
    arrivals: dict[int, float] = {}
    ready = threading.Event()

    def read() -> None:
        with httpx.stream("GET", f"{url}/api/events", headers={"Authorization": f"Bearer {TOKEN}"},
                          timeout=httpx.Timeout(60, read=60)) as response:
            for line in response.iter_lines():
                if line.startswith("retry:"):
                    ready.set()
                elif line.startswith("data:") and '"task_id"' in line:
                    arrivals[json.loads(line[5:])["task_id"]] = time.time()
                if len(arrivals) >= count:
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ready.wait(10)
    time.sleep(0.3)
    commits: dict[int, tuple[float, float]] = {}
    for i in range(count):
        began = time.time()
        task = queue.enqueue(conn, agent="bench", document_uri=f"/bench/sse-{i}.pdf")
        commits[task.id] = (began, time.time())
        time.sleep(pace)
    reader.join(30)
    delivered = [(arrivals[t], c) for t, c in commits.items() if t in arrivals]
    return [(a - c[1]) * 1000 for a, c in delivered], [(a - c[0]) * 1000 for a, c in delivered]


OBSERVE = """() => {
  window.__changes = [];
  const el = document.querySelector('[data-testid="kpi-enqueued"]');
  new MutationObserver(() => window.__changes.push([Date.now(), el.innerText]))
    .observe(el, {childList: true, characterData: true, subtree: true});
}"""


def measure_dom(url: str, conn, count: int) -> list[float]:
    """Enqueues tasks one at a time and times the dashboard's count changing in the DOM."""
    from playwright.sync_api import sync_playwright

    samples = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(f"{url}/login?token={TOKEN}&next=/dashboard")
        page.wait_for_function("() => window.did_handshake === true")
        page.evaluate(OBSERVE)
        for i in range(count):
            before = int(page.locator('[data-testid="kpi-enqueued"]').inner_text().replace(",", ""))
            queue.enqueue(conn, agent="bench", document_uri=f"/bench/dom-{i}.pdf")
            committed = time.time() * 1000
            want = f"{before + 1:,}"
            page.wait_for_function("(w) => window.__changes.some(c => c[1] === w)", arg=want, timeout=10_000)
            seen = page.evaluate("(w) => window.__changes.find(c => c[1] === w)[0]", want)
            samples.append(seen - committed)
            time.sleep(0.5)  # let each change render on its own instead of coalescing with the next
        browser.close()
    return samples


AGENTS = {"documents": 4, "invoices": 8, "contracts": 3, "statements": 2}  # max concurrent tasks
PRICES = {"documents": (0.15, 0.60), "invoices": (0.15, 0.60), "contracts": (2.50, 10.0), "statements": (1.10, 4.40)}
CUSTOMERS = ["Northwind Audit", "Borealis Finance", "Meridian Partners", "Halcyon Retail", "Kessler Group"]
COMPUTE_USD_PER_HOUR = 0.45


class Workload:
    """Submissions and a simulated worker fleet: claims within each agent's cap, reports results."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._submit, daemon=True)]
        self.threads += [threading.Thread(target=self._work, args=(a,), daemon=True) for a in AGENTS]

    def __enter__(self) -> Workload:
        with db.connect(self.dsn) as conn:
            for agent, cap in AGENTS.items():
                queue.configure_agent(conn, agent, max_concurrent_tasks=cap)
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(10)

    def _submit(self) -> None:
        rng = random.Random(1)
        with db.connect(self.dsn) as conn:
            n = 0
            while not self.stop.is_set():
                agent = rng.choices(["invoices", "contracts", "statements"], [6, 2, 1])[0]
                pages = rng.randint(1, 3) if agent == "invoices" else rng.randint(4, 40)
                n += 1
                task = queue.enqueue(conn, agent=agent, document_uri=f"/bench/{agent}-{n}.pdf",
                                     document_name=f"{agent[:-1]}-{2024000 + n}.pdf", pages=pages,
                                     customer=rng.choice(CUSTOMERS), priority=rng.choice([0, 0, 0, 5, 9]),
                                     submitted_by="bench")
                if rng.random() < 0.02:
                    queue.cancel(conn, task.id, actor="bench")
                time.sleep(rng.uniform(0.05, 0.25))

    def _work(self, agent: str) -> None:
        rng = random.Random(agent)
        running: list[tuple[float, float, object]] = []
        with db.connect(self.dsn) as conn:
            while not self.stop.is_set():
                for claim in queue.claim(conn, agent=agent, worker_id=f"bench-{agent}", limit=AGENTS[agent]):
                    seconds = rng.uniform(0.8, 2.0) + 0.25 * (claim.task.pages or 1) * rng.uniform(0.5, 1.5)
                    running.append((time.monotonic() + seconds, seconds, claim))
                now = time.monotonic()
                for item in [r for r in running if r[0] <= now]:
                    running.remove(item)
                    self._report(conn, rng, agent, item[2], seconds=item[1])
                time.sleep(0.1)

    @staticmethod
    def _report(conn, rng: random.Random, agent: str, claim, *, seconds: float) -> None:
        pages = claim.task.pages or 1
        tokens_in = int((900 + 650 * pages) * rng.uniform(0.8, 1.2))
        tokens_out = int(rng.uniform(150, 450) + 20 * pages)
        price_in, price_out = PRICES[agent]
        usage = {"input_tokens": tokens_in, "output_tokens": tokens_out,
                 "llm_cost_usd": round((tokens_in * price_in + tokens_out * price_out) / 1e6, 6)}
        if rng.random() < 0.05:
            payload = {"status": "failed", "error": "the scan has no text layer", "retryable": False, **usage}
        else:
            confidence = round(min(0.99, max(0.3, rng.betavariate(8, 2))), 3)
            payload = {"status": "completed", "confidence": confidence, "trace_id": f"tr-{uuid.uuid4().hex[:16]}",
                       "result": {"document_type": agent.rstrip("s") if agent != "statements" else
                                  "financial_statement", "extractor": "llm", "model": "bench", "fields": {}}, **usage}
        queue.apply_callback(conn, claim.attempt_id, payload)
        run_seconds = seconds + pages * 0.2
        queue.record_compute(conn, claim.attempt_id, compute_seconds=run_seconds,
                             compute_cost_usd=round(run_seconds * COMPUTE_USD_PER_HOUR / 3600, 6))


DROP_FILES = """(files) => {
  const transfer = new DataTransfer();
  for (const f of files) {
    const bytes = Uint8Array.from(atob(f.b64), c => c.charCodeAt(0));
    transfer.items.add(new File([bytes], f.name, {type: 'application/pdf'}));
  }
  document.querySelector('.q-uploader').dispatchEvent(new DragEvent('dragover', {dataTransfer: transfer, bubbles: true}));
  setTimeout(() => document.querySelector('.q-uploader__dnd')
    .dispatchEvent(new DragEvent('drop', {dataTransfer: transfer, bubbles: true, cancelable: true})), 100);
}"""


SHOT_VIEWPORTS = {"1440": {"width": 1440, "height": 900}, "390": {"width": 390, "height": 844}}


def take_screenshots(url: str, dsn: str, target: Path, *, seconds: float) -> None:
    """The upload page with a batch in progress, the dashboard and a task's detail, while the workload
    runs: at 1440 and 390 px, light and dark (docs/img/<page>-<width>-<theme>.png)."""
    import base64

    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    target.mkdir(parents=True, exist_ok=True)
    samples = sorted((ROOT / "app" / "samples").glob("*.pdf"))
    files = [{"name": p.name, "b64": base64.b64encode(p.read_bytes()).decode()} for p in samples]
    files.append({"name": "scan_receipt_0193.pdf", "b64": base64.b64encode(b"GIF89a not a pdf").decode()})
    saved: list[Path] = []
    with Workload(dsn), sync_playwright() as playwright:
        time.sleep(max(seconds - 12, 0))
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for width, viewport in SHOT_VIEWPORTS.items():
            for theme in ("light", "dark"):
                context = browser.new_context(viewport=viewport, device_scale_factor=1)
                context.set_default_timeout(120_000)  # a busy machine under the workload is slow to answer
                page = context.new_page()
                page.goto(f"{url}/login?token={TOKEN}")
                page.wait_for_function("() => window.did_handshake === true")
                if theme == "dark":
                    page.locator('[data-testid="dark-toggle"]').click()
                    page.wait_for_function("() => document.body.classList.contains('body--dark')")
                page.locator('[data-testid="upload-customer"]').fill("Northwind Audit")
                page.evaluate(DROP_FILES, files)
                page.wait_for_function("(n) => document.querySelectorAll('[data-testid=batch-row]').length === n",
                                       arg=len(files))
                # Every row has an outcome (a held batch stays enqueued until it is submitted).
                page.wait_for_function("() => [...document.querySelectorAll('[data-testid=file-status]')]"
                                       ".every(e => e.innerText.trim() !== '')", timeout=30_000)
                saved.append(target / f"upload-{width}-{theme}.png")
                page.screenshot(path=str(saved[-1]), full_page=True)
                page.goto(f"{url}/dashboard")
                page.wait_for_function("() => window.did_handshake === true")
                page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 5")
                try:
                    page.locator('[data-testid="fetch-compute"]').click(timeout=15_000)
                    page.wait_for_function("() => document.querySelector('[data-testid=kpi-compute-cost]')"
                                           ".innerText.includes('$')", timeout=30_000)
                except PlaywrightError as exc:  # the picture is still worth taking without that figure
                    print(f"compute cost not shown at {width} px, {theme}: {str(exc).splitlines()[0]}")
                saved.append(target / f"dashboard-{width}-{theme}.png")
                page.screenshot(path=str(saved[-1]), full_page=True)
                with psycopg.connect(dsn) as conn:
                    task_id = conn.execute("SELECT id FROM tasks WHERE status = 'completed' "
                                           "ORDER BY finished_at DESC LIMIT 1").fetchone()[0]
                page.goto(f"{url}/tasks/{task_id}")
                page.wait_for_function("() => window.did_handshake === true")
                saved.append(target / f"task-{width}-{theme}.png")
                page.screenshot(path=str(saved[-1]), full_page=True)
                context.close()
        browser.close()
    print("screenshots: " + ", ".join(str(p) for p in saved))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sse-events", type=int, default=300)
    parser.add_argument("--pace", type=float, default=0.01, help="seconds between SSE-measured changes")
    parser.add_argument("--dom-events", type=int, default=25)
    parser.add_argument("--screenshots", type=Path, help="save screenshots of the pages under load here")
    parser.add_argument("--load-seconds", type=float, default=75.0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="quire-bench-events-") as tmp, bench_server() as pg:
        tmp_dir = Path(tmp)
        server_dsn = pg.dsn
        name = f"quire_bench_events_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        dsn = db.with_database(server_dsn, name)
        process, url = start_server(dsn, tmp_dir)
        conn = db.connect(dsn)
        try:
            queue.configure_agent(conn, "bench")
            after_commit, from_call = measure_sse(url, conn, args.sse_events, args.pace)
            print(f"commit -> SSE delivery:         {percentiles(after_commit)}")
            print(f"engine call start -> SSE:       {percentiles(from_call)}")
            print(f"commit -> browser DOM:          {percentiles(measure_dom(url, conn, args.dom_events))}")
            if args.screenshots:
                take_screenshots(url, dsn, args.screenshots, seconds=args.load_seconds)
        finally:
            conn.close()
            process.terminate()
            process.wait(15)
            with psycopg.connect(server_dsn, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    random.seed(7)
    sys.exit(main())
