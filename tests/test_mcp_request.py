"""The request record of context functions (``tdk.hosts.mcp.CallRequest``): headers over HTTP,
the token the SDK's bearer authentication verified, the call's ``_meta`` and the client, in
both protocol eras, in process and over streamable HTTP with the SDK's own client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import mcp
import pytest
from _mcp_live import connected, serving, serving_app
from _mcp_support import HOST, run
from mcp import types
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

from tdk import ToolContext, Toolkit, tool
from tdk.hosts import mcp as tdk_mcp
from tdk.hosts.mcp import CallRequest, ClientInfo

#: The two protocol eras of the SDK's client: 2026-07-28 (``auto`` finds it) and the 2025
#: handshake.
MODES = ["auto", "legacy"]
CLIENT = types.Implementation(name="probe-client", version="3.1.4")
TOKEN = "opaque-token-5b0c7e1d9a2f"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "X-Tenant": "acme"}


@tool(read_only=True)
def whoami(context: ToolContext) -> dict[str, Any]:
    """Who the call is for, and what its context says."""
    return {"user": context.user_id, "metadata": dict(context.metadata)}


def seen_by(records: list[CallRequest]) -> Callable[[CallRequest], ToolContext]:
    """A context function of one argument that notes each request it is given."""

    def context(request: CallRequest) -> ToolContext:
        records.append(request)
        tenant = (request.headers or {}).get("x-tenant", "none")
        return ToolContext(user_id="from-request", metadata={"tenant": tenant})

    return context


@pytest.mark.parametrize("mode", MODES)
def test_in_process_the_record_has_meta_and_client(mode: str) -> None:
    """In process (no HTTP): no headers, no auth; the call's ``_meta`` and the client's name
    and version as it gave them."""
    records: list[CallRequest] = []
    server = tdk_mcp.server(Toolkit("records", [whoami]), context=seen_by(records))

    async def scenario() -> types.CallToolResult:
        async with mcp.Client(server, mode=mode, client_info=CLIENT) as client:  # type: ignore[arg-type]
            return await client.call_tool("whoami", {}, meta={"trace": "t-1", "n": 2})

    answered = run(scenario())
    assert answered.structured_content == {
        "user": "from-request",
        "metadata": {"tenant": "none"},
    }
    [record] = records
    assert record.headers is None
    assert record.auth is None
    assert record.client == ClientInfo("probe-client", "3.1.4")
    assert {"trace": "t-1", "n": 2}.items() <= record.meta.items()
    with pytest.raises(TypeError):
        record.meta["trace"] = "changed"  # type: ignore[index]


@pytest.mark.parametrize("mode", MODES)
def test_over_http_the_record_has_the_headers(mode: str) -> None:
    """Over streamable HTTP the record holds the request's headers (names in lower case,
    read-only), and the context function may use them."""
    records: list[CallRequest] = []
    server = tdk_mcp.server(Toolkit("records", [whoami]), context=seen_by(records))

    async def scenario() -> types.CallToolResult:
        async with (
            serving(server) as url,
            connected(url, headers={"X-Tenant": "acme"}, mode=mode, client_info=CLIENT) as client,
        ):
            return await client.call_tool("whoami", {}, meta={"trace": "t-2"})

    answered = run(scenario())
    assert answered.structured_content == {
        "user": "from-request",
        "metadata": {"tenant": "acme"},
    }
    [record] = records
    assert record.headers is not None
    assert record.headers["x-tenant"] == "acme"
    assert record.headers["host"].startswith(HOST)
    assert record.client == ClientInfo("probe-client", "3.1.4")
    assert record.meta["trace"] == "t-2"
    with pytest.raises(TypeError):
        record.headers["x-tenant"] = "other"  # type: ignore[index]


CONTEXTS: list[Any] = [
    pytest.param(lambda: ToolContext(user_id="no-argument"), "no-argument", id="no-argument"),
    pytest.param(lambda request: ToolContext(user_id="one-argument"), "one-argument", id="one"),
    pytest.param(lambda *args: ToolContext(user_id=str(len(args))), "1", id="star-args"),
]


@pytest.mark.parametrize(("context", "user"), CONTEXTS)
def test_a_context_function_of_no_argument_keeps_working(context: Any, user: str) -> None:
    """A context function without a parameter is called without the record, as before; one
    that takes an argument gets it."""
    server = tdk_mcp.server(Toolkit("records", [whoami]), context=context)

    async def scenario() -> Any:
        async with mcp.Client(server) as client:
            return (await client.call_tool("whoami", {})).structured_content

    assert run(scenario())["user"] == user


def test_an_async_context_function_gets_the_record() -> None:
    """An ``async def`` context function of one argument is awaited with the record."""

    async def context(request: CallRequest) -> ToolContext:
        assert request.client is not None
        return ToolContext(user_id=request.client.name)

    server = tdk_mcp.server(Toolkit("records", [whoami]), context=context)

    async def scenario() -> Any:
        async with mcp.Client(server, client_info=CLIENT) as client:
            return (await client.call_tool("whoami", {})).structured_content

    assert run(scenario())["user"] == "probe-client"


def test_a_context_that_is_neither_is_refused_at_once() -> None:
    """``context=`` that is no ``ToolContext`` and cannot be called: a ``TypeError`` when the
    server is made, not a failure of every call."""
    with pytest.raises(TypeError, match="context= takes a ToolContext or a function"):
        tdk_mcp.server(Toolkit("records", [whoami]), context="user-1")  # type: ignore[arg-type]


class Verifier:
    """The SDK's ``TokenVerifier``: one token is good, for the subject ``u-7``."""

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != TOKEN:
            return None
        return AccessToken(
            token=token, client_id="host-app", scopes=["tools"], subject="u-7", claims={}
        )


