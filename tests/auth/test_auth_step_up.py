"""Serving with authentication in this process: ``tdk.hosts.mcp.serve(..., auth=verifier)``
on a free port, spoken to in raw HTTP (every shape of body a client may POST, against the
step-up of a tool's scopes) and by the SDK's client; and ``tdk serve --auth`` run by
``main()`` here, ended by Ctrl-C as from a terminal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any

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
    accepts,
    call_request,
    can_connect,
    free_port,
    run,
)
from mcp.client.streamable_http import streamable_http_client

from tdk import ToolContext, Toolkit, tool
from tdk.__main__ import main
from tdk.auth import CLIENT_ID_VARIABLE, CLIENT_SECRET_VARIABLE, JWTVerifier, current_caller
from tdk.hosts import mcp as tdk_mcp


@tool(read_only=True)
def hello(context: ToolContext) -> str:
    """Say hello to the caller."""
    return f"hello {context.user_id}"


@tool(requires_scopes=["repo:write"])
def close_issue(number: Annotated[int, "The issue."]) -> str:
    """Close an issue."""
    return f"closed {number}"


TOOLKIT = Toolkit("issues", [hello, close_issue])


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with issuer_running() as running:
        yield running


@contextlib.asynccontextmanager
async def serving(issuer: Issuer, **options: Any) -> AsyncIterator[str]:
    """``serve(TOOLKIT, "http", auth=..., **options)`` in a task on a free port; its URL."""
    port = free_port()
    async with JWTVerifier(issuer=issuer.url, audience=AUDIENCE) as verifier:
        serve = tdk_mcp.serve(TOOLKIT, "http", port=port, auth=verifier, **options)
        task = asyncio.create_task(serve)
        try:
            while not await can_connect(port):
                assert not task.done(), task
                await asyncio.sleep(0.02)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def test_serve_takes_a_verifier(issuer: Issuer) -> None:
    """The protection of ``tdk serve --auth`` in process: no token is a 401, a token makes
    the SDK's client's calls the subject's; a verifier for stdio is refused."""

    async def scenario() -> tuple[int, Any]:
        async with JWTVerifier(issuer=issuer.url, audience=AUDIENCE) as verifier:
            with pytest.raises(ValueError, match="transport='http'"):
                await tdk_mcp.serve(TOOLKIT, "stdio", auth=verifier)
        async with serving(issuer) as url:
            async with httpx.AsyncClient() as raw:
                refused = await raw.post(url, json=INITIALIZE, headers=RAW_HEADERS)
            headers = {"Authorization": f"Bearer {issuer.token()}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=SCENARIO_TIMEOUT) as http,
                mcp.Client(streamable_http_client(url, http_client=http)) as client,
            ):
                called = await client.call_tool("hello", {})
        return refused.status_code, called.structured_content

    assert run(scenario()) == (401, {"result": "hello alice"})


def _app_context() -> ToolContext:
    """An application's context function: its own user id for the verified caller."""
    caller = current_caller()
    assert caller is not None
    return ToolContext(user_id=f"app-{caller.subject}", metadata={"client": caller.client_id})


def test_a_context_of_the_application_keeps_its_user_id(issuer: Issuer) -> None:
    """A context function reads the verified caller (``tdk.auth.current_caller()``); the
    ``user_id`` it sets is kept, the scopes and claims it leaves empty are the token's."""

    @tool(read_only=True)
    def who(context: ToolContext) -> dict[str, Any]:
        """Who calls, and how."""
        return {
            "user": context.user_id,
            "client": context.metadata["client"],
            "scopes": sorted(context.scopes),
            "sub": context.claims["sub"],
        }

    async def scenario() -> Any:
        port = free_port()
        async with JWTVerifier(issuer=issuer.url, audience=AUDIENCE) as verifier:
            serve = tdk_mcp.serve([who], "http", port=port, auth=verifier, context=_app_context)
            task = asyncio.create_task(serve)
            try:
                while not await can_connect(port):
                    await asyncio.sleep(0.02)
                url = f"http://127.0.0.1:{port}/mcp"
                headers = {"Authorization": f"Bearer {issuer.token()}"}
                async with (
                    httpx2.AsyncClient(headers=headers, timeout=SCENARIO_TIMEOUT) as http,
                    mcp.Client(streamable_http_client(url, http_client=http)) as client,
                ):
                    return (await client.call_tool("who", {})).structured_content
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    assert run(scenario()) == {
        "user": "app-alice",
        "client": "mcp-client",
        "scopes": ["tools:read"],
        "sub": "alice",
    }


@pytest.mark.parametrize(
    ("host", "status"),
    [("tools.example.test", 200), ("127.0.0.1", 200), ("evil.example.test", 421)],
    ids=["the-resource-url", "the-address-served", "another-name"],
)
def test_the_resource_urls_name_is_a_name_of_the_server(
    issuer: Issuer, host: str, status: int
) -> None:
    """Behind a proxy that keeps the ``Host`` its clients send, the name of
    ``resource_url`` passes the DNS-rebinding check; another name still does not."""

    async def scenario() -> int:
        async with (
            serving(issuer, resource_url="https://tools.example.test/mcp") as url,
            httpx.AsyncClient(timeout=SCENARIO_TIMEOUT) as raw,
        ):
            headers = {**RAW_HEADERS, "Authorization": f"Bearer {issuer.token()}", "Host": host}
            return (await raw.post(url, json=INITIALIZE, headers=headers)).status_code

    assert run(scenario()) == status


