"""Binds each page's Socket.IO connection to whoever loaded the page.

NiceGUI lets any socket that names a page's client id join that page's room, and takes events
addressed to a client id from any socket. Here a socket joins a page only when it carries the
identity that loaded the page (the same signed-in caller, or an anonymous caller on the sign-in
page), and a socket's events reach only the page it joined.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request

from app import auth

log = logging.getLogger("quire.app")
_ROUTED = ("event", "javascript_response", "ack")


def _page_identity(client) -> str | None:
    try:
        request = client.request
    except Exception:  # a client built without a request (NiceGUI's own error pages)
        return None
    # As PageGuard found it when the page loaded; the sign-in page is loaded anonymously.
    who = getattr(request.state, "identity", None) if request is not None else None
    return who.name if who is not None else None


def _socket_identity(environ: dict[str, Any] | None) -> str | None:
    scope = (environ or {}).get("asgi.scope")
    if not scope:
        return None
    if scope.get("type") == "websocket":
        scope = {**scope, "type": "http", "method": "GET"}
    return auth.identity_of(Request(scope)).name


def install() -> None:
    """Wraps NiceGUI's handshake and event handlers with the identity check."""
    from nicegui import Client, core
    from socketio.exceptions import ConnectionRefusedError

    sio = core.sio
    handlers = sio.handlers["/"]
    handshake = handlers["handshake"]

    async def guarded_handshake(sid: str, data: dict[str, Any]) -> bool:
        client_id = (data or {}).get("client_id")
        client = Client.instances.get(client_id) if isinstance(client_id, str) else None
        if client is None:
            return False
        if _socket_identity(sio.get_environ(sid)) != _page_identity(client):
            log.warning("a socket without the page's identity was refused (client %s)", client.id)
            return False
        return await handshake(sid, data)

    connect = handlers["connect"]

    async def guarded_connect(sid: str, environ: dict[str, Any], auth_data=None):
        # A page's socket hands its client id over in the query and may shake hands right here.
        query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        client = Client.instances.get(query.get("client_id", ""))
        if client is not None and _socket_identity(environ) != _page_identity(client):
            log.warning("a socket without the page's identity was refused (client %s)", client.id)
            raise ConnectionRefusedError("this socket does not belong to that page")
        return await connect(sid, environ, auth_data)

    sio.on("connect", guarded_connect)
    sio.on("handshake", guarded_handshake)
    for name in _ROUTED:
        original = handlers.get(name)
        if original is None:
            continue

        def routed(sid: str, msg: dict, _original=original):
            # Only the socket that joined a page may act on it.
            if not isinstance(msg, dict) or msg.get("client_id") not in sio.rooms(sid):
                return None
            return _original(sid, msg)

        sio.on(name, routed)
