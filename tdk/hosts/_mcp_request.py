"""The request a context function sees: headers, auth, ``_meta`` and the client.

``tdk.hosts.mcp.server(..., context=fn)`` calls ``fn`` once per ``tools/call``. A function of
no argument keeps working as it always did; a function of one argument receives a
:class:`CallRequest` built from the SDK's request context:

- ``headers``: the HTTP request's headers (names in lower case, read-only), over streamable
  HTTP in either protocol era; None over stdio.
- ``auth``: the SDK's ``AccessToken`` when its bearer authentication verified the request's
  token (``mcp.server.auth``, which section 15's ``tdk serve --auth`` builds on); None
  otherwise.
- ``meta``: the call's ``_meta`` as the client sent it (read-only; empty when it sent none).
- ``client``: the client's name and version, from ``initialize`` (2025 era) or the request
  envelope's ``clientInfo`` (2026-07-28); None when the client did not say.

A context given once (a ``ToolContext``, or none) is used as it is, except that a verified
token's subject becomes its ``user_id`` (when it has none of its own): section 15 makes the
token's ``sub`` the call's user.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext

from tdk._execution.context import ToolContext

__all__ = ["CallRequest", "ClientInfo", "ContextSource", "context_maker"]

_NOTHING: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """The MCP client of a call, as it named itself.

    .. versionadded:: 0.2.0
    """

    name: str
    """The client's name (``clientInfo.name``)."""
    version: str
    """The client's version (``clientInfo.version``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRequest:
    """What a context function of one argument receives for each ``tools/call``.

    ::

        def context(request: CallRequest) -> ToolContext:
            tenant = request.headers.get("x-tenant", "") if request.headers else ""
            return ToolContext(metadata={"tenant": tenant}, secrets=SECRETS)

        server = tdk_mcp.server(toolkit, context=context)

    Its ``repr()`` names the headers but never shows their values, nor the token of ``auth``.

    .. versionadded:: 0.2.0
    """

    headers: Mapping[str, str] | None = field(default=None, repr=False)
    """The HTTP request's headers, names in lower case (read-only); None over stdio."""
    auth: AccessToken | None = field(default=None, repr=False)
    """The token the SDK's bearer authentication verified (its ``subject``, ``scopes``,
    ``claims``), or None."""
    meta: Mapping[str, Any] = field(default_factory=lambda: _NOTHING)
    """The call's ``_meta``, as the client sent it (read-only)."""
    client: ClientInfo | None = None
    """The client, as it named itself, or None."""

    def __repr__(self) -> str:
        headers = None if self.headers is None else sorted(self.headers)
        auth = (
            None
            if self.auth is None
            else f"<AccessToken subject={self.auth.subject!r} scopes={self.auth.scopes!r}>"
        )
        return (
            f"CallRequest(headers={headers!r}, auth={auth}, meta={dict(self.meta)!r}, "
            f"client={self.client!r})"
        )


#: What ``context=`` takes: one context for every call, or a function making one per call
#: (of no argument, or of the call's :class:`CallRequest`; it may be async).
ContextSource: TypeAlias = (
    ToolContext
    | Callable[[], ToolContext | Awaitable[ToolContext]]
    | Callable[[CallRequest], ToolContext | Awaitable[ToolContext]]
    | None
)

#: The context of one call, from the SDK's request context.
ContextMaker: TypeAlias = Callable[[ServerRequestContext[Any, Any]], Awaitable[ToolContext | None]]


def context_maker(context: ContextSource) -> ContextMaker:
    """How the server makes each call's context from ``context`` (read once: whether a
    function takes the request)."""
    if context is None or isinstance(context, ToolContext):
        return _given(context)
    if not callable(context):
        raise TypeError(
            f"context= takes a ToolContext or a function returning one, not "
            f"{type(context).__name__}"
        )
    if _takes_the_request(context):
        return _made_with_request(context)
    return _made_without_request(context)


def _given(context: ToolContext | None) -> ContextMaker:
    async def make(request: ServerRequestContext[Any, Any]) -> ToolContext | None:
        token = _token_of(request)
        if token is None or token.subject is None:
            return context
        if context is None:
            return ToolContext(user_id=token.subject)
        if context.user_id is not None:
            return context
        return dataclasses.replace(context, user_id=token.subject)

    return make


def _made_with_request(function: Callable[..., Any]) -> ContextMaker:
    async def make(request: ServerRequestContext[Any, Any]) -> ToolContext | None:
        return await _checked(function(request_record(request)))

    return make


def _made_without_request(function: Callable[..., Any]) -> ContextMaker:
    async def make(_request: ServerRequestContext[Any, Any]) -> ToolContext | None:
        return await _checked(function())

    return make


async def _checked(each: Any) -> ToolContext | None:
    """What a context function gave (awaited when it is awaitable): a ``ToolContext`` or
    None; ``TypeError`` for anything else."""
    if inspect.isawaitable(each):
        each = await each
    if each is not None and not isinstance(each, ToolContext):
        raise TypeError(f"context= gave a {type(each).__name__}, not a ToolContext")
    return each


def _takes_the_request(function: Callable[..., Any]) -> bool:
    """Whether ``function`` takes an argument (the request); a function whose signature
    Python cannot read is called without one, as before."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(
        each.kind in positional or each.kind is inspect.Parameter.VAR_POSITIONAL
        for each in parameters
    )


def request_record(request: ServerRequestContext[Any, Any]) -> CallRequest:
    """The :class:`CallRequest` of the SDK's request context ``request``."""
    http = request.request
    headers = getattr(http, "headers", None)
    meta = request.meta
    params = request.session.client_params
    info = None if params is None else params.client_info
    return CallRequest(
        headers=None
        if headers is None
        else MappingProxyType({name.lower(): value for name, value in headers.items()}),
        auth=_token_of(request),
        meta=_NOTHING if not meta else MappingProxyType(dict(meta)),
        client=None if info is None else ClientInfo(info.name, info.version),
    )


def _token_of(request: ServerRequestContext[Any, Any]) -> AccessToken | None:
    """The token the SDK's bearer authentication verified for the HTTP request, or None."""
    scope = getattr(request.request, "scope", None)
    user = scope.get("user") if isinstance(scope, Mapping) else None
    return user.access_token if isinstance(user, AuthenticatedUser) else None