def _call(name: str, **options: Any) -> bytes:
    return json.dumps(call_request(1, name, {"number": 1}) | options).encode()


#: Bodies a client may POST with a token that lacks ``repo:write``, and the status each gets
#: (403: the step-up; another: the SDK's own answer, the middleware stepped aside).
BODIES = [
    pytest.param(_call("close_issue"), 403, id="call-without-the-scope"),
    pytest.param(_call("CLOSE_ISSUE"), 403, id="call-in-another-case"),
    pytest.param(
        json.dumps([INITIALIZE, call_request(2, "close_issue", {})]).encode(), 403, id="batch"
    ),
    pytest.param(_call("no_such_tool"), 400, id="unknown-tool-outside-a-session"),
    pytest.param(_call("hello"), 400, id="tool-without-scopes-outside-a-session"),
    pytest.param(b'{"jsonrpc": "2.0", "method": "tools/call", "params": [1]', 400, id="not-json"),
    pytest.param(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1]}).encode(),
        400,
        id="params-not-an-object",
    ),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, 400, id="nested-too-deep"),
    pytest.param(_call("close_issue") + b" " * (4 * 1024 * 1024), 413, id="too-large"),
]


@pytest.mark.parametrize(("body", "status"), BODIES)
def test_the_step_up_reads_only_what_it_must(issuer: Issuer, body: bytes, status: int) -> None:
    """A ``tools/call`` of a tool whose scope the token lacks is a 403 whatever its case, in
    a batch too; any other body (no such tool, not JSON, nested too deep, too large) goes to
    the SDK as it came."""
    token = issuer.token(scope="tools:read")

    async def scenario() -> httpx.Response:
        async with serving(issuer) as url, httpx.AsyncClient(timeout=SCENARIO_TIMEOUT) as raw:
            headers = {**RAW_HEADERS, "Authorization": f"Bearer {token}"}
            return await raw.post(url, content=body, headers=headers)

    answered = run(scenario())
    assert answered.status_code == status
    if status == 403:
        challenge = answered.headers["www-authenticate"]
        assert 'error="insufficient_scope", scope="repo:write"' in challenge
        assert "the tool 'close_issue' needs the scopes: repo:write" in challenge
        assert answered.json()["error"]["data"] == {
            "error": "insufficient_scope",
            "scope": "repo:write",
        }


def test_the_step_up_lets_the_scope_through(issuer: Issuer) -> None:
    """With the scope, a call of the tool in a session of the SDK's client runs it."""

    async def scenario() -> Any:
        async with serving(issuer) as url:
            headers = {"Authorization": f"Bearer {issuer.token(scope='repo:write')}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=SCENARIO_TIMEOUT) as http,
                mcp.Client(streamable_http_client(url, http_client=http)) as client,
            ):
                listed = await client.list_tools()
                called = await client.call_tool("close_issue", {"number": 4})
        return sorted(each.name for each in listed.tools), called.structured_content

    assert run(scenario()) == (["close_issue", "hello"], {"result": "closed 4"})


# -- the command, in this process ---------------------------------------------------------------

TOOLS = '''
from tdk import ToolContext, tool


@tool(read_only=True)
def hello(context: ToolContext) -> str:
    """Say hello to the caller."""
    return f"hello {context.user_id}"
'''


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auth-in-process") / "auth_in_process_tools.py"
    path.write_text(TOOLS.lstrip())
    return path


def _hello_then_interrupt(port: int, token: str, said: list[object]) -> None:
    """Once ``port`` accepts: ``hello`` with ``token`` and without, then Ctrl-C to this
    process (whatever happened: the command must end)."""
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not accepts(port) and time.monotonic() < deadline:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port}/mcp"
        said.append(httpx.post(url, json=INITIALIZE, headers=RAW_HEADERS, timeout=30).status_code)

        async def hello_over_mcp() -> Any:
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=SCENARIO_TIMEOUT) as http,
                mcp.Client(streamable_http_client(url, http_client=http)) as client,
            ):
                return (await client.call_tool("hello", {})).structured_content

        said.append(run(hello_over_mcp()))
    finally:
        os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("auth", ["jwt", "introspection"])
def test_tdk_serve_with_auth_in_this_process(
    tools_file: Path, issuer: Issuer, monkeypatch: pytest.MonkeyPatch, auth: str
) -> None:
    """``main(["serve", ..., "--auth", ...])``: a request without a token is a 401, the
    bearer of one is its subject; Ctrl-C ends it (130), the verifier's connections closed."""
    port = free_port()
    said: list[object] = []
    with contextlib.ExitStack() as stack:
        if auth == "jwt":
            token = issuer.token()
            options = ["--issuer", issuer.url, "--audience", AUDIENCE]
        else:
            server = stack.enter_context(AuthorizationServerOnLoopback(AUDIENCE))
            token = server.token_for("alice")
            options = ["--issuer", server.url, "--introspection-url", server.introspection_url]
            monkeypatch.setenv(CLIENT_ID_VARIABLE, RESOURCE_CLIENT[0])
            monkeypatch.setenv(CLIENT_SECRET_VARIABLE, RESOURCE_CLIENT[1])
        client = threading.Thread(target=_hello_then_interrupt, args=(port, token, said))
        client.start()
        try:
            argv = ["serve", str(tools_file), "--http", "--port", str(port), "--auth", auth]
            status = main([*argv, *options])
        finally:
            client.join(SCENARIO_TIMEOUT)
    assert (status, said) == (130, [401, {"result": "hello alice"}])
