"""Opaque access tokens, verified by asking the authorization server (RFC 7662 introspection).

Each token is POSTed to the introspection endpoint with this resource server's own client
credentials (HTTP Basic, RFC 6749 section 2.3.1), read from the environment by
``tdk serve`` (:data:`CLIENT_ID_VARIABLE`, :data:`CLIENT_SECRET_VARIABLE`). A token is
accepted when the answer is a JSON object saying ``"active": true`` and nothing in it
contradicts this server: not expired (``exp``), not for later (``nbf``, ``iat``), from the
issuer configured (``iss``, when the answer names one), for the audience configured (``aud``,
when one is), and not a refresh token. An endpoint that answers HTML, an error status, or
nothing within the timeout refuses the token: a 401, never a hang.

Every request is introspected (no cache): a revoked token stops working at once.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

import httpx
from mcp.server.auth.provider import AccessToken

from tdk._execution.seconds import finite
from tdk._failures.redact import redact_url
from tdk.auth._caller import LEEWAY, MAX_TOKEN_LENGTH, access_token, refused
from tdk.auth._fetch import FETCH_TIMEOUT, FetchError, client_basic, fetch_json
from tdk.auth._urls import checked_url, seconds_option

__all__ = ["CLIENT_ID_VARIABLE", "CLIENT_SECRET_VARIABLE", "IntrospectionVerifier"]

logger = logging.getLogger("tdk.auth")

#: The environment variables ``tdk serve --auth introspection`` reads the client id and
#: secret of this resource server from (its credentials at the introspection endpoint).
CLIENT_ID_VARIABLE: Final = "TDK_INTROSPECTION_CLIENT_ID"
CLIENT_SECRET_VARIABLE: Final = "TDK_INTROSPECTION_CLIENT_SECRET"  # noqa: S105 (a name)


class IntrospectionVerifier:
    """Verifies access tokens by introspection at the authorization server (RFC 7662), for
    ``tdk serve --http --auth introspection`` (the MCP SDK's ``TokenVerifier``).

    ``url`` is the introspection endpoint; ``issuer`` the authorization server (listed in
    this server's protected-resource metadata, and compared with the answer's ``iss``);
    ``client_id`` and ``client_secret`` this resource server's credentials there;
    ``audience``, when given, must be in the answer's ``aud``. URLs are ``https``, or
    ``http`` on loopback only. See :meth:`from_environment`.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        url: str,
        *,
        issuer: str,
        client_id: str,
        client_secret: str,
        audience: str | None = None,
        leeway: float = LEEWAY,
        timeout: float = FETCH_TIMEOUT,
    ) -> None:
        self.url: Final = checked_url(url, "the introspection URL")
        self.issuer: Final = checked_url(issuer, "the issuer")
        if not client_id or not client_secret:
            raise ValueError("the client id and secret of the introspection must not be empty")
        self._authorization = client_basic(client_id, client_secret)
        self.audience: Final = audience
        self._leeway = seconds_option(leeway, "leeway", zero=True)
        self._timeout = seconds_option(timeout, "timeout")
        self._client = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)
        self._failing = False

    @classmethod
    def from_environment(
        cls,
        url: str,
        *,
        issuer: str,
        audience: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> IntrospectionVerifier:
        """A verifier whose client credentials are the environment variables
        :data:`CLIENT_ID_VARIABLE` and :data:`CLIENT_SECRET_VARIABLE` (``os.environ`` by
        default); a ``ValueError`` naming those that are missing or empty."""
        found = os.environ if environ is None else environ
        names = (CLIENT_ID_VARIABLE, CLIENT_SECRET_VARIABLE)
        missing = [name for name in names if not found.get(name)]
        if missing:
            raise ValueError(
                f"introspection needs this server's client credentials: set {' and '.join(missing)}"
            )
        return cls(
            url,
            issuer=issuer,
            client_id=found[CLIENT_ID_VARIABLE],
            client_secret=found[CLIENT_SECRET_VARIABLE],
            audience=audience,
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``AccessToken`` for ``token`` when the authorization server says it is
        active and it passes the checks of the module docstring, else None. Never raises."""
        if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_LENGTH:
            return refused("it is empty or longer than tdk reads")
        try:
            answer = await fetch_json(
                self._client,
                self.url,
                form={"token": token, "token_type_hint": "access_token"},
                headers={"Authorization": self._authorization},
                timeout=self._timeout,
            )
        except FetchError as failed:
            self._unreachable(str(failed))
            return None
        if self._failing:
            logger.warning("tdk.auth: the introspection endpoint answers again")
            self._failing = False
        problem = self._contradiction(answer)
        if problem is not None:
            return refused(problem)
        return access_token(token, answer)

    def _contradiction(self, answer: Mapping[str, Any]) -> str | None:
        """Why an introspection answer does not make the token good here, or None."""
        if answer.get("active") is not True:
            return "the authorization server says it is not active"
        now = time.time()
        exp, nbf, iat = (answer.get(name) for name in ("exp", "nbf", "iat"))
        if exp is not None and not _numeric_date(exp) > now - self._leeway:
            return "it has expired (or its exp is malformed)"
        for when in (nbf, iat):
            if when is not None and not _numeric_date(when) <= now + self._leeway:
                return "it is not valid yet (or its nbf or iat is malformed)"
        if "iss" in answer and answer["iss"] != self.issuer:
            return "it is from another issuer"
        if self.audience is not None:
            aud = answer.get("aud")
            held = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if self.audience not in held:
                return "it is for another audience"
        if str(answer.get("token_type", "")).lower() == "refresh_token":
            return "it is a refresh token"
        return None

    def _unreachable(self, reason: str) -> None:
        """Log an endpoint that gave no answer (one WARNING per outage; DEBUG while it
        lasts)."""
        level = logging.DEBUG if self._failing else logging.WARNING
        logger.log(
            level,
            "tdk.auth: the introspection endpoint %s gave no answer: %s (tokens are refused "
            "meanwhile)",
            redact_url(self.url),
            reason,
        )
        self._failing = True

    async def aclose(self) -> None:
        """Close the connections to the introspection endpoint."""
        await self._client.aclose()

    async def __aenter__(self) -> IntrospectionVerifier:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _numeric_date(value: object) -> float:
    """A NumericDate as a number; NaN (which every comparison refuses) when malformed."""
    number = finite(value)
    return math.nan if number is None else number
