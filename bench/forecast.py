"""Forecast against actual: a mixed batch through a real app and worker, forecast before it runs.

Usage:
    python bench/forecast.py [--dsn DSN] [--documents 60] [--warmup 12] [--concurrency 3] [--scans N]

Starts `quire serve` (app plus co-hosted worker, local executor, the LLM extractor) on a fresh
database, with a local OpenAI-compatible fake model endpoint that bills tokens in proportion to
the prompt it receives. A warm-up batch teaches the agent's rates; then a mixed batch (the bundled
samples plus documents from bench/corpus.py, 1 to 12 pages) is submitted held, its forecast read,
released, and followed to the end. Prints forecast and actual cost and duration, and their ratio.
With --scans N, N of the batch's documents are image-only PDFs (bench/realworld/scan.py: rendered,
tilted, speckled, JPEG), read through Tesseract; the warm-up then has half as many scans (at
least 3). With --warmup 0 nothing runs before the batch: its forecast is made from a cold start
(text and OCR as the worker measured them at start-up, with a prior for the model's answer).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import generate_document, kind_for
from bench.fake_http import FakeHttpServer, Request
from bench.pgserver import bench_server
from bench.realworld.scan import scan_pdf
from schema.forecast import finish_time

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-forecast-token"
PRICE_IN, PRICE_OUT = 3.0, 15.0


def fake_model(request: Request) -> tuple[int, dict]:
    """Answers chat completions with an empty extraction; bills prompt characters / 4 plus an answer."""
    body = request.json() or {}
    prompt = sum(len(m.get("content") or "") for m in body.get("messages", [])) // 4
    answer = json.dumps({"document_type": "other", "fields": {}})
    time.sleep(0.05 + prompt / 200_000)  # a model takes longer over longer prompts
    return 200, {"id": "fake", "object": "chat.completion", "model": body.get("model", "fake"),
                 "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}],
                 "usage": {"prompt_tokens": prompt, "completion_tokens": 120 + prompt // 20,
                           "total_tokens": prompt + 120 + prompt // 20}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def corpus(count: int, seed: int) -> list[tuple[str, bytes]]:
    """The bundled samples first, then generated invoices, contracts and statements of 1 to 12 pages."""
    docs = [(p.name, p.read_bytes()) for p in sorted((ROOT / "app" / "samples").glob("*.pdf"))][:count]
    kinds = ("invoice", "contract", "financial_statement")
    rng = random.Random(seed)
    i = 0
    while len(docs) < count:
        kind = kind_for(i, kinds)
        data, _ = generate_document(kind, seed, i, max_pages=rng.choice([1, 2, 3, 6, 12]))
        docs.append((f"{seed}-{i:04d}_{kind}.pdf", data))
        i += 1
    return docs


def scans(count: int, seed: int, pages: tuple[int, ...] = (1, 2, 3, 6)) -> list[tuple[str, bytes]]:
    """Image-only PDFs: generated documents of these page counts, scanned (no text layer)."""
    kinds = ("invoice", "contract", "financial_statement")
    rng = random.Random(seed * 7 + 1)
    out = []
    for i in range(count):
        kind = kind_for(i, kinds)
        data, _ = generate_document(kind, seed + 1000, i, max_pages=rng.choice(pages))
        out.append((f"{seed}-{i:04d}_{kind}-scan.pdf", scan_pdf(data, dpi=150, seed=seed + i)))
    return out


def submit(http: httpx.Client, docs: list[tuple[str, bytes]], *, hold: bool) -> dict:
    files = [("files", (name, data, "application/pdf")) for name, data in docs]
    response = http.post("/api/tasks", data={"customer": "Bench Co", "priority": "5", "hold": str(hold).lower(),
                                             "duplicates": "rerun"}, files=files, timeout=300)
    response.raise_for_status()
    return response.json()


def wait_done(http: httpx.Client, batch_id: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = http.get(f"/api/batches/{batch_id}").json()
        if batch["done"]:
            return batch
        time.sleep(0.5)
    raise SystemExit(f"batch {batch_id} did not finish within {timeout:.0f} s")


def wait_calibration(dsn: str, timeout: float) -> Any:
    """The worker's start-up measure of OCR and text, once recorded."""
    from schema import calibration, db

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with db.connect(dsn) as conn:
            measured = calibration.ocr_calibration_latest(conn)
        if measured is not None:
            return measured
        time.sleep(1)
    raise SystemExit(f"the worker recorded no OCR measure within {timeout:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("QUIRE_TEST_DATABASE_URL"),
                        help="a Postgres server to create the bench database on (default: embedded)")
    parser.add_argument("--documents", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=12,
                        help="documents run before the batch to learn from (0: a cold start, nothing learned)")
    parser.add_argument("--concurrency", type=int, default=3)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--scans", type=int, default=0, help="image-only PDFs among the documents (read by OCR)")
    args = parser.parse_args(argv)
    with bench_server(args.dsn) as pg:
        return run(args, pg.dsn)


