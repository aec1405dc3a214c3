"""The `quire` command line: migrate, db-url, db-stop, submit, status, pause, resume, worker, serve, up,
requirements, grants."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC
from pathlib import Path

from schema.errors import QuireError, UnknownAgent
from schema.models import DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY, TaskStatus, is_priority


def _settings():
    from schema.settings import get_settings

    return get_settings()


def _prepare():
    """Migrates and applies quire.toml: only `migrate`, `up`, `serve` and `worker` do this."""
    from schema import queue
    from schema.bootstrap import prepare_database
    from worker.agent_check import check_agents

    def report_agents(conn) -> None:
        for agent, error in check_agents(conn).items():
            print(f"agent {agent!r} will not run until its configuration is fixed: {error}", file=sys.stderr)
        for spec in queue.list_agents(conn):
            print(agent_line(spec))

    return prepare_database(_settings(), then=report_agents)


def agent_line(agent) -> str:
    """How start-up names an agent: its executor, model and prices, or that its costs are unpriced."""
    model = f"model {agent.model}" if agent.model else "no model (no LLM calls)"
    if agent.price_input_per_mtok is not None and agent.price_output_per_mtok is not None:
        prices = (f"${float(agent.price_input_per_mtok):g} in / ${float(agent.price_output_per_mtok):g} out "
                  "per million tokens")
    else:
        prices = "no prices: costs shown as unpriced"
    return f"agent {agent.name}: {agent.executor} executor, {model}, {prices}"


def _database() -> str:
    """The DSN for commands that only read: they never migrate, nor apply quire.toml."""
    from schema import db
    from schema.migrate import pending

    # A command that only reads never makes a new, empty database where there is none.
    dsn = db.database_url(_settings(), create=False)
    with db.connect(dsn) as conn:
        missing = pending(conn)
    if missing:
        raise QuireError(f"the database lacks {len(missing)} migration(s): run `quire migrate` first")
    return dsn


def cmd_migrate(args) -> int:
    from schema import db
    from schema.migrate import migrate

    dsn = db.database_url(_settings())
    with db.connect(dsn) as conn:
        applied = migrate(conn)
    _prepare()
    print(f"applied migrations: {', '.join(map(str, applied))}" if applied else "database is up to date")
    return 0


def cmd_db_url(args) -> int:
    from schema import db

    print(db.database_url(_settings()))
    return 0


def cmd_db_stop(args) -> int:
    from schema import db

    settings = _settings()
    if settings.database_url:
        print("QUIRE_DATABASE_URL is set: there is no embedded server to stop", file=sys.stderr)
        return 1
    print("stopped" if db.stop_embedded(settings.data_dir) else "the embedded server was not running")
    return 0


def cmd_submit(args) -> int:
    from app.submitting import SubmitOptions, Upload, submit_documents
    from schema import db, queue

    settings = _settings()
    uploads, failures = [], 0
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            print(f"rejected {name}: no such file", file=sys.stderr)
            failures += 1
            continue
        uploads.append(Upload(path.name, path=path.resolve()))
    dsn = _database()
    with db.connect(dsn) as conn:
        try:
            agent = queue.get_agent(conn, args.agent or settings.default_agent)  # before any file is stored
        except UnknownAgent as exc:
            raise UnknownAgent(f"{exc}: agents are configured from quire.toml by `quire migrate`") from None
        options = SubmitOptions(agent=agent.name, priority=args.priority, customer=args.customer,
                                rerun_duplicates=args.duplicates == "rerun")
        for result in submit_documents(conn, settings, uploads, options, submitted_by=args.submitted_by):
            if result.outcome == "created":
                kind = f"{result.einvoice} e-invoice, " if result.einvoice and not result.pages \
                    else f"{result.pages} pages, "
                print(f"task {result.task_id}: {result.name} ({kind}priority {args.priority}, agent {agent.name})")
            elif result.outcome == "duplicate":
                assert result.duplicate_of is not None  # a duplicate names its original
                print(f"duplicate {result.name}: already task {result.duplicate_of['id']} "
                      f"({result.duplicate_of['status']}); --duplicates rerun runs it again")
            else:
                print(f"rejected {result.error}", file=sys.stderr)
                failures += 1
    return 1 if failures else 0


def cmd_status(args) -> int:
    from schema import db, stats

    dsn = _database()
    with db.connect(dsn) as conn:
        counts = stats.status_counts(conn)
    if args.json:
        print(json.dumps(counts, indent=2))
        return 0
    statuses = [s.value for s in TaskStatus]
    print(f"{'agent':<20}" + "".join(f"{s:>12}" for s in statuses))
    for agent, by_status in sorted(counts["agents"].items()):
        print(f"{agent:<20}" + "".join(f"{by_status.get(s, 0):>12}" for s in statuses))
    print(f"{'total':<20}" + "".join(f"{counts['total'].get(s, 0):>12}" for s in statuses))
    return 0


def _when(text: str):
    """An ISO 8601 time for --until (UTC when it names no zone)."""
    from datetime import datetime

    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time (like 2026-01-31T18:00): {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def cmd_pause(args) -> int:
    from datetime import datetime

    from schema import db, queue

    if args.until is not None and args.until <= datetime.now(UTC):
        raise ValueError("the time to resume must be in the future")
    with db.connect(_database()) as conn:
        agent = queue.pause_agent(conn, args.agent, actor=args.by, until=args.until, reason=args.reason)
    until = f"until {agent.paused_until:%Y-%m-%d %H:%M} UTC" if agent.paused_until else "until resumed"
    print(f"agent {agent.name} paused {until}: running tasks finish, nothing new starts"
          + (f" ({agent.paused_reason})" if agent.paused_reason else ""))
    return 0


def cmd_resume(args) -> int:
    from schema import db, queue

    with db.connect(_database()) as conn:
        agent = queue.resume_agent(conn, args.agent)
    print(f"agent {agent.name} resumed: its waiting tasks start again")
    return 0


def cmd_worker(args) -> int:
    from worker.daemon import run_worker

    return run_worker(_settings(), _prepare(), concurrency=args.concurrency)


def cmd_serve(args) -> int:
    from app.main import run_app

    return run_app(_settings(), _prepare(), samples=False, worker=not args.no_worker)


def cmd_up(args) -> int:
    from app.main import run_app

    return run_app(_settings(), _prepare(), samples=args.samples, worker=True)


def cmd_requirements(args) -> int:
    from app.deploy import REQUIREMENTS, requirements_text

    text = requirements_text()
    if args.write:
        REQUIREMENTS.write_text(text)
        print(f"wrote {REQUIREMENTS}")
    else:
        print(text, end="")
    return 0


def cmd_grants(args) -> int:
    from app.deploy import grants
    from schema import db

    # Only grants: the database is neither migrated nor given quire.toml's agents here.
    dsn = db.database_url(_settings())
    for statement in grants(dsn, args.principal, apply=args.apply, owner=args.owner):
        print(statement)
    if args.apply:
        print(f"-- applied to {args.principal}", file=sys.stderr)
    return 0


def _priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not is_priority(value):
        raise argparse.ArgumentTypeError(f"the priority must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY}, "
                                         f"not {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quire", description="Postgres-native orchestrator for document agents")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="apply database migrations and agent configuration").set_defaults(fn=cmd_migrate)
    sub.add_parser("db-url", help="print the database DSN in use").set_defaults(fn=cmd_db_url)
    sub.add_parser("db-stop", help="stop the embedded Postgres server").set_defaults(fn=cmd_db_stop)
    submit = sub.add_parser("submit", help="store PDF files or e-invoices (XML, .p7m) and enqueue a task for each")
    submit.add_argument("files", nargs="+")
    submit.add_argument("--agent")
    submit.add_argument("--priority", type=_priority, default=DEFAULT_PRIORITY,
                        help=f"0..9, 9 the most urgent (default {DEFAULT_PRIORITY})")
    submit.add_argument("--customer")
    submit.add_argument("--submitted-by", default="cli")
    submit.add_argument("--duplicates", choices=["offer", "rerun"], default="offer",
                        help="offer: a document submitted before is not run again; rerun: run it anyway")
    submit.set_defaults(fn=cmd_submit)
    status = sub.add_parser("status", help="task counts per status and agent")
    status.add_argument("--json", action="store_true")
    status.set_defaults(fn=cmd_status)
    pause = sub.add_parser("pause", help="pause an agent: running tasks finish, nothing new starts")
    pause.add_argument("agent")
    pause.add_argument("--until", type=_when, help="resume by itself at this ISO 8601 time (UTC if no zone)")
    pause.add_argument("--reason", help="shown beside the agent and its waiting tasks")
    pause.add_argument("--by", default="cli", help="who paused it (default cli)")
    pause.set_defaults(fn=cmd_pause)
    resume = sub.add_parser("resume", help="resume a paused agent")
    resume.add_argument("agent")
    resume.set_defaults(fn=cmd_resume)
    worker = sub.add_parser("worker", help="run the worker daemon alone")
    worker.add_argument("--concurrency", type=int, default=None,
                        help="runs at once (default QUIRE_WORKER_CONCURRENCY, else the CPU count)")
    worker.set_defaults(fn=cmd_worker)
    serve = sub.add_parser("serve", help="run the web app and HTTP API (co-hosting a worker)")
    serve.add_argument("--no-worker", action="store_true")
    serve.set_defaults(fn=cmd_serve)
    up = sub.add_parser("up", help="start everything on the embedded Postgres")
    up.add_argument("--samples", action="store_true", help="enqueue the bundled sample documents")
    up.set_defaults(fn=cmd_up)
    requirements = sub.add_parser("requirements", help="print requirements.txt for the Databricks Apps build")
    requirements.add_argument("--write", action="store_true", help="write requirements.txt beside pyproject.toml")
    requirements.set_defaults(fn=cmd_requirements)
    grants = sub.add_parser("grants", help="print (or apply) the role and grants a principal needs on the queue")
    grants.add_argument("--principal", required=True, help="Postgres role: a service principal's application id")
    grants.add_argument("--owner", help="the role that runs the migrations (default: the connected role): "
                                        "tables it creates later are granted by default privileges")
    grants.add_argument("--apply", action="store_true", help="run the grants (one transaction)")
    grants.set_defaults(fn=cmd_grants)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (QuireError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
