"""Wires the web app: pool, identity, live updates, API routers, pages, co-hosted worker, samples."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from schema.settings import Settings

if TYPE_CHECKING:
    from worker.listener import Listener

log = logging.getLogger("quire.app")
STATIC = Path(__file__).with_name("static")
# What the app's shutdown allows the co-hosted worker beyond its grace, to hand back what is left.
HAND_BACK_SECONDS = 60


def public_url(settings: Settings) -> str:
    """Where agents and people reach this process: the public URL (QUIRE_PUBLIC_URL, or the
    Databricks App's own), else this machine's address, which only local agents can use."""
    from worker import public_url as urls

    return urls.public_url(settings) or urls.local_url(settings)


def _log_if_failed(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the co-hosted worker stopped", exc_info=task.exception())


def _host_worker(app, settings: Settings, dsn: str, base_url: str, listener: Listener) -> None:
    """Runs worker.daemon.WorkerDaemon in this process's event loop on the process's one Listener,
    stopping it on shutdown."""
    from app import stopping
    from worker.daemon import WorkerDaemon

    stop, hurried = asyncio.Event(), asyncio.Event()

    async def start() -> None:
        daemon = WorkerDaemon(settings, dsn, callback_base_url=base_url, listener=listener, settle_gc=True)
        app.state.worker = daemon
        task = asyncio.create_task(daemon.run(stop), name="quire-worker")
        task.add_done_callback(_log_if_failed)
        app.state.worker_task = task

        async def drain() -> None:
            """Stops claiming; serves on while the worker drains and other workers' runs report."""
            stop.set()
            await asyncio.gather(asyncio.wait([task]), stopping.runs_reported(
                app.state.pool, grace_seconds=settings.shutdown_grace_seconds, hurried=hurried))

        def hurry() -> None:
            hurried.set()
            daemon.hurry()

        stopping.drain_before_exit(drain, hurry)

    async def shutdown() -> None:
        stop.set()
        task = getattr(app.state, "worker_task", None)
        if task is not None:
            try:
                # The worker's drain lasts up to the grace and its hand-back a few seconds more.
                await asyncio.wait_for(task, timeout=settings.shutdown_grace_seconds + HAND_BACK_SECONDS)
            except (TimeoutError, Exception):
                task.cancel()

    app.on_startup(start)
    app.on_shutdown(shutdown)


def _fold_in_background(app, settings: Settings) -> None:
    """Without a co-hosted worker, the app folds the rollups itself, a bounded step at a time, so that
    a bulk load is counted without any read waiting for it (folds of several processes take turns)."""
    from worker.folder import FolderConfig, RollupFolder
    from worker.service import service_loop

    stop = asyncio.Event()

    async def start() -> None:
        folder = RollupFolder(app.state.pool, "app", FolderConfig(interval_seconds=settings.rollup_fold_seconds,
                                                    drain_seconds=settings.rollup_drain_fold_seconds))
        app.state.folder_task = asyncio.create_task(
            service_loop("rollup fold", folder.run_once, folder.config.interval_seconds, stop, worker_id="app"),
            name="quire-rollup-fold")

    async def shutdown() -> None:
        stop.set()
        task = getattr(app.state, "folder_task", None)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    app.on_startup(start)
    app.on_shutdown(shutdown)


def run_app(settings: Settings, dsn: str, *, samples: bool, worker: bool) -> int:
    """Serves the pages and the API until interrupted; returns the exit code."""
    if not worker:  # `quire serve --no-worker`: the app holds no worker, whatever QUIRE_WORKER says
        settings = settings.replace(worker="off")
    from nicegui import app, background_tasks, ui
    from nicegui.storage import Storage

    from app import auth, guard, live, sockets, submitting
    from app.api import (
        agents,
        callbacks,
        docs,
        errors,
        events,
        export,
        foresight,
        health,
        review,
        session,
        summary,
        tasks,
    )
    from app.pages import dashboard, login, task_detail, upload  # noqa: F401  (registers the pages)
    from app.pages import review as review_page  # noqa: F401  (registers the page)
    from schema.db import make_pool
    from worker.listener import Listener

    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    authenticator = auth.Authenticator(settings)
    auth.install(authenticator)
    app.add_middleware(auth.PageGuard)
    sockets.install()
    # Per-browser UI preferences (app.storage.user) live under the data dir, not the working directory.
    Storage.path = (Path(settings.data_dir) / "ui-storage").resolve()
    broadcaster = live.Broadcaster(Listener(dsn, config=live.LISTENER_CONFIG))
    live.install(broadcaster)
    app.state.settings = settings
    # A request waits at most a few seconds for a connection: during an outage the API answers 503.
    app.state.pool = make_pool(dsn, max_size=16, name="quire-app", timeout=5, reconnect_timeout=5)
    guard.install(app, settings)
    errors.install(app)
    for module in (tasks, summary, events, health, session, callbacks, export, foresight, agents, review):
        app.include_router(module.router)
    docs.install(app, title="Quire API", version="0.1.0",
                 description="Submit documents, follow tasks live, retry and cancel; review, correct and approve "
                             "extracted data. "
                             "Send the operator token as `Authorization: Bearer <token>`.")
    base_url = public_url(settings)
    app.on_startup(broadcaster.start)
    app.on_startup(lambda: background_tasks.create(session.keep_revocations(app.state.pool),
                                                   name="quire-revocations"))
    app.on_shutdown(broadcaster.stop)
    if settings.worker == "on":
        _host_worker(app, settings, dsn, base_url, broadcaster.listener)
    else:  # other workers' agents may report here: serve them until their runs end, or the grace
        from app import stopping

        hurried = asyncio.Event()
        app.on_startup(lambda: stopping.drain_before_exit(lambda: stopping.runs_reported(
            app.state.pool, grace_seconds=settings.shutdown_grace_seconds, hurried=hurried), hurried.set))
        _fold_in_background(app, settings)
    if samples:
        async def enqueue_samples() -> None:
            results = await submitting.submit_samples(app.state.pool, settings)
            created = sum(r.outcome == "created" for r in results)
            print(f"samples: {created} enqueued, {len(results) - created} already submitted", flush=True)
        app.on_startup(enqueue_samples)
    app.on_shutdown(lambda: app.state.pool.close())  # NiceGUI passes the app to one-argument handlers

    print(f"Quire is serving {base_url}", flush=True)
    if authenticator.databricks:
        print("identity: Databricks Apps forwarded headers; operators: "
              f"{', '.join(sorted(settings.operator_emails)) or '(none configured)'}; reviewers: "
              f"{', '.join(sorted(settings.reviewer_emails)) or '(none configured)'}", flush=True)
    else:
        print(f"operator token: {authenticator.token}", flush=True)
        print(f"sign in: {base_url}/login?token={authenticator.token}", flush=True)
    ui.run(host=settings.host, port=settings.port, reload=False, show=False, title="Quire",
           favicon=STATIC / "favicon.svg", show_welcome_message=False, uvicorn_logging_level="warning",
           # Event streams never end by themselves: on shutdown they get this long, then are cut.
           timeout_graceful_shutdown=3, storage_secret=authenticator.storage_secret,
           # A page waits this long for its browser to reconnect before it is rebuilt.
           reconnect_timeout=10.0)
    return 0
