"""An OAuth 2.0 authorization server on loopback for the introspection tests, built on
authlib: it issues opaque access tokens (the resource owner password grant, for a user and
the scopes asked), introspects them (RFC 7662) for the resource server's client, and revokes
them (RFC 7009). Served by stdlib ``http.server`` in a thread.

Its introspection endpoint can misbehave on request: answer HTML, a 500, or hang.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal
from urllib.parse import parse_qsl

import httpx
from authlib.oauth2.rfc6749 import (
    AuthorizationServer,
    ClientMixin,
    OAuth2Request,
    TokenMixin,
    grants,
)
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7662 import IntrospectionEndpoint

#: The resource server's credentials at the introspection endpoint.
RESOURCE_CLIENT = ("mcp-resource", "resource-secret-0f9e8d")
#: The MCP client's credentials at the token endpoint.
MCP_CLIENT = ("mcp-client", "client-secret-7a6b5c")
#: The users and their passwords.
USERS = {"alice": "alice-password", "bob": "bob-password"}
#: Seconds a hanging answer holds (released when the server closes).
HANG = 60.0

IntrospectionMode = Literal["ok", "html", "500", "hang"]


@dataclass
class Client(ClientMixin):
    """A registered client (confidential, HTTP Basic)."""

    client_id: str
    secret: str
    grant_types: tuple[str, ...]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return ""

    def get_allowed_scope(self, scope: str | None) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return False

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "client_secret_basic"

    def check_response_type(self, response_type: str) -> bool:
        return False

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types


@dataclass
class Token(TokenMixin):
    """An issued access token."""

    access_token: str
    client: Client
    user: str
    scope: str
    issued_at: int
    expires_in: int
    revoked: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    """What the introspection answer says beside (or instead of) the usual fields."""

    def check_client(self, client: Client) -> bool:
        return self.client.client_id == client.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return self.expires_in

    def is_expired(self) -> bool:
        return time.time() > self.issued_at + self.expires_in

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> str:
        return self.user

    def get_client(self) -> Client:
        return self.client


class _Request(OAuth2Request):
    """An authlib request from what ``http.server`` read."""

    def __init__(self, method: str, uri: str, headers: Any, form: dict[str, str]) -> None:
        super().__init__(method, uri, headers=headers)
        self.payload = BasicOAuth2Payload(form)
        self._form = form

    @property
    def form(self) -> dict[str, str]:
        return self._form


@dataclass
class Store:
    """The server's clients and tokens."""

    issuer: str
    audience: str
    clients: dict[str, Client] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)


