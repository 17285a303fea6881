"""Acting as the user against hostile input (issue 27, red team): ``requires_auth=`` given
objects that are not what ``with_scopes`` makes, a token endpoint answering what no
provider should, and a refresh slower than the store's lock is held."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import time
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from _acting_support import SCENARIO, STATE_KEY, run, seed_tokens
from _canned_endpoint import CannedEndpoint
from _oauth_provider_server import (
    CALLBACK,
    CLIENT,
    CLIENT_ID_SECRET,
    CLIENT_SECRET_SECRET,
    OAuthProviderServer,
    client_secrets,
    provider_for,
)

import tdk
import tdk.http
from tdk import ErrorKind, ToolContext, ToolDefinitionError, Toolkit, ToolResult, tool
from tdk.auth import AuthRequirement, InMemoryTokenStore, OAuthProvider, TokenSet, UserAuth
from tdk.auth._user_auth import MAX_WAITING
from tdk.hosts._mcp_login import SignedIn
from tdk.runner import ToolRunner


@pytest.fixture
def server() -> Iterator[OAuthProviderServer]:
    with OAuthProviderServer() as running:
        yield running


class _Scope(str):
    """A scope that is text only by inheritance (its comparisons may be anything)."""

    __slots__ = ()


class _Unlistable:
    """Scopes that raise when listed."""

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("not listed")


HOSTILE_SCOPES = [
    pytest.param("repo", id="a-string"),
    pytest.param(5, id="an-int"),
    pytest.param(None, id="none"),
    pytest.param(["repo"], id="a-list"),
    pytest.param(_Unlistable(), id="raises-when-listed"),
    pytest.param((_Scope("repo"),), id="a-str-subclass"),
]


@pytest.mark.parametrize("scopes", HOSTILE_SCOPES)
def test_requires_auth_with_scopes_that_are_not_a_tuple_of_strings_is_a_definition_error(
    server: OAuthProviderServer, scopes: Any
) -> None:
    """``AuthRequirement(provider, scopes)`` made by hand with scopes that are not a tuple
    of plain strings: a ToolDefinitionError naming the problem (never ``r``, ``e``, ``p``,
    ``o`` as four scopes, nor another exception)."""
    requirement = AuthRequirement(provider_for(server), scopes)
    with pytest.raises(ToolDefinitionError) as raised:

        @tool(requires_auth=requirement)
        def my_repos(context: ToolContext) -> int:
            """The user's repositories."""
            return 0

    kinds = {problem["kind"] for problem in raised.value.details["problems"]}
    assert kinds == {"invalid_auth"}
    assert "requires_auth=" in str(raised.value)


def test_a_provider_subclass_is_a_definition_error(server: OAuthProviderServer) -> None:
    """A subclass of OAuthProvider (its equality, its hash may be anything) is refused."""
    base = provider_for(server)

    class Provider(OAuthProvider):
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("compared")

        __hash__ = OAuthProvider.__hash__

    fields = {name: getattr(base, name) for name in OAuthProvider.__dataclass_fields__}
    with pytest.raises(ToolDefinitionError):

        @tool(requires_auth=Provider(**fields).with_scopes("repo"))
        def my_repos(context: ToolContext) -> int:
            """The user's repositories."""
            return 0


# -- a hostile token endpoint ------------------------------------------------------------------

#: The access and refresh tokens the user's store holds before the refresh.
OLD_ACCESS = "old-access-token-1f2e3d4c"
OLD_REFRESH = "old-refresh-token-9a8b7c6d"
JSON = "application/json"


def _gzip_bomb() -> bytes:
    return gzip.compress(b'{"access_token": "' + b"a" * 10_000_000 + b'"}')


