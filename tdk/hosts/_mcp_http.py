"""An MCP server over streamable HTTP: the socket, the names a request may give, and uvicorn.

``serve()`` of :mod:`tdk.hosts.mcp` and ``tdk serve --http`` both serve through
:func:`serve_http`. The socket is bound before anything is said about it: a port in use is
an ``OSError`` before the server runs, and ``on_listening`` hears the URL only once the
socket is bound. A worker of ``tdk serve --workers`` serves a socket its supervisor bound,
and statelessly: the SDK's session manager keeps no session, so a 2025 client's requests
may each reach another worker (a 2026-07-28 request is stateless whatever the mode).

Against DNS rebinding (a web page in the user's browser whose name an attacker points at this
machine), a request must name the server in ``Host`` (and ``Origin``, when it has one): the
address served, as given and as bound, and on a loopback address the loopback names too;
each with any port or none (a standard client leaves out the default port: ``Host:
127.0.0.1`` for a server on port 80, or behind a proxy on 443). A server on every interface
cannot know the names it will be reached by: it runs without the check, and says so.

A runner given ``user_auth`` (its tools act as the user at OAuth providers) has the
provider's callback served next to ``/mcp``, at the path of its ``redirect_uri``
(:mod:`tdk.hosts._mcp_callback`); its Host is checked likewise, the redirect URI's name
allowed too (behind a proxy).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings

from tdk._cli.addresses import Listening, bound, listening_address
from tdk._compat.sse_shutdown import shutdown_flag_restored
from tdk.hosts._mcp_auth import Protection, protected_app
from tdk.hosts._mcp_callback import callback_problem, callback_refusal, callback_routes
from tdk.hosts._mcp_login import Login

if TYPE_CHECKING:
    from starlette.routing import Route

    from tdk.runner import ToolRunner

__all__ = ["security", "serve_http"]

logger = logging.getLogger("tdk.hosts.mcp")

#: The names of this machine's loopback, as a Host or Origin header gives them.
_LOOPBACK: Final = ("127.0.0.1", "localhost", "[::1]")


async def serve_http(
    mcp_server: Server[Any],
    host: str,
    port: int,
    *,
    on_listening: Callable[[str], None] | None = None,
    protection: Protection | None = None,
    listener: socket.socket | None = None,
    runner: ToolRunner | None = None,
) -> None:
    """Serve ``mcp_server`` over streamable HTTP at ``http://host:port/mcp`` until cancelled
    (then as on Ctrl-C: the socket closes, the sessions end). ``OSError`` when the address
    cannot be bound; ``on_listening(url)`` once it is. With ``protection``, every request
    needs a bearer token it verifies (:mod:`tdk.hosts._mcp_auth`).

    ``listener``: a listening socket for ``host:port`` bound by another process and shared
    with it (``tdk serve --workers``): served as it is, statelessly (no session lives in one
    process: any request may reach another), and closed here on the way out.

    ``runner``: that of ``mcp_server``; the provider's callback of one given ``user_auth``
    is served too (``ValueError``: see :func:`~tdk.hosts._mcp_callback.callback_refusal`)."""
    import uvicorn

    where = listening_address(host, port)
    stateless, routes = listener is not None, _callback_routes(runner, where, protection)
    if protection is None:
        app = mcp_server.streamable_http_app(
            host=host,
            transport_security=security(where),
            stateless_http=stateless,
            custom_starlette_routes=routes,
        )
    else:
        resource = protection.resource_url or where.url
        app = protected_app(
            mcp_server,
            protection,
            host=host,
            transport_security=security(where, also=resource, authenticated=True),
            resource_url=resource,
            stateless_http=stateless,
            routes=routes,
        )
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=5
    )
    http = uvicorn.Server(config)
    # (binding: an OSError for a port in use, not an exit; a signal's mark on the SSE streams
    # of the process is cleared once the server has ended: see tdk._compat.sse_shutdown)
    opened = bound(where) if listener is None else contextlib.closing(listener)
    with opened as listening, shutdown_flag_restored():
        if on_listening is not None:
            on_listening(where.url)
        serving = asyncio.ensure_future(http.serve(sockets=[listening]))
        try:
            await asyncio.shield(serving)
        except asyncio.CancelledError:  # stop as on Ctrl-C: close the socket, end the sessions
            http.should_exit = True
            await serving
            raise


def _callback_routes(
    runner: ToolRunner | None, where: Listening, protection: Protection | None
) -> list[Route]:
    """The route of the provider's callback, for a runner given ``user_auth`` (see
    :func:`serve_http`); none for others."""
    if runner is None or runner.user_auth is None:
        return []
    login_client = None if protection is None else protection.login_client
    problem = callback_problem(runner)
    if problem is None and protection is not None:
        problem = callback_refusal(runner, login_client)
    if problem is not None:
        raise ValueError(problem)
    redirect = runner.user_auth.redirect_uri
    login = None
    if protection is not None and login_client is not None:
        resource = protection.resource_url or where.url
        login = Login(protection.verifier, *login_client, resource=resource, redirect_uri=redirect)
    # (on every interface there is no check, and security() has said so already for /mcp)
    checked = None if where.reach == "every" else security(where, also=redirect)
    return callback_routes(runner, checked, login)


def security(
    where: Listening, *, also: str | None = None, authenticated: bool = False
) -> TransportSecuritySettings | None:
    """The DNS-rebinding check for a server at ``where`` (see the module docstring), which
    also takes the name of the URL ``also`` (the public URL of a protected resource, behind a
    proxy that keeps the ``Host`` its clients send); None, with a WARNING, on every
    interface. ``authenticated``: the server checks bearer tokens."""
    if where.reach == "every":
        logger.warning(
            "serving on every interface (%r): no DNS-rebinding protection%s; put it behind a "
            "proxy that checks Host%s",
            where.host,
            "" if authenticated else " and no authentication",
            "" if authenticated else " and authenticates",
        )
        return None
    public = urlsplit(also).hostname if also else None
    given = (where.host, where.bound, *((public,) if public else ()))
    loopback = _LOOPBACK if where.reach == "loopback" else ()
    names = dict.fromkeys(
        (f"[{name}]" if ":" in name else name for name in (*given, *loopback)),
    )
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[each for name in names for each in (name, f"{name}:*")],
        allowed_origins=[
            each
            for name in names
            for scheme in ("http", "https")
            for each in (f"{scheme}://{name}", f"{scheme}://{name}:*")
        ],
    )
