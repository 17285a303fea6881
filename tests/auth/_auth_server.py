"""An OAuth 2.0 authorization server on loopback for the introspection tests, built on
authlib: it issues opaque access tokens (the resource owner password grant, for a user and
the scopes asked), introspects them (RFC 7662) for the resource server's client, and revokes
them (RFC 7009). Served by stdlib ``http.server`` in a thread.

Its introspection endpoint can misbehave on request: answer HTML, a 500, or hang.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import httpx
from _authlib_loopback import (
    HANG,
    AuthlibServer,
    Client,
    FormRequest,
    Loopback,
    LoopbackHandler,
    Token,
    random_token,
)
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7662 import IntrospectionEndpoint

__all__ = [
    "HANG",
    "MCP_CLIENT",
    "RESOURCE_CLIENT",
    "USERS",
    "AuthorizationServerOnLoopback",
    "Client",
    "Server",
    "Store",
    "Token",
]

#: The resource server's credentials at the introspection endpoint.
RESOURCE_CLIENT = ("mcp-resource", "resource-secret-0f9e8d")
#: The MCP client's credentials at the token endpoint.
MCP_CLIENT = ("mcp-client", "client-secret-7a6b5c")
#: The users and their passwords.
USERS = {"alice": "alice-password", "bob": "bob-password"}

IntrospectionMode = Literal["ok", "html", "500", "hang"]


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


class Server(AuthlibServer):
    """authlib's authorization server over :class:`Store`."""

    def __init__(self, store: Store) -> None:
        super().__init__(store.clients, ["tools:read", "repo:write"])
        self.store = store
        self.register_token_generator(
            "default", BearerTokenGenerator(access_token_generator=random_token)
        )
        self.register_grant(_PasswordGrant)
        for endpoint in (_Introspection, _Revocation):
            made = endpoint(self)
            made.store = store
            self.register_endpoint(made)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        self.store.tokens[token["access_token"]] = Token(
            access_token=token["access_token"],
            client=request.client,
            user=request.user,
            scope=token.get("scope", ""),
            issued_at=int(time.time()),
            expires_in=token["expires_in"],
        )


class AuthorizationServerOnLoopback:
    """The server of the module docstring on ``http://127.0.0.1:PORT``: ``/token``,
    ``/introspect``, ``/revoke``."""

    def __init__(self, audience: str) -> None:
        self._http = Loopback(_handler_for(self))
        self.url = self._http.url
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
        self.released: threading.Event = self._http.released
        self._lock = threading.Lock()

    def __enter__(self) -> AuthorizationServerOnLoopback:
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

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

    def answer(self, path: str, headers: Any, form: list[tuple[str, str]]) -> tuple[int, Any, Any]:
        """The answer of authlib's server to a POST (one at a time)."""
        request = FormRequest("POST", self.url + path, headers, form)
        with self._lock:
            if path == "/token":
                return self.oauth.create_token_response(request)  # type: ignore[no-any-return]
            name = {"/introspect": "introspection", "/revoke": "revocation"}[path]
            return self.oauth.create_endpoint_response(name, request)  # type: ignore[no-any-return]


def _handler_for(server: AuthorizationServerOnLoopback) -> type[LoopbackHandler]:
    class Handler(_Handler):
        owner: ClassVar[AuthorizationServerOnLoopback] = server

    return Handler


class _Handler(LoopbackHandler):
    owner: ClassVar[AuthorizationServerOnLoopback]

    def do_POST(self) -> None:
        """Answer one request."""
        server = self.owner
        server.requests[self.path] += 1
        form = self.read_form()
        if form is None:
            return
        if self.path == "/introspect" and server.mode != "ok":
            self.misbehave(server.mode, server.released)
            return
        if self.path not in ("/token", "/introspect", "/revoke"):
            self.send(404, b'{"error": "not found"}')
            return
        status, body, _ = server.answer(self.path, self.headers, form)
        self.send_authlib((status, body, None))