def authenticated(context: Any, scenario: Callable[[mcp.Client], Awaitable[Any]], mode: str) -> Any:
    """``scenario(client)`` against a server with ``context=context`` behind the SDK's bearer
    authentication, the client sending the good token (and a tenant)."""
    server = tdk_mcp.server(Toolkit("authed", [whoami]), context=context)
    settings = AuthSettings(
        issuer_url="https://issuer.example",
        resource_server_url=f"http://{HOST}/mcp",
        validate_token_resource=False,
    )

    async def body() -> Any:
        app = server.streamable_http_app(
            host=HOST,
            auth=settings,
            token_verifier=Verifier(),
            transport_security=None,
        )
        async with (
            serving_app(app) as url,
            connected(url, headers=HEADERS, mode=mode) as client,
        ):
            return await scenario(client)

    return run(body())


@pytest.mark.parametrize("mode", MODES)
def test_the_record_has_the_verified_token(mode: str) -> None:
    """Behind the SDK's bearer authentication, ``auth`` is the token it verified (its
    subject and scopes); the record's ``repr()`` shows neither the token nor header values."""
    records: list[CallRequest] = []

    async def scenario(client: mcp.Client) -> Any:
        return (await client.call_tool("whoami", {})).structured_content

    assert authenticated(seen_by(records), scenario, mode)["user"] == "from-request"
    [record] = records
    assert record.auth is not None
    assert (record.auth.subject, record.auth.scopes) == ("u-7", ["tools"])
    assert TOKEN not in repr(record)
    assert "'authorization'" in repr(record)
    assert "acme" not in repr(record)


CONTEXTS_GIVEN_ONCE = [
    pytest.param(None, "u-7", id="none"),
    pytest.param(ToolContext(secrets={"KEY": "k" * 20}), "u-7", id="secrets-only"),
    pytest.param(ToolContext(user_id="fixed"), "fixed", id="own-user-kept"),
]


@pytest.mark.parametrize(("context", "user"), CONTEXTS_GIVEN_ONCE)
def test_a_verified_subject_is_the_user_of_a_context_given_once(
    context: ToolContext | None, user: str
) -> None:
    """The default of ``tdk serve`` (a context given once, from the environment): a verified
    token's subject is the call's ``user_id``, unless the context names its own."""

    async def scenario(client: mcp.Client) -> Any:
        return (await client.call_tool("whoami", {})).structured_content

    assert authenticated(context, scenario, "auto")["user"] == user