ANSWERS = [
    pytest.param(400, JSON, b'{"error": {"code": "invalid_grant"}}', (), id="error-an-object"),
    pytest.param(400, JSON, b'{"error": ["invalid_grant"]}', (), id="error-a-list"),
    pytest.param(400, JSON, b'{"error": 5}', (), id="error-a-number"),
    pytest.param(
        400,
        JSON,
        json.dumps({"error": "x\r\n\x1b[31m" + "y" * 65_000}).encode(),
        (),
        id="error-64k",
    ),
    pytest.param(200, "text/html", b"<html>sign in</html>", (), id="html"),
    pytest.param(500, JSON, b'{"error": "server_error"}', (), id="500"),
    pytest.param(
        200, JSON, b'{"access_token": "a", "expires_in": ' + b"9" * 5000 + b"}", (), id="huge-int"
    ),
    pytest.param(200, JSON, b"[" * 30_000 + b"]" * 30_000, (), id="deep-nesting"),
    pytest.param(200, JSON, _gzip_bomb(), (("Content-Encoding", "gzip"),), id="gzip-bomb"),
    pytest.param(302, JSON, b"{}", (("Location", "http://evil.example/token"),), id="redirect"),
    pytest.param(200, JSON, b'{"token_type": "Bearer"}', (), id="no-access-token"),
    pytest.param(200, JSON, b'{"access_token": 5}', (), id="access-token-a-number"),
]


@pytest.mark.parametrize(("status", "media", "body", "headers"), ANSWERS)
def test_a_hostile_refresh_answer_is_a_provider_error_and_keeps_the_tokens(
    status: int, media: str, body: bytes, headers: tuple[tuple[str, str], ...]
) -> None:
    """A refresh answered with what no provider should say: the call fails retryable in
    tdk's words (a ProviderError, never another exception, never the provider's text), the
    tool does not run, and the user's tokens are kept (not a refusal of the grant)."""
    runs: list[str] = []
    with CannedEndpoint() as endpoint:
        endpoint.answer = (status, media, body, headers)
        provider = OAuthProvider(
            name="github",
            authorize_url=f"{endpoint.url}/authorize",
            token_url=endpoint.token_url,
            client_id_from=CLIENT_ID_SECRET,
            client_secret_from=CLIENT_SECRET_SECRET,
        )

        @tool(requires_auth=provider, read_only=True)
        def whoami(context: ToolContext) -> str:
            """Who the user is."""
            runs.append("ran")
            return "octocat"

        store = InMemoryTokenStore()
        user_auth = UserAuth(store, redirect_uri=CALLBACK, secrets=client_secrets())
        runner = ToolRunner(Toolkit("github", [whoami]), user_auth=user_auth, state_key=STATE_KEY)
        stale = TokenSet(OLD_ACCESS, OLD_REFRESH, time.time() - 1)

        async def scenario() -> tuple[ToolResult, TokenSet | None]:
            await store.put("alice", "github", stale)
            result = await runner.run("whoami", {}, context=ToolContext(user_id="alice"))
            return result, await store.get("alice", "github")

        result, kept = run(scenario())
    assert endpoint.posts == 1
    assert runs == []
    assert result.error is not None
    assert result.error.retryable is True
    assert "ProviderError" in (result.error.developer_message or "")
    assert kept == stale
    shown = json.dumps(result.to_dict()) + result.for_model()
    for secret in (OLD_ACCESS, OLD_REFRESH, "yyyyyyyy", "\x1b", CLIENT[1]):
        assert secret not in shown


# -- a refresh slower than the lock ------------------------------------------------------------


class _HoldsNoted(InMemoryTokenStore):
    """An in-memory store that notes for how long each refresh asks to hold its lock (as a
    shared store would expire it: another worker may then refresh with the same grant)."""

    def __init__(self) -> None:
        super().__init__()
        self.holds: list[float | None] = []

    def lock(self, user: str, provider: str, **options: float) -> AbstractAsyncContextManager[None]:
        self.holds.append(options.get("hold"))  # (None: the store's default, 30 s)
        return super().lock(user, provider, **options)


