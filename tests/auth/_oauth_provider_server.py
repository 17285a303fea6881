"""An OAuth 2.0 provider on loopback that plays "GitHub" for the outbound tests (tools acting
as the user upstream), built on authlib: the authorization code grant with PKCE (S256,
required of every client), refresh with rotation (a used refresh token is refused), token
revocation (RFC 7009), and a protected resource (``GET /user``, ``POST /user/repos``) that
answers 401 ``invalid_token`` for a token it does not honour.

Served by stdlib ``http.server`` in a thread (:class:`OAuthProviderServer`), or as a process
of its own for tests whose workers are processes (:class:`OAuthProviderProcess`, which runs
this file: ``python tests/auth/_oauth_provider_server.py --port-file F``; it serves until
its stdin closes, and adds ``GET /stats`` and ``POST /control``).

The user "signed in at the provider" is the ``login`` cookie of the browser, or the
``login_as`` parameter of the authorization URL; consent is automatic, refused for the users
in ``deny``. Its token endpoint can misbehave on request (``token_mode``).
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, ClassVar, get_args
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit

import httpx
from _authlib_loopback import Client, FormRequest, Loopback, LoopbackHandler, Mode, Token
from _oauth_provider_authlib import SCOPES, TOKEN_AUTH_METHODS, Provider, ProviderStore
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from tdk.auth import OAuthProvider

__all__ = [
    "CALLBACK",
    "CLIENT",
    "CLIENT_ID_SECRET",
    "CLIENT_SECRET_SECRET",
    "PUBLIC_CLIENT",
    "SCOPES",
    "OAuthProviderProcess",
    "OAuthProviderServer",
    "ProviderEndpoints",
    "browser_sign_in",
    "client_secrets",
    "loopback_or_example",
    "provider_for",
]

#: The confidential client (the tdk application registered at "GitHub"): id and secret.
CLIENT = ("tdk-github", "github-secret-3c2b1a")
#: The public client's id (no secret: PKCE alone).
PUBLIC_CLIENT = "tdk-github-public"
#: The names of the secrets an ``OAuthProvider`` for this server reads its client from.
CLIENT_ID_SECRET, CLIENT_SECRET_SECRET = "GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET"
#: The redirect URI :meth:`ProviderEndpoints.tokens_for` uses unless told another.
CALLBACK = "http://127.0.0.1/oauth/callback"
#: Seconds the process mode is given to start, and any one request of the helpers.
STARTUP, TIMEOUT = 30.0, 10.0

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def loopback_or_example(uri: str) -> bool:
    """The default redirect URIs: any http(s) URL on loopback, or https on ``example.com``,
    a subdomain of it, or a ``.test`` host (no credentials, no fragment)."""
    try:
        parts = urlsplit(uri)
        host, _ = parts.hostname, parts.port
    except ValueError:
        return False
    if not host or parts.fragment or parts.username or parts.password:
        return False
    if parts.scheme == "http":
        return host in _LOOPBACK
    example = host == "example.com" or host.endswith((".example.com", ".test"))
    return parts.scheme == "https" and (host in _LOOPBACK or example)


class ProviderEndpoints:
    """The URLs of a running provider and what a test does over HTTP with it, whichever
    way it runs (in this process or in its own)."""

    url: str
    callback: str = CALLBACK
    """The redirect URI :meth:`tokens_for` uses."""

    @property
    def authorize_url(self) -> str:
        """The authorization endpoint."""
        return f"{self.url}/authorize"

    @property
    def token_url(self) -> str:
        """The token endpoint."""
        return f"{self.url}/token"

    @property
    def revocation_url(self) -> str:
        """The revocation endpoint (RFC 7009)."""
        return f"{self.url}/revoke"

    @property
    def user_url(self) -> str:
        """The protected resource ``GET /user``."""
        return f"{self.url}/user"

    def authorization_url(
        self,
        *,
        scope: str = "repo",
        state: str = "",
        code_challenge: str | None,
        client_id: str = CLIENT[0],
        redirect_uri: str | None = None,
        **extra: str,
    ) -> str:
        """An authorization URL as a client builds it (``code_challenge=None`` leaves PKCE
        out; ``extra`` adds or overrides parameters, e.g. ``code_challenge_method``)."""
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri or self.callback,
            "scope": scope,
            "state": state,
        }
        if code_challenge is not None:
            params |= {"code_challenge": code_challenge, "code_challenge_method": "S256"}
        return f"{self.authorize_url}?{urlencode(params | extra)}"

    def browser_sign_in(self, authorize_url: str, user: str) -> tuple[int, str | None]:
        """Open ``authorize_url`` in the browser of ``user`` (signed in at the provider):
        the status and the ``Location`` it answers, not followed."""
        return browser_sign_in(authorize_url, user)

    def tokens_for(
        self,
        user: str,
        scope: str = "repo",
        *,
        client_id: str = CLIENT[0],
        redirect_uri: str | None = None,
    ) -> dict[str, Any]:
        """The token answer of a whole code flow with PKCE run for ``user`` (the confidential
        client authenticates with HTTP Basic; the public one sends only its id)."""
        verifier = secrets.token_urlsafe(48)
        state = secrets.token_urlsafe(8)
        redirect = redirect_uri or self.callback
        link = self.authorization_url(
            scope=scope,
            state=state,
            code_challenge=create_s256_code_challenge(verifier),
            client_id=client_id,
            redirect_uri=redirect,
        )
        status, location = self.browser_sign_in(link, user)
        back = parse_qs(urlsplit(location or "").query)
        if status != 302 or back.get("state") != [state] or "code" not in back:
            raise AssertionError(f"the authorization answered {status} {location}")
        form = {"grant_type": "authorization_code", "code": back["code"][0]}
        form |= {"redirect_uri": redirect, "code_verifier": verifier}
        secret = CLIENT[1] if client_id == CLIENT[0] else None
        auth = (client_id, secret) if secret else None
        if auth is None:
            form["client_id"] = client_id
        answered = httpx.post(self.token_url, data=form, auth=auth, timeout=TIMEOUT)
        answered.raise_for_status()
        tokens: dict[str, Any] = answered.json()
        return tokens

    def access_token_valid(self, token: str) -> bool:
        """Whether the provider honours ``token`` (``GET /user`` answers 200)."""
        headers = {"Authorization": f"Bearer {token}"}
        return httpx.get(self.user_url, headers=headers, timeout=TIMEOUT).status_code == 200


def browser_sign_in(authorize_url: str, user: str) -> tuple[int, str | None]:
    """Open ``authorize_url`` as the browser of ``user`` (its ``login`` cookie): the status
    and the ``Location`` answered, not followed."""
    headers = {"Cookie": f"login={user}"}
    answered = httpx.get(authorize_url, headers=headers, timeout=TIMEOUT)
    return answered.status_code, answered.headers.get("location")


def provider_for(
    server: ProviderEndpoints, *, name: str = "github", public: bool = False, **options: Any
) -> OAuthProvider:
    """A ``tdk.auth.OAuthProvider`` for ``server``, its client read from the secrets
    :data:`CLIENT_ID_SECRET` and :data:`CLIENT_SECRET_SECRET` (see :func:`client_secrets`);
    ``options`` are more of its fields."""
    return OAuthProvider(
        name=name,
        authorize_url=server.authorize_url,
        token_url=server.token_url,
        revocation_url=server.revocation_url,
        client_id_from=CLIENT_ID_SECRET,
        client_secret_from=None if public else CLIENT_SECRET_SECRET,
        **options,
    )


def client_secrets(*, public: bool = False) -> dict[str, str]:
    """The secrets (environment) holding the client of :func:`provider_for`."""
    if public:
        return {CLIENT_ID_SECRET: PUBLIC_CLIENT}
    return {CLIENT_ID_SECRET: CLIENT[0], CLIENT_SECRET_SECRET: CLIENT[1]}


RedirectURIs = Collection[str] | Callable[[str], bool]


class OAuthProviderServer(ProviderEndpoints):
    """The provider of the module docstring on ``http://127.0.0.1:PORT``, in this process.

    ``redirect_uris``: the redirect URIs the clients may use, a collection (exact matches;
    the first is :attr:`callback`) or a predicate (by default :func:`loopback_or_example`).
    Settings tests change as it runs: :attr:`expires_in`, :attr:`refuse_scope_on_refresh`,
    :attr:`token_mode`, :attr:`deny`. It counts :attr:`grants` (successful, by grant type)
    and :attr:`requests` (by path), and keeps :attr:`last_token_form` and
    :attr:`last_token_auth`. ``admin`` adds ``GET /stats`` and ``POST /control``.
    """

    def __init__(
        self,
        redirect_uris: RedirectURIs = loopback_or_example,
        *,
        expires_in: int = 3600,
        refuse_scope_on_refresh: bool = False,
        port: int = 0,
        admin: bool = False,
    ) -> None:
        if isinstance(redirect_uris, str):
            redirect_uris = (redirect_uris,)
        if not callable(redirect_uris):
            self.callback = next(iter(redirect_uris), CALLBACK)
            redirect_uris = frozenset(redirect_uris).__contains__
        allowed = ("refresh_token", "authorization_code")
        self.store = ProviderStore(
            clients={
                CLIENT[0]: Client(
                    CLIENT[0], CLIENT[1], allowed, TOKEN_AUTH_METHODS[:2], redirect_uris
                ),
                PUBLIC_CLIENT: Client(PUBLIC_CLIENT, None, allowed, ("none",), redirect_uris),
            },
            expires_in=expires_in,
            refuse_scope_on_refresh=refuse_scope_on_refresh,
        )
        self.oauth = Provider(self.store)
        self.admin = admin
        self.token_mode: Mode = "ok"
        """How ``/token`` answers: as OAuth says ("ok"), or "html", "500", "hang", "huge"."""
        self.deny: set[str] = set()
        """The users who refuse consent (redirected back with ``error=access_denied``)."""
        self.grants: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.last_token_form: dict[str, str] = {}
        """The form of the last ``/token`` request (``code_verifier``, ``scope``...)."""
        self.last_token_auth: str | None = None
        """How it authenticated: client_secret_basic, client_secret_post, or none."""
        self.repos_created: list[tuple[str, str]] = []
        """(user, name) of each ``POST /user/repos`` the provider accepted."""
        self._lock = threading.Lock()
        self._http = Loopback(_handler_for(self), port)
        self.url = self._http.url
        self.released = self._http.released

    @property
    def expires_in(self) -> int:
        """Seconds the access tokens issued from now on are good for."""
        return self.store.expires_in

    @expires_in.setter
    def expires_in(self, seconds: int) -> None:
        self.store.expires_in = seconds

    @property
    def refuse_scope_on_refresh(self) -> bool:
        """Whether a refresh that sends ``scope`` is refused (400 ``invalid_scope``)."""
        return self.store.refuse_scope_on_refresh

    @refuse_scope_on_refresh.setter
    def refuse_scope_on_refresh(self, refuse: bool) -> None:
        self.store.refuse_scope_on_refresh = refuse

    def __enter__(self) -> OAuthProviderServer:
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def access_token_valid(self, token: str) -> bool:
        """Whether ``token`` is an access token the provider honours (read directly)."""
        with self._lock:
            found = self.store.tokens.get(token)
            return found is not None and not (found.is_expired() or found.is_revoked())

    def revoke_user(self, user: str) -> None:
        """Revoke every token of ``user``, refresh tokens included (a refresh is then
        refused ``invalid_grant``: the user must authorize again)."""
        with self._lock:
            for token in self.store.of_user(user):
                token.revoked = token.refresh_revoked = True

    def expire_user(self, user: str) -> None:
        """Expire the access tokens of ``user`` now; their refresh tokens stay good."""
        with self._lock:
            for token in self.store.of_user(user):
                token.expire()

    def stats(self) -> dict[str, Any]:
        """The counters and the last token request, as ``GET /stats`` answers them."""
        with self._lock:
            return {
                "grants": dict(self.grants),
                "requests": dict(self.requests),
                "last_token_form": dict(self.last_token_form),
                "last_token_auth": self.last_token_auth,
            }

    def control(self, settings: dict[str, Any]) -> None:
        """Apply what ``POST /control`` sent: ``expires_in``, ``refuse_scope_on_refresh``,
        ``token_mode``, ``deny`` (a list of users), ``revoke_user``, ``expire_user``."""
        if "expires_in" in settings:
            self.expires_in = int(settings["expires_in"])
        if "refuse_scope_on_refresh" in settings:
            self.refuse_scope_on_refresh = bool(settings["refuse_scope_on_refresh"])
        if "token_mode" in settings:
            if settings["token_mode"] not in get_args(Mode):
                raise ValueError(f"no token_mode {settings['token_mode']!r}")
            self.token_mode = settings["token_mode"]
        if "deny" in settings:
            self.deny = set(settings["deny"])
        if "revoke_user" in settings:
            self.revoke_user(str(settings["revoke_user"]))
        if "expire_user" in settings:
            self.expire_user(str(settings["expire_user"]))

    def count(self, path: str) -> None:
        """Count a request to ``path``."""
        with self._lock:
            self.requests[path] += 1

    def authorize(self, request: FormRequest, user: str) -> tuple[int, Any, Any]:
        """The answer of ``/authorize`` to ``user``'s browser."""
        with self._lock:
            return self.oauth.authorize(request, user, granted=user not in self.deny)

    def token(self, request: FormRequest) -> tuple[int, Any, Any]:
        """The answer of ``/token`` (counted in :attr:`grants` when it issues tokens)."""
        with self._lock:
            answer: tuple[int, Any, Any] = self.oauth.create_token_response(request)
            if answer[0] == 200:
                self.grants[request.payload.grant_type] += 1
            return answer

    def note_token_request(self, headers: Any, form: list[tuple[str, str]]) -> None:
        """Keep what a ``/token`` request sent, whatever it is then answered."""
        sent = dict(form)
        basic = (headers.get("Authorization") or "").lower().startswith("basic ")
        method = "client_secret_post" if "client_secret" in sent else "none"
        with self._lock:
            self.last_token_form = sent
            self.last_token_auth = "client_secret_basic" if basic else method

    def revoke(self, request: FormRequest) -> tuple[int, Any, Any]:
        """The answer of ``/revoke`` (RFC 7009)."""
        with self._lock:
            return self.oauth.create_endpoint_response("revocation", request)  # type: ignore[no-any-return]

    def protected(self, request: FormRequest, scopes: list[str]) -> Token | tuple[int, Any, Any]:
        """The token of a protected request, or the answer refusing it."""
        with self._lock:
            return self.oauth.protected(request, scopes)

    def record_repo(self, user: str, name: str) -> None:
        """Record a repository created upstream."""
        with self._lock:
            self.repos_created.append((user, name))


