"""The loopback OAuth 2.0 provider the outbound tests act on (``_oauth_provider_server``)
behaves as a real one: the code flow with PKCE required, refresh with rotation, scope on
refresh refused when flagged, revocation, its protected resource, each way its token endpoint
misbehaves, and the process mode. Real HTTP only (httpx against 127.0.0.1)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from _authlib_loopback import HUGE
from _oauth_provider_server import (
    CALLBACK,
    CLIENT,
    CLIENT_ID_SECRET,
    PUBLIC_CLIENT,
    OAuthProviderProcess,
    OAuthProviderServer,
    ProviderEndpoints,
    client_secrets,
    loopback_or_example,
    provider_for,
)
from authlib.oauth2.rfc7636 import create_s256_code_challenge

#: Bound of one request, in seconds (each answers far inside it).
TIMEOUT = 10.0


@pytest.fixture
def provider() -> Iterator[OAuthProviderServer]:
    with OAuthProviderServer() as running:
        yield running


def sign_in(
    provider: ProviderEndpoints, user: str = "alice", **overrides: Any
) -> tuple[dict[str, list[str]], str]:
    """The query the provider redirects ``user``'s browser back with, and the PKCE verifier
    the authorization URL was built for (``overrides``: parameters of that URL)."""
    verifier = secrets.token_urlsafe(48)
    options: dict[str, Any] = {"state": "s-1", "scope": "repo"}
    options["code_challenge"] = create_s256_code_challenge(verifier)
    status, location = provider.browser_sign_in(
        provider.authorization_url(**(options | overrides)), user
    )
    assert status == 302
    assert location is not None
    assert location.startswith(overrides.get("redirect_uri", CALLBACK) + "?")
    return parse_qs(urlsplit(location).query), verifier


def token_request(
    provider: ProviderEndpoints, form: dict[str, str], client: str = "basic"
) -> httpx.Response:
    """A POST to ``/token`` as the confidential client (``basic`` or ``post``), or the
    public one (``public``)."""
    auth = CLIENT if client == "basic" else None
    if client == "post":
        form = form | {"client_id": CLIENT[0], "client_secret": CLIENT[1]}
    elif client == "public":
        form = form | {"client_id": PUBLIC_CLIENT}
    return httpx.post(provider.token_url, data=form, auth=auth, timeout=TIMEOUT)


def exchange(
    provider: ProviderEndpoints, code: str, verifier: str | None, client: str = "basic"
) -> httpx.Response:
    """The code traded for tokens (``verifier=None`` sends none)."""
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": CALLBACK}
    if verifier is not None:
        form["code_verifier"] = verifier
    return token_request(provider, form, client)


def refresh(
    provider: ProviderEndpoints, refresh_token: str, client: str = "basic", **more: str
) -> httpx.Response:
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token} | more
    return token_request(provider, form, client)


def user_of(provider: ProviderEndpoints, access_token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {access_token}"}
    return httpx.get(provider.user_url, headers=headers, timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("client", "auth"),
    [
        ("basic", "client_secret_basic"),
        ("post", "client_secret_post"),
        ("public", "none"),
    ],
    ids=["confidential-basic", "confidential-post", "public-pkce-only"],
)
def test_the_code_flow_with_pkce_issues_tokens_of_the_user(
    provider: OAuthProviderServer, client: str, auth: str
) -> None:
    """The browser comes back with a code and the state; the code and its verifier give
    an access token the resource honours as the user's, and a refresh token."""
    client_id = PUBLIC_CLIENT if client == "public" else CLIENT[0]
    back, verifier = sign_in(provider, "alice", client_id=client_id, scope="repo read:user")
    assert back["state"] == ["s-1"]
    answered = exchange(provider, back["code"][0], verifier, client)
    assert answered.status_code == 200, answered.text
    tokens = answered.json()
    assert tokens["token_type"] == "Bearer"
    assert (tokens["expires_in"], tokens["scope"]) == (3600, "repo read:user")
    assert tokens["refresh_token"]
    seen = user_of(provider, tokens["access_token"])
    assert (seen.status_code, seen.json()) == (200, {"login": "alice"})
    assert seen.headers["X-OAuth-Scopes"] == "repo read:user"
    assert provider.access_token_valid(tokens["access_token"])
    assert provider.grants == {"authorization_code": 1}
    assert provider.last_token_form["code_verifier"] == verifier
    assert provider.last_token_auth == auth
    assert provider.requests["/authorize"] == 1
    assert provider.requests["/token"] == 1


