"""Who calls: the verified token of a request, as the MCP SDK holds it and as tools see it.

A verifier turns a token it accepts into the SDK's ``AccessToken`` (:func:`access_token`):
its ``subject`` is the token's ``sub``, its ``scopes`` the token's, its ``claims`` the JWT
payload or the introspection answer. The SDK's bearer middleware keeps it for the request,
and :func:`current_caller` reads it back as a :class:`Caller`, which never holds the token.
:func:`with_caller` completes a call's :class:`~tdk.ToolContext` with it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Protocol

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from tdk._execution.context import ToolContext

__all__ = [
    "LEEWAY",
    "MAX_SCOPES",
    "MAX_TOKEN_LENGTH",
    "Caller",
    "Verifier",
    "access_token",
    "current_caller",
    "refused",
    "scopes_of",
    "with_caller",
]

logger = logging.getLogger("tdk.auth")

#: The most scopes read from one token (a token listing more is refused).
MAX_SCOPES: Final = 256
#: The longest token read, in characters (an access token is a few hundred to a few thousand).
MAX_TOKEN_LENGTH: Final = 16 * 1024
#: Seconds of clock skew allowed between this machine and the authorization server.
LEEWAY: Final = 30.0


class Verifier(Protocol):
    """What serving with authentication takes: the MCP SDK's ``TokenVerifier`` (which never
    raises: a token it refuses is None) that names its authorization server, and closes.
    :class:`~tdk.auth.JWTVerifier` and :class:`~tdk.auth.IntrospectionVerifier` are two.

    .. versionadded:: 0.1.0
    """

    @property
    def issuer(self) -> str:
        """The authorization server that issues the tokens (in the protected-resource
        metadata)."""
        ...

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's ``AccessToken`` when it is valid, else None."""
        ...

    async def aclose(self) -> None:
        """Release what the verifier holds (its connections)."""
        ...


@dataclass(frozen=True, slots=True)
class Caller:
    """The caller of a request, as its verified bearer token says (never the token itself).

    .. versionadded:: 0.1.0
    """

    subject: str | None
    """The token's ``sub``: who the end user is, for the issuer (a call's ``user_id``)."""
    scopes: frozenset[str]
    """The scopes the token grants."""
    claims: Mapping[str, Any]
    """The token's claims (read-only): the JWT payload, or the introspection answer."""
    client_id: str | None = None
    """The OAuth client the token was issued to, when the token says."""

    @classmethod
    def of(cls, token: AccessToken) -> Caller:
        """The caller an ``AccessToken`` of the MCP SDK stands for."""
        return cls(
            subject=token.subject,
            scopes=frozenset(token.scopes),
            claims=MappingProxyType(dict(token.claims or {})),
            client_id=token.client_id or None,
        )


def current_caller() -> Caller | None:
    """The verified caller of the request being served (``tdk serve --http --auth``, or
    :func:`tdk.hosts.mcp.serve` with ``auth=``), or None without authentication.

    .. versionadded:: 0.1.0
    """
    token = get_access_token()
    return None if token is None else Caller.of(token)


def with_caller(context: ToolContext | None, caller: Caller | None) -> ToolContext | None:
    """``context`` completed with ``caller``: each of ``user_id``, ``scopes`` and ``claims``
    that the context leaves empty is the caller's (what a context sets itself is kept: an
    application that maps ``sub`` to its own user ids, say)."""
    if caller is None:
        return context
    if context is None:
        return ToolContext(user_id=caller.subject, scopes=caller.scopes, claims=caller.claims)
    user_id = context.user_id or caller.subject
    scopes = context.scopes or caller.scopes
    claims = context.claims or caller.claims
    if (user_id, scopes, claims) == (context.user_id, context.scopes, context.claims):
        return context
    return dataclasses.replace(context, user_id=user_id, scopes=scopes, claims=claims)


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str] | None:
    """The scopes a token's claims grant: ``scope`` (RFC 9068, RFC 7662: one string, scopes
    separated by spaces) or ``scp`` (a list, as some issuers write it); None when the claims
    are malformed (more than :data:`MAX_SCOPES`, or not strings)."""
    given = claims.get("scope", claims.get("scp"))
    if given is None:
        return frozenset()
    if isinstance(given, str):
        given = given.split(" ", MAX_SCOPES)
    if not isinstance(given, list) or len(given) > MAX_SCOPES:
        return None
    if not all(isinstance(scope, str) for scope in given):
        return None
    return frozenset(scope for scope in given if scope)


def access_token(token: str, claims: Mapping[str, Any]) -> AccessToken | None:
    """The SDK's ``AccessToken`` for ``token`` with its verified ``claims``, or None when the
    claims are malformed (scopes that are not strings, a ``sub`` that is not a string)."""
    scopes = scopes_of(claims)
    subject = claims.get("sub")
    client = claims.get("client_id", claims.get("azp"))
    if scopes is None or not isinstance(subject, str | None):
        return refused("its claims are malformed (scope or sub)")
    return AccessToken(
        token=token,
        client_id=client if isinstance(client, str) else "",
        scopes=sorted(scopes),
        expires_at=_whole_seconds(claims.get("exp")),
        subject=subject,
        claims=dict(claims),
    )


def refused(reason: str) -> AccessToken | None:
    """None, the verdict on a token refused for ``reason`` (logged: tdk's words, never the
    token's)."""
    logger.info("tdk.auth: a bearer token was refused: %s", reason)
    return None


def _whole_seconds(value: object) -> int | None:
    """A NumericDate claim (``exp``) as whole seconds, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value)
