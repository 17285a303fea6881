"""``tdk.auth.IntrospectionVerifier`` against a real OAuth 2.0 authorization server on
loopback (authlib: tokens issued by its token endpoint, introspected by its RFC 7662
endpoint, revoked by its RFC 7009 one), and against an endpoint that misbehaves."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest
from _auth_server import RESOURCE_CLIENT, AuthorizationServerOnLoopback
from mcp.server.auth.provider import AccessToken

from tdk.auth import CLIENT_ID_VARIABLE, CLIENT_SECRET_VARIABLE, IntrospectionVerifier

AUDIENCE = "https://tools.example.test/mcp"
#: Bound of one scenario, in seconds.
SCENARIO = 30.0


@pytest.fixture
def server() -> Iterator[AuthorizationServerOnLoopback]:
    with AuthorizationServerOnLoopback(AUDIENCE) as running:
        yield running


def check(
    server: AuthorizationServerOnLoopback,
    token: str,
    *,
    secret: str = RESOURCE_CLIENT[1],
    **options: object,
) -> AccessToken | None:
    """``token`` verified by introspection at ``server``."""

    async def scenario() -> AccessToken | None:
        async with IntrospectionVerifier(
            server.introspection_url,
            issuer=options.pop("issuer", server.url),  # type: ignore[arg-type]
            client_id=RESOURCE_CLIENT[0],
            client_secret=secret,
            **options,  # type: ignore[arg-type]
        ) as verifier:
            return await asyncio.wait_for(verifier.verify_token(token), SCENARIO)

    return asyncio.run(scenario())


def test_an_active_token_is_the_users(server: AuthorizationServerOnLoopback) -> None:
    """A token the server issued is accepted: its ``sub``, scopes and claims are what the
    introspection answer says."""
    token = server.token_for("alice", "tools:read repo:write")
    found = check(server, token, audience=AUDIENCE)
    assert found is not None
    assert (found.subject, found.client_id, found.scopes) == (
        "alice",
        "mcp-client",
        ["repo:write", "tools:read"],
    )
    assert found.claims is not None
    assert found.claims["username"] == "alice"


def test_a_revoked_or_unknown_token_is_refused(server: AuthorizationServerOnLoopback) -> None:
    """The server says a revoked token, or one it never issued, is not active."""
    token = server.token_for("bob")
    server.revoke(token)
    assert check(server, token) is None
    assert check(server, "never-issued-by-it") is None


def test_an_expired_token_is_refused(server: AuthorizationServerOnLoopback) -> None:
    """A token past its lifetime is not active."""
    token = server.token_for("alice")
    server.store.tokens[token].issued_at = int(time.time()) - 10**7
    assert check(server, token) is None


@pytest.mark.parametrize(
    "options",
    [{"audience": "https://other.example.test/mcp"}, {"issuer": "https://other.example.test"}],
    ids=["other-audience", "other-issuer"],
)
def test_a_token_for_another_resource_or_of_another_issuer_is_refused(
    server: AuthorizationServerOnLoopback, options: dict[str, object]
) -> None:
    """Active at the server, but not for this resource server: refused."""
    assert check(server, server.token_for("alice"), **options) is None


#: What an introspection answer may say of an active token that makes it no good here.
CONTRADICTIONS = [
    pytest.param({"active": "true"}, "not active", id="active-not-true"),
    pytest.param({"exp": int(time.time()) - 3600}, "expired", id="expired"),
    pytest.param({"exp": "soon"}, "expired", id="exp-malformed"),
    pytest.param({"nbf": int(time.time()) + 3600}, "not valid yet", id="nbf-in-the-future"),
    pytest.param({"iat": "later"}, "not valid yet", id="iat-malformed"),
    pytest.param({"aud": ["https://a.test", "https://b.test"]}, "audience", id="other-audiences"),
    pytest.param({"aud": None}, "audience", id="no-audience"),
    pytest.param({"token_type": "refresh_token"}, "refresh token", id="a-refresh-token"),
    pytest.param({"sub": 42}, "malformed", id="sub-not-a-string"),
    pytest.param({"scope": ["tools:read", 7]}, "malformed", id="scopes-not-strings"),
]


@pytest.mark.parametrize(("answer", "reason"), CONTRADICTIONS)
def test_an_answer_that_contradicts_the_token_refuses_it(
    server: AuthorizationServerOnLoopback,
    answer: dict[str, object],
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Whatever the answer says against the token (or says malformed) refuses it, with the
    reason logged and never the token."""
    token = server.token_for("alice")
    server.store.tokens[token].extra = answer
    with caplog.at_level(logging.INFO, logger="tdk.auth"):
        assert check(server, token, audience=AUDIENCE) is None
    assert reason in caplog.text
    assert token not in caplog.text