@pytest.mark.parametrize(
    "overrides",
    [
        {"code_challenge": None},
        {"code_challenge_method": "plain"},
        {"code_challenge": "short"},
    ],
    ids=["no-challenge", "plain-method", "malformed-challenge"],
)
def test_an_authorization_without_s256_pkce_is_refused(
    provider: OAuthProviderServer, overrides: dict[str, Any]
) -> None:
    """PKCE S256 is required of every client, the confidential one too: the browser is
    sent back with ``invalid_request`` and the state, and no code."""
    back, _ = sign_in(provider, **overrides)
    assert back["error"] == ["invalid_request"]
    assert back["state"] == ["s-1"]
    assert "code" not in back
    assert not provider.store.codes


@pytest.mark.parametrize(
    ("verifier", "error"),
    [
        (None, "invalid_request"),
        ("w" * 64, "invalid_grant"),
        ("bad verifier!", "invalid_request"),
    ],
    ids=["no-verifier", "wrong-verifier", "malformed-verifier"],
)
def test_a_code_without_its_verifier_is_refused(
    provider: OAuthProviderServer, verifier: str | None, error: str
) -> None:
    back, _ = sign_in(provider)
    answered = exchange(provider, back["code"][0], verifier)
    assert (answered.status_code, answered.json()["error"]) == (400, error)
    assert provider.grants == {}


def test_a_code_is_used_once_and_bound_to_its_redirect_uri(
    provider: OAuthProviderServer,
) -> None:
    back, verifier = sign_in(provider)
    code = back["code"][0]
    elsewhere = {"grant_type": "authorization_code", "code": code, "code_verifier": verifier}
    moved = token_request(provider, elsewhere | {"redirect_uri": "http://127.0.0.1/other"})
    assert (moved.status_code, moved.json()["error"]) == (400, "invalid_grant")
    assert exchange(provider, code, verifier).status_code == 200
    again = exchange(provider, code, verifier)
    assert (again.status_code, again.json()["error"]) == (400, "invalid_grant")
    assert provider.grants == {"authorization_code": 1}


@pytest.mark.parametrize("client", ["wrong-secret", "confidential-without-secret"], ids=str)
def test_the_confidential_client_must_authenticate(
    provider: OAuthProviderServer, client: str
) -> None:
    back, verifier = sign_in(provider)
    form = {"grant_type": "authorization_code", "code": back["code"][0]}
    form |= {"redirect_uri": CALLBACK, "code_verifier": verifier}
    if client == "wrong-secret":
        answered = httpx.post(
            provider.token_url, data=form, auth=(CLIENT[0], "guess"), timeout=TIMEOUT
        )
    else:
        form["client_id"] = CLIENT[0]
        answered = httpx.post(provider.token_url, data=form, timeout=TIMEOUT)
    assert (answered.status_code, answered.json()["error"]) == (401, "invalid_client")
    assert provider.grants == {}


def test_a_redirect_uri_not_registered_is_never_redirected_to() -> None:
    """A registered list is matched exactly; another URI gets a 400 page, no redirect."""
    mine = "http://127.0.0.1:8765/oauth/callback"
    with OAuthProviderServer([mine]) as provider:
        assert provider.callback == mine
        back, _ = sign_in(provider, redirect_uri=mine)
        assert "code" in back
        link = provider.authorization_url(
            code_challenge="c" * 43, redirect_uri="http://127.0.0.1:8765/elsewhere"
        )
        status, location = provider.browser_sign_in(link, "alice")
        assert (status, location) == (400, None)


@pytest.mark.parametrize(
    ("uri", "allowed"),
    [
        ("http://127.0.0.1:9/cb", True),
        ("http://localhost/cb", True),
        ("http://[::1]:80/cb", True),
        ("https://tools.example.com/oauth/callback", True),
        ("https://app.test/cb", True),
        ("http://tools.example.com/cb", False),
        ("https://evil.example.org/cb", False),
        ("http://user:pw@127.0.0.1/cb", False),
        ("http://127.0.0.1/cb#frag", False),
        ("http://127.0.0.1:99999/cb", False),
    ],
    ids=[
        "loopback",
        "localhost",
        "ipv6-loopback",
        "https-example",
        "https-test",
        "http-not-loopback",
        "other-domain",
        "credentials",
        "fragment",
        "bad-port",
    ],
)
def test_the_default_redirect_uris(uri: str, allowed: bool) -> None:
    assert loopback_or_example(uri) is allowed


