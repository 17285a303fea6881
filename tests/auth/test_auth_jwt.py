"""``tdk.auth.JWTVerifier`` against a real issuer on loopback: its keys (RSA and EC) published
in a JWKS found from its metadata, tokens signed with them, forged ones, and a JWKS that
misbehaves. Every refusal is None (the SDK then answers 401), never an exception, never a
hang, and never the token in a log line."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

import pytest
from _auth_issuer import AUDIENCE, Issuer, issuer_running
from _mcp_support import free_port
from mcp.server.auth.provider import AccessToken

import tdk.auth
from tdk.auth import JWTVerifier

#: Bound of one scenario, in seconds (each takes well under one; a hang takes the fetch
#: timeout the verifier is given).
SCENARIO = 30.0


@pytest.fixture
def issuer() -> Issuer:
    with issuer_running() as running:
        yield running


async def verify(verifier: JWTVerifier, token: str) -> AccessToken | None:
    return await asyncio.wait_for(verifier.verify_token(token), SCENARIO)


def check(issuer: Issuer, token: str, **options: object) -> AccessToken | None:
    """``token`` verified by a verifier of ``issuer`` for :data:`AUDIENCE`."""

    async def scenario() -> AccessToken | None:
        async with JWTVerifier(issuer=issuer.url, audience=AUDIENCE, **options) as verifier:  # type: ignore[arg-type]
            return await verify(verifier, token)

    return asyncio.run(scenario())


@pytest.mark.parametrize(
    ("kid", "where"),
    [
        ("rsa-1", "jwks-url"),
        ("ec-1", "jwks-url"),
        ("rsa-1", "oauth"),
        ("ec-1", "openid"),
    ],
    ids=["rsa-given-jwks", "ec-given-jwks", "rsa-rfc8414-metadata", "ec-openid-metadata"],
)
def test_a_token_signed_by_the_issuer_is_accepted(issuer: Issuer, kid: str, where: str) -> None:
    """RSA and EC tokens verify with keys read from the JWKS URL given, or found from the
    issuer's metadata at RFC 8414's path or OpenID Connect's; ``sub``, scopes and claims
    are those of the token."""
    if where != "jwks-url":
        issuer.metadata_at = "oauth" if where == "oauth" else "openid"
    options = {"jwks_url": issuer.jwks_url} if where == "jwks-url" else {}
    token = issuer.token(kid, scope="tools:read repo:write")
    found = check(issuer, token, **options)
    assert found is not None
    assert (found.subject, found.client_id, found.scopes) == (
        "alice",
        "mcp-client",
        ["repo:write", "tools:read"],
    )
    assert found.claims is not None
    assert found.claims["email"] == "alice@example.test"
    assert found.expires_at == found.claims["exp"]


#: Tokens that must be refused, each made from a running issuer.
BAD_TOKENS: list[object] = [
    pytest.param(lambda i: i.token(exp=int(time.time()) - 3600), id="expired"),
    pytest.param(lambda i: i.token(nbf=int(time.time()) + 3600), id="nbf-in-the-future"),
    pytest.param(lambda i: i.token(iat=int(time.time()) + 3600), id="iat-in-the-future"),
    pytest.param(lambda i: i.token(exp=None), id="no-exp"),
    pytest.param(lambda i: i.token(exp=str(int(time.time()) + 3600)), id="exp-a-numeric-string"),
    pytest.param(lambda i: i.token(iat=str(int(time.time()))), id="iat-a-numeric-string"),
    pytest.param(lambda i: i.token(iss="https://evil.example.test"), id="wrong-issuer"),
    pytest.param(lambda i: i.token(iss=None), id="no-issuer"),
    pytest.param(lambda i: i.token(aud="https://other.example.test/mcp"), id="wrong-audience"),
    pytest.param(lambda i: i.token(aud=None), id="no-audience"),
    pytest.param(lambda i: i.unsigned(), id="alg-none"),
    pytest.param(lambda i: i.hs256_with_public_key(), id="hs256-with-the-public-key"),
    pytest.param(lambda i: i.signed_by_stranger(), id="signed-by-another-key"),
    pytest.param(lambda i: i.tampered(), id="payload-changed-after-signing"),
    pytest.param(lambda i: i.token("ec-1", header={"kid": "rsa-1"}), id="ec-signature-rsa-kid"),
    pytest.param(lambda i: i.token(header={"kid": "unknown"}), id="unknown-kid"),
    pytest.param(lambda i: i.token("weak-1"), id="rsa-1024-key"),
    pytest.param(lambda i: i.token(sub=42), id="sub-not-a-string"),
    pytest.param(lambda i: i.token(scope=["a", 7]), id="scopes-not-strings"),
    pytest.param(lambda i: "not-a-jwt", id="not-a-jwt"),
    pytest.param(lambda i: "a.b.c", id="three-garbage-segments"),
    pytest.param(lambda i: "", id="empty"),
    pytest.param(lambda i: i.token() + "x" * 20_000, id="too-long"),
]


@pytest.mark.parametrize("make", BAD_TOKENS)
def test_a_bad_token_is_refused_and_never_logged(
    issuer: Issuer, make: Callable[[Issuer], str], caplog: pytest.LogCaptureFixture
) -> None:
    """Each forged, stale or foreign token is None, with a reason logged in tdk's words:
    the log never holds the token, nor its signature."""
    token = make(issuer)
    with caplog.at_level(logging.DEBUG):
        assert check(issuer, token, jwks_url=issuer.jwks_url) is None
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "a bearer token was refused" in logged
    for part in [token, *token.split(".")]:
        assert len(part) < 8 or part not in logged


#: A JWKS endpoint that misbehaves, and the reason logged.
BROKEN_JWKS = [
    pytest.param("down", "HTTP 503", id="503"),
    pytest.param("html", "text/html, not JSON", id="html"),
    pytest.param("garbage", "not JSON", id="garbage"),
    pytest.param("not-a-set", "no public signing key", id="symmetric-keys-only"),
    pytest.param("huge", "larger than", id="too-large"),
    pytest.param("streamed-huge", "larger than", id="too-large-without-length"),
    pytest.param("for-encryption", "no public signing key", id="encryption-keys-only"),
    pytest.param("keys-not-a-list", "no public signing key", id="keys-not-a-list"),
    pytest.param("array", "not a JSON object", id="an-array"),
    pytest.param("gzip", "compressed", id="compressed-unasked"),
    pytest.param("hang", "within 1 s", id="hangs"),
]


@pytest.mark.parametrize(("mode", "reason"), BROKEN_JWKS)
def test_a_broken_jwks_refuses_the_token_within_the_timeout(
    issuer: Issuer, mode: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A valid token is refused while the JWKS is down, answers HTML or garbage, holds no
    key tdk may use, is too large or never ends: one WARNING says why, the token nowhere."""
    issuer.jwks_mode = mode  # type: ignore[assignment]
    token = issuer.token()
    with caplog.at_level(logging.DEBUG, logger="tdk.auth"):
        assert check(issuer, token, jwks_url=issuer.jwks_url, timeout=1.0) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert reason in warnings[0]
    assert token not in caplog.text


