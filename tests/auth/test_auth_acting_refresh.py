"""Acting as the user upstream, once the user has signed in (issue 27, MISSION section 15):
tokens that expire soon are refreshed before the call (once, however many calls wait; the
rotated refresh token kept; ``scope`` sent only when the provider asks), an upstream 401 seen
by tdk's httpx hook is one forced refresh and one more run (never after an earlier write of
the attempt), and a token endpoint that fails keeps the tokens. In process, against the
loopback "GitHub" (``_oauth_provider_server``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from _acting_support import (
    ASK,
    Seen,
    acting_runner,
    fingerprint,
    github_tools,
    run,
    seed_tokens,
    sign_in,
)
from _authlib_loopback import Mode
from _oauth_provider_server import (
    CLIENT,
    PUBLIC_CLIENT,
    OAuthProviderServer,
    client_secrets,
    provider_for,
)

import tdk.http
from tdk import ErrorKind, RetryPolicy, ToolContext, Toolkit, ToolResult, tool
from tdk.auth import InMemoryTokenStore, TokenSet, UserAuth
from tdk.errors import NetworkTransportError
from tdk.runner import ToolRunner

ALICE = ToolContext(user_id="alice")
#: Seconds the seeded access tokens are good for: within the default refresh margin (60 s).
EXPIRING = 30


@pytest.fixture
def server() -> Iterator[OAuthProviderServer]:
    with OAuthProviderServer() as running:
        yield running


def _refused_at_provider(server: OAuthProviderServer, refresh_token: str) -> bool:
    """Whether the provider refuses ``refresh_token`` (``invalid_grant``)."""
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
    answered = httpx.post(server.token_url, data=form, auth=CLIENT, timeout=10.0)
    return answered.status_code == 400 and answered.json()["error"] == "invalid_grant"


def _runner_with_alice(
    server: OAuthProviderServer, *, expires_in: int, **options: Any
) -> tuple[ToolRunner, InMemoryTokenStore, Seen, TokenSet]:
    """A runner of the GitHub tools whose store holds alice's tokens (good for
    ``expires_in`` seconds); ``options``: of the provider (``provider_for``) and the UserAuth
    (``timeout``)."""
    timeout = options.pop("timeout", 10.0)
    seen = Seen()
    store = InMemoryTokenStore()
    kit = github_tools(server, provider_for(server, **options), seen)
    runner = acting_runner(server, kit, store, timeout=timeout)
    tokens = run(seed_tokens(server, store, "alice", expires_in=expires_in))
    return runner, store, seen, tokens


# -- a refresh before the call -----------------------------------------------------------------


def test_tokens_that_expire_soon_are_refreshed_first(server: OAuthProviderServer) -> None:
    """Tokens expiring within ``refresh_margin``: one refresh, the call runs with the new
    access token, and the rotated refresh token is kept (the old one is refused now)."""
    runner, store, seen, old = _runner_with_alice(server, expires_in=EXPIRING)

    result = run(runner.run("whoami", {}, context=ALICE))

    assert result.error is None, result.to_dict()
    assert server.grants["refresh_token"] == 1
    kept = run(store.get("alice", "github"))
    assert kept is not None
    assert kept.refresh_token is not None
    assert seen.tokens == [kept.access_token] != [old.access_token]
    assert result.value == {"login": "alice", "token": fingerprint(kept.access_token)}
    assert old.refresh_token is not None
    assert kept.refresh_token != old.refresh_token
    assert _refused_at_provider(server, old.refresh_token)
    assert not _refused_at_provider(server, kept.refresh_token)

    again = run(runner.run("whoami", {}, context=ALICE))  # good for an hour now: no refresh
    assert again.error is None
    assert server.grants["refresh_token"] == 2  # (the check above used the kept one)


def test_tokens_good_for_long_are_used_as_they_are(server: OAuthProviderServer) -> None:
    """Tokens good for longer than the margin: no refresh."""
    runner, _, seen, tokens = _runner_with_alice(server, expires_in=3600)

    for _ in range(3):
        assert run(runner.run("whoami", {}, context=ALICE)).error is None

    assert seen.tokens == [tokens.access_token] * 3
    assert "refresh_token" not in server.grants


@pytest.mark.parametrize(
    ("sends_scope", "refuse_scope", "form_scope"),
    [(False, True, None), (True, False, "repo")],
    ids=["scope-not-sent", "scope-sent-when-asked"],
)
def test_scope_is_sent_on_refresh_only_when_the_provider_asks(
    server: OAuthProviderServer, sends_scope: bool, refuse_scope: bool, form_scope: str | None
) -> None:
    """A refresh sends no ``scope`` (a provider that refuses it still refreshes), unless
    ``OAuthProvider(refresh_sends_scope=True)``: then the scopes granted."""
    runner, *_ = _runner_with_alice(server, expires_in=EXPIRING, refresh_sends_scope=sends_scope)
    server.refuse_scope_on_refresh = refuse_scope

    result = run(runner.run("whoami", {}, context=ALICE))

    assert result.error is None, result.to_dict()
    assert server.grants["refresh_token"] == 1
    assert server.last_token_form["grant_type"] == "refresh_token"
    assert server.last_token_form.get("scope") == form_scope


@pytest.mark.parametrize(
    ("token_auth", "public", "sent"),
    [
        ("client_secret_basic", False, "client_secret_basic"),
        ("client_secret_post", False, "client_secret_post"),
        ("client_secret_basic", True, "none"),
    ],
    ids=["basic", "post", "public-client"],
)
def test_the_client_authenticates_as_the_provider_says(
    server: OAuthProviderServer, token_auth: str, public: bool, sent: str
) -> None:
    """A refresh authenticates the application's client as ``OAuthProvider.token_auth``
    says (HTTP Basic by default, or in the form); a public client only names itself."""
    seen = Seen()
    store = InMemoryTokenStore()
    provider = provider_for(server, public=public, token_auth=token_auth)
    runner = acting_runner(
        server,
        github_tools(server, provider, seen),
        store,
        secrets=client_secrets(public=public),
    )
    client_id = PUBLIC_CLIENT if public else CLIENT[0]
    run(seed_tokens(server, store, "alice", expires_in=EXPIRING, client_id=client_id))

    result = run(runner.run("whoami", {}, context=ALICE))

    assert result.error is None, result.to_dict()
    assert server.grants["refresh_token"] == 1
    assert server.last_token_auth == sent
    assert ("client_secret" in server.last_token_form) == (sent == "client_secret_post")


def test_calls_waiting_on_one_refresh_share_it(server: OAuthProviderServer) -> None:
    """20 calls at once with tokens that expire soon: ONE refresh at the provider, and
    every call runs with the token it gave."""
    runner, store, seen, _ = _runner_with_alice(server, expires_in=EXPIRING)

    async def together() -> list[ToolResult]:
        calls = [runner.run("whoami", {}, context=ALICE) for _ in range(20)]
        return await asyncio.gather(*calls)

    results = run(together())

    assert [result.error for result in results] == [None] * 20
    assert server.grants["refresh_token"] == 1
    kept = run(store.get("alice", "github"))
    assert kept is not None
    assert set(seen.tokens) == {kept.access_token}
    assert {result.value["token"] for result in results} == {fingerprint(kept.access_token)}


@pytest.mark.parametrize("mode", ["html", "500", "huge", "hang"])
def test_a_token_endpoint_that_fails_keeps_the_tokens(
    server: OAuthProviderServer, mode: Mode
) -> None:
    """The token endpoint answering HTML, a 500, a huge body or nothing (past UserAuth's
    timeout) during a refresh: the call fails retryable in tdk's words (no token, no
    provider text, no foreign exception's text), its body not run, the tokens kept."""
    runner, store, seen, tokens = _runner_with_alice(server, expires_in=EXPIRING, timeout=1.0)
    server.token_mode = mode

    result = run(runner.run("whoami", {}, context=ALICE))

    assert result.error is not None
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_RETRY
    assert result.pending is None
    assert seen.runs == {}
    shown = json.dumps(result.to_dict())
    assert tokens.refresh_token is not None
    for value in (tokens.access_token, tokens.refresh_token, "<html", "aaaaaaaa", CLIENT[1]):
        assert value not in shown
    for foreign in ("ReadTimeout", "JSONDecodeError", "HTTPStatusError", server.url):
        assert foreign not in shown
    assert run(store.get("alice", "github")) == tokens

    server.token_mode = "ok"  # the provider is back: the same tokens refresh then
    assert run(runner.run("whoami", {}, context=ALICE)).error is None
    assert server.grants["refresh_token"] == 1


