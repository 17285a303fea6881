"""``tdk serve --http --auth jwt|introspection`` end to end: a real ``tdk serve`` subprocess,
a real issuer on loopback (its metadata and JWKS) or a real authlib authorization server
(its introspection endpoint), the official MCP client with a bearer token (an httpx auth of
its HTTP client), and raw HTTP for what no SDK client shows (statuses and challenges).

Every refusal is a 401 (or a 403 step-up for a tool's scopes) with ``WWW-Authenticate``
naming the protected-resource metadata, and no token ever reaches the server's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp
import pytest
from _auth_issuer import AUDIENCE, Issuer, issuer_running
from _auth_server import RESOURCE_CLIENT, AuthorizationServerOnLoopback
from _mcp_support import (
    INITIALIZE,
    RAW_HEADERS,
    SCENARIO_TIMEOUT,
    START_TIMEOUT,
    STOP_TIMEOUT,
    accepts,
    call_request,
    free_port,
    run,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tdk.__main__ import main
from tdk.auth import CLIENT_ID_VARIABLE, CLIENT_SECRET_VARIABLE

TOOLS = '''
from typing import Annotated, Any

from tdk import ToolContext, tool


@tool(read_only=True)
def whoami(context: ToolContext) -> dict[str, Any]:
    """Who calls, as the context says."""
    return {
        "user": context.user_id,
        "scopes": sorted(context.scopes),
        "email": context.claims.get("email"),
    }


@tool(requires_scopes=["repo:write"])
def close_issue(number: Annotated[int, "The issue."]) -> str:
    """Close an issue."""
    return f"closed {number}"
'''


class Served:
    """A ``tdk serve --http`` subprocess: its port, URLs and stderr."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.log = log
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.metadata_url = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"

    def stderr(self) -> str:
        """What the server wrote on stderr so far."""
        return self.log.read_text()

    def stderr_once(self, text: str) -> str:
        """Its stderr once it holds ``text`` (its log lines are written by a thread of their
        own, after the answer), or after :data:`SCENARIO_TIMEOUT` seconds."""
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        while text not in (written := self.stderr()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return written


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auth-serve") / "auth_serve_tools.py"
    path.write_text(TOOLS.lstrip())
    return path


@contextlib.contextmanager
def serving(tools_file: Path, *options: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``tdk serve tools_file --http --port P OPTIONS``, once it accepts on 127.0.0.1."""
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
            env={**os.environ, **(env or {})},
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


class Bearer(httpx2.Auth):
    """An httpx auth that sends a bearer token (as an OAuth client library would)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, Any, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


@contextlib.asynccontextmanager
async def client_of(url: str, token: str) -> Any:
    """The SDK's client at ``url``, its HTTP client sending ``token``."""
    async with (
        httpx2.AsyncClient(auth=Bearer(token), timeout=SCENARIO_TIMEOUT) as http,
        mcp.Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def session(url: str, token: str) -> tuple[list[str], dict[str, Any]]:
    """The tools listed to the bearer of ``token``, and what ``whoami`` says of them."""
    async with client_of(url, token) as client:
        listed = await client.list_tools()
        called = await client.call_tool("whoami", {})
    assert called.structured_content is not None
    return sorted(each.name for each in listed.tools), called.structured_content


# -- JWT ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with issuer_running() as running:
        yield running


@pytest.fixture(scope="module")
def jwt_server(tools_file: Path, issuer: Issuer) -> Iterator[Served]:
    """Tokens of ``issuer`` (keys found from its metadata) for :data:`AUDIENCE`."""
    with serving(
        tools_file, "--auth", "jwt", "--issuer", issuer.url, "--audience", AUDIENCE
    ) as served:
        yield served


def test_each_caller_is_the_subject_of_its_token(jwt_server: Served, issuer: Issuer) -> None:
    """The SDK's client with a bearer token: ``user_id`` is the token's ``sub``, scopes and
    claims are on the context; two users at once each see their own, and a tool that needs
    a scope is listed to the one who holds it only."""
    alice = issuer.token(scope="tools:read")
    bob = issuer.token(sub="bob", scope="tools:read repo:write", email="bob@example.test")

    async def both() -> list[tuple[list[str], dict[str, Any]]]:
        return list(
            await asyncio.gather(session(jwt_server.url, alice), session(jwt_server.url, bob))
        )

    (alice_tools, alice_is), (bob_tools, bob_is) = run(both())
    assert alice_tools == ["whoami"]
    assert alice_is == {"user": "alice", "scopes": ["tools:read"], "email": "alice@example.test"}
    assert bob_tools == ["close_issue", "whoami"]
    assert bob_is == {
        "user": "bob",
        "scopes": ["repo:write", "tools:read"],
        "email": "bob@example.test",
    }
    assert alice not in jwt_server.stderr()
    assert bob not in jwt_server.stderr()


def test_the_protected_resource_metadata_names_the_issuer(
    jwt_server: Served, issuer: Issuer
) -> None:
    """RFC 9728 metadata at its well-known path: this resource, and its issuer."""
    answered = httpx.get(jwt_server.metadata_url, timeout=SCENARIO_TIMEOUT)
    assert answered.status_code == 200
    metadata = answered.json()
    assert metadata["resource"] == jwt_server.url
    assert metadata["authorization_servers"] == [issuer.url]


def post(served: Served, message: dict[str, Any], authorization: str | None) -> httpx.Response:
    headers = dict(RAW_HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization
    return httpx.post(served.url, json=message, headers=headers, timeout=SCENARIO_TIMEOUT)


def assert_challenged(answered: httpx.Response, served: Served) -> None:
    """A 401 whose ``WWW-Authenticate`` is a Bearer challenge naming the metadata."""
    assert answered.status_code == 401
    challenge = answered.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{served.metadata_url}"' in challenge


#: Authorization headers that must get a 401, made from the issuer (the tokens of
#: test_auth_jwt's table, and no token at all).
REFUSED: list[Any] = [
    pytest.param(lambda i: None, id="no-authorization"),
    pytest.param(lambda i: f"Basic {i.token()}", id="not-bearer"),
    pytest.param(lambda i: "Bearer", id="bearer-without-token"),
    pytest.param(lambda i: f"Bearer {i.token(exp=int(time.time()) - 3600)}", id="expired"),
    pytest.param(lambda i: f"Bearer {i.token(nbf=int(time.time()) + 3600)}", id="future-nbf"),
    pytest.param(lambda i: f"Bearer {i.token(iat=int(time.time()) + 3600)}", id="future-iat"),
    pytest.param(lambda i: f"Bearer {i.unsigned()}", id="alg-none"),
    pytest.param(lambda i: f"Bearer {i.hs256_with_public_key()}", id="hs256-public-key"),
    pytest.param(lambda i: f"Bearer {i.signed_by_stranger()}", id="wrongly-signed"),
    pytest.param(lambda i: f"Bearer {i.tampered()}", id="tampered"),
    pytest.param(lambda i: f"Bearer {i.token(iss='https://evil.example.test')}", id="issuer"),
    pytest.param(lambda i: f"Bearer {i.token(aud='https://other.example.test')}", id="audience"),
    pytest.param(lambda i: f"Bearer {i.token(header={'kid': 'nope'})}", id="unknown-kid"),
    pytest.param(lambda i: "Bearer not.a.jwt", id="garbage"),
]


@pytest.mark.parametrize("make", REFUSED)
def test_a_request_without_a_valid_token_is_401(
    jwt_server: Served, issuer: Issuer, make: Callable[[Issuer], str | None]
) -> None:
    """Missing, expired, future-dated, unsigned, wrongly signed, foreign: each request is
    a 401 with the Bearer challenge, and the server logs none of the token."""
    authorization = make(issuer)
    answered = post(jwt_server, INITIALIZE, authorization)
    assert_challenged(answered, jwt_server)
    token = (authorization or "").partition(" ")[2]
    for part in [token, *token.split(".")]:
        assert len(part) < 8 or part not in jwt_server.stderr()


def test_a_call_without_the_tools_scope_is_a_403_step_up(
    jwt_server: Served, issuer: Issuer
) -> None:
    """A call of a tool whose scope the token lacks: 403, ``insufficient_scope`` naming the
    scope (the MCP step-up challenge), a JSON-RPC error the SDK's client raises; the tool
    does not run."""
    alice = issuer.token(scope="tools:read")
    answered = post(jwt_server, call_request(5, "Close_Issue", {"number": 1}), f"Bearer {alice}")
    assert answered.status_code == 403
    challenge = answered.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope", scope="repo:write"')
    assert f'resource_metadata="{jwt_server.metadata_url}"' in challenge
    assert answered.json()["id"] == 5

    async def by_the_sdk() -> str:
        async with client_of(jwt_server.url, alice) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("close_issue", {"number": 1})
        return str(refused.value)

    assert "insufficient_scope" in run(by_the_sdk())


def test_the_scope_held_runs_the_tool(jwt_server: Served, issuer: Issuer) -> None:
    """The same call with the scope: the tool runs."""

    async def scenario() -> Any:
        async with client_of(jwt_server.url, issuer.token(scope="repo:write")) as client:
            return await client.call_tool("close_issue", {"number": 3})

    assert run(scenario()).structured_content == {"result": "closed 3"}


@pytest.fixture(scope="module")
def hanging_keys(tools_file: Path, issuer: Issuer) -> Iterator[tuple[Served, Issuer]]:
    """A server on every interface whose JWKS never answers (a second issuer's)."""
    with issuer_running() as stalled:
        stalled.jwks_mode = "hang"
        with serving(
            tools_file,
            "--host",
            "0.0.0.0",
            "--auth",
            "jwt",
            "--issuer",
            stalled.url,
            "--audience",
            AUDIENCE,
            "--jwks-url",
            stalled.jwks_url,
            "--resource-url",
            "https://tools.example.test/mcp",
        ) as served:
            yield served, stalled


def test_auth_serves_every_interface_without_the_flag(
    hanging_keys: tuple[Served, Issuer],
) -> None:
    """A host that is not loopback needs no ``--allow-unauthenticated`` with ``--auth``,
    and nothing says the server is open; the metadata names the resource URL given."""
    served, _ = hanging_keys
    assert "without authentication" not in served.stderr()
    metadata = httpx.get(served.metadata_url, timeout=SCENARIO_TIMEOUT).json()
    assert metadata["resource"] == "https://tools.example.test/mcp"


def test_a_jwks_that_never_answers_is_a_401_not_a_hang(
    hanging_keys: tuple[Served, Issuer],
) -> None:
    """The fetch of the keys is bounded: the request is refused once it gives up, with one
    WARNING saying why, and no token in it."""
    served, stalled = hanging_keys
    token = stalled.token()
    answered = post(served, INITIALIZE, f"Bearer {token}")
    assert answered.status_code == 401
    assert (
        'resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp"'
        in (answered.headers["www-authenticate"])
    )
    said = "the signing keys cannot be read within 5 s"
    stderr = served.stderr_once(said)
    assert said in stderr
    assert token not in stderr


# -- introspection ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def authorization_server() -> Iterator[AuthorizationServerOnLoopback]:
    with AuthorizationServerOnLoopback(AUDIENCE) as running:
        yield running


@pytest.fixture(scope="module")
def introspecting(
    tools_file: Path, authorization_server: AuthorizationServerOnLoopback
) -> Iterator[Served]:
    server = authorization_server
    with serving(
        tools_file,
        "--auth",
        "introspection",
        "--introspection-url",
        server.introspection_url,
        "--issuer",
        server.url,
        "--audience",
        AUDIENCE,
        env={CLIENT_ID_VARIABLE: RESOURCE_CLIENT[0], CLIENT_SECRET_VARIABLE: RESOURCE_CLIENT[1]},
    ) as served:
        yield served


def test_introspection_makes_the_caller_the_tokens_user(
    introspecting: Served, authorization_server: AuthorizationServerOnLoopback
) -> None:
    """A token the authorization server issued works until it is revoked; then 401."""
    token = authorization_server.token_for("alice", "tools:read repo:write")
    tools, whoami = run(session(introspecting.url, token))
    assert tools == ["close_issue", "whoami"]
    assert whoami == {"user": "alice", "scopes": ["repo:write", "tools:read"], "email": None}
    authorization_server.revoke(token)
    assert_challenged(post(introspecting, INITIALIZE, f"Bearer {token}"), introspecting)
    assert token not in introspecting.stderr()


@pytest.mark.parametrize("mode", ["html", "500"])
def test_an_introspection_endpoint_in_trouble_is_a_401(
    introspecting: Served, authorization_server: AuthorizationServerOnLoopback, mode: str
) -> None:
    """HTML or a 500 from the introspection endpoint: 401, and the server goes on."""
    token = authorization_server.token_for("bob")
    authorization_server.mode = mode  # type: ignore[assignment]
    try:
        assert_challenged(post(introspecting, INITIALIZE, f"Bearer {token}"), introspecting)
    finally:
        authorization_server.mode = "ok"
    assert post(introspecting, INITIALIZE, f"Bearer {token}").status_code == 200
    assert RESOURCE_CLIENT[1] not in introspecting.stderr()


# -- the command's options ----------------------------------------------------------------------

USAGE_ERRORS = [
    pytest.param(
        ["--http", "--auth", "jwt", "--audience", AUDIENCE], "needs --issuer", id="no-issuer"
    ),
    pytest.param(
        ["--http", "--auth", "jwt", "--issuer", "https://a.test"], "needs --audience", id="no-aud"
    ),
    pytest.param(
        ["--auth", "jwt", "--issuer", "https://a.test", "--audience", AUDIENCE],
        "serve with --http",
        id="stdio",
    ),
    pytest.param(
        ["--http", "--auth", "jwt", "--issuer", "http://a.test", "--audience", AUDIENCE],
        "--issuer must be https",
        id="http-issuer",
    ),
    pytest.param(
        [
            "--http",
            "--auth",
            "jwt",
            "--issuer",
            "https://a.test",
            "--audience",
            AUDIENCE,
            "--jwks-url",
            "http://a.test/jwks",
        ],
        "--jwks-url must be https",
        id="http-jwks",
    ),
    pytest.param(
        ["--http", "--auth", "introspection", "--issuer", "https://a.test"],
        "needs --introspection-url",
        id="no-introspection-url",
    ),
    pytest.param(
        [
            "--http",
            "--auth",
            "introspection",
            "--issuer",
            "https://a.test",
            "--introspection-url",
            "https://a.test/introspect",
        ],
        f"set {CLIENT_ID_VARIABLE} and {CLIENT_SECRET_VARIABLE}",
        id="no-client-credentials",
    ),
    pytest.param(["--http", "--issuer", "https://a.test"], "go with --auth", id="no-auth"),
]


@pytest.mark.parametrize(("options", "said"), USAGE_ERRORS)
def test_authentication_that_cannot_hold_is_a_usage_error(
    tools_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    options: list[str],
    said: str,
) -> None:
    """Status 2 before anything is loaded, saying what is missing or unsafe."""
    monkeypatch.delenv(CLIENT_ID_VARIABLE, raising=False)
    monkeypatch.delenv(CLIENT_SECRET_VARIABLE, raising=False)
    with pytest.raises(SystemExit) as exited:
        main(["serve", str(tools_file), "--port", str(free_port()), *options])
    assert exited.value.code == 2
    assert said in " ".join(capsys.readouterr().err.split())


def test_a_tool_no_caller_can_call_is_said_at_start(tools_file: Path) -> None:
    """Without ``--auth`` (stdio here), a tool that needs scopes is never listed: the
    operator is told at start."""
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "serve", str(tools_file)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT,
        check=False,
        cwd=tools_file.parent,
    )
    assert done.returncode == 0
    assert (
        "tdk serve: close_issue needs the scopes repo:write, which no caller holds without "
        "--http --auth: it is not listed"
    ) in " ".join(done.stderr.split())
