"""Quota-matched throttling: real PDFs, the LLM extractor and `quire worker` against a rate-limited endpoint.

    python bench/ratelimit.py                        # TPM 40,000; app/samples + 48 generated PDFs
    python bench/ratelimit.py --tpm 20000 --generated 20 --concurrency 8
    python bench/ratelimit.py --tpm 40000 --quota 20000   # the endpoint allows less than max_tpm
    python bench/ratelimit.py --fresh-processes            # each agent run a new process
    QUIRE_DATABASE_URL=postgresql://... python bench/ratelimit.py

The endpoint (bench/fake_llm.py) allows --quota tokens (default: --tpm) over any sliding minute and
answers 429 with Retry-After beyond it. The agent is configured with max_tpm --tpm. Documents go in
through the one submit service (the upload page's), the real `quire worker` process runs them
with the local executor and `--extractor llm`. Printed: the endpoint's 429s, the makespan (first
claim to last finish), the minimum the quota allows at a steady rate (total tokens / TPM), their
ratio, the quota's utilisation over the makespan, and the least makespan a sliding minute allows
(it lets a whole quota through at once, so it is shorter); every --every seconds, the agent's
effective TPM and concurrency, the tokens it reserved in the window and the 429s of that interval.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))

from app.submitting import SubmitOptions, Upload, submit_documents  # noqa: E402
from bench.fake_llm import RateLimitedChat  # noqa: E402
from bench.peers import fresh_database, quire_env, scalar, start_server  # noqa: E402
from schema import db, queue  # noqa: E402
from schema.migrate import migrate  # noqa: E402
from schema.settings import Settings  # noqa: E402


def documents(generated: int, seed: int) -> list[Path]:
    """The bundled samples, PDFs of any corpus under bench/out, and freshly generated ones."""
    pdfs = sorted((REPO / "app" / "samples").glob("*.pdf")) + sorted((BENCH / "out").rglob("*.pdf"))
    if generated:
        out = Path(tempfile.mkdtemp(prefix="quire-ratelimit-corpus-"))
        subprocess.run([sys.executable, str(BENCH / "corpus.py"), str(out), "--count", str(generated),
                        "--seed", str(seed), "--max-pages", "6"], check=True, capture_output=True)
        pdfs += sorted(out.glob("*.pdf"))
    return pdfs


def timeline(conn, at: float, endpoint: RateLimitedChat, seen: int) -> int:
    """Prints one line of the timeline; returns the 429s counted so far."""
    agent = queue.get_agent(conn, "llm")
    window = int(scalar(conn, "SELECT coalesce(sum(coalesce(input_tokens + output_tokens, estimated_tokens)), 0) "
                              "FROM task_attempts WHERE agent = 'llm' AND (status = 'processing' OR "
                              "coalesce(finished_at, started_at) > now() - interval '60 seconds')"))
    refused = endpoint.stats()["rate_limited"]
    print(f"timeline: {at:4.0f}  {agent.effective_tpm or agent.max_tpm:>13,}  "
          f"{agent.effective_concurrency or '-':>11}  {window:>18,}  {refused - seen:>4}", flush=True)
    return refused


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tpm", type=int, default=40_000, help="the agent's max_tpm (and the endpoint's quota)")
    parser.add_argument("--quota", type=int, help="the endpoint's quota, when it differs from --tpm")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between lines of the timeline")
    parser.add_argument("--generated", type=int, default=48, help="generated PDFs beside the samples")
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--concurrency", type=int, default=8, help="quire worker --concurrency")
    parser.add_argument("--fresh-processes", action="store_true",
                        help="each agent run a new process (QUIRE_AGENT_PRELOAD=false), not forked from the fork server")
    args = parser.parse_args()
    quota = args.quota or args.tpm
    server, tmp = os.environ.get("QUIRE_DATABASE_URL"), None
    if not server:
        server, tmp = start_server()
    data_dir = Path(tempfile.mkdtemp(prefix="quire-ratelimit-"))
    try:
        pdfs = documents(args.generated, args.seed)
        dsn = fresh_database(server, "quire_ratelimit")
        with db.connect(dsn) as conn:
            migrate(conn)
            queue.configure_agent(conn, "llm", max_tpm=args.tpm, executor="local", model="fake-quota",
                                  settings={"extractor": "llm"}, lease_seconds=300)
            settings = Settings(data_dir=data_dir)
            results = submit_documents(conn, settings, [Upload(p.name, p.read_bytes()) for p in pdfs],
                                       SubmitOptions(agent="llm", rerun_duplicates=True), "bench")
        created = sum(r.outcome == "created" for r in results)
        print(f"{created} documents ({len(pdfs)} PDFs); endpoint quota {quota:,} TPM, max_tpm {args.tpm:,}; "
              f"worker concurrency {args.concurrency}; agent runs "
              f"{'started afresh' if args.fresh_processes else 'forked from the fork server'}", flush=True)
        with RateLimitedChat(quota) as endpoint:
            env = quire_env(dsn, data_dir)
            env.update(QUIRE_LLM_BASE_URL=endpoint.url, QUIRE_LLM_API_KEY="x")  # the model is the agent's
            if args.fresh_processes:
                env["QUIRE_AGENT_PRELOAD"] = "false"
            log = open(data_dir / "worker.log", "w")  # noqa: SIM115 (closed with the worker)
            worker = subprocess.Popen([str(Path(sys.executable).with_name("quire")), "worker", "--concurrency",
                                       str(args.concurrency)], env=env, stdout=log, stderr=log)
            try:
                with db.connect(dsn) as conn:
                    started, shown, seen = time.monotonic(), 0.0, 0
                    print("timeline:   s  effective tpm  concurrency  reserved in window  429s", flush=True)
                    while scalar(conn, "SELECT count(*) FROM tasks WHERE status IN ('enqueued', 'processing')"):
                        if worker.poll() is not None:
                            raise RuntimeError((data_dir / "worker.log").read_text()[-2000:])
                        if time.monotonic() - started >= shown + args.every:
                            shown += args.every
                            seen = timeline(conn, shown, endpoint, seen)
                        time.sleep(0.5)
                    timeline(conn, time.monotonic() - started, endpoint, seen)
                    makespan = float(scalar(conn, "SELECT extract(epoch FROM max(finished_at) - min(started_at)) "
                                                  "FROM task_attempts"))
                    statuses = {r["status"]: r["n"] for r in conn.execute(
                        "SELECT status::text AS status, count(*) AS n FROM tasks GROUP BY status")}
                    reported = int(scalar(conn, "SELECT coalesce(sum(input_tokens + output_tokens), 0) "
                                                "FROM task_attempts"))
                    agent = queue.get_agent(conn, "llm")
                    learned = conn.execute("SELECT document_type, samples FROM agent_token_rates "
                                           "WHERE agent = 'llm' ORDER BY document_type").fetchall()
            finally:
                worker.terminate()
                worker.wait(timeout=60)
                log.close()
            stats = endpoint.stats()
        if not stats["tokens"]:
            raise RuntimeError(f"the endpoint served nothing: tasks {statuses}")
        minimum = stats["tokens"] / quota * 60
        # A sliding minute admits a whole quota at once: a minute's worth at the start, another a
        # minute later, and so on. No schedule can end before this.
        burst_minimum = 60 * (math.ceil(stats["tokens"] / quota) - 1)
        print(f"tasks: {statuses}")
        refusals = sorted(endpoint.refusals)
        if refusals:
            print(f"429s from {refusals[0] - endpoint.first_at:.0f} s to {refusals[-1] - endpoint.first_at:.0f} s "
                  "after the endpoint's first answer")
        print(f"429s: {stats['rate_limited']}   (the agent's adaptive limits: tpm {agent.effective_tpm}, "
              f"concurrency {agent.effective_concurrency}; rate limits seen {agent.rate_limited_total})")
        print(f"tokens: {stats['tokens']:,} answered by the endpoint, {reported:,} reported by the agents")
        print(f"makespan {makespan:.1f} s; minimum at the quota {minimum:.1f} s; "
              f"ratio {makespan / minimum:.2f}x; quota utilisation {minimum / makespan:.0%}")
        print(f"a sliding minute lets a whole quota through at once: no schedule ends before {burst_minimum} s "
              f"(the makespan is {makespan / burst_minimum:.2f}x that)" if burst_minimum else
              "the whole run fits in one minute's quota")
        print("attempts learned from, by document type: "
              + ", ".join(f"{r['document_type']} {r['samples']}" for r in learned))
    finally:
        if tmp:
            db.stop_embedded(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
