"""An MCP server over HTTP that knows who calls: the SDK's authorization support, and tdk's
step-up for the tools that need scopes.

:func:`protected_app` builds the SDK's streamable HTTP app as a resource server
(``AuthSettings`` and a ``TokenVerifier``): protected-resource metadata (RFC 9728) at its
well-known path, and 401 with ``WWW-Authenticate: Bearer ..., resource_metadata="..."`` for a
request without a valid token. On top of it, :class:`ScopeStepUp` answers a ``tools/call``
of a tool declared with ``@tool(requires_scopes=...)`` whose caller's token lacks some of them
with 403 and ``WWW-Authenticate: Bearer error="insufficient_scope", scope="..."`` (the MCP
authorization spec's step-up), before the SDK reads the request: the client can ask the user
for the scopes and send the call again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecuritySettings,
)
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tdk._define.definition import ToolDefinition
from tdk.auth._caller import Verifier

__all__ = ["MCP_PATH", "Protection", "ScopeStepUp", "protected_app", "scopes_needed"]

#: Where the MCP endpoint is served.
MCP_PATH: Final = "/mcp"

#: A tool's name (as a client sends it) -> the tool's own name and the scopes its call needs,
#: or None for a tool that needs none or does not exist (the SDK answers those).
ScopesNeeded = Callable[[str], tuple[str, tuple[str, ...]] | None]


@dataclass(frozen=True, slots=True)
class Protection:
    """How a server over HTTP authenticates: the verifier of its tokens, the URL of the
    protected resource it is (None: the URL it serves), the scopes its tools need, and the
    login client of the provider's callback."""

    verifier: Verifier
    resource_url: str | None
    scopes_needed: ScopesNeeded | None
    login_client: tuple[str, str] | None = None
    """The id and secret of the client a browser signs in with at the issuer, for the
    provider's callback of tools acting as the user (:mod:`tdk.hosts._mcp_login`)."""


def protected_app(
    mcp_server: Server[Any],
    protection: Protection,
    *,
    host: str,
    transport_security: TransportSecuritySettings | None,
    resource_url: str,
    stateless_http: bool = False,
    routes: list[Route] | None = None,
) -> Starlette:
    """The streamable HTTP app of ``mcp_server``, served as the protected resource
    ``resource_url`` whose tokens ``protection`` verifies; with :class:`ScopeStepUp` when
    some tool needs scopes. ``stateless_http``: no session kept (``tdk serve --workers``).
    ``routes``: more routes, served without a token (the provider's callback)."""
    verifier = protection.verifier
    settings = AuthSettings.model_validate(
        {
            # (as text: the settings keep a URL without a path as it is, and RFC 8414 compares
            # issuers as strings, so https://auth.example.com is not https://auth.example.com/)
            "issuer_url": verifier.issuer,
            "resource_server_url": resource_url,
            # the verifiers check the audience themselves (JWT aud, introspection aud)
            "validate_token_resource": False,
        }
    )
    app = mcp_server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        transport_security=transport_security,
        stateless_http=stateless_http,
        auth=settings,
        token_verifier=verifier,
        custom_starlette_routes=routes,
    )
    if protection.scopes_needed is not None:
        # Innermost of the app's middleware: after the SDK's authentication has put the
        # verified user in the request's scope (``add_middleware`` would put it first).
        app.user_middleware.append(
            Middleware(
                ScopeStepUp,
                scopes_needed=protection.scopes_needed,
                resource_metadata=str(build_resource_metadata_url(AnyHttpUrl(resource_url))),
            )
        )
    return app


def scopes_needed(definitions: Iterable[ToolDefinition]) -> ScopesNeeded | None:
    """The lookup :class:`ScopeStepUp` makes of the tools of ``definitions`` that need
    scopes, named as a client names them (in any case, as a toolkit finds them); None when
    no tool needs a scope."""
    folded = {
        each.name.lower(): (each.name, each.requirements.scopes)
        for each in definitions
        if each.requirements.scopes
    }
    if not folded:
        return None
    return lambda name: folded.get(name.lower())


class ScopeStepUp:
    """ASGI middleware: a ``tools/call`` whose tool needs scopes the caller's token lacks is
    answered 403 ``insufficient_scope`` naming them (see the module docstring). Only an
    authenticated POST to the MCP endpoint is read: the SDK answers the others."""

    def __init__(self, app: ASGIApp, *, scopes_needed: ScopesNeeded, resource_metadata: str):
        self.app = app
        self.scopes_needed = scopes_needed
        self.resource_metadata = resource_metadata

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request."""
        user = scope.get("user")
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope["path"] != MCP_PATH
            or not isinstance(user, AuthenticatedUser)
        ):
            await self.app(scope, receive, send)
            return
        messages, body = await _buffered(receive)
        held = set(user.scopes)
        for request_id, called in _tool_calls(body):
            needs = self.scopes_needed(called)
            if needs is not None and not held.issuperset(needs[1]):
                await self._refuse(send, request_id, *needs)
                return
        await self.app(scope, _replaying(messages, receive), send)

    async def _refuse(
        self, send: Send, request_id: object, name: str, needed: tuple[str, ...]
    ) -> None:
        # (a tool's name and its scopes are checked by @tool: nothing to escape in a header)
        wanted = " ".join(needed)
        description = f"the tool '{name}' needs the scopes: {wanted}"
        challenge = (
            f'Bearer error="insufficient_scope", scope="{wanted}", '
            f'resource_metadata="{self.resource_metadata}", '
            f'error_description="{description}"'
        )
        # A JSON-RPC error for the call (the SDK's client shows its message), carrying the
        # OAuth error and scope too.
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {
                    "code": _FORBIDDEN,
                    "message": f"Forbidden: insufficient_scope: {description}",
                    "data": {"error": "insufficient_scope", "scope": wanted},
                },
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", challenge.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


#: The JSON-RPC error code of a refused call (the implementation-defined server range).
_FORBIDDEN: Final = -32001


async def _buffered(receive: Receive) -> tuple[list[Message], bytes | None]:
    """The request's messages read so far, and its body when it is complete and no larger
    than the SDK takes (else None: the SDK refuses it on its own)."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        size += len(message.get("body", b""))
        if size > DEFAULT_MAX_REQUEST_BODY_SIZE:
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(m.get("body", b"") for m in messages)


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives ``messages`` again, then what ``receive`` gives."""
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


def _tool_calls(body: bytes | None) -> Iterable[tuple[object, str]]:
    """The (id, tool name) of each ``tools/call`` request of a JSON-RPC body (one message or
    a batch); nothing for a body that is none."""
    if body is None:
        return ()
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return ()
    found = []
    for message in parsed if isinstance(parsed, list) else [parsed]:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            continue
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if isinstance(name, str):
            request_id = message.get("id")
            found.append((request_id if isinstance(request_id, str | int) else None, name))
    return found
