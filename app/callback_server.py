"""A small HTTP server with only the callback and heartbeat routes, apart from the web app.

For workers whose agents report to a host of their own, and for tests:
`python -m app.callback_server [--host H] [--port P]` (database from QUIRE_DATABASE_URL).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator

from fastapi import FastAPI

from app.api.callbacks import router
from app.guard import RequestGuard
from schema import db
from schema.settings import Settings, get_settings


def create_app(dsn: str, settings: Settings | None = None, *, pool_size: int = 4) -> FastAPI:
    """A FastAPI app serving the callback routes over its own pool on `dsn`."""
    settings = settings or get_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        """Opens the app's pool for its lifetime."""
        app.state.pool = db.make_pool(dsn, min_size=1, max_size=pool_size, name="quire-callbacks")
        try:
            yield
        finally:
            app.state.pool.close()

    app = FastAPI(title="Quire callbacks", lifespan=lifespan)
    app.state.settings = settings
    app.add_middleware(RequestGuard, settings=settings)  # bodies capped before they are read
    app.include_router(router)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """Liveness only: the routes answer 503 themselves while the database is away."""
        return {"status": "ok"}

    return app


def main(argv: list[str] | None = None) -> int:
    """Serves the callback routes until interrupted."""
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m app.callback_server")
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    settings = get_settings()
    dsn = db.database_url(settings)
    uvicorn.run(create_app(dsn, settings), host=args.host or settings.host, port=args.port or settings.port,
                log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
