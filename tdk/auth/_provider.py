"""An OAuth 2.0 provider a tool acts on as the user (GitHub, Google...): where to send the
user to authorize, where to trade a code or a refresh token for tokens, and the names of the
secrets that hold this application's client id and secret there; and what a tool needs of it
(:class:`AuthRequirement`, ``@tool(requires_auth=...)``).

Standard library only: ``@tool`` reads these types, and ``import tdk`` must load no extra.
The flow that uses them is :mod:`tdk.auth._user_auth`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from tdk.auth._urls import checked_url

__all__ = ["AuthRequirement", "OAuthProvider", "TokenAuth"]

#: A provider's name: what tokens are stored under, and what ``requires_auth`` names.
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")

#: How the client authenticates at the token endpoint (RFC 6749 section 2.3.1).
TokenAuth = Literal["client_secret_basic", "client_secret_post"]
_TOKEN_AUTHS: Final = ("client_secret_basic", "client_secret_post")
#: The parameters of the authorization request tdk sets: never given by authorize_params.
_SET_BY_TDK: Final = frozenset(
    {
        "response_type",
        "client_id",
        "redirect_uri",
        "scope",
        "state",
        "code_challenge",
        "code_challenge_method",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OAuthProvider:
    """An OAuth 2.0 authorization server tools act on as the user.

    ::

        GITHUB = OAuthProvider(
            name="github",
            authorize_url="https://github.com/login/oauth/authorize",
            token_url="https://github.com/login/oauth/access_token",
            client_id_from="GITHUB_CLIENT_ID",
            client_secret_from="GITHUB_CLIENT_SECRET",
            token_auth="client_secret_post",
        )

        @tool(requires_auth=GITHUB.with_scopes("repo"))
        async def close_issue(repo: str, number: int, context: ToolContext) -> str: ...

    The client id and secret are never written here: ``client_id_from`` and
    ``client_secret_from`` name the secrets that hold them (``tdk serve`` reads secrets from
    the environment). ``client_secret_from=None`` is a public client (PKCE alone). URLs are
    ``https``, or ``http`` on loopback. A ``ValueError`` says what is wrong.

    .. versionadded:: 0.1.0
    """

    name: str
    """What the tokens are kept under, per user, and what tools name."""
    authorize_url: str
    """Where the user is sent to authorize (the authorization endpoint)."""
    token_url: str
    """Where a code or a refresh token is traded for tokens (the token endpoint)."""
    client_id_from: str
    """The name of the secret holding this application's client id."""
    client_secret_from: str | None = None
    """The name of the secret holding its client secret; None for a public client."""
    revocation_url: str | None = None
    """Where tokens are revoked (RFC 7009), when the provider has such an endpoint."""
    pkce: bool = True
    """Whether the authorization uses PKCE (S256). Leave it on unless the provider fails it."""
    refresh_sends_scope: bool = False
    """Whether a refresh sends ``scope``: off, as RFC 6749 allows, since some providers
    refuse a refresh that names it."""
    authorize_params: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Extra parameters of the authorization URL (``access_type=offline`` for Google...);
    not one tdk sets (``state``, ``redirect_uri``, ``scope``, the PKCE challenge...)."""
    token_auth: TokenAuth = "client_secret_basic"  # noqa: S105 (a method's name)
    """How the client secret is sent to the token endpoint: HTTP Basic (what RFC 6749 asks
    every server to support), or as form fields (``client_secret_post``, GitHub's way)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _NAME.fullmatch(self.name) is None:
            raise ValueError(f"name must be 1-64 letters, digits, '_' or '-', not {self.name!r}")
        for what in ("authorize_url", "token_url", "revocation_url"):
            given = getattr(self, what)
            if given is not None or what != "revocation_url":
                checked_url(given if isinstance(given, str) else "", what)
        secrets = [self.client_id_from, self.client_secret_from]
        for what, given in zip(("client_id_from", "client_secret_from"), secrets, strict=True):
            if given is None and what == "client_secret_from":
                continue
            if not isinstance(given, str) or not given.strip():
                raise ValueError(f"{what} must name a secret, not {given!r}")
        if self.client_id_from == self.client_secret_from:
            raise ValueError("client_id_from and client_secret_from name the same secret")
        params: Any = self.authorize_params
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
            raise ValueError("authorize_params maps names to strings")
        taken = sorted(name for name in params if name in _SET_BY_TDK)
        if taken:
            raise ValueError(
                f"authorize_params cannot set {', '.join(map(repr, taken))}: tdk sets them "
                "(the sealed state, the redirect URI, the scopes, the PKCE challenge)"
            )
        object.__setattr__(self, "authorize_params", MappingProxyType(dict(params)))
        if self.token_auth not in _TOKEN_AUTHS:
            raise ValueError(f"token_auth must be one of {_TOKEN_AUTHS}, not {self.token_auth!r}")

    @property
    def secrets(self) -> tuple[str, ...]:
        """The names of the secrets the provider reads (a tool acting on it requires them)."""
        return tuple(name for name in (self.client_id_from, self.client_secret_from) if name)

    def with_scopes(self, *scopes: str) -> AuthRequirement:
        """What a tool needs of this provider: the user's authorization with ``scopes``
        (``@tool(requires_auth=GITHUB.with_scopes("repo", "read:org"))``; checked there).
        ``requires_auth=GITHUB`` alone asks for no particular scope."""
        return AuthRequirement(self, scopes)


@dataclass(frozen=True, slots=True)
class AuthRequirement:
    """A tool's need to act as the user at ``provider`` with ``scopes``
    (``@tool(requires_auth=...)``; made by :meth:`OAuthProvider.with_scopes`).

    .. versionadded:: 0.1.0
    """

    provider: OAuthProvider
    """The provider the tool acts on."""
    scopes: tuple[str, ...] = ()
    """The scopes the user must grant (as given: ``@tool`` checks them)."""
