"""Command line of the agent job: `python -m agents run --document PATH ...` (docs/CONTRACTS.md)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from agents.callback import (
    CallbackClient,
    CallbackFailed,
    CallbackRejected,
    Heartbeat,
    app_bearer,
    resolve_secret,
)
from agents.durable import is_volume_path, write_report
from agents.errors import ConfigurationError, Stopped
from agents.limits import cap_memory
from agents.runner import EXIT_FAILED, run

log = logging.getLogger("agents")
DEFAULT_RUN_MEMORY_MB = 4096


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
    run_cmd.add_argument("--extractor", choices=("offline", "llm", "cascade"), default="offline")
    run_cmd.add_argument("--out", help="also write the payload JSON to this file")
    run_cmd.add_argument("--callback-auth", choices=("none", "databricks"), default="none",
                         help="databricks: send an OAuth bearer of the job's service principal with callbacks")
    # The agent's configuration travels with the run; an empty value means "not configured".
    run_cmd.add_argument("--model", help="model or serving endpoint (sets QUIRE_LLM_MODEL)")
    run_cmd.add_argument("--price-input-per-mtok", help="USD per million input tokens")
    run_cmd.add_argument("--price-output-per-mtok", help="USD per million output tokens")
    run_cmd.add_argument("--review-threshold",
                         help="confidence below which a field is doubtful: the cascade asks the model "
                              "for it, and a core field below it needs review (default 0.6)")
    run_cmd.add_argument("--callback-key-scope", help="secret scope of the shared callback key")
    run_cmd.add_argument("--callback-key-name", help="secret key of the shared callback key")
    run_cmd.add_argument("--oauth-client-id-key",
                         help="key in the callback key's scope holding the job principal's OAuth client id")
    run_cmd.add_argument("--oauth-client-secret-key",
                         help="key in the callback key's scope holding the job principal's OAuth client secret")
    # What a job's environment does not say by itself (sets DATABRICKS_HOST, MLFLOW_*).
    run_cmd.add_argument("--workspace-host", help="the workspace URL: the serving endpoints and MLflow live there")
    run_cmd.add_argument("--mlflow-tracking-uri", help="where traces go (databricks: the workspace's MLflow)")
    run_cmd.add_argument("--mlflow-experiment", help="the experiment traces go to (an absolute path on Databricks)")
    return parser


# Flag -> the environment variable the extractors read it from.
RUN_SETTINGS = {"model": "QUIRE_LLM_MODEL", "price_input_per_mtok": "QUIRE_LLM_PRICE_INPUT_PER_MTOK",
                "price_output_per_mtok": "QUIRE_LLM_PRICE_OUTPUT_PER_MTOK",
                "review_threshold": "QUIRE_REVIEW_THRESHOLD",
                "callback_key_scope": "QUIRE_CALLBACK_KEY_SCOPE", "callback_key_name": "QUIRE_CALLBACK_KEY_NAME",
                "workspace_host": "DATABRICKS_HOST", "mlflow_tracking_uri": "MLFLOW_TRACKING_URI",
                "mlflow_experiment": "MLFLOW_EXPERIMENT_NAME"}


def apply_run_settings(args: argparse.Namespace) -> None:
    """Puts the model, prices and key location given on the command line where they are read."""
    for attr, name in RUN_SETTINGS.items():
        value = getattr(args, attr, None)
        if value is None:
            continue  # not given: the environment (set by a local worker) stands
        if value.strip():
            os.environ[name] = value.strip()
        else:
            os.environ.pop(name, None)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("QUIRE_LOG_LEVEL", "INFO").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return command_run(args)


def cap_run_memory() -> None:
    """Caps this run's address space (QUIRE_AGENT_MEMORY_MB, 4,096 by default; 0: no cap), and so
    OCR's Tesseract, which inherits it: a document that slips past the limits fails this run
    instead of taking the machine's memory."""
    raw = os.environ.get("QUIRE_AGENT_MEMORY_MB", "").strip()
    try:
        megabytes = int(raw) if raw else DEFAULT_RUN_MEMORY_MB
    except ValueError:
        megabytes = DEFAULT_RUN_MEMORY_MB
    if megabytes > 0:
        cap_memory(megabytes)


def command_run(args: argparse.Namespace) -> int:
    """Run the agent with heartbeats, then deliver the payload (callback, stdout, --out)."""
    apply_run_settings(args)
    signed = bool(args.callback_url or args.heartbeat_url)
    try:
        secret = resolve_secret(args.attempt_id) if signed else ""  # unsigned: nothing is sent
    except ConfigurationError as exc:
        # Without a secret nothing can be reported; the orchestrator's lease sweeper takes over.
        log.error("%s", exc)
        return EXIT_FAILED
    auth, no_bearer = None, None
    if signed and args.callback_auth == "databricks":
        try:
            auth = app_bearer(os.environ.get("QUIRE_CALLBACK_KEY_SCOPE"), args.oauth_client_id_key,
                              args.oauth_client_secret_key)
        except ConfigurationError as exc:
            # The proxy would refuse every request: the work goes on and its signed report is kept
            # in the Volume, which the orchestrator reads when the run ends.
            no_bearer = str(exc)
            log.error("%s; the report goes to the Volume only", no_bearer)
    cap_run_memory()
    with contextlib.ExitStack() as stack:
        if args.heartbeat_url and not no_bearer:
            beat_client = CallbackClient(secret, auth_headers=auth)
            stack.callback(beat_client.close)
            stack.enter_context(Heartbeat(beat_client, args.heartbeat_url))
        with stopped_by_sigterm():
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
    kept = keep_in_volume(args, outcome.payload, secret)
    if no_bearer:
        return outcome.exit_code if kept else EXIT_FAILED
    client = CallbackClient(secret, auth_headers=auth)
    try:
        status = client.post(args.callback_url, outcome.payload)
        log.info("callback delivered (HTTP %d)", status)
    except (CallbackRejected, CallbackFailed) as exc:
        log.error("%s", exc)
        if not kept:
            return EXIT_FAILED
        log.info("the report stays in the Volume, where the orchestrator reads it when the run ends")
    finally:
        client.close()
    return outcome.exit_code


def _raise_stopped(signum, frame) -> None:
    raise Stopped("stopped by the orchestrator (its task was cancelled or its attempt ended)")


@contextlib.contextmanager
def stopped_by_sigterm():
    """While the agent works, SIGTERM ends the run as a failure that still reports the tokens spent
    so far: the orchestrator keeps the spend up to a cancel. Outside it, SIGTERM ends the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def keep_in_volume(args: argparse.Namespace, payload: dict, secret: str) -> bool:
    """Writes the signed report beside a Volume document before the callback; True if written."""
    if args.attempt_id is None or not is_volume_path(args.document):
        return False
    try:
        from databricks.sdk import WorkspaceClient

        path = write_report(WorkspaceClient(), args.document, args.attempt_id, payload, secret)
    except Exception as exc:  # the callback may still deliver; the failure is logged
        log.error("could not write the report to the Volume: %s", exc)
        return False
    log.info("report written to %s", path)
    return True
