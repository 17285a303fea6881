"""Who opens the provider's callback on a server that authenticates its callers: the browser
signs in at the server's own authorization server first.

A browser coming back from a provider (``code`` and ``state``) holds no bearer token, and
the MCP URL elicitation rule asks the server to verify that the user completing it is the one
who started it, "not relying on client input". So the callback sends the browser through the
authorization server that issues this server's tokens (one round trip: a user signed in there
comes back at once):

1. The provider's parameters (``code``, ``state``, ``error``), a PKCE verifier and an expiry
   are sealed into a login ``state`` (:data:`LOGIN_PURPOSE`, with a key derived from the
   login client's secret, which every worker has), and the browser is redirected to the
   authorization endpoint of the issuer (found in its metadata, RFC 8414 or OpenID Connect):
   the authorization code grant with PKCE S256, as the login client
   (:data:`LOGIN_CLIENT_VARIABLES`), for ``resource`` = this server's resource URL, back to
   the same callback URL.
2. The issuer sends the browser back with its own code and the login state: the code is
   traded (with the verifier), and the access token verified by the server's own verifier,
   as every MCP request's: its ``sub`` is who opened the link, and the provider's callback is
   completed for that user (a link forwarded to another user attaches nothing).

Nothing read from the issuer is shown: failures are tdk's words, logged by type.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlencode

import httpx

from tdk.auth._caller import Verifier
from tdk.auth._fetch import (
    FETCH_TIMEOUT,
    MAX_TOKEN_ANSWER,
    TOKEN_STATUSES,
    FetchError,
    client_basic,
    fetch_json,
)
from tdk.auth._urls import checked_url
from tdk.runner._seal import Sealer, TokenUnreadableError

__all__ = ["CARRIED", "LOGIN_CLIENT_VARIABLES", "LOGIN_PURPOSE", "Login", "SignedIn"]

logger = logging.getLogger("tdk.hosts.mcp")

#: The environment variables of the login client (its id and secret at the issuer).
LOGIN_CLIENT_VARIABLES: Final = ("TDK_LOGIN_CLIENT_ID", "TDK_LOGIN_CLIENT_SECRET")
#: What a login state is sealed for (it never opens as anything else).
LOGIN_PURPOSE: Final = b"tdk/oauth/login/1"
#: Seconds the browser has to sign in at the issuer.
LOGIN_EXPIRY: Final = 600.0
#: The provider's parameters carried through the sign-in, and their most characters in all.
CARRIED: Final = ("code", "state", "error")
_MAX_CARRIED: Final = 4096

#: What the person who opened the link is told when the sign-in here did not complete.
NOT_SIGNED_IN: Final = (
    "The sign-in at this server did not complete: nothing was attached. Ask your assistant "
    "to try again."
)
UNAVAILABLE: Final = (
    "This server's sign-in cannot be reached right now: nothing was attached. Try again in "
    "a moment."
)


@dataclass(frozen=True, slots=True)
class SignedIn:
    """Who opened the link, and the provider's parameters carried through the sign-in."""

    params: Mapping[str, str] = field(repr=False)
    """The provider's ``code``, ``state`` (or ``error``): never shown by ``repr()``."""
    user_id: str
    """The verified ``sub`` of the token the issuer gave the browser's sign-in."""


