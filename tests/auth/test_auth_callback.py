"""The provider's callback of ``tdk serve --http`` end to end: a real ``tdk serve``
subprocess serving a ToolRunner given ``user_auth``, a real OAuth provider on loopback
("GitHub", authlib), the official MCP client over HTTP in both protocol eras, and httpx as
the user's browser.

A call of a tool acting as the user asks them to sign in (a URL elicitation); the browser
signs in at the provider, is sent back to tdk serve's ``/oauth/callback`` (a page saying
"signed in"), and the call goes on as the user. A callback forged, replayed or too large
is a 400 page that attaches nothing; no code, state or token reaches stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import httpx2
import mcp
import pytest
from _login_issuer import LOGIN_CLIENT, RESOURCE_CLIENT, LoginIssuer
from _mcp_support import SCENARIO_TIMEOUT, START_TIMEOUT, STOP_TIMEOUT, accepts, free_port, run
from _oauth_provider_server import (
    OAuthProviderServer,
    browser_sign_in,
    client_secrets,
    provider_for,
)
from mcp import types
from mcp.client.streamable_http import streamable_http_client

from tdk import ToolContext, Toolkit, ToolRunner, tool
from tdk.auth import JWTVerifier, UserAuth
from tdk.hosts import mcp as tdk_mcp

TOOLS = '''
import os

import httpx

import tdk.http
from tdk import ToolContext, Toolkit, tool
from tdk.auth import OAuthProvider, UserAuth
from tdk.runner import ToolRunner

PROVIDER = os.environ["TEST_PROVIDER_URL"]
GITHUB = OAuthProvider(
    name="github",
    authorize_url=f"{PROVIDER}/authorize",
    token_url=f"{PROVIDER}/token",
    client_id_from="GITHUB_CLIENT_ID",
    client_secret_from="GITHUB_CLIENT_SECRET",
)


@tool(requires_auth=GITHUB.with_scopes("repo"), read_only=True)
async def whoami(context: ToolContext) -> str:
    """The user's login at GitHub."""
    async with httpx.AsyncClient(trust_env=False) as client:
        tdk.http.install(client)
        bearer = {"Authorization": f"Bearer {context.auth_token}"}
        answered = await client.get(f"{PROVIDER}/user", headers=bearer)
        return str(answered.json()["login"])