def test_the_endpoint_answering_again_is_said(
    server: AuthorizationServerOnLoopback, caplog: pytest.LogCaptureFixture
) -> None:
    """One WARNING when the endpoint stops answering, one when it answers again; the token
    is refused meanwhile and accepted after."""
    token = server.token_for("alice")

    async def scenario() -> list[bool]:
        async with IntrospectionVerifier(
            server.introspection_url,
            issuer=server.url,
            client_id=RESOURCE_CLIENT[0],
            client_secret=RESOURCE_CLIENT[1],
        ) as verifier:
            server.mode = "500"
            during = [await verifier.verify_token(token) is None for _ in range(3)]
            server.mode = "ok"
            return [*during, await verifier.verify_token(token) is None]

    with caplog.at_level(logging.WARNING, logger="tdk.auth"):
        assert asyncio.run(scenario()) == [True, True, True, False]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "answers again" in warnings[1]


#: An introspection endpoint that does not answer JSON, and what the WARNING says.
BROKEN = [
    pytest.param("html", "text/html, not JSON", id="html"),
    pytest.param("500", "HTTP 500", id="500"),
    pytest.param("hang", "within 1 s", id="hangs"),
    pytest.param("wrong-secret", "HTTP 401", id="wrong-client-secret"),
]


@pytest.mark.parametrize(("mode", "reason"), BROKEN)
def test_an_endpoint_without_an_answer_refuses_the_token(
    server: AuthorizationServerOnLoopback,
    mode: str,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """HTML, a 500, a hang (bounded by the timeout) or a refusal of this server's own
    credentials: the token is refused, one WARNING says why, and neither the token nor the
    client secret is logged."""
    token = server.token_for("alice")
    secret = RESOURCE_CLIENT[1]
    if mode == "wrong-secret":
        secret = "not-the-secret"
    else:
        server.mode = mode  # type: ignore[assignment]
    with caplog.at_level(logging.DEBUG, logger="tdk.auth"):
        assert check(server, token, secret=secret, timeout=1.0) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert reason in warnings[0]
    assert token not in caplog.text
    assert secret not in caplog.text


def test_the_credentials_come_from_the_environment(
    server: AuthorizationServerOnLoopback,
) -> None:
    """``from_environment`` reads the two variables, and names those missing."""
    environ = {CLIENT_ID_VARIABLE: RESOURCE_CLIENT[0], CLIENT_SECRET_VARIABLE: RESOURCE_CLIENT[1]}

    async def scenario() -> AccessToken | None:
        made = IntrospectionVerifier.from_environment(
            server.introspection_url, issuer=server.url, environ=environ
        )
        async with made as verifier:
            return await verifier.verify_token(server.token_for("alice"))

    assert asyncio.run(scenario()) is not None
    with pytest.raises(ValueError, match=f"set {CLIENT_SECRET_VARIABLE}$"):
        IntrospectionVerifier.from_environment(
            server.introspection_url,
            issuer=server.url,
            environ={CLIENT_ID_VARIABLE: "x", CLIENT_SECRET_VARIABLE: ""},
        )