def run(args: argparse.Namespace, server_dsn: str) -> int:
    """Submits a warm-up batch, then a held batch: its forecast against what it took and cost."""
    from schema import db
    from schema.migrate import migrate

    work = Path(tempfile.mkdtemp(prefix="quire-bench-forecast-"))
    name = f"quire_bench_forecast_{uuid.uuid4().hex[:8]}"
    with db.connect(server_dsn) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    dsn = db.with_database(server_dsn, name)
    with db.connect(dsn) as conn:
        migrate(conn)
    model = FakeHttpServer(fake_model).start()
    (work / "quire.toml").write_text(
        f"[agents.documents]\nmax_concurrent_tasks = {args.concurrency}\nlease_seconds = 120\n"
        f"model = \"fake\"\nprice_input_per_mtok = {PRICE_IN}\nprice_output_per_mtok = {PRICE_OUT}\n"
        "settings = { extractor = \"llm\" }\n")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QUIRE_", "DATABRICKS_"))}
    env.update(QUIRE_DATABASE_URL=dsn, QUIRE_DATA_DIR=str(work / "data"), QUIRE_CONFIG=str(work / "quire.toml"),
               QUIRE_PORT=str(port), QUIRE_OPERATOR_TOKEN=TOKEN, QUIRE_WORKER="on",
               QUIRE_WORKER_CONCURRENCY=str(args.concurrency), QUIRE_COMPUTE_RATE_USD_PER_HOUR="2.0",
               QUIRE_LLM_BASE_URL=f"{model.url}/v1", QUIRE_LLM_MODEL="fake",
               QUIRE_LLM_API_KEY="fake", QUIRE_LLM_PRICE_INPUT_PER_MTOK=str(PRICE_IN),
               QUIRE_LLM_PRICE_OUTPUT_PER_MTOK=str(PRICE_OUT), PYTHONPATH=str(ROOT))
    with open(work / "server.log", "wb") as log:  # the server writes to its own copy
        app = subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], cwd=work, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"},
                            timeout=60)
        deadline = time.monotonic() + 60
        while True:
            try:
                if http.get("/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or app.poll() is not None:
                raise SystemExit(f"the app did not start:\n{(work / 'server.log').read_text()[-3000:]}")
            time.sleep(0.2)
        if args.scans:
            # The worker times OCR and text on this machine at start-up: the forecast's priors.
            m = wait_calibration(dsn, timeout=300)
            print(f"measured at start-up: OCR {m.seconds_per_page:.2f} s a standard page ({m.cpu_seconds_per_page or 0:.2f} "
                  f"s of CPU: slowed {m.slowdown:.2f} times); text {m.text_seconds_base or 0:.3f} s a document "
                  f"+ {m.text_seconds_per_page or 0:.3f} s a page (no model)")
        if args.warmup:
            warm_docs = corpus(args.warmup, args.seed + 1)
            if args.scans:
                warm_docs += scans(max(3, args.scans // 2), args.seed + 1, pages=(1, 2, 3, 6))
                random.Random(args.seed).shuffle(warm_docs)
            warm = submit(http, warm_docs, hold=False)
            wait_done(http, warm["batch_id"], timeout=1800)
        docs = corpus(args.documents - args.scans, args.seed) + scans(args.scans, args.seed)
        random.Random(args.seed + 2).shuffle(docs)
        held = submit(http, docs, hold=True)
        plan = held["forecast"]
        load_before = os.getloadavg()
        started = time.monotonic()
        http.post(f"/api/batches/{held['batch_id']}/release").raise_for_status()
        batch = wait_done(http, held["batch_id"], timeout=1800)
        wall = time.monotonic() - started
        cost_f = (plan["llm_cost_usd"] or 0.0) + plan["compute_cost_usd"]
        cost_a = batch["actual_llm_cost_usd"] + batch["actual_compute_cost_usd"]
        load_after = os.getloadavg()
        print(f"load average (1, 5, 15 min): at release {', '.join(f'{x:.1f}' for x in load_before)}; "
              f"at the end {', '.join(f'{x:.1f}' for x in load_after)}")
        print(f"batch: {plan['documents']} documents, {plan['pages']} pages ({plan.get('scanned_pages', 0)} scanned), "
              f"concurrency {plan['concurrency']}, {plan['basis']}")
        if plan.get("eta_low_seconds") is not None:
            print(f"ETA range: {plan['eta_low_seconds']:,.1f} s to {plan['eta_high_seconds']:,.1f} s")
        rows = [("tokens", plan["tokens"], batch["actual_tokens"]),
                ("LLM cost (USD)", plan["llm_cost_usd"], batch["actual_llm_cost_usd"]),
                ("compute cost (USD)", plan["compute_cost_usd"], batch["actual_compute_cost_usd"]),
                ("total cost (USD)", cost_f, cost_a),
                ("duration (s)", plan["eta_seconds"], batch["actual_seconds"] or wall)]
        print(f"{'':<20}{'forecast':>14}{'actual':>14}{'actual/forecast':>18}")
        for label, f, a in rows:
            print(f"{label:<20}{f:>14,.4f}{a:>14,.4f}{(a / f if f else float('nan')):>18.3f}")
        with db.connect(dsn) as conn:
            own = conn.execute(
                "SELECT extract(epoch FROM a.finished_at - a.started_at)::float8 AS s, a.cpu_seconds AS cpu, "
                "t.scanned FROM task_attempts a JOIN tasks t ON t.id = a.task_id "
                "WHERE t.batch_id = %s AND a.status = 'completed' ORDER BY t.id, a.id", [held["batch_id"]]).fetchall()
            runs = [r["s"] for r in own]
            slots = plan["concurrency"]
            print(f"the batch's own runs replayed in queue order on {slots:g} at once "
                  f"(schema.forecast.finish_time): {finish_time(runs, slots):,.1f} s; summed {sum(runs):,.1f} s")
            for scanned in (False, True):
                part = [r for r in own if r["scanned"] == scanned]
                print(f"  {'scans' if scanned else 'text':<6}{len(part):>4} runs: {sum(r['s'] for r in part):,.1f} s "
                      f"of wall, {sum(r['cpu'] or 0 for r in part):,.1f} s of CPU")
            if plan.get("cpu_seconds") is not None:
                print(f"CPU of the runs: forecast {plan['cpu_seconds']:,.1f} s, actual "
                      f"{sum(r['cpu'] or 0 for r in own):,.1f} s")
            print("run seconds per page, by batch and kind (mean over completed attempts; scans also per "
                  "standard page of OCR work, and CPU seconds):")
            for r in conn.execute(
                    "SELECT t.batch_id, t.scanned, count(*) AS n, sum(t.pages) AS pages, "
                    "round(sum(extract(epoch FROM a.finished_at - a.started_at))::numeric / sum(t.pages), 2) AS s, "
                    "round(sum(t.ocr_work)::numeric, 1) AS work, "
                    "round(sum(extract(epoch FROM a.finished_at - a.started_at))::numeric "
                    "      / nullif(sum(t.ocr_work), 0)::numeric, 2) AS s_work, "
                    "round(sum(a.cpu_seconds)::numeric / nullif(sum(t.ocr_work), 0)::numeric, 2) AS cpu_work "
                    "FROM task_attempts a JOIN tasks t ON t.id = a.task_id WHERE a.status = 'completed' "
                    "GROUP BY 1, 2 ORDER BY 1, 2").fetchall():
                kind = "scans" if r["scanned"] else "text"
                work = (f"; {r['work']} standard pages, {r['s_work']} s and {r['cpu_work']} s of CPU each"
                        if r["work"] is not None else "")
                print(f"  batch {r['batch_id']} {kind:<6}{r['n']:>4} documents {r['pages']:>4} pages {r['s']:>8} s/page{work}")
        return 0
    finally:
        app.terminate()
        try:
            app.wait(timeout=30)
        except subprocess.TimeoutExpired:
            app.kill()
        model.stop()
        with db.connect(server_dsn) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