runner = ToolRunner(
    Toolkit("github", [whoami]),
    user_auth=UserAuth(redirect_uri=os.environ["TEST_REDIRECT_URI"]),
    state_key="a state key of the test, long enough",
)
'''

#: The user's login at the provider.
LOGIN = "octocat"
#: The era each mode of the client speaks.
ERAS = [pytest.param("2026-07-28", id="2026"), pytest.param("legacy", id="2025")]


class Served:
    """A ``tdk serve --http`` subprocess of :data:`TOOLS`: its URLs and stderr."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process = process
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.callback = f"http://127.0.0.1:{port}/oauth/callback"
        self.log = log
        self.provider: OAuthProviderServer | None = None
        """The provider it signs users in at, when a fixture shares both."""

    def stderr(self, until: str = "") -> str:
        """What the server wrote on stderr so far: once it holds ``until`` (or after
        :data:`SCENARIO_TIMEOUT` seconds), else a moment after now (its log lines are written
        by a thread of their own, after the answer)."""
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        time.sleep(0.2)
        while until not in (written := self.log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return written


@pytest.fixture
def provider() -> Iterator[OAuthProviderServer]:
    with OAuthProviderServer() as server:
        yield server


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "callback_tools.py"
    path.write_text(TOOLS.lstrip())
    return path


def environment(
    provider: OAuthProviderServer, port: int, path: str = "/oauth/callback"
) -> dict[str, str]:
    return {
        **os.environ,
        **client_secrets(),
        "TEST_PROVIDER_URL": provider.url,
        "TEST_REDIRECT_URI": f"http://127.0.0.1:{port}{path}",
    }


@contextlib.contextmanager
def serving(
    tools_file: Path,
    provider: OAuthProviderServer,
    *options: str,
    redirect_port: int = 0,
    env: dict[str, str] | None = None,
) -> Iterator[Served]:
    """``tdk serve tools_file --http --port P OPTIONS``, once it accepts on 127.0.0.1 (the
    redirect URI names ``redirect_port``, by default P)."""
    port = free_port()
    log = tools_file.parent / f"stderr-{port}.log"
    argv = [sys.executable, "-m", "tdk", "serve", str(tools_file), "--http", "--port", str(port)]
    with log.open("w") as err:
        process = subprocess.Popen(
            [*argv, *options],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=tools_file.parent,
            env=environment(provider, redirect_port or port) | (env or {}),
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not accepts(port):
            if process.poll() is not None:
                pytest.fail(f"tdk serve ended ({process.returncode}): {log.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"tdk serve did not listen in {START_TIMEOUT} s: {log.read_text()}")
            time.sleep(0.05)
        yield Served(process, port, log)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT)


class Browser:
    """The user, as an elicitation callback: opens the URL shown in their browser (signed
    in at the provider), which the provider sends back to tdk serve's callback; records the
    URLs and the callback's answers."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.pages: list[httpx.Response] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        self.shown.append(params.url)
        self.pages.append(await asyncio.to_thread(signed_in, params.url))
        return types.ElicitResult(action="accept")


def signed_in(url: str, user: str = LOGIN) -> httpx.Response:
    """``url`` opened by ``user``'s browser: the provider's redirect followed to the
    callback, whose answer is returned."""
    status, location = browser_sign_in(url, user)
    assert status == 302, status
    assert location is not None
    return httpx.get(location, timeout=SCENARIO_TIMEOUT)


def callback_url(served: Served, url: str, user: str = LOGIN) -> str:
    """Where the provider sends ``user``'s browser back after ``url`` (not opened)."""
    status, location = browser_sign_in(url, user)
    assert status == 302
    assert location is not None
    assert location.startswith(served.callback)
    return location


async def call_whoami(
    url: str, mode: str, *, headers: dict[str, str] | None = None, **options: Any
) -> types.CallToolResult:
    async with httpx2.AsyncClient(headers=headers, timeout=SCENARIO_TIMEOUT) as http:
        transport = streamable_http_client(url, http_client=http)
        async with mcp.Client(transport, mode=mode, **options) as client:
            return await client.call_tool("whoami", {})


def text_of(answered: types.CallToolResult) -> str:
    [content] = answered.content
    assert isinstance(content, types.TextContent)
    return content.text


def sign_in_url(served: Served) -> str:
    """The sign-in URL a call of a client without elicitation is given."""
    answered = run(call_whoami(served.url, "legacy"))
    assert answered.is_error is True
    assert answered.meta is not None
    [(key, asked)] = answered.meta["tdk/pending"]["requests"].items()
    assert key == "auth.github"
    url: str = asked["url"]
    return url


def assert_secure_page(page: httpx.Response) -> None:
    """The callback's page: HTML, not cached, no referrer, no script, no framing."""
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert "Traceback" not in page.text


def assert_nothing_secret(stderr: str, provider: OAuthProviderServer, *urls: str) -> None:
    """No code, state or challenge of ``urls``, and no token the provider issued, in
    ``stderr``."""
    assert "Traceback" not in stderr
    issued = [*provider.store.tokens, *provider.store.refresh_tokens]
    assert all(token not in stderr for token in issued)
    for url in urls:
        for name, values in parse_qs(urlsplit(url).query).items():
            if name in ("code", "state", "code_challenge"):
                assert all(value not in stderr for value in values), name


@pytest.mark.parametrize("mode", ERAS)
def test_a_call_signs_the_user_in_through_the_callback_and_goes_on(
    mode: str, tools_file: Path, provider: OAuthProviderServer
) -> None:
    """Both eras: the call asks the user to open the provider's URL; the provider sends the
    browser to tdk serve's callback (200, "signed in"); the call then runs as the user."""
    user = Browser()
    with serving(tools_file, provider) as served:
        answered = run(call_whoami(served.url, mode, elicitation_callback=user))
        stderr = served.stderr()
    assert answered.is_error is False, text_of(answered)
    assert text_of(answered) == LOGIN
    [shown] = user.shown
    assert shown.startswith(f"{provider.url}/authorize?")
    [page] = user.pages
    assert page.status_code == 200
    assert "signed in" in page.text
    assert_secure_page(page)
    assert provider.grants["authorization_code"] == 1
    assert_nothing_secret(stderr, provider, shown, str(page.url))


def test_the_callback_attaches_once_and_the_call_sent_again_runs(
    tools_file: Path, provider: OAuthProviderServer
) -> None:
    """A client without elicitation: the sign-in URL in ``_meta["tdk/pending"]``; the
    callback attaches the user's tokens once (a replay of it is a 400 page); the call sent
    again runs."""
    with serving(tools_file, provider) as served:
        location = callback_url(served, sign_in_url(served))
        first = httpx.get(location, timeout=SCENARIO_TIMEOUT)
        again = httpx.get(location, timeout=SCENARIO_TIMEOUT)
        answered = run(call_whoami(served.url, "legacy"))
        stderr = served.stderr()
    assert (first.status_code, again.status_code) == (200, 400)
    assert "used already" in again.text
    assert_secure_page(again)
    assert text_of(answered) == LOGIN
    assert provider.grants["authorization_code"] == 1
    assert_nothing_secret(stderr, provider, location)


def _forged(served: Served, location: str) -> str:
    parts = urlsplit(location)
    code = parse_qs(parts.query)["code"][0]
    return f"{served.callback}?{urlencode({'code': code, 'state': 'tdk1.' + 'A' * 80})}"


def _no_state(served: Served, location: str) -> str:
    return f"{served.callback}?{urlencode({'code': parse_qs(urlsplit(location).query)['code'][0]})}"


def _long(served: Served, location: str) -> str:
    return f"{location}&pad={'x' * 9000}"  # past tdk's bound, within the HTTP server's


def _huge(served: Served, location: str) -> str:
    return f"{location}&pad={'x' * 60_000}"  # past the HTTP server's own bound too


def _many(served: Served, location: str) -> str:
    return location + "".join(f"&p{n}=1" for n in range(40))


def _twice(served: Served, location: str) -> str:
    state = parse_qs(urlsplit(location).query)["state"][0]
    return f"{location}&{urlencode({'state': state})}"


def _script(served: Served, location: str) -> str:
    return f"{served.callback}?{urlencode({'code': '<script>x</script>', 'state': '<b>'})}"


REFUSED = [
    pytest.param(_forged, "not one this server made", id="forged-state"),
    pytest.param(_no_state, "not one this server made", id="no-state"),
    pytest.param(_long, "not one this server made", id="query-too-long"),
    pytest.param(_huge, None, id="query-huge"),
    pytest.param(_many, "not one this server made", id="too-many-parameters"),
    pytest.param(_twice, "not one this server made", id="state-twice"),
    pytest.param(_script, "not one this server made", id="markup"),
]


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One ``tdk serve`` (and its provider) for every case of :data:`REFUSED`: none of them
    attaches anything, so each finds the server as the first left it (one start, not seven)."""
    with OAuthProviderServer() as shared:
        path = tmp_path_factory.mktemp("refusing") / "callback_tools.py"
        path.write_text(TOOLS.lstrip())
        with serving(path, shared) as served:
            served.provider = shared
            yield served


@pytest.mark.parametrize(("make", "said"), REFUSED)
def test_a_callback_that_is_not_the_providers_attaches_nothing(
    make: Any, said: str | None, refusing: Served
) -> None:
    """A callback forged, too large or ambiguous: 400, nothing attached (no code traded,
    the call still asks), no traceback, no code or state on stderr."""
    served = refusing
    provider = served.provider
    assert provider is not None
    location = callback_url(served, sign_in_url(served))
    url = make(served, location)
    page = httpx.get(url, timeout=SCENARIO_TIMEOUT)
    answered = run(call_whoami(served.url, "legacy"))
    stderr = served.stderr()
    assert page.status_code == 400
    assert "Traceback" not in page.text
    if said is not None:
        assert said in page.text
        assert_secure_page(page)
        assert "<script>" not in page.text
        assert "<b>" not in page.text
    assert provider.grants["authorization_code"] == 0
    assert answered.is_error is True
    assert answered.meta is not None
    assert "tdk/pending" in answered.meta
    assert_nothing_secret(stderr, provider, location)


def test_the_callback_answers_get_only(tools_file: Path, provider: OAuthProviderServer) -> None:
    """A POST to the callback runs nothing (a browser comes back with a GET)."""
    with serving(tools_file, provider) as served:
        location = callback_url(served, sign_in_url(served))
        posted = httpx.post(location, timeout=SCENARIO_TIMEOUT)
        first = httpx.get(location, timeout=SCENARIO_TIMEOUT)
    assert posted.status_code == 405
    assert first.status_code == 200


def test_the_callback_checks_the_host(tools_file: Path, provider: OAuthProviderServer) -> None:
    """A request naming another host (DNS rebinding) is refused before anything runs."""
    with serving(tools_file, provider) as served:
        location = callback_url(served, sign_in_url(served))
        rebound = httpx.get(location, headers={"Host": "evil.example"}, timeout=SCENARIO_TIMEOUT)
        first = httpx.get(location, timeout=SCENARIO_TIMEOUT)
    assert rebound.status_code == 421
    assert first.status_code == 200


SLASHED = [
    pytest.param("evil.example", 421, id="another-host"),
    pytest.param(None, 200, id="its-own-host"),
]


@pytest.mark.parametrize(("host", "status"), SLASHED)
def test_the_callback_with_a_trailing_slash_is_not_redirected_by_host(
    host: str | None, status: int, tools_file: Path, provider: OAuthProviderServer
) -> None:
    """``/oauth/callback/`` (a trailing slash) is answered as the callback, Host checked
    first: never a redirect built from the Host header carrying the code and state to
    another site (the router's slash redirect answered before any check)."""
    with serving(tools_file, provider) as served:
        location = callback_url(served, sign_in_url(served))
        slashed = location.replace("/oauth/callback?", "/oauth/callback/?", 1)
        headers = {"Host": host} if host is not None else {}
        page = httpx.get(slashed, headers=headers, timeout=SCENARIO_TIMEOUT)
        first = httpx.get(location, timeout=SCENARIO_TIMEOUT)
    assert page.status_code == status
    assert "location" not in page.headers
    assert first.status_code == (200 if host is not None else 400)  # (attached once)


JWT = ["--auth", "jwt", "--issuer", "http://127.0.0.1:9", "--audience", "tdk"]
LOGIN_ID = {"TDK_LOGIN_CLIENT_ID": "tdk-login"}
REFUSALS = [
    pytest.param(JWT, {}, "/oauth/callback", "cannot know who opens it", id="auth-no-login"),
    pytest.param(
        JWT,
        {**LOGIN_ID, "TDK_LOGIN_CLIENT_SECRET": "short"},
        "/oauth/callback",
        "TDK_LOGIN_CLIENT_SECRET is shorter than 16 bytes",
        id="auth-login-secret-short",
    ),
    pytest.param(
        JWT, LOGIN_ID, "/oauth/callback", "cannot know who opens it", id="auth-login-no-secret"
    ),
    pytest.param([], {}, "/mcp", "which the MCP server answers", id="callback-at-mcp"),
    pytest.param(
        JWT,
        {**LOGIN_ID, "TDK_LOGIN_CLIENT_SECRET": "a secret long enough"},
        "/.well-known/oauth-protected-resource/mcp",
        "which the MCP server answers",
        id="auth-callback-at-metadata",
    ),
]


@pytest.mark.parametrize(("options", "env", "path", "said"), REFUSALS)
def test_tdk_serve_refuses_a_callback_it_cannot_serve(
    options: list[str],
    env: dict[str, str],
    path: str,
    said: str,
    tools_file: Path,
    provider: OAuthProviderServer,
) -> None:
    """With ``--auth`` and no login client the callback could not know who opens it (a
    browser holds no bearer token): tdk serve does not start (status 2) and says what to do
    instead; nor with a login secret too short to seal with, or a callback at a path of the
    MCP server."""
    port = free_port()
    argv = [sys.executable, "-m", "tdk", "serve", str(tools_file), "--http", "--port", str(port)]
    ended = subprocess.run(
        [*argv, *options],
        capture_output=True,
        text=True,
        cwd=tools_file.parent,
        env=environment(provider, port, path) | env,
        timeout=SCENARIO_TIMEOUT,
        check=False,
    )
    assert ended.returncode == 2, ended.stderr
    assert said in ended.stderr
    assert "Traceback" not in ended.stderr
    assert not accepts(port)


@tool(read_only=True)
def ping() -> str:
    """Pong."""
    return "pong"


def test_serve_answers_the_callback_of_a_runner_with_user_auth(
    provider: OAuthProviderServer,
) -> None:
    """The Python API: ``serve(..., transport="http", runner=runner)`` answers the callback
    at the path of the runner's ``redirect_uri``; the runner then has the user's token."""
    github = provider_for(provider)

    @tool(requires_auth=github.with_scopes("repo"), read_only=True)
    async def whoami(context: ToolContext) -> str:
        """The user's login at GitHub."""
        async with httpx.AsyncClient(trust_env=False) as client:
            bearer = {"Authorization": f"Bearer {context.auth_token}"}
            answered = await client.get(provider.user_url, headers=bearer)
            return str(answered.json()["login"])

    port = free_port()
    redirect = f"http://127.0.0.1:{port}/signed-in"
    user_auth = UserAuth(redirect_uri=redirect, secrets=client_secrets())
    runner = ToolRunner(Toolkit("github", [whoami]), user_auth=user_auth)

    async def scenario() -> tuple[int, str, str | None]:
        serving = asyncio.create_task(
            tdk_mcp.serve(runner.toolkit, "http", port=port, runner=runner)
        )
        try:
            while not accepts(port):
                await asyncio.sleep(0.05)
            asked = await runner.run("whoami", {})
            assert asked.pending is not None
            url = asked.pending.requests["auth.github"]["url"]
            page = await asyncio.to_thread(signed_in, url)
            again = await runner.run("whoami", {})
            return page.status_code, page.text, again.value
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving

    status, text, value = run(scenario())
    assert status == 200
    assert "signed in" in text
    assert value == LOGIN


def test_serve_refuses_a_callback_with_auth() -> None:
    """The Python API: ``serve(..., transport="http", auth=...)`` with a runner given
    ``user_auth`` raises ``ValueError`` before it listens."""
    kit = Toolkit("k", [ping])
    runner = ToolRunner(kit, user_auth=UserAuth(redirect_uri="http://127.0.0.1/oauth/callback"))
    verifier = JWTVerifier(
        issuer="http://127.0.0.1:9", audience="tdk", jwks_url="http://127.0.0.1:9/jwks"
    )
    port = free_port()
    serving = tdk_mcp.serve(kit, "http", port=port, runner=runner, auth=verifier)
    with pytest.raises(ValueError, match=re.escape("cannot know who opens it")):
        run(serving)
    assert not accepts(port)


WARNINGS = [
    pytest.param(
        [], True, "the providers will send the users' browsers elsewhere", id="other-port"
    ),
    pytest.param(
        ["--workers", "2"], False, "each worker keeps its own users' tokens", id="workers-in-memory"
    ),
]


@pytest.mark.parametrize(("options", "other_port", "said"), WARNINGS)
def test_tdk_serve_says_when_sign_ins_cannot_come_back(
    options: list[str], other_port: bool, said: str, tools_file: Path, provider: OAuthProviderServer
) -> None:
    """The operator is told, once, when the users' browsers would come back elsewhere (a
    loopback redirect URI of another port) or to a worker without the tokens."""
    redirect_port = free_port() if other_port else 0
    with serving(tools_file, provider, *options, redirect_port=redirect_port) as served:
        stderr = served.stderr(until="tdk serve: http://")
    assert stderr.count(said) == 1, stderr


def test_tdk_serve_over_stdio_says_nothing_answers_the_callback(
    tools_file: Path, provider: OAuthProviderServer
) -> None:
    """Over stdio there is no callback: the operator is told, and the server still serves."""
    ended = subprocess.run(
        [sys.executable, "-m", "tdk", "serve", str(tools_file)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tools_file.parent,
        env=environment(provider, free_port()),
        timeout=SCENARIO_TIMEOUT,
        check=False,
    )
    assert ended.returncode == 0, ended.stderr
    assert "over stdio nothing answers the providers' callback" in ended.stderr


@pytest.fixture
def issuer() -> Iterator[LoginIssuer]:
    with LoginIssuer() as running:
        yield running


def authenticated(issuer: LoginIssuer) -> tuple[list[str], dict[str, str]]:
    """The options and environment of ``tdk serve --auth introspection`` at ``issuer``, with
    the login client of the callback's sign-in."""
    options = ["--auth", "introspection", "--introspection-url", issuer.introspection_url]
    environ = {
        "TDK_INTROSPECTION_CLIENT_ID": RESOURCE_CLIENT[0],
        "TDK_INTROSPECTION_CLIENT_SECRET": RESOURCE_CLIENT[1],
        "TDK_LOGIN_CLIENT_ID": LOGIN_CLIENT[0],
        "TDK_LOGIN_CLIENT_SECRET": LOGIN_CLIENT[1],
    }
    return [*options, "--issuer", issuer.url], environ


def browsed(url: str, user: str) -> list[httpx.Response]:
    """``url`` opened in the browser of ``user`` (signed in at the provider and at the
    issuer: their ``login`` cookie), every redirect followed: each answer, the last last."""
    answers: list[httpx.Response] = []
    with httpx.Client(headers={"Cookie": f"login={user}"}, timeout=SCENARIO_TIMEOUT) as browser:
        while len(answers) < 10 and (not answers or answers[-1].is_redirect):
            # (followed here: httpx drops a Cookie header of its own on a redirect)
            answers.append(browser.get(answers[-1].headers["location"] if answers else url))
    return answers


class SignedInBrowser:
    """The user as an elicitation callback, on a server that authenticates: the link opened
    in their browser (see :func:`browsed`)."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.answers: list[httpx.Response] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        self.answers = await asyncio.to_thread(browsed, params.url, self.user)
        return types.ElicitResult(action="accept")


@pytest.mark.parametrize("mode", ERAS)
def test_with_auth_the_browser_signs_in_at_the_issuer_before_the_callback_attaches(
    mode: str, tools_file: Path, provider: OAuthProviderServer, issuer: LoginIssuer
) -> None:
    """``--auth``: the callback sends the browser to the issuer (the login client, PKCE,
    the resource), learns who it is from the token it gets, and attaches the provider's
    tokens to that user, the caller: the call then runs as them."""
    options, environ = authenticated(issuer)
    bearer = {"Authorization": f"Bearer {issuer.access_token('alice')}"}
    alice = SignedInBrowser("alice")
    with serving(tools_file, provider, *options, env=environ) as served:
        answered = run(call_whoami(served.url, mode, headers=bearer, elicitation_callback=alice))
        stderr = served.stderr()
    assert answered.is_error is False
    assert text_of(answered) == "alice"
    steps = [(urlsplit(str(each.url)).port, each.status_code) for each in alice.answers]
    served_port = urlsplit(served.url).port
    assert steps == [
        (urlsplit(provider.url).port, 302),  # the provider: signed in, back to the callback
        (served_port, 302),  # the callback: to the issuer's sign-in first
        (urlsplit(issuer.provider.url).port, 302),  # the issuer: signed in, back again
        (served_port, 200),  # the callback: attached
    ]
    to_issuer = alice.answers[1]
    assert to_issuer.headers["referrer-policy"] == "no-referrer"
    assert to_issuer.headers["cache-control"] == "no-store"
    sign_in = parse_qs(urlsplit(to_issuer.headers["location"]).query)
    assert sign_in["client_id"] == [LOGIN_CLIENT[0]]
    assert sign_in["resource"] == [served.url]
    assert sign_in["code_challenge_method"] == ["S256"]
    assert "signed in" in alice.answers[-1].text
    assert issuer.provider.grants["authorization_code"] == 2  # alice's bearer, her sign-in
    assert_nothing_secret(stderr, provider, *(str(each.url) for each in alice.answers))


def test_with_auth_a_link_opened_by_another_user_attaches_nothing(
    tools_file: Path, provider: OAuthProviderServer, issuer: LoginIssuer
) -> None:
    """Alice's sign-in link, forwarded to Mallory: Mallory signs in at the provider and at
    the issuer, and the callback attaches nothing (a 400 page); Alice's call still asks."""
    options, environ = authenticated(issuer)
    bearer = {"Authorization": f"Bearer {issuer.access_token('alice')}"}
    with serving(tools_file, provider, *options, env=environ) as served:
        first = run(call_whoami(served.url, "legacy", headers=bearer))
        assert first.meta is not None
        link = first.meta["tdk/pending"]["requests"]["auth.github"]["url"]
        answers = browsed(link, "mallory")
        again = run(call_whoami(served.url, "legacy", headers=bearer))
        stderr = served.stderr()
    assert answers[-1].status_code == 400
    assert "made for another user" in answers[-1].text
    assert provider.grants["authorization_code"] == 0  # Mallory's GitHub code never traded
    assert again.is_error is True
    assert again.meta is not None
    assert "tdk/pending" in again.meta
    assert_nothing_secret(stderr, provider, link, *(str(each.url) for each in answers))


def _declined(issuer: LoginIssuer, served: Served, link: str) -> list[httpx.Response]:
    issuer.provider.deny.add("alice")  # alice says no at the issuer's sign-in
    return browsed(link, "alice")


def _replayed(issuer: LoginIssuer, served: Served, link: str) -> list[httpx.Response]:
    answers = browsed(link, "alice")
    assert answers[-1].status_code == 200
    return browsed(str(answers[-1].url), "alice")  # the issuer's answer, sent again


def _tampered(issuer: LoginIssuer, served: Served, link: str) -> list[httpx.Response]:
    answers = browsed(link, "alice")
    back = urlsplit(str(answers[-1].url))
    query = {name: values[0] for name, values in parse_qs(back.query).items()}
    query["state"] = query["state"][:-8] + "AAAAAAAA"
    return browsed(f"{served.callback}?{urlencode(query)}", "alice")


def _without_state(issuer: LoginIssuer, served: Served, link: str) -> list[httpx.Response]:
    return browsed(f"{served.callback}?code=abc", "alice")


NOT_COMPLETED = [
    pytest.param(_declined, "did not complete", 0, id="declined-at-the-issuer"),
    pytest.param(_replayed, "did not complete", 1, id="issuer-answer-replayed"),
    pytest.param(_tampered, "not one this server made", 1, id="login-state-tampered"),
    pytest.param(_without_state, "not one this server made", 0, id="no-state"),
]


@pytest.mark.parametrize(("make", "said", "attached"), NOT_COMPLETED)
def test_with_auth_a_sign_in_that_does_not_complete_attaches_nothing_more(
    make: Any,
    said: str,
    attached: int,
    tools_file: Path,
    provider: OAuthProviderServer,
    issuer: LoginIssuer,
) -> None:
    """The sign-in at the issuer declined, its answer replayed or tampered with, a callback
    without a state: a 400 page in tdk's words, and no more GitHub codes traded than the
    one sign-in that completed."""
    options, environ = authenticated(issuer)
    bearer = {"Authorization": f"Bearer {issuer.access_token('alice')}"}
    with serving(tools_file, provider, *options, env=environ) as served:
        first = run(call_whoami(served.url, "legacy", headers=bearer))
        assert first.meta is not None
        link = first.meta["tdk/pending"]["requests"]["auth.github"]["url"]
        answers = make(issuer, served, link)
        stderr = served.stderr()
    assert answers[-1].status_code == 400
    assert said in answers[-1].text
    assert_secure_page(answers[-1])
    assert provider.grants["authorization_code"] == attached
    assert len(answers) < 10
    assert_nothing_secret(stderr, provider, link, *(str(each.url) for each in answers))


def test_with_auth_an_issuer_without_metadata_is_said_on_the_page(
    tools_file: Path, provider: OAuthProviderServer, issuer: LoginIssuer
) -> None:
    """An issuer whose metadata cannot be read: the callback answers a 400 page saying the
    sign-in cannot be reached, and the operator is told (without the provider's code)."""
    options, environ = authenticated(issuer)
    options[options.index("--issuer") + 1] = provider.url  # (no metadata there)
    with serving(tools_file, provider, *options, env=environ) as served:
        answers = browsed(f"{served.callback}?code=abc&state=def", "alice")
        stderr = served.stderr(until="no usable metadata")
    assert [each.status_code for each in answers] == [400]
    assert "cannot be reached right now" in answers[-1].text
    assert "no usable metadata of the issuer" in stderr
    assert "abc" not in stderr


@pytest.mark.parametrize("extra", ["jwt", "authlib"])
def test_serving_with_a_callback_needs_no_auth_extra(extra: str) -> None:
    """The callback and its sign-in are part of ``tdk.hosts.mcp``, which needs the mcp extra
    alone: the auth extra (PyJWT, authlib) loads only with ``--auth``."""
    blocked = f"import sys; sys.modules[{extra!r}] = None; import tdk.hosts.mcp"
    ended = subprocess.run(
        [sys.executable, "-c", blocked],
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT,
        check=False,
    )
    assert ended.returncode == 0, ended.stderr


class TenantIssuer(LoginIssuer):
    """An issuer whose authorization endpoint has a query of its own (a tenant, a policy:
    Azure AD B2C's ``?p=...``)."""

    def metadata(self) -> dict[str, Any]:
        return {
            **super().metadata(),
            "authorization_endpoint": f"{self.provider.authorize_url}?tenant=t1",
        }


def test_with_auth_an_issuer_endpoint_with_a_query_keeps_it(
    tools_file: Path, provider: OAuthProviderServer
) -> None:
    """The issuer's authorization endpoint has a query of its own: the sign-in's parameters
    are added to it (not a second ``?`` that the issuer reads as part of its value)."""
    with TenantIssuer() as issuer:
        options, environ = authenticated(issuer)
        bearer = {"Authorization": f"Bearer {issuer.access_token('alice')}"}
        with serving(tools_file, provider, *options, env=environ) as served:
            first = run(call_whoami(served.url, "legacy", headers=bearer))
            assert first.meta is not None
            link = first.meta["tdk/pending"]["requests"]["auth.github"]["url"]
            answers = browsed(link, "alice")
    sign_in = parse_qs(urlsplit(answers[1].headers["location"]).query)
    assert sign_in["tenant"] == ["t1"]
    assert sign_in["response_type"] == ["code"]
    assert answers[-1].status_code == 200, answers[-1].text


def test_with_auth_a_sign_in_started_by_another_user_attaches_nothing(
    tools_file: Path, provider: OAuthProviderServer, issuer: LoginIssuer
) -> None:
    """No cookie ties the issuer's step to the browser that began it: Mallory signs in at
    the provider with his own link, stops at the callback's redirect to the issuer, and
    has Alice open that (her browser signed in at the issuer). The issuer says Alice, the
    link was Mallory's: nothing attached to either, no code traded."""
    options, environ = authenticated(issuer)
    bearer = {"Authorization": f"Bearer {issuer.access_token('mallory')}"}
    with serving(tools_file, provider, *options, env=environ) as served:
        first = run(call_whoami(served.url, "legacy", headers=bearer))
        assert first.meta is not None
        link = first.meta["tdk/pending"]["requests"]["auth.github"]["url"]
        to_issuer = httpx.get(callback_url(served, link, "mallory"), timeout=SCENARIO_TIMEOUT)
        assert to_issuer.status_code == 302
        answers = browsed(to_issuer.headers["location"], "alice")
        again = run(call_whoami(served.url, "legacy", headers=bearer))
        stderr = served.stderr()
    assert answers[-1].status_code == 400
    assert "made for another user" in answers[-1].text
    assert provider.grants["authorization_code"] == 0
    assert again.meta is not None
    assert "tdk/pending" in again.meta
    assert_nothing_secret(stderr, provider, link, *(str(each.url) for each in answers))