class Login:
    """The callback's sign-in at ``verifier``'s issuer (see the module docstring), as the
    client ``client_id`` / ``client_secret`` (at least 16 characters: the login states are
    sealed with a key derived from it), for ``resource``, coming back to ``redirect_uri``."""

    def __init__(
        self,
        verifier: Verifier,
        client_id: str,
        client_secret: str,
        *,
        resource: str,
        redirect_uri: str,
        timeout: float = FETCH_TIMEOUT,
    ) -> None:
        self.verifier = verifier
        """The server's verifier: its issuer signs the browser in, its check names who."""
        self.resource = resource
        """This server's resource URL, asked for at the issuer (RFC 8707)."""
        self.redirect_uri = redirect_uri
        """The callback's URL, where the issuer sends the browser back."""
        self._client_id = client_id
        self._basic = client_basic(client_id, client_secret)
        self._sealer = Sealer(client_secret, purpose=LOGIN_PURPOSE)
        self._timeout = timeout
        self._endpoints: tuple[str, str] | None = None

    def opened(self, params: Mapping[str, object]) -> dict[str, object] | None:
        """The login state of ``params`` when it is one this server sealed (the issuer
        sends the browser back), else None (the provider does)."""
        state = params.get("state")
        if not isinstance(state, str) or not state.startswith("tdk1."):
            return None
        try:
            payload = self._sealer.open(state)
        except (TokenUnreadableError, ValueError):
            return None
        return payload if isinstance(payload, dict) else None

    @staticmethod
    def carried(params: Mapping[str, object]) -> dict[str, str] | None:
        """The provider's parameters to carry through the sign-in; None when they are more
        than a provider sends."""
        carried = {name: value for name in CARRIED if isinstance(value := params.get(name), str)}
        return None if sum(map(len, carried.values())) > _MAX_CARRIED else carried

    async def start(self, carried: Mapping[str, str]) -> str | None:
        """Where to send the browser to sign in, carrying the provider's parameters
        ``carried``; None (logged) when the issuer's endpoints cannot be found."""
        endpoints = await self._found()
        if endpoints is None:
            return None
        verifier = secrets.token_urlsafe(48)
        state = self._sealer.seal(
            {"q": dict(carried), "cv": verifier, "exp": time.time() + LOGIN_EXPIRY}
        )
        query = {
            "response_type": "code",
            "client_id": self._client_id,
            "redirect_uri": self.redirect_uri,
            "state": state,
            "code_challenge": _s256(verifier),
            "code_challenge_method": "S256",
            "resource": self.resource,
        }
        base = endpoints[0]  # (its own query, a tenant or a policy, kept: ours added to it)
        return f"{base}{'&' if '?' in base else '?'}{urlencode(query)}"

    async def finish(
        self, payload: Mapping[str, object], params: Mapping[str, object]
    ) -> SignedIn | str:
        """Who signed in, from the issuer's answer ``params`` to the login ``payload``;
        else what to tell the person (tdk's words)."""
        expires = payload.get("exp")
        carried = payload.get("q")
        code = params.get("code")
        if not isinstance(expires, float | int) or expires <= time.time():
            return NOT_SIGNED_IN
        if not isinstance(carried, dict) or not isinstance(code, str) or "error" in params:
            return NOT_SIGNED_IN
        endpoints = await self._found()
        if endpoints is None:
            return UNAVAILABLE
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": str(payload.get("cv", "")),
            "resource": self.resource,
        }
        try:
            answer = await self._fetch(endpoints[1], form)
        except FetchError as failed:
            logger.warning("oauth callback: the sign-in's token endpoint failed: %s", failed)
            return UNAVAILABLE
        token = answer.get("access_token")
        verified = await self.verifier.verify_token(token) if isinstance(token, str) else None
        if verified is None or not verified.subject:
            logger.warning("oauth callback: the sign-in gave no token this server accepts")
            return NOT_SIGNED_IN
        return SignedIn({str(k): str(v) for k, v in carried.items()}, verified.subject)

    async def _found(self) -> tuple[str, str] | None:
        """The issuer's authorization and token endpoints, from its metadata (kept once
        found); None, logged, when they cannot be."""
        if self._endpoints is not None:
            return self._endpoints
        # (the auth extra, there since a verifier is: tdk.hosts.mcp must not need it)
        from tdk.auth._keys import metadata_urls

        issuer = self.verifier.issuer
        for url in metadata_urls(issuer):
            try:
                metadata = await self._fetch(url, None)
            except FetchError:
                continue
            if metadata.get("issuer") != issuer:
                continue
            try:
                found = (
                    checked_url(str(metadata.get("authorization_endpoint")), "its endpoint"),
                    checked_url(str(metadata.get("token_endpoint")), "its endpoint"),
                )
            except ValueError:
                continue
            self._endpoints = found
            return found
        logger.warning("oauth callback: no usable metadata of the issuer (sign-in endpoints)")
        return None

    async def _fetch(self, url: str, form: Mapping[str, str] | None) -> dict[str, object]:
        headers = {} if form is None else {"Authorization": self._basic}
        async with httpx.AsyncClient(trust_env=False) as client:
            return await fetch_json(
                client,
                url,
                form=form,
                headers=headers,
                timeout=self._timeout,
                limit=MAX_TOKEN_ANSWER,
                statuses=TOKEN_STATUSES if form is not None else (200,),
            )


def _s256(verifier: str) -> str:
    """The PKCE S256 challenge of ``verifier`` (RFC 7636 section 4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")
