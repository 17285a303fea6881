"""Who calls a served toolkit: bearer tokens verified for ``tdk serve --http --auth`` (extra
``tdk-tools[auth]``).

::

    from tdk.auth import JWTVerifier
    from tdk.hosts import mcp as tdk_mcp

    async with JWTVerifier(issuer=ISSUER, audience="https://tools.example.com/mcp") as verifier:
        await tdk_mcp.serve(
            toolkit, "http", auth=verifier, resource_url="https://tools.example.com/mcp"
        )

Two verifiers, both the MCP SDK's ``TokenVerifier``: :class:`JWTVerifier` (JWT access tokens
checked with the issuer's published keys, PyJWT) and :class:`IntrospectionVerifier` (opaque
tokens, RFC 7662). Serving is the SDK's authorization support: protected-resource metadata at
its well-known path, and 401 with ``WWW-Authenticate: Bearer resource_metadata=...`` for every
request without a valid token. The token's ``sub`` is each call's ``ToolContext.user_id``,
its scopes and claims ``ToolContext.scopes`` and ``ToolContext.claims``
(:func:`current_caller` reads them for the request being served). See ``docs/auth.md``.

Acting as the user upstream: the :class:`OAuthProvider` a tool acts on
(``@tool(requires_auth=GITHUB.with_scopes("repo"))``), and :class:`UserAuth`, which a runner
is given (``ToolRunner(user_auth=...)``) to keep each user's :class:`TokenSet` there, sealed
by a :class:`TokenSealer` in a :class:`TokenStore` (:class:`InMemoryTokenStore`, or
``RedisTokenStore`` for many workers), refresh it, and ask the user to sign in; the
provider's callback gives an :class:`Authorization`.

Each name is loaded on first use: serving without authentication never imports PyJWT.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tdk.auth._authorization import Authorization, ProviderError, TokenStoreError
    from tdk.auth._caller import Caller, Verifier, current_caller
    from tdk.auth._introspection import (
        CLIENT_ID_VARIABLE,
        CLIENT_SECRET_VARIABLE,
        IntrospectionVerifier,
    )
    from tdk.auth._jwt import JWTVerifier
    from tdk.auth._provider import AuthRequirement, OAuthProvider
    from tdk.auth._redis_tokens import RedisTokenStore as RedisTokenStore
    from tdk.auth._token_store import InMemoryTokenStore, TokenStore
    from tdk.auth._tokens import TokenSealer, TokenSet
    from tdk.auth._user_auth import UserAuth

__all__ = [
    "CLIENT_ID_VARIABLE",
    "CLIENT_SECRET_VARIABLE",
    "AuthRequirement",
    "Authorization",
    "Caller",
    "InMemoryTokenStore",
    "IntrospectionVerifier",
    "JWTVerifier",
    "OAuthProvider",
    "ProviderError",
    "TokenSealer",
    "TokenSet",
    "TokenStore",
    "TokenStoreError",
    "UserAuth",
    "Verifier",
    "current_caller",
]
# ``RedisTokenStore`` is importable from tdk.auth but left out of ``__all__``: it needs the
# redis extra, and ``from tdk.auth import *`` must work without it.

#: Public name -> the module it is loaded from on first use.
_LAZY = {
    "Authorization": "tdk.auth._authorization",
    "ProviderError": "tdk.auth._authorization",
    "TokenStoreError": "tdk.auth._authorization",
    "AuthRequirement": "tdk.auth._provider",
    "UserAuth": "tdk.auth._user_auth",
    "Caller": "tdk.auth._caller",
    "Verifier": "tdk.auth._caller",
    "current_caller": "tdk.auth._caller",
    "CLIENT_ID_VARIABLE": "tdk.auth._introspection",
    "CLIENT_SECRET_VARIABLE": "tdk.auth._introspection",
    "IntrospectionVerifier": "tdk.auth._introspection",
    "JWTVerifier": "tdk.auth._jwt",
    "OAuthProvider": "tdk.auth._provider",
    "RedisTokenStore": "tdk.auth._redis_tokens",
    "InMemoryTokenStore": "tdk.auth._token_store",
    "TokenStore": "tdk.auth._token_store",
    "TokenSealer": "tdk.auth._tokens",
    "TokenSet": "tdk.auth._tokens",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tdk.auth' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "RedisTokenStore"})
