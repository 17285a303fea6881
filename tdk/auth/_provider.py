"""An OAuth 2.0 provider a tool acts on as the user (GitHub, Google...): where to send the
user to authorize, where to trade a code or a refresh token for tokens, and the names of the
secrets that hold this application's client id and secret there.

Part of the outbound half of issue 27 (acting as the user upstream); the flow that uses it
(``@tool(requires_auth=...)``, the authorization ask, refresh) comes with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from tdk.auth._fetch import checked_url

__all__ = ["OAuthProvider"]

#: A provider's name: what tokens are stored under, and what ``requires_auth`` names.
_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


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
        )

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
    """Extra parameters of the authorization URL (``access_type=offline`` for Google...)."""

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
        object.__setattr__(self, "authorize_params", MappingProxyType(dict(params)))

    @property
    def secrets(self) -> tuple[str, ...]:
        """The names of the secrets the provider reads (a tool acting on it requires them)."""
        return tuple(name for name in (self.client_id_from, self.client_secret_from) if name)