def test_a_symmetric_key_published_in_the_jwks_signs_nothing(issuer: Issuer) -> None:
    """An ``oct`` key in the JWKS is public knowledge: a token MACed with it is refused,
    while the issuer's own keys still verify."""
    issuer.jwks_mode = "with-oct"
    assert check(issuer, issuer.hs256_with_published_secret(), jwks_url=issuer.jwks_url) is None
    assert check(issuer, issuer.token(), jwks_url=issuer.jwks_url) is not None


def test_a_jwks_nobody_listens_on_refuses_the_token(issuer: Issuer) -> None:
    """Connection refused is a refusal too."""
    closed = f"http://127.0.0.1:{free_port()}/jwks"
    assert check(issuer, issuer.token(), jwks_url=closed) is None


@pytest.mark.parametrize(
    ("metadata_at", "configured", "reason"),
    [
        ("nowhere", "", "HTTP 404"),
        ("oauth", "/", "its issuer is not"),
        ("oauth", "/tenant", "HTTP 404"),
        ("insecure-jwks-uri", "", "no usable jwks_uri"),
    ],
    ids=["no-metadata", "issuer-with-a-slash", "issuer-with-a-path", "jwks-uri-over-http"],
)
def test_keys_are_only_taken_from_the_issuers_own_metadata(
    issuer: Issuer,
    metadata_at: str,
    configured: str,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without a JWKS URL, keys come from metadata whose ``issuer`` is the one configured
    (as a string: a trailing slash is another issuer), at the paths the standards give for
    it, and whose ``jwks_uri`` is https (or loopback)."""
    issuer.metadata_at = metadata_at  # type: ignore[assignment]
    wanted = issuer.url + configured

    async def scenario() -> AccessToken | None:
        async with JWTVerifier(issuer=wanted, audience=AUDIENCE) as verifier:
            return await verify(verifier, issuer.token(iss=wanted))

    with caplog.at_level(logging.WARNING, logger="tdk.auth"):
        assert asyncio.run(scenario()) is None
    assert "no metadata of the issuer found" in caplog.text
    assert reason in caplog.text


def test_keys_come_back_after_an_outage(issuer: Issuer, caplog: pytest.LogCaptureFixture) -> None:
    """A JWKS that answers again is read again: the token refused meanwhile is accepted,
    and the operator is told (one WARNING for the outage, one for its end)."""
    issuer.jwks_mode = "html"

    async def scenario() -> list[AccessToken | None]:
        async with JWTVerifier(
            issuer=issuer.url, audience=AUDIENCE, jwks_url=issuer.jwks_url, refresh_interval=0
        ) as verifier:
            token = issuer.token()
            during = [await verify(verifier, token), await verify(verifier, token)]
            issuer.jwks_mode = "ok"
            return [*during, await verify(verifier, token)]

    with caplog.at_level(logging.WARNING, logger="tdk.auth"):
        assert [found is None for found in asyncio.run(scenario())] == [True, True, False]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert "are read again" in warnings[1]


def test_a_new_key_id_is_fetched_once(issuer: Issuer) -> None:
    """A token naming a key id not held makes the keys be fetched again, once: the rotated
    key verifies; a burst of tokens naming made-up key ids costs one fetch more."""

    async def scenario() -> list[AccessToken | None]:
        async with JWTVerifier(
            issuer=issuer.url, audience=AUDIENCE, jwks_url=issuer.jwks_url, refresh_interval=0
        ) as verifier:
            first = await verify(verifier, issuer.token())
            kid = issuer.rotate()
            rotated = await verify(verifier, issuer.token(kid))
            made_up = [issuer.token(header={"kid": uuid.uuid4().hex}) for _ in range(50)]
            burst = await asyncio.gather(*(verify(verifier, each) for each in made_up))
            return [first, rotated, *burst]

    first, rotated, *burst = asyncio.run(scenario())
    assert first is not None
    assert rotated is not None
    assert burst == [None] * 50
    assert issuer.requests["/jwks"] == 3


def test_made_up_key_ids_do_not_refetch_within_the_interval(issuer: Issuer) -> None:
    """With the default interval, tokens naming made-up key ids right after a fetch cost no
    fetch at all."""

    async def scenario() -> None:
        async with JWTVerifier(
            issuer=issuer.url, audience=AUDIENCE, jwks_url=issuer.jwks_url
        ) as verifier:
            assert await verify(verifier, issuer.token()) is not None
            made_up = [issuer.token(header={"kid": uuid.uuid4().hex}) for _ in range(50)]
            assert await asyncio.gather(*(verify(verifier, t) for t in made_up)) == [None] * 50

    asyncio.run(scenario())
    assert issuer.requests["/jwks"] == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"issuer": "http://auth.example.test", "audience": AUDIENCE}, "must be https"),
        ({"issuer": "ftp://127.0.0.1", "audience": AUDIENCE}, "must be an https URL"),
        ({"issuer": "https://u:p@auth.example.test", "audience": AUDIENCE}, "credentials"),
        ({"issuer": "https://auth.example.test", "audience": ""}, "audience"),
        ({"issuer": "https://auth.example.test", "audience": AUDIENCE, "timeout": 0}, "timeout"),
        (
            {"issuer": "https://auth.example.test", "audience": AUDIENCE, "jwks_url": "http://x"},
            "the JWKS URL must be https",
        ),
    ],
    ids=["http-not-loopback", "not-http", "credentials", "no-audience", "no-timeout", "jwks-http"],
)
def test_a_verifier_that_could_be_fooled_is_refused(
    options: dict[str, object], message: str
) -> None:
    """Keys read over plain HTTP from another machine could be swapped on the way."""
    with pytest.raises(ValueError, match=message):
        JWTVerifier(**options)  # type: ignore[arg-type]


def test_tdk_auth_names_what_it_has() -> None:
    """Its names load on first use; ``dir()`` lists them; another name is an AttributeError."""
    names = {"JWTVerifier", "IntrospectionVerifier", "Caller", "current_caller"}
    assert names <= set(dir(tdk.auth))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tdk.auth.Nope  # noqa: B018


def test_importing_tdk_or_tdk_auth_does_not_import_pyjwt() -> None:
    """PyJWT (the extra) is loaded by the JWT verifier only."""
    code = (
        "import sys, tdk, tdk.auth; from tdk.auth import Caller, IntrospectionVerifier; "
        "print('jwt' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
