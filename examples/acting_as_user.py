"""Tools that act as each user at an OAuth 2.0 provider ("GitHub"), through a ``ToolRunner``
given ``user_auth=``: the whole flow, in one process.

1. Alice's first call has no token: it ends pending, asking her to open the provider's
   authorization URL (an ``OpenUrl`` under the key ``auth.github``).
2. The link forwarded to Bob attaches nothing; Alice opens it, signs in, and the provider
   sends her browser back to the callback with a code: the runner trades it for her tokens.
   The same callback again attaches nothing.
3. The call sent again runs, with Alice's token as ``context.auth_token``.
4. The provider stops honouring the access token (a 401 upstream): one forced refresh, one
   more attempt. Tokens about to expire are refreshed before the call, once for calls that
   find them stale together.
5. Alice revokes the application at the provider: the next call asks her to sign in again.
   Bob signs in, then out (his tokens revoked at the provider and forgotten).

The provider is the loopback "GitHub" of tdk's own tests (``tests/auth``: authlib's
authorization server, with PKCE, refresh-token rotation and revocation, on 127.0.0.1), so
this runs offline from a checkout of the repository. The browser is played by
``browser_sign_in``: the provider's sign-in page answers a user already signed in there with
the redirect to the callback. Against GitHub, only the ``OAuthProvider``'s URLs and the
environment change (``docs/auth.md``, "Acting as the user upstream").

Run: python examples/acting_as_user.py
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlsplit

import httpx

import tdk.http
from tdk import ToolContext, Toolkit, ToolResult, ToolRunner, tool
from tdk.auth import InMemoryTokenStore, OAuthProvider, TokenSealer, UserAuth


def loopback_github() -> ModuleType:
    """The loopback provider of tdk's tests (a checkout's ``tests/auth``)."""
    tests = Path(__file__).resolve().parents[1] / "tests"
    sys.path[:0] = [str(tests / "auth"), str(tests)]
    return importlib.import_module("_oauth_provider_server")


def provider_for(url: str) -> OAuthProvider:
    """The provider as a deployment declares it (GitHub's own URLs in production)."""
    return OAuthProvider(
        name="github",
        authorize_url=f"{url}/authorize",  # https://github.com/login/oauth/authorize
        token_url=f"{url}/token",  # https://github.com/login/oauth/access_token
        revocation_url=f"{url}/revoke",
        client_id_from="GITHUB_CLIENT_ID",  # the names of the secrets, never their values
        client_secret_from="GITHUB_CLIENT_SECRET",  # noqa: S106 (a name)
        token_auth="client_secret_post",  # noqa: S106 (GitHub's way of taking the secret)
    )


def toolkit_for(github: OAuthProvider, client: httpx.AsyncClient) -> Toolkit:
    """Two tools acting as the caller at ``github`` (its API reached with ``client``): a read
    and a write."""

    def bearer(context: ToolContext) -> dict[str, str]:
        return {"Authorization": f"Bearer {context.auth_token}"}

    @tool(requires_auth=github, read_only=True)
    async def my_login(context: ToolContext) -> str:
        """The caller's login at GitHub."""
        login: str = (await client.get("/user", headers=bearer(context))).json()["login"]
        return login

    @tool(requires_auth=github.with_scopes("repo"))
    async def create_repo(name: Annotated[str, "The new repository."], context: ToolContext) -> str:
        """Create a repository of the caller's."""
        answer = await client.post("/user/repos", json={"name": name}, headers=bearer(context))
        created: dict[str, Any] = answer.json()
        return f"created {created['owner']['login']}/{created['name']}"

    return Toolkit("github", [my_login, create_repo])


def shown(result: ToolResult) -> str:
    """One line of what a call gave."""
    if result.pending is not None:
        (key, request), *_ = result.pending.requests.items()
        parts = urlsplit(request["url"])
        names = sorted(name for name, _ in parse_qsl(parts.query))
        return f"{result.kind}: {key}: open {parts.path}?{'&'.join(names)}"
    return f"{result.kind}: {result.error.message}" if result.error else f"-> {result.value}"


def callback_params(location: str | None) -> dict[str, str]:
    """The query parameters the provider sends the browser back with."""
    assert location is not None
    return dict(parse_qsl(urlsplit(location).query))


async def sign_in(runner: ToolRunner, provider: ModuleType) -> None:
    """Steps 1 to 3: the first call asks, the callback attaches, the call sent again runs."""
    alice = ToolContext(user_id="alice")
    print("1. alice, no token yet")
    first = await runner.run("create_repo", {"name": "notes"}, context=alice)
    print("  ", shown(first))
    assert first.pending is not None
    assert first.pending.token is not None
    link = first.pending.requests["auth.github"]["url"]
    print("   asked:", first.pending.requests["auth.github"]["message"])

    print("2. the callback")
    _, location = provider.browser_sign_in(link, "bob")  # the link, forwarded to bob
    outcome = await runner.complete_authorization(callback_params(location), user_id="bob")
    print("   bob opens alice's link:", outcome.reason, "-", outcome.message)
    _, location = provider.browser_sign_in(link, "alice")
    params = callback_params(location)
    outcome = await runner.complete_authorization(params, user_id="alice")
    print("   alice opens it:", outcome.reason, "-", outcome.message)
    outcome = await runner.complete_authorization(params, user_id="alice")
    print("   the same callback again:", outcome.reason, "-", outcome.message)

    print("3. the call sent again")
    again = await runner.resume(first.pending.token, {"auth.github": None}, context=alice)
    print("  ", shown(again))


async def refresh(runner: ToolRunner, server: Any) -> None:
    """Step 4: a forced refresh after a 401, and one refresh for calls that find the token
    about to expire together."""
    alice = ToolContext(user_id="alice")
    print("4. refresh")
    server.expires_in = 30  # tokens issued from now on: within UserAuth's refresh_margin
    server.expire_user("alice")  # the provider refuses alice's access token: a 401
    print("   after a 401:", shown(await runner.run("my_login", {}, context=alice)))
    print("   refreshes so far:", server.grants["refresh_token"])
    together = [runner.run("my_login", {}, context=alice) for _ in range(5)]
    results = await asyncio.gather(*together)  # each finds the token about to expire
    print("   5 calls at once:", sorted({shown(each) for each in results}))
    print("   refreshes so far:", server.grants["refresh_token"])
    print("   a refresh sends scope:", "scope" in server.last_token_form)


async def revoke(
    runner: ToolRunner,
    user_auth: UserAuth,
    github: OAuthProvider,
    provider: ModuleType,
    server: Any,
) -> None:
    """Step 5: a grant revoked at the provider, and a user signing out."""
    alice, bob = ToolContext(user_id="alice"), ToolContext(user_id="bob")
    print("5. revoked, and signed out")
    server.revoke_user("alice")
    print("   alice revoked the app:", shown(await runner.run("my_login", {}, context=alice)))
    asked = await runner.run("my_login", {}, context=bob)
    assert asked.pending is not None
    _, location = provider.browser_sign_in(asked.pending.requests["auth.github"]["url"], "bob")
    await runner.complete_authorization(callback_params(location), user_id="bob")
    print("   bob signed in:", shown(await runner.run("my_login", {}, context=bob)))
    tokens = await user_auth.store.get("bob", "github")
    assert tokens is not None
    await user_auth.sign_out("bob", github)
    honoured = server.access_token_valid(tokens.access_token)
    print("   bob signed out; his token still honoured:", honoured)
    print("   bob's next call:", shown(await runner.run("my_login", {}, context=bob)))


async def main() -> None:
    """The flow of the module docstring, step by step."""
    provider = loopback_github()
    with provider.OAuthProviderServer(expires_in=3600) as server:
        # The deployment's environment: the client registered at the provider.
        os.environ.update(provider.client_secrets())
        github = provider_for(server.url)
        user_auth = UserAuth(
            InMemoryTokenStore(TokenSealer([os.urandom(32)])),  # RedisTokenStore: many workers
            redirect_uri=server.callback,  # registered at the provider as the callback URL
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=10.0) as client:
            tdk.http.install(client)  # a 401 becomes an error the runner knows
            runner = ToolRunner(
                toolkit_for(github, client),
                user_auth=user_auth,
                state_key=os.urandom(32),  # in production: one key of every worker's, secret
            )
            await sign_in(runner, provider)
            await refresh(runner, server)
            await revoke(runner, user_auth, github, provider, server)


if __name__ == "__main__":
    asyncio.run(main())