def _handler_for(server: OAuthProviderServer) -> type[LoopbackHandler]:
    class Handler(_Handler):
        owner: ClassVar[OAuthProviderServer] = server

    return Handler


class _Handler(LoopbackHandler):
    owner: ClassVar[OAuthProviderServer]

    def _request(self, form: Sequence[tuple[str, str]] = ()) -> FormRequest:
        return FormRequest(self.command, self.owner.url + self.path, self.headers, form)

    def _user(self, request: FormRequest) -> str | None:
        """Who is signed in at the provider: ``login_as``, else the ``login`` cookie."""
        if request.args.get("login_as"):
            return request.args["login_as"]
        for pair in (self.headers.get("Cookie") or "").split(";"):
            name, _, value = pair.strip().partition("=")
            if name == "login" and value:
                return value
        return None

    def do_GET(self) -> None:
        """Answer ``/authorize``, ``/user`` and (admin) ``/stats``."""
        server, path = self.owner, urlsplit(self.path).path
        server.count(path)
        request = self._request()
        if path == "/authorize":
            user = self._user(request)
            if user is None:
                self.send(200, "<html><body>Sign in to GitHub</body></html>", "text/html")
            else:
                self.send_authlib(server.authorize(request, user))
        elif path == "/user":
            found = server.protected(request, [])
            if isinstance(found, Token):
                scopes = {"X-OAuth-Scopes": found.scope}
                self.send(200, json.dumps({"login": found.user}), headers=scopes.items())
            else:
                self.send_authlib(found)
        elif path == "/stats" and server.admin:
            self.send(200, json.dumps(server.stats()))
        else:
            self.send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:
        """Answer ``/token``, ``/revoke``, ``/user/repos`` and (admin) ``/control``."""
        server, path = self.owner, urlsplit(self.path).path
        server.count(path)
        body = self.read_body()
        if body is None:
            return
        form = parse_qsl(body.decode(errors="replace"), keep_blank_values=True)
        if path == "/token":
            server.note_token_request(self.headers, form)
            if server.token_mode != "ok":
                self.misbehave(server.token_mode, server.released)
            else:
                self.send_authlib(server.token(self._request(form)))
        elif path == "/revoke":
            self.send_authlib(server.revoke(self._request(form)))
        elif path == "/user/repos":
            self._create_repo(body)
        elif path == "/control" and server.admin:
            try:
                server.control(json.loads(body or b"{}"))
            except (ValueError, TypeError) as refused:
                self.send(400, json.dumps({"error": str(refused)}))
            else:
                self.send(200, json.dumps(server.stats()))
        else:
            self.send(404, b'{"error": "not found"}')

    def _create_repo(self, body: bytes) -> None:
        """A write upstream: create a repository (scope ``repo``) for the token's user."""
        found = self.owner.protected(self._request(), ["repo"])
        if not isinstance(found, Token):
            self.send_authlib(found)
            return
        name = str(json.loads(body or b"{}").get("name", "repo"))
        self.owner.record_repo(found.user, name)
        self.send(201, json.dumps({"name": name, "owner": {"login": found.user}}))


