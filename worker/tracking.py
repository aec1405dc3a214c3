"""Where agents trace: MLflow, by default with its store in a database beside the queue's."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from urllib.parse import quote, quote_plus

from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from schema import db
from schema.sql import fetch_row, q
from worker import logs
from worker.apart import start_apart

DEFAULT_DATABASE = "quire_mlflow"
DEFAULT_EXPERIMENT = "quire"
# Connection parameters that carry over from the queue's DSN to the MLflow database URL.
_PASSED_ON = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name")


def tracking_uri_beside(dsn: str, database: str = DEFAULT_DATABASE) -> str:
    """The SQLAlchemy URL of `database` on the queue's server (a unix socket stays a socket).

    Written out as SQLAlchemy's URL.render_as_string writes it, without importing SQLAlchemy: the
    worker asks for this URL before it claims anything, and SQLAlchemy took a second or more to
    import on a busy machine. MLflow parses it when an agent first traces.
    """
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    host = params.get("host") or None
    query = {k: params[k] for k in _PASSED_ON if params.get(k)}
    if host and host.startswith("/"):
        query["host"], host = host, None
    url = "postgresql+psycopg://"
    if params.get("user") is not None:
        url += quote(params["user"], safe=" +")
        if params.get("password") is not None:
            url += ":" + quote(params["password"], safe=" +")
        url += "@"
    if host is not None:
        url += f"[{host}]" if ":" in host else host
    if params.get("port"):
        url += f":{int(params['port'])}"
    url += "/" + quote(database, safe=" +/")
    if query:
        url += "?" + "&".join(f"{quote_plus(k)}={quote_plus(str(query[k]))}" for k in sorted(query))
    return url


def ensure_database(dsn: str, database: str = DEFAULT_DATABASE) -> bool:
    """Creates `database` on the queue's server unless it exists; True if this call created it."""
    with db.connect(dsn) as conn:
        if fetch_row(conn, "database_exists_one", {"name": database})["present"]:
            return False
        try:
            conn.execute(sql.SQL(q("database_create")).format(name=sql.Identifier(database)))
        except (pg_errors.DuplicateDatabase, pg_errors.UniqueViolation):  # another worker won the race
            return False
    return True


def locate_tracking(dsn: str, configured_uri: str | None) -> tuple[str, bool]:
    """The tracking URI agents get, and whether its store is ours to set up (beside the queue).

    QUIRE_MLFLOW_TRACKING_URI (or MLFLOW_TRACKING_URI) is used as given; otherwise a database
    `quire_mlflow` beside the queue's is created if it is missing.
    """
    uri = configured_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri, False
    ensure_database(dsn)
    return tracking_uri_beside(dsn), True


def tracking_store_state(dsn: str) -> str:
    """How far the store beside the queue's is set up: "empty", "tables" (MLflow made its tables),
    or "ready" (and the experiment is there: nothing is left to do, MLflow need not be loaded)."""
    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    with db.connect(db.with_database(dsn, DEFAULT_DATABASE)) as conn:
        if not fetch_row(conn, "tracking_store_present_one")["present"]:
            return "empty"
        if fetch_row(conn, "tracking_experiment_present_one", {"name": experiment})["present"]:
            return "ready"
        return "tables"


def prepare_store(dsn: str, uri: str, *, artifact_root: Path, worker_id: str | None = None) -> bool:
    """Makes MLflow's tables and the experiment in the database beside the queue's; False on failure.

    Under an advisory lock, so that workers starting together do not race through MLflow's
    migrations; the experiment's artifacts go under the data dir rather than the working dir.
    """
    experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    try:
        with db.connect(db.with_database(dsn, DEFAULT_DATABASE)) as lock_conn:
            lock_conn.execute(q("tracking_lock_setup"))
            try:
                from mlflow.tracking import MlflowClient

                client = MlflowClient(tracking_uri=uri)  # its first use creates MLflow's tables
                if client.get_experiment_by_name(experiment) is None:
                    artifact_root.mkdir(parents=True, exist_ok=True)
                    client.create_experiment(experiment, artifact_location=artifact_root.resolve().as_uri())
                    logs.change("worker", "tracking_prepared", experiment=experiment, worker=worker_id)
            finally:
                lock_conn.execute(q("tracking_unlock_setup"))
    except Exception as exc:  # tracing is optional, the work is not
        logs.problem("prepare MLflow tracking", exc, worker=worker_id)
        return False
    return True


# The environment variable that hands prepare_store's arguments to its own process.
_SETUP_ENV = "QUIRE_TRACKING_SETUP"
# The set-up's CPU priority (nice): below the claims, above the OCR measure (traced runs wait on it).
SETUP_PRIORITY = 10


async def prepare_store_apart(dsn: str, uri: str, *, artifact_root: Path, worker_id: str | None = None) -> bool:
    """prepare_store in a process of its own at a lower CPU priority: MLflow's import and its
    migrations take seconds of CPU, most of it holding the interpreter lock, and in the worker's
    process they slowed its claims and settlements while they ran.

    The process is a session of its own: a Ctrl-C to the worker's terminal does not end it halfway
    through MLflow's migrations, and a worker that stops before it is done leaves it to finish. With
    credentials only this process holds (Lakebase tokens), it runs here, in a thread."""
    if db.connection_kwargs():
        return await asyncio.to_thread(prepare_store, dsn, uri, artifact_root=artifact_root, worker_id=worker_id)
    arguments = {"dsn": dsn, "uri": uri, "artifact_root": str(artifact_root), "worker_id": worker_id}
    try:
        process = await start_apart("worker.tracking", nice=SETUP_PRIORITY,
                                    env={**os.environ, _SETUP_ENV: json.dumps(arguments)})
    except OSError as exc:
        logs.problem("prepare MLflow tracking", exc, worker=worker_id)
        return False
    return await process.wait() == 0


def _main() -> int:
    """`python -m worker.tracking`: prepare_store with the arguments prepare_store_apart handed on."""
    handed = os.environ.pop(_SETUP_ENV, None)
    if handed is None:
        print(f"python -m worker.tracking is started by the worker, with {_SETUP_ENV} set", file=sys.stderr)
        return 2
    arguments = json.loads(handed)
    logs.configure_stderr_logging()
    return 0 if prepare_store(arguments["dsn"], arguments["uri"], artifact_root=Path(arguments["artifact_root"]),
                              worker_id=arguments["worker_id"]) else 1


if __name__ == "__main__":
    sys.exit(_main())