class _PasswordGrant(grants.ResourceOwnerPasswordCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic"]

    def authenticate_user(self, username: str, password: str) -> str | None:
        known = USERS.get(username)
        return username if known is not None and known == password else None


class _Introspection(IntrospectionEndpoint):
    CLIENT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic"]
    store: Store

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        return self.store.tokens.get(token_string)

    def check_permission(self, token: Token, client: Client, request: Any) -> bool:
        return client.client_id == RESOURCE_CLIENT[0]

    def introspect_token(self, token: Token) -> dict[str, Any]:
        return {
            "active": True,
            "client_id": token.client.client_id,
            "token_type": "Bearer",
            "username": token.user,
            "scope": token.scope,
            "sub": token.user,
            "aud": self.store.audience,
            "iss": self.store.issuer,
            "exp": token.issued_at + token.expires_in,
            "iat": token.issued_at,
        } | token.extra


class _Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic"]
    store: Store

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        return self.store.tokens.get(token_string)

    def revoke_token(self, token: Token, request: Any) -> None:
        token.revoked = True


class Server(AuthorizationServer):  # type: ignore[misc]
    """authlib's authorization server over :class:`Store`."""

    def __init__(self, store: Store) -> None:
        super().__init__(scopes_supported=["tools:read", "repo:write"])
        self.store = store
        self.register_token_generator(
            "default",
            BearerTokenGenerator(access_token_generator=lambda *a, **k: secrets.token_urlsafe(32)),
        )
        self.register_grant(_PasswordGrant)
        for endpoint in (_Introspection, _Revocation):
            made = endpoint(self)
            made.store = store
            self.register_endpoint(made)

    def query_client(self, client_id: str) -> Client | None:
        return self.store.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        self.store.tokens[token["access_token"]] = Token(
            access_token=token["access_token"],
            client=request.client,
            user=request.user,
            scope=token.get("scope", ""),
            issued_at=int(time.time()),
            expires_in=token["expires_in"],
        )

    def create_oauth2_request(self, request: Any) -> OAuth2Request:
        return request if isinstance(request, OAuth2Request) else _Request(*request)

    def handle_response(self, status: int, body: Any, headers: Any) -> tuple[int, Any, Any]:
        return status, body, headers

    def send_signal(self, name: str, *args: object, **kwargs: object) -> None:
        """No signals."""


class AuthorizationServerOnLoopback:
    """The server of the module docstring on ``http://127.0.0.1:PORT``: ``/token``,
    ``/introspect``, ``/revoke``."""

    def __init__(self, audience: str) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self.introspection_url = f"{self.url}/introspect"
        self.store = Store(issuer=self.url, audience=audience)
        for client_id, secret, grant_types in (
            (*MCP_CLIENT, ("password",)),
            (*RESOURCE_CLIENT, ()),
        ):
            self.store.clients[client_id] = Client(client_id, secret, grant_types)
        self.oauth = Server(self.store)
        self.mode: IntrospectionMode = "ok"
        self.requests: Counter[str] = Counter()
        self.released = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> AuthorizationServerOnLoopback:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(10)

    def token_for(self, user: str, scope: str = "tools:read") -> str:
        """An access token issued to the MCP client for ``user`` and ``scope``, through the
        token endpoint (the password grant)."""
        answered = httpx.post(
            f"{self.url}/token",
            data={
                "grant_type": "password",
                "username": user,
                "password": USERS[user],
                "scope": scope,
            },
            auth=MCP_CLIENT,
            timeout=10,
        )
        answered.raise_for_status()
        token: str = answered.json()["access_token"]
        return token

    def revoke(self, token: str) -> None:
        """Revoke ``token`` through the revocation endpoint (as its client)."""
        httpx.post(
            f"{self.url}/revoke", data={"token": token}, auth=MCP_CLIENT, timeout=10
        ).raise_for_status()

    def answer(self, path: str, headers: Any, form: dict[str, str]) -> tuple[int, Any, Any]:
        """The answer of authlib's server to a POST (one at a time)."""
        request = ("POST", self.url + path, headers, form)
        with self._lock:
            if path == "/token":
                return self.oauth.create_token_response(request)  # type: ignore[no-any-return]
            name = {"/introspect": "introspection", "/revoke": "revocation"}[path]
            return self.oauth.create_endpoint_response(name, request)  # type: ignore[no-any-return]


def _handler_for(server: AuthorizationServerOnLoopback) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        owner: ClassVar[AuthorizationServerOnLoopback] = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: ClassVar[AuthorizationServerOnLoopback]

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""

    def _send(self, status: int, body: bytes, media: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        """Answer one request."""
        server = self.owner
        server.requests[self.path] += 1
        length = int(self.headers.get("Content-Length", "0"))
        form = dict(parse_qsl(self.rfile.read(length).decode()))
        if self.path == "/introspect" and server.mode != "ok":
            self._misbehave(server)
            return
        if self.path not in ("/token", "/introspect", "/revoke"):
            self._send(404, b'{"error": "not found"}')
            return
        status, body, _ = server.answer(self.path, self.headers, form)
        self._send(status, (body if isinstance(body, str) else json.dumps(body)).encode())

    def _misbehave(self, server: AuthorizationServerOnLoopback) -> None:
        if server.mode == "html":
            self._send(200, b"<html><body>Sign in</body></html>", "text/html")
        elif server.mode == "500":
            self._send(500, b'{"error": "server_error"}')
        else:  # hang
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            server.released.wait(HANG)
