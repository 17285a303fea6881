"""JWT access tokens, verified with the issuer's published keys (PyJWT, ``tdk-tools[auth]``).

A token is accepted when it is signed by a key of the issuer's JWKS with an algorithm that
key allows (:mod:`tdk.auth._keys`), names the issuer configured (``iss``) and an audience
configured (``aud``), and is valid now: ``exp`` in the future, ``nbf`` and ``iat`` not,
give or take :data:`LEEWAY` seconds of clock skew. Everything else is refused, never raised:
the SDK's bearer middleware then answers 401 with ``WWW-Authenticate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

import httpx
import jwt
from mcp.server.auth.provider import AccessToken

from tdk.auth._caller import LEEWAY, MAX_TOKEN_LENGTH, access_token, refused
from tdk.auth._fetch import FETCH_TIMEOUT
from tdk.auth._keys import MIN_REFRESH, Key, KeySet
from tdk.auth._urls import checked_url, seconds_option

__all__ = ["JWTVerifier", "refusal_reason"]


class _NotANumericDate(jwt.InvalidTokenError):
    """A time claim (``exp``, ``nbf``, ``iat``) that is not a JSON number (RFC 7519's
    NumericDate): PyJWT reads ``"1796540388"`` as a number; tdk refuses it."""


#: The claims RFC 7519 says are NumericDates.
_TIME_CLAIMS: Final = ("exp", "nbf", "iat")

#: Why PyJWT refused a token, in words that quote nothing of it (most specific first).
_REASONS: Final[tuple[tuple[type[jwt.PyJWTError], str], ...]] = (
    (jwt.ExpiredSignatureError, "it has expired"),
    (jwt.ImmatureSignatureError, "it is not valid yet (nbf or iat in the future)"),
    (jwt.InvalidAudienceError, "it is for another audience"),
    (jwt.InvalidIssuerError, "it is from another issuer"),
    (jwt.MissingRequiredClaimError, "a required claim is missing (exp, iss, aud)"),
    (jwt.InvalidSignatureError, "its signature does not verify"),
    (jwt.InvalidAlgorithmError, "its algorithm is not one its key allows"),
    (jwt.InvalidKeyError, "its key is too weak or unusable"),
    (jwt.DecodeError, "it is not a well-formed JWT"),
    (_NotANumericDate, "a time claim (exp, nbf, iat) is not a number"),
)


def refusal_reason(error: jwt.PyJWTError) -> str:
    """Why a token was refused, in words of tdk's own (safe to log)."""
    for kind, reason in _REASONS:
        if isinstance(error, kind):
            return reason
    return f"it is invalid ({type(error).__name__})"


class JWTVerifier:
    """Verifies the JWT access tokens of one issuer, for ``tdk serve --http --auth jwt``
    (the MCP SDK's ``TokenVerifier``).

    ::

        verifier = JWTVerifier(issuer="https://auth.example.com", audience="https://tools.example.com/mcp")
        await tdk.hosts.mcp.serve(toolkit, "http", auth=verifier)

    ``issuer`` is the ``iss`` tokens must name; ``audience`` the ``aud`` (one of several);
    ``jwks_url`` where the keys are (default: the ``jwks_uri`` of the issuer's metadata).
    URLs are ``https``, or ``http`` on loopback only. ``leeway``: seconds of clock skew
    allowed; ``timeout``: seconds one fetch of the keys (with the metadata) may take;
    ``refresh_interval``: seconds between two fetches at least (a token naming a key id not
    held makes the keys be fetched again, if the last fetch is that old).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str | Sequence[str],
        jwks_url: str | None = None,
        leeway: float = LEEWAY,
        timeout: float = FETCH_TIMEOUT,
        refresh_interval: float = MIN_REFRESH,
    ) -> None:
        self.issuer: Final = checked_url(issuer, "the issuer")
        audiences = [audience] if isinstance(audience, str) else list(audience)
        if not audiences or not all(isinstance(a, str) and a for a in audiences):
            raise ValueError("audience must be a non-empty string, or a list of them")
        self.audience: Final = tuple(audiences)
        self._leeway = seconds_option(leeway, "leeway", zero=True)
        timeout = seconds_option(timeout, "timeout")
        self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)
        self._keys = KeySet(
            self._client,
            issuer=issuer,
            jwks_url=None if jwks_url is None else checked_url(jwks_url, "the JWKS URL"),
            timeout=timeout,
            min_refresh=seconds_option(refresh_interval, "refresh_interval", zero=True),
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``AccessToken`` for ``token`` when it is valid (its ``subject`` the
        ``sub``, its ``claims`` the payload), else None. Never raises."""
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_LENGTH:
            return refused("it is empty or longer than tdk reads")
        try:
            header = jwt.get_unverified_header(token)
        except Exception:  # (PyJWT's DecodeError, or another for odd input)
            return refused("it is not a well-formed JWT")
        kid, alg = header.get("kid"), header.get("alg")
        if not isinstance(kid, str | None) or not isinstance(alg, str):
            return refused("its header is malformed")
        keys = await self._keys.find(kid)
        if not keys:
            return refused("no signing key of the issuer has its key id")
        key = next((key for key in keys if alg in key.algorithms), None)
        if key is None:  # alg "none", HS256 with the public key as the secret...
            return refused("its algorithm is not one its key allows")
        try:
            claims = self._verified(token, key)
        except jwt.PyJWTError as error:
            return refused(refusal_reason(error))
        except Exception as error:  # (PyJWT's own TypeError or ValueError for odd input)
            return refused(f"it is invalid ({type(error).__name__})")
        return access_token(token, claims)

    def _verified(self, token: str, key: Key) -> dict[str, Any]:
        """The claims of ``token`` verified with ``key`` (PyJWT's error when they are not)."""
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=list(key.algorithms),
            audience=list(self.audience),
            issuer=self.issuer,
            leeway=self._leeway,
            # (the claims without which a token is refused, and RSA keys of 2048 bits at
            # least: a shorter one is refused, not warned about)
            options={"require": ["exp", "iss", "aud"], "enforce_minimum_key_length": True},
        )
        for name in _TIME_CLAIMS:
            value = claims.get(name)
            if value is not None and (type(value) is bool or not isinstance(value, int | float)):
                raise _NotANumericDate(name)
        return claims

    async def aclose(self) -> None:
        """Close the connections to the issuer."""
        await self._client.aclose()

    async def __aenter__(self) -> JWTVerifier:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