def test_who_signs_in_and_who_refuses(provider: OAuthProviderServer) -> None:
    """No signed-in user sees the sign-in page; ``login_as`` signs in as the cookie does;
    a user in ``deny`` is sent back with ``access_denied``."""
    link = provider.authorization_url(code_challenge="c" * 43, state="s-2")
    page = httpx.get(link, timeout=TIMEOUT)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    as_bob = httpx.get(f"{link}&login_as=bob", timeout=TIMEOUT)
    assert as_bob.status_code == 302
    assert provider.store.codes.popitem()[1].user == "bob"
    provider.deny.add("mallory")
    status, location = provider.browser_sign_in(link, "mallory")
    back = parse_qs(urlsplit(location or "").query)
    assert (status, back["error"], back["state"]) == (302, ["access_denied"], ["s-2"])
    assert not provider.store.codes


def test_refresh_rotates_and_a_used_refresh_token_is_refused(
    provider: OAuthProviderServer,
) -> None:
    first = provider.tokens_for("alice", "repo gist")
    renewed = refresh(provider, first["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    second = renewed.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    assert second["scope"] == "repo gist"
    assert "scope" not in provider.last_token_form
    assert user_of(provider, second["access_token"]).json() == {"login": "alice"}
    reused = refresh(provider, first["refresh_token"])
    assert (reused.status_code, reused.json()["error"]) == (400, "invalid_grant")
    assert refresh(provider, second["refresh_token"]).status_code == 200
    assert provider.grants == {"authorization_code": 1, "refresh_token": 2}


def test_the_public_client_refreshes_with_its_id_alone(provider: OAuthProviderServer) -> None:
    first = provider.tokens_for("alice", client_id=PUBLIC_CLIENT)
    assert refresh(provider, first["refresh_token"], "public").status_code == 200
    assert provider.last_token_auth == "none"
    other = refresh(provider, first["refresh_token"], "basic")
    assert other.status_code == 400


@pytest.mark.parametrize(
    ("refuse", "scope", "status", "error"),
    [
        (False, "repo", 200, None),
        (False, "repo admin:org", 400, "invalid_scope"),
        (True, "repo", 400, "invalid_scope"),
        (True, None, 200, None),
    ],
    ids=["subset-allowed", "wider-refused", "flagged-refused", "flagged-without-scope"],
)
def test_scope_on_refresh(
    provider: OAuthProviderServer, refuse: bool, scope: str | None, status: int, error: str
) -> None:
    """A refresh may name a subset of the granted scopes, unless the server refuses any
    ``scope`` on refresh (as some real providers do)."""
    provider.refuse_scope_on_refresh = refuse
    first = provider.tokens_for("alice", "repo gist")
    more = {} if scope is None else {"scope": scope}
    answered = refresh(provider, first["refresh_token"], **more)
    assert answered.status_code == status
    assert answered.json().get("error") == error
    assert provider.grants["refresh_token"] == (status == 200)


@pytest.mark.parametrize(
    ("which", "access_dies", "refresh_dies"),
    [("access_token", True, False), ("refresh_token", True, True)],
    ids=["access-token", "refresh-token"],
)
def test_revocation(
    provider: OAuthProviderServer, which: str, access_dies: bool, refresh_dies: bool
) -> None:
    """RFC 7009: a revoked access token is refused by the resource (401 ``invalid_token``);
    revoking the refresh token kills both."""
    tokens = provider.tokens_for("alice")
    revoked = httpx.post(
        provider.revocation_url,
        data={"token": tokens[which], "token_type_hint": which},
        auth=CLIENT,
        timeout=TIMEOUT,
    )
    assert revoked.status_code == 200
    seen = user_of(provider, tokens["access_token"])
    assert seen.status_code == (401 if access_dies else 200)
    assert 'error="invalid_token"' in seen.headers["WWW-Authenticate"]
    assert seen.headers["WWW-Authenticate"].startswith("Bearer ")
    assert provider.access_token_valid(tokens["access_token"]) is not access_dies
    again = refresh(provider, tokens["refresh_token"])
    assert again.status_code == (400 if refresh_dies else 200)


def test_the_user_endpoint_refuses_what_it_does_not_honour(
    provider: OAuthProviderServer,
) -> None:
    unknown = user_of(provider, "never-issued")
    assert unknown.status_code == 401
    assert 'error="invalid_token"' in unknown.headers["WWW-Authenticate"]
    bare = httpx.get(provider.user_url, timeout=TIMEOUT)
    assert bare.status_code == 401
    assert bare.headers["WWW-Authenticate"].lower().startswith("bearer ")


def test_the_server_expires_and_revokes_a_users_tokens(provider: OAuthProviderServer) -> None:
    """``expire_user``: the access token is refused, the refresh token still good;
    ``revoke_user``: both refused; ``expires_in`` sets the lifetime of the next tokens."""
    provider.expires_in = 120
    tokens = provider.tokens_for("alice")
    bob = provider.tokens_for("bob")
    assert tokens["expires_in"] == 120
    provider.expire_user("alice")
    assert user_of(provider, tokens["access_token"]).status_code == 401
    renewed = refresh(provider, tokens["refresh_token"]).json()
    assert provider.access_token_valid(renewed["access_token"])
    provider.revoke_user("alice")
    assert not provider.access_token_valid(renewed["access_token"])
    refused = refresh(provider, renewed["refresh_token"])
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_grant")
    assert provider.access_token_valid(bob["access_token"])
    provider.expires_in = 0
    assert not provider.access_token_valid(provider.tokens_for("bob")["access_token"])


@pytest.mark.parametrize(
    ("scope", "status"), [("repo", 201), ("read:user", 403)], ids=["repo", "without-repo"]
)
def test_a_write_upstream_needs_the_repo_scope(
    provider: OAuthProviderServer, scope: str, status: int
) -> None:
    token = provider.tokens_for("alice", scope)["access_token"]
    created = httpx.post(
        f"{provider.url}/user/repos",
        json={"name": "tdk"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=TIMEOUT,
    )
    assert created.status_code == status
    assert provider.repos_created == ([("alice", "tdk")] if status == 201 else [])


@pytest.mark.parametrize(
    ("mode", "status", "media"),
    [("html", 200, "text/html"), ("500", 500, "application/json")],
    ids=["html", "500"],
)
def test_the_token_endpoint_misbehaves_on_request(
    provider: OAuthProviderServer, mode: Any, status: int, media: str
) -> None:
    tokens = provider.tokens_for("alice")
    provider.token_mode = mode
    answered = refresh(provider, tokens["refresh_token"])
    assert answered.status_code == status
    assert answered.headers["content-type"].startswith(media)
    assert provider.grants == {"authorization_code": 1}
    assert provider.last_token_form["grant_type"] == "refresh_token"


def test_a_hanging_token_endpoint_is_released_on_close() -> None:
    with OAuthProviderServer() as provider:
        provider.token_mode = "hang"
        form = {"grant_type": "refresh_token", "refresh_token": "any"}
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(provider.token_url, data=form, auth=CLIENT, timeout=0.3)
    assert provider.released.is_set()


def test_a_huge_token_answer(provider: OAuthProviderServer) -> None:
    """10 MB announced and sent: a reader that stops early just hangs up."""
    provider.token_mode = "huge"
    form = {"grant_type": "refresh_token", "refresh_token": "any"}
    with httpx.stream("POST", provider.token_url, data=form, timeout=TIMEOUT) as answered:
        assert int(answered.headers["content-length"]) == HUGE
        read = b""
        for chunk in answered.iter_bytes():
            read += chunk
            if len(read) > 100_000:
                break
    assert read.startswith(b'{"access_token": "aaaa')
    assert provider.grants == {}


def test_the_process_mode_is_shared_over_http() -> None:
    """Run as a process of its own: the same provider, its counters read over ``/stats``
    and its settings changed over ``/control``; it ends when closed."""
    with OAuthProviderProcess(refuse_scope_on_refresh=True) as provider:
        tokens = provider.tokens_for("alice", "repo")
        assert provider.access_token_valid(tokens["access_token"])
        assert refresh(provider, tokens["refresh_token"], scope="repo").status_code == 400
        renewed = refresh(provider, tokens["refresh_token"]).json()
        stats = provider.stats()
        assert stats["grants"] == {"authorization_code": 1, "refresh_token": 1}
        assert stats["requests"]["/token"] == 3
        assert stats["last_token_form"]["grant_type"] == "refresh_token"
        provider.control(revoke_user="alice")
        assert not provider.access_token_valid(renewed["access_token"])
        provider.control(token_mode="500")
        assert refresh(provider, renewed["refresh_token"]).status_code == 500
        wrong = httpx.post(f"{provider.url}/control", json={"token_mode": "x"}, timeout=TIMEOUT)
        assert wrong.status_code == 400
        github = provider_for(provider)
        assert (github.token_url, github.secrets) == (
            provider.token_url,
            tuple(client_secrets()),
        )
        process = provider.process
        assert process is not None
        assert process.poll() is None
    assert process.poll() is not None
    assert client_secrets(public=True) == {CLIENT_ID_SECRET: PUBLIC_CLIENT}