@pytest.mark.parametrize("timeout", [5.0, 60.0, 300.0], ids=["short", "a-minute", "long"])
def test_a_refresh_holds_its_lock_for_longer_than_it_may_take(
    server: OAuthProviderServer, timeout: float
) -> None:
    """``UserAuth(timeout=...)`` bounds one exchange with the token endpoint: the lock of a
    refresh is asked for longer than that, so that it cannot expire while the refresh is
    still waiting on the provider (another worker would then refresh with the same refresh
    token: refused once rotated, and the user's fresh tokens deleted)."""
    store = _HoldsNoted()
    github = provider_for(server)

    @tool(requires_auth=github, read_only=True)
    def whoami(context: ToolContext) -> str:
        """Who the user is."""
        return "octocat"

    user_auth = UserAuth(
        store, redirect_uri=server.callback, secrets=client_secrets(), timeout=timeout
    )
    runner = ToolRunner(Toolkit("github", [whoami]), user_auth=user_auth, state_key=STATE_KEY)

    async def scenario() -> ToolResult:
        await seed_tokens(server, store, "alice", expires_in=1)
        return await runner.run("whoami", {}, context=ToolContext(user_id="alice"))

    result = run(scenario())
    assert result.value == "octocat"
    assert server.grants["refresh_token"] == 1
    [hold] = store.holds
    assert hold is not None
    assert hold > timeout


# -- a 401 tdk's hook did not see --------------------------------------------------------------


def _unseen_401_tools(server: OAuthProviderServer, runs: list[str]) -> Toolkit:
    """Writes whose requests go through a client without tdk's hook (a provider's SDK, as
    the body sees it): a repository created, then a read refused with a 401 (the provider
    expired the token meanwhile), raised as tdk's error by ``tdk.http.classify``."""
    github = provider_for(server)

    async def create_then_read(name: str, context: ToolContext) -> None:
        runs.append(name)
        bearer = {"Authorization": f"Bearer {context.auth_token}"}
        async with httpx.AsyncClient(trust_env=False) as plain:  # (no tdk.http.install)
            created = await plain.post(
                f"{server.url}/user/repos", json={"name": name}, headers=bearer
            )
            server.expire_user(created.json()["owner"]["login"])
            answered = await plain.get(server.user_url, headers=bearer)
        error = tdk.http.classify(answered)
        if error is not None:
            raise error

    @tool(requires_auth=github.with_scopes("repo"))
    async def sdk_write(name: str, context: ToolContext) -> str:
        """Create a repository through the provider's SDK, then read the user.

        Args:
            name: The repository's name.
        """
        await create_then_read(name, context)
        return name

    @tool(requires_auth=github.with_scopes("repo"))
    async def sdk_write_raised_by_hand(name: str, context: ToolContext) -> str:
        """Create a repository through the provider's SDK; its 401 raised by hand.

        Args:
            name: The repository's name.
        """
        try:
            await create_then_read(name, context)
        except tdk.UpstreamError as refused:
            raise tdk.UpstreamError(
                "GitHub refused the token.",
                kind=refused.kind,
                status_code=401,
            ) from None
        return name

    return Toolkit("github", [sdk_write, sdk_write_raised_by_hand])


@pytest.mark.parametrize("name", ["sdk_write", "sdk_write_raised_by_hand"])
def test_a_401_the_hook_did_not_see_does_not_run_a_write_again(
    server: OAuthProviderServer, name: str
) -> None:
    """A write through a client without tdk's hook, then a 401 (classified by hand): the
    hook saw neither, so nothing says the write did not act. The 401 is the call's result
    (docs/auth.md: "A 401 the hook does not see ... is just the body's failure"): no
    refresh, no second run, one repository."""
    runs: list[str] = []
    store = InMemoryTokenStore()
    user_auth = UserAuth(store, redirect_uri=server.callback, secrets=client_secrets())
    kit = _unseen_401_tools(server, runs)
    runner = ToolRunner(kit, user_auth=user_auth, state_key=STATE_KEY)

    async def scenario() -> ToolResult:
        await seed_tokens(server, store, "alice", expires_in=3600)
        return await runner.run(name, {"name": "once"}, context=ToolContext(user_id="alice"))

    result = run(scenario())
    assert result.error is not None
    assert result.error.kind is ErrorKind.UPSTREAM_RUNTIME_AUTH_ERROR
    assert result.error.status_code == 401
    assert runs == ["once"]
    assert server.repos_created == [("alice", "once")]
    assert "refresh_token" not in server.grants