@pytest.mark.parametrize(
    ("expires_in", "expire_upstream", "runs"),
    [(-5, False, 0), (EXPIRING, False, 1), (3600, True, 1)],
    ids=["expired", "expiring-still-good", "refused-upstream"],
)
def test_tokens_without_a_refresh_token(
    server: OAuthProviderServer, expires_in: int, expire_upstream: bool, runs: int
) -> None:
    """Tokens the provider gave without a refresh token: used while good (even within the
    margin); expired, or refused upstream with a 401, the call asks for a sign-in."""
    runner, store, seen, tokens = _runner_with_alice(server, expires_in=3600)
    expires_at = time.time() + expires_in
    run(store.put("alice", "github", replace(tokens, refresh_token=None, expires_at=expires_at)))
    if expire_upstream:
        server.expire_user("alice")

    result = run(runner.run("whoami", {}, context=ALICE))

    assert seen.runs.get("whoami", 0) == runs
    assert "refresh_token" not in server.grants
    if runs and not expire_upstream:
        assert result.error is None, result.to_dict()
    else:
        assert result.pending is not None
        assert list(result.pending.requests) == [ASK]


# -- an upstream 401 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "value"),
    [
        ("whoami", {}, "alice"),
        ("create_repo", {"name": "notes"}, "notes"),
    ],
    ids=["read", "write"],
)
def test_an_upstream_401_is_one_refresh_and_one_more_run(
    server: OAuthProviderServer, name: str, arguments: dict[str, Any], value: str
) -> None:
    """The provider no longer honours alice's access token (expired there, though not by
    its ``expires_in``): the body's request is a 401, the tokens are refreshed once and the
    call runs once more, with the new token. For a write too: the 401 did nothing upstream
    (exactly one repository is created)."""
    runner, store, seen, old = _runner_with_alice(server, expires_in=3600)
    server.expire_user("alice")

    result = run(runner.run(name, arguments, context=ALICE))

    assert result.error is None, result.to_dict()
    got = result.value["login"] if isinstance(result.value, dict) else result.value
    assert got == value
    assert seen.runs == {name: 2}
    kept = run(store.get("alice", "github"))
    assert kept is not None
    assert seen.tokens == [old.access_token, kept.access_token]
    assert server.grants["refresh_token"] == 1
    expected = [("alice", "notes")] if name == "create_repo" else []
    assert server.repos_created == expected


