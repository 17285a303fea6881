"""The provider's callback, served next to ``/mcp``: where a user's browser comes back after
signing in at an OAuth provider a tool acts on (``@tool(requires_auth=...)``).

A served runner given ``user_auth`` has its :meth:`~tdk.ToolRunner.complete_authorization`
answered at the path of ``user_auth.redirect_uri`` (usually ``/oauth/callback``): a ``GET``
with the provider's query parameters (``code`` and ``state``, or ``error``). The answer is a
small HTML page saying, in tdk's words, what became of the sign-in: 200 when the user's
tokens are kept, 400 otherwise. The page never shows the code or the state, is not cached,
sends no referrer (the URL the browser shows still holds the code), runs no script and loads
nothing (its Content-Security-Policy allows nothing), and cannot be framed.

Who opens the link must be the user the link was made for (the state says who): a server
without authentication has one user, the anonymous local one (None), since it serves on
loopback only unless told otherwise, and every caller of its tools is that user. On a server
that authenticates its callers a browser holds no bearer token: it signs in at the issuer
first, as a login client (:mod:`tdk.hosts._mcp_login`), and without one the server refuses
to start (:func:`callback_refusal`); an application with its own web server calls
``runner.complete_authorization()`` there with its session's user instead.

The request is bounded: a query longer than :data:`MAX_QUERY` bytes, or with more than
:data:`MAX_FIELDS` parameters, is refused before anything is read of it. The Host header is
checked against the names the server answers to (DNS rebinding), as for ``/mcp``.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs, urlsplit

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tdk.auth._authorization import Authorization
from tdk.hosts._mcp_auth import MCP_PATH
from tdk.hosts._mcp_login import UNAVAILABLE, Login, SignedIn

if TYPE_CHECKING:
    from tdk.runner import ToolRunner

__all__ = [
    "MAX_FIELDS",
    "MAX_QUERY",
    "callback_path",
    "callback_problem",
    "callback_refusal",
    "callback_routes",
]

logger = logging.getLogger("tdk.hosts.mcp")

#: The longest query string of a callback read, in bytes (a code and a state are far shorter).
MAX_QUERY: Final = 8 * 1024
#: The most parameters a callback's query may hold (a provider sends three or four).
MAX_FIELDS: Final = 16

#: The shortest login client secret the sign-in's states are sealed with (as a state_key).
_MIN_SECRET: Final = 16

#: The headers of every page: not cached, no referrer, no script, no framing, no sniffing.
_HEADERS: Final = {
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": (
        "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
}

_PAGE: Final = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{title}</title></head>
<body><h1>{title}</h1><p>{message}</p></body>
</html>
"""

#: What a callback too large, or not a GET, is told.
_TOO_LARGE: Final = "This sign-in link is not one this server made: nothing was attached."
_NOT_GET: Final = "Open this address in a browser: nothing was attached."
_BROKEN: Final = "The sign-in could not be completed: nothing was attached. Try again later."


def callback_path(runner: ToolRunner) -> str | None:
    """The path the provider's callback is served at for ``runner`` (that of its
    ``user_auth.redirect_uri``), or None for a runner that acts as no user."""
    user_auth = runner.user_auth
    if user_auth is None:
        return None
    return urlsplit(user_auth.redirect_uri).path or "/"


def callback_problem(runner: ToolRunner) -> str | None:
    """Why the callback of ``runner`` cannot be served next to ``/mcp`` (its path is one
    the MCP server answers already), or None."""
    path = callback_path(runner)
    if path is None or (path != MCP_PATH and not path.startswith(("/.well-known/", "/mcp/"))):
        return None
    return (
        f"user_auth's redirect_uri has the path {path!r}, which the MCP server answers: give "
        "the callback a path of its own (such as /oauth/callback)"
    )


def callback_refusal(runner: ToolRunner, login_client: tuple[str, str] | None) -> str | None:
    """Why ``runner`` cannot be served with authentication, or None: its tools act as the
    user, and the callback cannot know who opens a sign-in link unless the browser signs in
    at the issuer first, as the ``login_client`` (id, secret) (:mod:`tdk.hosts._mcp_login`)."""
    if runner.user_auth is None:
        return None
    if login_client is not None:
        if len(login_client[1].encode()) >= _MIN_SECRET:
            return None
        return (
            f"TDK_LOGIN_CLIENT_SECRET is shorter than {_MIN_SECRET} bytes: the sign-in's "
            "states are sealed with a key derived from it"
        )
    return (
        f"the runner has user_auth: its tools act as the user at OAuth providers, and the "
        f"provider's callback ({callback_path(runner)}) cannot know who opens it when callers "
        "authenticate with bearer tokens (a browser holds none). Register a login client at "
        "the issuer (authorization code with PKCE, redirect URI: user_auth's redirect_uri) "
        "and set TDK_LOGIN_CLIENT_ID and TDK_LOGIN_CLIENT_SECRET, for the browser to sign in "
        "there first; or serve /mcp from your application, whose own web server calls "
        "runner.complete_authorization(params, user_id=...) with its session's user "
        "(docs/auth.md)"
    )