# -- a provider's extra parameters -------------------------------------------------------------

RESERVED = [
    "response_type",
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "code_challenge",
    "code_challenge_method",
]


@pytest.mark.parametrize("name", RESERVED)
def test_authorize_params_cannot_name_what_tdk_sets(server: OAuthProviderServer, name: str) -> None:
    """``authorize_params`` naming a parameter of the authorization request tdk sets (the
    state, the redirect URI, the PKCE challenge...) is refused when the provider is made (a
    ValueError naming it): it would replace the sealed state or the callback, or make every
    call of the tool raise a TypeError instead of asking the user to sign in."""
    with pytest.raises(ValueError, match=f"authorize_params.*'{name}'"):
        provider_for(server, authorize_params={name: "x"})


def test_authorize_params_of_the_provider_s_own_are_in_the_link(
    server: OAuthProviderServer,
) -> None:
    """Other extra parameters (``access_type=offline``) are in the sign-in link."""
    github = provider_for(server, authorize_params={"access_type": "offline"})

    @tool(requires_auth=github, read_only=True)
    def whoami(context: ToolContext) -> str:
        """Who the user is."""
        return "octocat"

    user_auth = UserAuth(redirect_uri=server.callback, secrets=client_secrets())
    runner = ToolRunner(Toolkit("github", [whoami]), user_auth=user_auth, state_key=STATE_KEY)
    asked = run(runner.run("whoami", {}, context=ToolContext(user_id="alice")))
    assert asked.pending is not None
    assert "access_type=offline" in asked.pending.requests["auth.github"]["url"]


# -- a call cancelled during its refresh -------------------------------------------------------

ROTATED = {"access_token": "new-access-token-5a6b7c8d", "refresh_token": "rotated-refresh-4e3f2a1b"}


def test_a_call_cancelled_during_its_refresh_keeps_the_rotated_tokens() -> None:
    """The call is cancelled (the client gave up) while its refresh is at the token
    endpoint, which has taken the refresh token (a provider that rotates them no longer
    honours it): the refresh still completes and keeps the rotated tokens, instead of
    leaving the store with a refresh token the provider refuses (the user would have to
    sign in again)."""
    with CannedEndpoint() as endpoint:
        endpoint.answer = (200, JSON, json.dumps({**ROTATED, "expires_in": 3600}).encode(), ())
        endpoint.held = True
        provider = OAuthProvider(
            name="github",
            authorize_url=f"{endpoint.url}/authorize",
            token_url=endpoint.token_url,
            client_id_from=CLIENT_ID_SECRET,
            client_secret_from=CLIENT_SECRET_SECRET,
        )

        @tool(requires_auth=provider, read_only=True)
        def whoami(context: ToolContext) -> str:
            """Who the user is."""
            return "octocat"

        store = InMemoryTokenStore()
        user_auth = UserAuth(store, redirect_uri=CALLBACK, secrets=client_secrets())
        runner = ToolRunner(Toolkit("github", [whoami]), user_auth=user_auth, state_key=STATE_KEY)

        async def kept_once_rotated() -> TokenSet | None:
            while (kept := await store.get("alice", "github")) is not None:
                if kept.refresh_token == ROTATED["refresh_token"]:
                    break
                await asyncio.sleep(0.02)
            return kept

        async def scenario() -> TokenSet | None:
            await store.put("alice", "github", TokenSet(OLD_ACCESS, OLD_REFRESH, time.time() - 1))
            call = asyncio.create_task(
                runner.run("whoami", {}, context=ToolContext(user_id="alice"))
            )
            await asyncio.to_thread(endpoint.arrived.wait, SCENARIO)
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            endpoint.released.set()  # the provider answers now: rotated
            try:
                return await asyncio.wait_for(kept_once_rotated(), 10)
            except TimeoutError:
                return await store.get("alice", "github")

        kept = run(scenario())
    assert kept is not None
    assert (kept.access_token, kept.refresh_token) == tuple(ROTATED.values())
    assert endpoint.posts == 1