class OAuthProviderProcess(ProviderEndpoints):
    """The provider in a process of its own (this file run by ``sys.executable``), shared
    by the processes of a test; it serves until closed (or until this process ends: it
    stops when its stdin closes). Settings as :class:`OAuthProviderServer`'s, changed with
    :meth:`control`; :meth:`stats` reads its counters."""

    def __init__(
        self,
        redirect_uris: Sequence[str] = (),
        *,
        expires_in: int = 3600,
        refuse_scope_on_refresh: bool = False,
    ) -> None:
        self._options = ["--expires-in", str(expires_in)]
        self._options += [f"--redirect-uri={uri}" for uri in redirect_uris]
        if refuse_scope_on_refresh:
            self._options.append("--refuse-scope-on-refresh")
        self.callback = redirect_uris[0] if redirect_uris else CALLBACK
        self.process: subprocess.Popen[bytes] | None = None
        """The process, once started (it has ended once this is closed)."""

    def __enter__(self) -> OAuthProviderProcess:
        with tempfile.TemporaryDirectory() as folder:
            port_file = Path(folder) / "url"
            command = [sys.executable, __file__, "--port-file", str(port_file), *self._options]
            self.process = process = subprocess.Popen(command, stdin=subprocess.PIPE)
            deadline = time.monotonic() + STARTUP
            while not port_file.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError("the OAuth provider process did not start")
                time.sleep(0.02)
            self.url = port_file.read_text().strip()
        return self

    def __exit__(self, *exc: object) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        with suppress(OSError):
            process.stdin.close()  # type: ignore[union-attr]
        try:
            process.wait(STARTUP)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STARTUP)

    def stats(self) -> dict[str, Any]:
        """``GET /stats``: ``grants`` and ``requests`` counters, ``last_token_form``,
        ``last_token_auth``."""
        answered = httpx.get(f"{self.url}/stats", timeout=TIMEOUT)
        answered.raise_for_status()
        stats: dict[str, Any] = answered.json()
        return stats

    def control(self, **settings: Any) -> dict[str, Any]:
        """``POST /control``: change settings (see :meth:`OAuthProviderServer.control`);
        answers the stats."""
        answered = httpx.post(f"{self.url}/control", json=settings, timeout=TIMEOUT)
        answered.raise_for_status()
        stats: dict[str, Any] = answered.json()
        return stats


def _arguments(arguments: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A loopback OAuth 2.0 provider for tests.")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--expires-in", type=int, default=3600)
    parser.add_argument("--refuse-scope-on-refresh", action="store_true")
    parser.add_argument("--redirect-uri", action="append", default=[])
    return parser.parse_args(arguments)


def main(arguments: Sequence[str] | None = None) -> None:
    """The process mode: serve, publish the URL in the port file, and serve until stdin
    closes (the test that started this process is done, or gone)."""
    given = _arguments(arguments)
    with OAuthProviderServer(
        given.redirect_uri or loopback_or_example,
        expires_in=given.expires_in,
        refuse_scope_on_refresh=given.refuse_scope_on_refresh,
        port=given.port,
        admin=True,
    ) as server:
        # Written aside, then renamed: a reader never sees half a URL.
        partial = given.port_file.with_suffix(".partial")
        partial.write_text(server.url)
        partial.replace(given.port_file)
        with suppress(KeyboardInterrupt):
            sys.stdin.buffer.read()


if __name__ == "__main__":
    main()
