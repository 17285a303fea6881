"""A tool that writes as the user, whose token the upstream refuses with a 401: the runner
refreshes the token once and runs the call once more (a 401 did nothing upstream), unless
another request of the attempt may have acted first. Against the loopback provider (real
HTTP, authlib), through ``ToolRunner(user_auth=...)``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from _oauth_provider_server import (
    OAuthProviderServer,
    browser_sign_in,
    client_secrets,
    provider_for,
)

import tdk.http
from tdk import ToolContext, Toolkit, ToolRunner, tool
from tdk.auth import InMemoryTokenStore, UserAuth

#: Bound of one call or request, in seconds (each ends far inside it).
TIMEOUT = 30.0


@pytest.fixture
def server() -> Iterator[OAuthProviderServer]:
    with OAuthProviderServer(admin=True) as running:
        yield running


def runner_for(server: OAuthProviderServer, api: httpx.AsyncClient) -> ToolRunner:
    """A runner of one write tool acting as the caller at ``server``: it creates a
    repository, after reading the provider's unauthenticated ``/stats`` first when told."""
    github = provider_for(server)

    @tool(requires_auth=github.with_scopes("repo"))
    async def create_repo(name: str, read_first: bool, context: ToolContext) -> str:
        """Create a repository.

        Args:
            name: Its name.
            read_first: Whether a request that reaches the upstream comes first.
        """
        if read_first:
            (await api.get("/stats")).raise_for_status()
        bearer = {"Authorization": f"Bearer {context.auth_token}"}
        answer = await api.post("/user/repos", json={"name": name}, headers=bearer)
        return str(answer.json()["name"])

    user_auth = UserAuth(
        InMemoryTokenStore(), redirect_uri=server.callback, secrets=client_secrets()
    )
    return ToolRunner(Toolkit("github", [create_repo]), user_auth=user_auth, state_key=b"k" * 32)


async def signed_in(runner: ToolRunner, user: str) -> None:
    """``user`` through the sign-in ask and the callback."""
    context = ToolContext(user_id=user)
    asked = await runner.run("create_repo", {"name": "first", "read_first": False}, context=context)
    assert asked.pending is not None
    _, location = browser_sign_in(asked.pending.requests["auth.github"]["url"], user)
    assert location is not None
    params = dict(parse_qsl(urlsplit(location).query))
    assert (await runner.complete_authorization(params, user_id=user)).attached


@pytest.mark.parametrize(
    ("read_first", "kind", "refreshes", "repos"),
    [
        pytest.param(False, None, 1, [("alice", "notes")], id="401-alone-refreshed-and-run-again"),
        pytest.param(
            True, "UPSTREAM_RUNTIME_AUTH_ERROR", 0, [], id="401-after-a-request-not-rerun"
        ),
    ],
)
def test_a_write_refused_401_is_refreshed_once_and_run_again(
    server: OAuthProviderServer,
    read_first: bool,
    kind: str | None,
    refreshes: int,
    repos: list[tuple[str, str]],
) -> None:
    """The access token refused upstream (``expire_user``): a write whose only request got
    the 401 gets one forced refresh and runs again, creating the repository once; a write
    after another request of the attempt reached the upstream is not run again (that request
    may have acted), and its 401 is the result."""

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as api:
            tdk.http.install(api)
            runner = runner_for(server, api)
            await signed_in(runner, "alice")
            server.expire_user("alice")
            arguments = {"name": "notes", "read_first": read_first}
            result = await runner.run(
                "create_repo", arguments, context=ToolContext(user_id="alice")
            )
            assert result.kind == kind, result.error
            if kind is None:
                assert result.value == "notes"
            assert server.grants["refresh_token"] == refreshes
            assert server.repos_created == repos

    asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