def test_a_callback_cancelled_during_its_exchange_keeps_the_tokens() -> None:
    """The callback's request is cancelled (the browser went away; a web framework cancels
    its handler) while the code is at the token endpoint, which has spent it: the exchange
    still completes and keeps the user's tokens (the state's nonce is used already, so the
    link could not be completed again)."""
    with CannedEndpoint() as endpoint:
        endpoint.answer = (200, JSON, json.dumps({**ROTATED, "expires_in": 3600}).encode(), ())
        provider = OAuthProvider(
            name="github",
            authorize_url=f"{endpoint.url}/authorize",
            token_url=endpoint.token_url,
            client_id_from=CLIENT_ID_SECRET,
            client_secret_from=CLIENT_SECRET_SECRET,
        )

        @tool(requires_auth=provider, read_only=True)
        def whoami(context: ToolContext) -> str:
            """Who the user is."""
            return "octocat"

        store = InMemoryTokenStore()
        user_auth = UserAuth(store, redirect_uri=CALLBACK, secrets=client_secrets())
        runner = ToolRunner(Toolkit("github", [whoami]), user_auth=user_auth, state_key=STATE_KEY)

        async def kept_at_last() -> TokenSet | None:
            while (kept := await store.get("alice", "github")) is None:
                await asyncio.sleep(0.02)
            return kept

        async def scenario() -> TokenSet | None:
            asked = await runner.run("whoami", {}, context=ToolContext(user_id="alice"))
            assert asked.pending is not None
            link = asked.pending.requests["auth.github"]["url"]
            state = parse_qs(urlsplit(link).query)["state"][0]
            endpoint.held = True
            callback = asyncio.create_task(
                runner.complete_authorization({"code": "c0de", "state": state}, user_id="alice")
            )
            await asyncio.to_thread(endpoint.arrived.wait, SCENARIO)
            callback.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await callback
            endpoint.released.set()  # the provider answers now
            try:
                return await asyncio.wait_for(kept_at_last(), 10)
            except TimeoutError:
                return None

        kept = run(scenario())
    assert kept is not None
    assert kept.access_token == ROTATED["access_token"]
    assert endpoint.posts == 1


def test_calls_waiting_for_a_sign_in_are_bounded(server: OAuthProviderServer) -> None:
    """Calls sent again after the sign-in ask wait for the callback before any limit of the
    runner applies: at most ``MAX_WAITING`` of them wait at once, and the others look once
    (no token yet: asked again) instead of holding a poller each. Those waiting get the
    tokens once they are kept."""
    github = provider_for(server)
    user_auth = UserAuth(
        redirect_uri=server.callback, secrets=client_secrets(), sign_in_wait=SCENARIO
    )

    async def scenario() -> tuple[int, TokenSet | None, list[TokenSet | None]]:
        waiting = [
            asyncio.create_task(user_auth.signed_in("alice", github)) for _ in range(MAX_WAITING)
        ]
        await asyncio.sleep(0)  # (each has looked once, and waits)
        one_more = await asyncio.wait_for(user_auth.signed_in("alice", github), SCENARIO / 2)
        still = sum(not task.done() for task in waiting)
        await seed_tokens(server, user_auth.store, "alice", expires_in=3600)
        return still, one_more, await asyncio.gather(*waiting)

    still, one_more, got = run(scenario())

    assert still == MAX_WAITING
    assert one_more is None
    assert all(tokens is not None for tokens in got)