def test_a_revoked_grant_asks_the_user_to_sign_in_again(server: OAuthProviderServer) -> None:
    """The user revoked the application at the provider: the 401's refresh is refused
    (``invalid_grant``), the tokens are forgotten and the call asks for a sign-in."""
    runner, store, seen, _ = _runner_with_alice(server, expires_in=3600)
    server.revoke_user("alice")

    result = run(runner.run("whoami", {}, context=ALICE))

    assert result.error is not None
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_INPUT_REQUIRED
    assert result.pending is not None
    assert list(result.pending.requests) == [ASK]
    assert seen.runs == {"whoami": 1}
    assert run(store.get("alice", "github")) is None
    assert "refresh_token" not in server.grants


def test_a_401_after_a_write_of_the_attempt_is_not_run_again(
    server: OAuthProviderServer,
) -> None:
    """A 401 after a request of the same attempt that acted (a repository created): the call
    is not run again (it would create a second one); the 401 is its result."""
    runner, _, seen, _ = _runner_with_alice(server, expires_in=3600)

    result = run(runner.run("write_then_read", {"name": "once"}, context=ALICE))

    assert result.error is not None
    assert result.error.kind is ErrorKind.UPSTREAM_RUNTIME_AUTH_ERROR
    assert result.error.status_code == 401
    assert seen.runs == {"write_then_read": 1}
    assert server.repos_created == [("alice", "once")]
    assert "refresh_token" not in server.grants


