"""The authorization server of ``tdk serve --http --auth introspection`` for the tests of
the provider's callback on a server that authenticates: its users sign in there (the
browser's ``login`` cookie, as at the loopback provider) before the callback attaches
anything.

It is the loopback provider (``_oauth_provider_server``: authlib's authorization code grant
with PKCE, its ``/authorize`` and ``/token``) with what an issuer publishes besides, on a
server of its own: RFC 8414 metadata naming those endpoints, and RFC 7662 introspection
(authlib's endpoint) for the resource server's client. Its users' tokens are the provider's.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar
from urllib.parse import urlsplit

from _authlib_loopback import Client, FormRequest, Loopback, LoopbackHandler, Token
from _oauth_provider_server import CLIENT, OAuthProviderServer
from authlib.oauth2.rfc7662 import IntrospectionEndpoint

__all__ = ["LOGIN_CLIENT", "RESOURCE_CLIENT", "LoginIssuer"]

#: The resource server's credentials at the introspection endpoint.
RESOURCE_CLIENT = ("tdk-resource", "resource-secret-5e4d3c2b")
#: The login client of the callback's sign-in (the provider's confidential client).
LOGIN_CLIENT = CLIENT


class LoginIssuer:
    """The issuer of the module docstring: :attr:`url` (its metadata and introspection),
    and :attr:`provider`, whose ``/authorize`` and ``/token`` it names."""

    def __init__(self) -> None:
        self.provider = OAuthProviderServer()
        resource = Client(RESOURCE_CLIENT[0], RESOURCE_CLIENT[1], ())
        self.provider.store.clients[RESOURCE_CLIENT[0]] = resource
        introspection = _Introspection(self.provider.oauth)
        introspection.issuer = self
        self.provider.oauth.register_endpoint(introspection)
        self._http = Loopback(_handler_for(self))
        self.url = self._http.url
        self.introspection_url = f"{self.url}/introspect"

    def __enter__(self) -> LoginIssuer:
        self.provider.__enter__()
        self._http.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()
        self.provider.__exit__(*exc)

    def metadata(self) -> dict[str, Any]:
        """Its RFC 8414 metadata."""
        return {
            "issuer": self.url,
            "authorization_endpoint": self.provider.authorize_url,
            "token_endpoint": self.provider.token_url,
            "introspection_endpoint": self.introspection_url,
            "code_challenge_methods_supported": ["S256"],
        }

    def access_token(self, user: str) -> str:
        """An access token of ``user`` (a whole code flow with PKCE)."""
        token: str = self.provider.tokens_for(user)["access_token"]
        return token


class _Introspection(IntrospectionEndpoint):
    CLIENT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic"]
    issuer: LoginIssuer

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        return self.issuer.provider.store.tokens.get(token_string)

    def check_permission(self, token: Token, client: Client, request: Any) -> bool:
        return client.client_id == RESOURCE_CLIENT[0]

    def introspect_token(self, token: Token) -> dict[str, Any]:
        return {
            "active": True,
            "client_id": token.client.client_id,
            "token_type": "Bearer",
            "scope": token.scope,
            "sub": token.user,
            "iss": self.issuer.url,
            "exp": token.issued_at + token.expires_in,
            "iat": token.issued_at,
        }


def _handler_for(issuer: LoginIssuer) -> type[LoopbackHandler]:
    class Handler(_Handler):
        owner: ClassVar[LoginIssuer] = issuer

    return Handler


class _Handler(LoopbackHandler):
    owner: ClassVar[LoginIssuer]

    def do_GET(self) -> None:
        """Answer the metadata."""
        if urlsplit(self.path).path == "/.well-known/oauth-authorization-server":
            self.send(200, json.dumps(self.owner.metadata()))
        else:
            self.send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:
        """Answer ``/introspect``."""
        form = self.read_form()
        if form is None:
            return
        if urlsplit(self.path).path != "/introspect":
            self.send(404, b'{"error": "not found"}')
            return
        request = FormRequest(self.command, self.owner.url + self.path, self.headers, form)
        oauth = self.owner.provider.oauth
        self.send_authlib(oauth.create_endpoint_response("introspection", request))
