"""Command line of the agent job: `python -m agents run --document PATH ...` (docs/CONTRACTS.md)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from pathlib import Path

from agents.callback import (
    CallbackClient, CallbackFailed, CallbackRejected, Heartbeat, resolve_secret,
)
from agents.errors import ConfigurationError
from agents.runner import EXIT_FAILED, run

log = logging.getLogger("agents")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agents",
                                     description="Quire document agent")
    commands = parser.add_subparsers(dest="command", required=True)
    run_cmd = commands.add_parser("run", help="extract one document and report the result")
    run_cmd.add_argument("--document", required=True,
                         help="local path or Unity Catalog Volume path (/Volumes/...)")
    run_cmd.add_argument("--callback-url", help="where to POST the signed result")
    run_cmd.add_argument("--attempt-id", type=int, help="the attempt this run belongs to")
    run_cmd.add_argument("--heartbeat-url", help="where to POST signed heartbeats")
    run_cmd.add_argument("--extractor", choices=("offline", "llm"), default="offline")
    run_cmd.add_argument("--out", help="also write the payload JSON to this file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("QUIRE_LOG_LEVEL", "INFO").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return command_run(args)


def command_run(args: argparse.Namespace) -> int:
    """Run the agent with heartbeats, then deliver the payload (callback, stdout, --out)."""
    signed = bool(args.callback_url or args.heartbeat_url)
    try:
        secret = resolve_secret(args.attempt_id) if signed else None
    except ConfigurationError as exc:
        # Without a secret nothing can be reported; the orchestrator's lease sweeper takes over.
        log.error("%s", exc)
        return EXIT_FAILED
    with contextlib.ExitStack() as stack:
        if args.heartbeat_url:
            beat_client = CallbackClient(secret)
            stack.callback(beat_client.close)
            stack.enter_context(Heartbeat(beat_client, args.heartbeat_url))
        outcome = run(args.document, args.extractor, args.attempt_id)
    text = json.dumps(outcome.payload, ensure_ascii=False, indent=2)
    if args.out:
        # Written whole, then renamed: whoever reads the file sees all of the report or none of it.
        partial = Path(f"{args.out}.partial")
        partial.write_text(text + "\n", encoding="utf-8")
        os.replace(partial, args.out)
    if not args.callback_url:
        print(text)
        return outcome.exit_code
    client = CallbackClient(secret)
    try:
        status = client.post(args.callback_url, outcome.payload)
        log.info("callback delivered (HTTP %d)", status)
    except (CallbackRejected, CallbackFailed) as exc:
        log.error("%s", exc)
        return EXIT_FAILED
    finally:
        client.close()
    return outcome.exit_code