def test_the_run_after_a_401_spends_what_is_left_of_the_calls_deadline(
    server: OAuthProviderServer,
) -> None:
    """The run after a forced refresh is the same call: its ``deadline`` (the whole call,
    attempts and waits) goes on, not a fresh one. Each run fails once (unreachable) and
    waits ``WAIT`` before its retry; the first run's retry gets the 401. Two waits pass the
    deadline: the second run's retry is not waited for (the runner's fake sleep counts the
    waits, no clock is read)."""
    wait, deadline = 6.0, 10.0
    github = provider_for(server)
    runs: list[str] = []

    @tool(requires_auth=github.with_scopes("repo"), read_only=True)
    async def whoami(context: ToolContext) -> str:
        """Who the user is at GitHub."""
        assert context.auth_token is not None
        runs.append(context.auth_token)
        if len(runs) in (1, 3):  # the first attempt of each run
            raise NetworkTransportError(
                "unreachable", kind=ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE
            )
        if len(runs) == 2:  # the provider no longer honours the token: a 401
            server.expire_user("alice")
        async with httpx.AsyncClient(trust_env=False) as client:
            tdk.http.install(client)
            answered = await client.get(
                server.user_url, headers={"Authorization": f"Bearer {context.auth_token}"}
            )
        return str(answered.json()["login"])

    async def sleep(seconds: float) -> None:  # (the runner counts the waits it asked for)
        await asyncio.sleep(0)

    store = InMemoryTokenStore()
    runner = ToolRunner(
        Toolkit("github", [whoami]),
        user_auth=UserAuth(store, redirect_uri=server.callback, secrets=client_secrets()),
        state_key=b"k" * 32,
        deadline=deadline,
        retry=RetryPolicy(max_attempts=2, initial_delay=wait, jitter=False),
        sleep=sleep,
    )
    run(seed_tokens(server, store, "alice", expires_in=3600))

    result = run(runner.run("whoami", {}, context=ALICE))

    assert server.grants["refresh_token"] == 1  # the 401 was one forced refresh
    assert len(runs) == 3, result.to_dict()  # and one more run, not waited for twice
    assert result.kind == ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE


class _HeldPuts:
    """A token store (over an :class:`InMemoryTokenStore`) whose writes wait for
    :attr:`release` (all, or the next :attr:`held` of them; deletions too with
    :attr:`hold_deletes`), and which notes its writes,
    deletions and the locks asked of it."""

    def __init__(self) -> None:
        self.inner = InMemoryTokenStore()
        self.held: int | None = None
        self.hold_deletes = False
        self.kept = asyncio.Event()
        self.put_reached = asyncio.Event()
        self.release = asyncio.Event()
        self.deleted = asyncio.Event()
        self.second_lock = asyncio.Event()
        self._locks = 0

    async def get(self, user: str, provider: str) -> TokenSet | None:
        return await self.inner.get(user, provider)

    async def put(self, user: str, provider: str, tokens: TokenSet) -> None:
        self.put_reached.set()
        if self.held is None or self.held > 0:
            if self.held is not None:
                self.held -= 1
            await self.release.wait()
        await self.inner.put(user, provider, tokens)
        self.kept.set()

    async def delete(self, user: str, provider: str) -> None:
        if self.hold_deletes:
            await self.release.wait()
        await self.inner.delete(user, provider)
        self.deleted.set()

    def lock(
        self, user: str, provider: str, *, hold: float = 30.0, wait: float = 30.0
    ) -> contextlib.AbstractAsyncContextManager[None]:
        self._locks += 1
        if self._locks >= 2:
            self.second_lock.set()
        return self.inner.lock(user, provider, hold=hold, wait=wait)


