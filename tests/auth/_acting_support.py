"""Tools that act as the user at the loopback "GitHub" (``_oauth_provider_server``), the
runners that run them with ``user_auth=``, and the steps of a user's sign-in, shared by the
tests of acting as the user (in process, and in the worker processes of
``test_auth_refresh_workers``).

The tools call the provider's protected resource through an httpx client with tdk's hook
(``tdk.http.install``), as a tool author would: a 401 there is an upstream auth error tdk saw.
Each records the access token it was given in :attr:`Seen.tokens` (in this process only) and
counts its runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx
from _oauth_provider_server import (
    CLIENT,
    OAuthProviderServer,
    ProviderEndpoints,
    client_secrets,
)

import tdk.http
from tdk import ToolContext, Toolkit, ToolResult, tool
from tdk.auth import OAuthProvider, TokenSet, TokenStore, UserAuth
from tdk.runner import ToolRunner

__all__ = [
    "ASK",
    "SCENARIO",
    "STATE_KEY",
    "Seen",
    "acting_runner",
    "callback_params",
    "fingerprint",
    "github_tools",
    "run",
    "seed_tokens",
    "sign_in",
]

#: Bound of one scenario, in seconds (each finishes far inside it).
SCENARIO = 30.0
#: The key of the authorization ask of the provider "github".
ASK = "auth.github"
#: The runners' state key (32 bytes, as replicas would share it).
STATE_KEY = b"k" * 32

T = TypeVar("T")
log = logging.getLogger("tests.acting")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` run in a loop of its own, bounded by :data:`SCENARIO`."""
    return asyncio.run(asyncio.wait_for(coro, SCENARIO))


def fingerprint(token: str) -> str:
    """A short digest of a token, to compare tokens without showing them."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


@dataclass
class Seen:
    """What the tools' bodies saw: the tokens they were given, and their runs by tool."""

    tokens: list[str] = field(default_factory=list)
    runs: Counter[str] = field(default_factory=Counter)


def github_tools(server: ProviderEndpoints, provider: OAuthProvider, seen: Seen) -> Toolkit:
    """Tools acting as the user at ``server``: ``whoami`` (a read), ``create_repo`` (a
    write, not idempotent), ``write_then_read`` (a write, then a read whose token the provider
    no longer honours: its access tokens expired between the two) and ``leaky`` (a body that
    puts its token in an error and in a log line)."""

    def bearer(context: ToolContext, name: str) -> dict[str, str]:
        assert context.auth_token is not None
        seen.tokens.append(context.auth_token)
        seen.runs[name] += 1
        return {"Authorization": f"Bearer {context.auth_token}"}

    @tool(requires_auth=provider.with_scopes("repo"), read_only=True)
    async def whoami(context: ToolContext) -> dict[str, str]:
        """Who the user is at GitHub (and a digest of the token used)."""
        headers = bearer(context, "whoami")
        async with httpx.AsyncClient(trust_env=False) as client:
            tdk.http.install(client)
            answered = await client.get(server.user_url, headers=headers)
        assert context.auth_token is not None
        return {"login": answered.json()["login"], "token": fingerprint(context.auth_token)}

    @tool(requires_auth=provider.with_scopes("repo"))
    async def create_repo(name: str, context: ToolContext) -> str:
        """Create a repository of the user's.

        Args:
            name: The repository's name.
        """
        headers = bearer(context, "create_repo")
        async with httpx.AsyncClient(trust_env=False) as client:
            tdk.http.install(client)
            answered = await client.post(
                f"{server.url}/user/repos", json={"name": name}, headers=headers
            )
        return str(answered.json()["name"])

    @tool(requires_auth=provider.with_scopes("repo"))
    async def write_then_read(name: str, context: ToolContext) -> str:
        """Create a repository, then read the user.

        Args:
            name: The repository's name.
        """
        headers = bearer(context, "write_then_read")
        async with httpx.AsyncClient(trust_env=False) as client:
            tdk.http.install(client)
            created = await client.post(
                f"{server.url}/user/repos", json={"name": name}, headers=headers
            )
            assert isinstance(server, OAuthProviderServer)
            server.expire_user(created.json()["owner"]["login"])
            answered = await client.get(server.user_url, headers=headers)
        return str(answered.json()["login"])

    @tool(requires_auth=provider, read_only=True)
    async def leaky(context: ToolContext) -> str:
        """A careless body: its token in a log line and in its error."""
        assert context.auth_token is not None
        seen.tokens.append(context.auth_token)
        log.warning("calling GitHub with %s", context.auth_token)
        raise tdk.ToolRuntimeError(f"GitHub refused {context.auth_token}")

    return Toolkit("github", [whoami, create_repo, write_then_read, leaky])


def acting_runner(
    server: ProviderEndpoints,
    toolkit: Toolkit,
    store: TokenStore | None = None,
    *,
    ask_expiry: float = 600.0,
    **options: Any,
) -> ToolRunner:
    """A runner of ``toolkit`` acting as the user at ``server`` (``options``: of the
    ``UserAuth``)."""
    options.setdefault("secrets", client_secrets())
    user_auth = UserAuth(store, redirect_uri=server.callback, **options)
    return ToolRunner(toolkit, user_auth=user_auth, state_key=STATE_KEY, ask_expiry=ask_expiry)


def callback_params(location: str | None) -> dict[str, str]:
    """The query parameters of the provider's redirect to the callback (the first of each)."""
    assert location is not None
    return {name: values[0] for name, values in parse_qs(urlsplit(location).query).items()}


def sign_in(server: ProviderEndpoints, pending: ToolResult, user: str) -> dict[str, str]:
    """``user`` opens the authorization link of ``pending`` (a result asking for it) and
    signs in at ``server``: the parameters the provider sends the browser back with. The
    browser is a thread of its own (its log records are not this side's)."""
    assert pending.pending is not None, pending.to_dict()
    url = pending.pending.requests[ASK]["url"]
    with ThreadPoolExecutor(1) as browser:
        status, location = browser.submit(server.browser_sign_in, url, user).result(SCENARIO)
    assert status == 302, (status, location)
    return callback_params(location)


async def seed_tokens(
    server: OAuthProviderServer,
    store: TokenStore,
    user: str,
    *,
    expires_in: int,
    login: str | None = None,
    client_id: str = CLIENT[0],
) -> TokenSet:
    """Tokens of ``user`` from a whole code flow at ``server`` (its access token good for
    ``expires_in`` seconds), kept in ``store`` as a runner's ``UserAuth`` keeps them
    (``login``: who signs in at the provider, by default ``user``; ``client_id``: the client
    the tokens are issued to)."""
    before, server.expires_in = server.expires_in, expires_in
    try:
        answer = await asyncio.to_thread(server.tokens_for, login or user, client_id=client_id)
    finally:
        server.expires_in = before
    tokens = TokenSet.from_token_response(answer)
    await store.put(user, "github", tokens)
    return tokens
