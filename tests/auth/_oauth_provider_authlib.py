"""The authlib half of the loopback "GitHub" (``_oauth_provider_server`` serves it): its
store, the authorization code grant with PKCE S256 required of every client, refresh with
rotation (and refused with ``scope`` when the store says so), RFC 7009 revocation, and the
bearer check of its protected resource.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from _authlib_loopback import AuthlibServer, Client, FormRequest, Token, random_token
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import AuthorizationCodeMixin, ResourceProtector, grants
from authlib.oauth2.rfc6749.errors import InvalidRequestError, InvalidScopeError
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge

#: The scopes the provider knows (another is refused: ``invalid_scope``).
SCOPES = ("repo", "read:user", "user:email", "gist", "workflow")
#: Seconds an authorization code is good for.
CODE_LIFETIME = 600
#: How clients may authenticate at the token and revocation endpoints (each client says
#: which of these it uses: the confidential one a secret, the public one none).
TOKEN_AUTH_METHODS: list[str] = ["client_secret_basic", "client_secret_post", "none"]


@dataclass
class Code(AuthorizationCodeMixin):
    """An authorization code, bound to its client, redirect URI, user and PKCE challenge."""

    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str
    code_challenge_method: str
    issued_at: float = field(default_factory=time.time)

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class ProviderStore:
    """What the provider knows: clients, codes, tokens (by access and by refresh token),
    and the settings tests change while it runs."""

    clients: dict[str, Client]
    expires_in: int = 3600
    refuse_scope_on_refresh: bool = False
    codes: dict[str, Code] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)
    refresh_tokens: dict[str, Token] = field(default_factory=dict)

    def of_user(self, user: str) -> list[Token]:
        """The tokens issued to ``user``."""
        return [token for token in self.tokens.values() if token.user == user]


class _S256Required(CodeChallenge):
    """PKCE required of every client, confidential ones too, and S256 only."""

    SUPPORTED_CODE_CHALLENGE_METHOD: ClassVar[list[str]] = ["S256"]

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("Missing 'code_challenge': PKCE is required.")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("'code_challenge_method' must be S256.")
        super().validate_code_challenge(grant, redirect_uri)


class _CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = TOKEN_AUTH_METHODS
    server: Provider

    def save_authorization_code(self, code: str, request: Any) -> None:
        data = request.payload.data
        self.server.store.codes[code] = Code(
            code=code,
            client_id=request.client.client_id,
            redirect_uri=request.payload.redirect_uri or "",
            scope=request.scope or "",
            user=request.user,
            code_challenge=data["code_challenge"],
            code_challenge_method=data["code_challenge_method"],
        )

    def query_authorization_code(self, code: str, client: Client) -> Code | None:
        found = self.server.store.codes.get(code)
        if found is None or found.client_id != client.client_id:
            return None
        return found if time.time() < found.issued_at + CODE_LIFETIME else None

    def delete_authorization_code(self, authorization_code: Code) -> None:
        self.server.store.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: Code) -> str:
        return authorization_code.user


class _RefreshGrant(grants.RefreshTokenGrant):
    """Refresh with rotation: a new refresh token each time, the old one revoked."""

    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = TOKEN_AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True
    server: Provider

    def validate_token_request(self) -> None:
        super().validate_token_request()
        if self.server.store.refuse_scope_on_refresh and self.request.payload.scope:
            raise InvalidScopeError("This server refuses 'scope' on refresh.")

    def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
        found = self.server.store.refresh_tokens.get(refresh_token)
        return None if found is None or found.refresh_revoked else found

    def authenticate_user(self, refresh_token: Token) -> str:
        return refresh_token.user

    def revoke_old_credential(self, refresh_token: Token) -> None:
        refresh_token.refresh_revoked = True


class _Revocation(RevocationEndpoint):
    """RFC 7009: an access token revoked alone; a refresh token with its access token."""

    CLIENT_AUTH_METHODS: ClassVar[list[str]] = TOKEN_AUTH_METHODS
    server: Provider

    def query_token(self, token_string: str, token_type_hint: str | None) -> Token | None:
        store = self.server.store
        return store.tokens.get(token_string) or store.refresh_tokens.get(token_string)

    def revoke_token(self, token: Token, request: Any) -> None:
        token.revoked = True
        if request.form.get("token") == token.refresh_token:
            token.refresh_revoked = True


class _Bearer(BearerTokenValidator):
    def __init__(self, store: ProviderStore) -> None:
        super().__init__(realm="github")
        self.store = store

    def authenticate_token(self, token_string: str) -> Token | None:
        return self.store.tokens.get(token_string)


class Provider(AuthlibServer):
    """authlib's authorization server over a :class:`ProviderStore`, and its resource
    protector for the protected endpoints."""

    def __init__(self, store: ProviderStore) -> None:
        super().__init__(store.clients, SCOPES)
        self.store = store
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                access_token_generator=random_token,
                refresh_token_generator=random_token,
                expires_generator=lambda client, grant_type: store.expires_in,
            ),
        )
        self.register_grant(_CodeGrant, [_S256Required(required=True)])
        self.register_grant(_RefreshGrant)
        self.register_endpoint(_Revocation)
        self.protector = ResourceProtector()
        self.protector.register_token_validator(_Bearer(store))

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        issued = Token(
            access_token=token["access_token"],
            client=request.client,
            user=request.user,
            scope=token.get("scope", ""),
            issued_at=int(time.time()),
            expires_in=token.get("expires_in", 0),
            refresh_token=token.get("refresh_token"),
        )
        self.store.tokens[issued.access_token] = issued
        if issued.refresh_token:
            self.store.refresh_tokens[issued.refresh_token] = issued

    def authorize(self, request: FormRequest, user: str, granted: bool) -> tuple[int, Any, Any]:
        """The answer to an authorization request of ``user``, who consents if ``granted``."""
        try:
            grant = self.get_consent_grant(request, end_user=user)
        except OAuth2Error as error:
            return self.handle_error_response(request, error)  # type: ignore[no-any-return]
        return self.create_authorization_response(  # type: ignore[no-any-return]
            request, grant_user=user if granted else None, grant=grant
        )

    def protected(self, request: FormRequest, scopes: list[str]) -> Token | tuple[int, Any, Any]:
        """The token a protected request carries, or the 401/403 answer refusing it."""
        try:
            token: Token = self.protector.validate_request(scopes, request)
        except OAuth2Error as error:
            return error()  # type: ignore[no-any-return]
        return token