def callback_routes(
    runner: ToolRunner, security: TransportSecuritySettings | None, login: Login | None = None
) -> list[Route]:
    """The routes answering the provider's callback for ``runner`` (which has ``user_auth``):
    its path, and the same with or without a trailing slash (else the router would answer
    that one with a redirect built from the Host header, before any check, carrying the
    code and state). ``security``: the Host check of the server (None: every interface, no
    check). ``login``: how the browser signs in at the issuer first, on a server that
    authenticates (without, the opener is the one anonymous user of a server without
    authentication)."""
    path = callback_path(runner)
    if path is None:
        raise ValueError("the runner has no user_auth: there is no callback to serve")
    check = TransportSecurityMiddleware(security)

    async def answer(request: Request) -> Response:
        refused = await check.validate_request(request)
        if refused is not None:
            return refused
        if request.method != "GET":
            return _page(405, "Not signed in", _NOT_GET)
        params = _query(request)
        if params is None:
            logger.warning("oauth callback refused: its query is too large")
            return _page(400, "Not signed in", _TOO_LARGE)
        opener: str | None = None
        if login is not None:
            signed_in = await _signed_in(login, params)
            if isinstance(signed_in, Response):
                return signed_in
            params, opener = dict(signed_in.params), signed_in.user_id
        try:
            outcome = await runner.complete_authorization(params, user_id=opener)
        except Exception as broken:  # (never raises for bad input: this is tdk's own bug)
            logger.error("oauth callback failed: %s", type(broken).__name__)
            return _page(500, "Not signed in", _BROKEN)
        _log(outcome)
        title = "Signed in" if outcome.attached else "Not signed in"
        return _page(200 if outcome.attached else 400, title, outcome.message)

    other = path[:-1] if path.endswith("/") else f"{path}/"
    paths = (path, other) if other else (path,)
    return [Route(each, answer, methods=["GET"], name="tdk-oauth-callback") for each in paths]


async def _signed_in(login: Login, params: Mapping[str, object]) -> SignedIn | Response:
    """Who opened the link, once the browser has signed in at the issuer; or the answer
    sending it there (the provider's parameters carried), or the page saying why not."""
    payload = login.opened(params)
    if payload is not None:  # the issuer sends the browser back
        found = await login.finish(payload, params)
        return _page(400, "Not signed in", found) if isinstance(found, str) else found
    carried = login.carried(params)
    if carried is None or "state" not in carried:  # (a provider's callback has its state:
        # without one there is nothing to sign in for, and no loop through the issuer)
        return _page(400, "Not signed in", _TOO_LARGE)
    where = await login.start(carried)
    if where is None:
        return _page(400, "Not signed in", UNAVAILABLE)
    return Response(status_code=302, headers={**_HEADERS, "Location": where})


def _query(request: Request) -> dict[str, str | list[str]] | None:
    """The callback's query parameters (a parameter given twice keeps both, which
    ``complete_authorization`` takes as none); None when the query is too large."""
    raw: bytes = request.scope.get("query_string", b"")
    if len(raw) > MAX_QUERY:
        return None
    try:
        parsed = parse_qs(raw.decode("latin-1"), max_num_fields=MAX_FIELDS)
    except ValueError:  # more fields than allowed
        return None
    return {name: values[0] if len(values) == 1 else values for name, values in parsed.items()}


def _page(status: int, title: str, message: str) -> Response:
    """The HTML page of an outcome (its text escaped: it is tdk's, but never trusted)."""
    body = _PAGE.format(title=html.escape(title), message=html.escape(message))
    return Response(body, status, headers=_HEADERS, media_type="text/html; charset=utf-8")


def _log(outcome: Authorization) -> None:
    """One line for the operator: the provider and the reason (never the code or state)."""
    provider = outcome.provider or "an unknown provider"
    if outcome.reason in ("attached", "declined"):
        logger.info("oauth callback of %s: %s", provider, outcome.reason)
    else:
        logger.warning("oauth callback of %s: nothing attached (%s)", provider, outcome.reason)