def test_a_signed_in_browser_shows_no_code_or_state() -> None:
    """What the callback's sign-in carries (the provider's code and state) is not in the
    ``repr()`` of its record."""
    signed_in = SignedIn({"code": "c0de-7d1f", "state": "st4te-7d1f"}, "alice")

    assert "7d1f" not in repr(signed_in)
    assert "alice" in repr(signed_in)


@pytest.mark.parametrize(
    ("granted", "needed", "kind"),
    [
        pytest.param(2000, 1, ErrorKind.TOOL_RUNTIME_INPUT_REQUIRED, id="provider-granted-many"),
        pytest.param(0, 300, ErrorKind.TOOL_RUNTIME_FATAL, id="tool-needs-too-many"),
    ],
)
def test_a_sign_in_link_too_long_to_show_is_a_result(
    server: OAuthProviderServer, granted: int, needed: int, kind: ErrorKind
) -> None:
    """The link asks for the scopes granted so far with the tool's: a provider that said it
    granted thousands makes it longer than an ``OpenUrl`` takes. The call then asks for the
    tool's scopes alone; a tool whose own scopes cannot fit gets a failed result. Never an
    exception out of ``run()``."""
    github = provider_for(server)
    scopes = [f"scope-{n:04d}-of-the-tool" for n in range(needed)]

    @tool(requires_auth=github.with_scopes(*scopes), read_only=True)
    async def scoped(context: ToolContext) -> str:
        """Needs many scopes."""
        return "ran"

    store = InMemoryTokenStore()
    if granted:  # (else no tokens at all: a first sign-in)
        said = frozenset(f"granted-by-the-provider-{n:05d}" for n in range(granted))
        run(store.put("alice", "github", TokenSet("access-7d2e", scopes=said)))
    user_auth = UserAuth(store, redirect_uri=CALLBACK, secrets=client_secrets())
    runner = ToolRunner(Toolkit("k", [scoped]), user_auth=user_auth, state_key=STATE_KEY)

    result = run(runner.run("scoped", {}, context=ToolContext(user_id="alice")))

    assert result.error is not None
    assert result.error.kind is kind
    if result.pending is not None:
        url = result.pending.requests["auth.github"]["url"]
        assert parse_qs(urlsplit(url).query)["scope"] == [" ".join(scopes)]


def test_an_access_token_with_a_lone_surrogate_is_given_and_scrubbed() -> None:
    """JSON can carry a lone surrogate (``"\\ud800"``): a provider answering such an access
    token gets it to the body like any other, and a body that puts it in its error has it
    scrubbed. Never a ``UnicodeEncodeError`` out of ``run()``."""
    github = OAuthProvider(
        name="github",
        authorize_url="https://github.example/authorize",
        token_url="https://github.example/token",
        client_id_from="ID",
        client_secret_from="SECRET",
    )
    answer = json.loads('{"access_token": "\\ud800odd-token-7d3f-0123456789"}')
    token = TokenSet.from_token_response(answer)
    seen: list[str | None] = []

    @tool(requires_auth=github, read_only=True)
    async def leaky(context: ToolContext) -> str:
        """Puts its token in its error."""
        seen.append(context.auth_token)
        raise tdk.ToolRuntimeError(f"refused {context.auth_token}")

    store = InMemoryTokenStore()
    run(store.put("alice", "github", token))
    user_auth = UserAuth(store, redirect_uri=CALLBACK, secrets={"ID": "i", "SECRET": "s"})
    runner = ToolRunner(Toolkit("k", [leaky]), user_auth=user_auth, state_key=STATE_KEY)

    result = run(runner.run("leaky", {}, context=ToolContext(user_id="alice")))

    assert seen == [token.access_token]
    assert result.error is not None
    assert "odd-token-7d3f" not in json.dumps(result.to_dict())