def test_signing_out_during_a_refresh_keeps_nothing(server: OAuthProviderServer) -> None:
    """A sign-out while a refresh is on its way (the provider answered, the new tokens not
    yet kept): the refresh cannot keep them again after the sign-out forgot them."""
    github = provider_for(server)

    async def scenario() -> TokenSet | None:
        store = _HeldPuts()
        await seed_tokens(server, store.inner, "alice", expires_in=EXPIRING)
        user_auth = UserAuth(store, redirect_uri=server.callback, secrets=client_secrets())
        refreshing = asyncio.create_task(user_auth.current("alice", github))
        await store.put_reached.wait()  # the provider has answered the refresh
        signing_out = asyncio.create_task(user_auth.sign_out("alice", github))
        # (the sign-out has forgotten the tokens, or waits for the refresh's lock)
        waits = [asyncio.create_task(event.wait()) for event in (store.deleted, store.second_lock)]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for each in waits:
            each.cancel()
        store.release.set()
        await refreshing
        await signing_out
        return await store.inner.get("alice", "github")

    assert run(scenario()) is None


def test_a_refresh_in_progress_does_not_write_over_a_new_sign_in(
    server: OAuthProviderServer,
) -> None:
    """Alice completes a new sign-in while a refresh of her older tokens is on its way (the
    provider answered it, the refreshed tokens not yet kept): the sign-in's tokens are
    those kept in the end, not the refreshed older ones."""
    github = provider_for(server)
    seen = Seen()

    async def scenario() -> tuple[str, TokenSet | None, TokenSet | None]:
        store = _HeldPuts()
        runner = acting_runner(server, github_tools(server, github, seen), store)
        assert runner.user_auth is not None
        pending = await runner.run("whoami", {}, context=ALICE)
        params = await asyncio.to_thread(sign_in, server, pending, "alice")
        await seed_tokens(server, store.inner, "alice", expires_in=EXPIRING)  # her older ones
        refreshing = asyncio.create_task(runner.user_auth.current("alice", github))
        await store.put_reached.wait()  # the provider has answered the refresh
        store.held = 0  # (the callback's write is not held)
        completing = asyncio.create_task(runner.complete_authorization(params, user_id="alice"))
        # (the callback has kept its tokens, or waits for the refresh's lock)
        waits = [asyncio.create_task(event.wait()) for event in (store.kept, store.second_lock)]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for each in waits:
            each.cancel()
        store.release.set()
        refreshed = await refreshing
        outcome = await completing
        return outcome.reason, refreshed, await store.inner.get("alice", "github")

    reason, refreshed, kept = run(scenario())

    assert reason == "attached"
    assert refreshed is not None
    assert kept is not None
    assert fingerprint(kept.access_token) != fingerprint(refreshed.access_token)


def test_forgetting_a_refused_token_keeps_a_new_sign_in(server: OAuthProviderServer) -> None:
    """A refused access token with no refresh token is forgotten; tokens a sign-in keeps
    meanwhile (between the read and the deletion) are not."""
    github = provider_for(server)

    async def scenario() -> tuple[TokenSet | None, TokenSet | None]:
        store = _HeldPuts()
        store.held, store.hold_deletes = 0, True
        await store.inner.put("alice", "github", TokenSet("refused-token"))
        user_auth = UserAuth(store, redirect_uri=server.callback, secrets=client_secrets())
        renewing = asyncio.create_task(user_auth.renewed("alice", github, "refused-token"))
        signed_in = TokenSet("new-token", refresh_token="new-refresh")
        keeping = asyncio.create_task(user_auth.keep("alice", github, signed_in))
        # (the sign-in has kept its tokens, or waits for the lock of the forgetting)
        waits = [asyncio.create_task(event.wait()) for event in (store.kept, store.second_lock)]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for each in waits:
            each.cancel()
        store.release.set()
        await keeping
        return await renewing, await store.inner.get("alice", "github")

    given, kept = run(scenario())

    assert given is None  # (the call asks again: a link of its own, harmless)
    assert kept is not None
    assert kept.access_token == "new-token"
