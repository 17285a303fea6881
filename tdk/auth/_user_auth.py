"""Acting as the user upstream: a runner's OAuth 2.0 client (extra ``tdk-tools[auth]``).

:class:`UserAuth` keeps each user's tokens per provider in a :class:`~tdk.auth.TokenStore`
and speaks the protocol with the provider: the authorization URL (PKCE S256, shaped by
authlib), the code traded for tokens, a refresh, a revocation (form posts, read by tdk's
bounded fetch). A runner
given one (``ToolRunner(user_auth=...)``, :mod:`tdk.runner._acting`) gives each call of a tool
declared ``@tool(requires_auth=...)`` the user's access token.

A refresh happens once at a time per (user, provider), across every worker sharing the
store: under the store's lock, the tokens are read again first (another worker may have
refreshed them while this one waited), and a rotated refresh token is saved with its access
token in one write. ``scope`` is not sent on refresh unless the provider says so.

Every exchange with the provider is bounded (:data:`TOKEN_TIMEOUT` unless given, and
:data:`~tdk.auth._fetch.MAX_TOKEN_ANSWER` bytes, uncompressed) and fails as
:class:`ProviderError` in tdk's own words: never the provider's text, never a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from typing import Any, Final

import httpx
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from tdk.auth._authorization import ProviderError
from tdk.auth._fetch import MAX_TOKEN_ANSWER, TOKEN_STATUSES, FetchError, client_basic, fetch_json
from tdk.auth._provider import OAuthProvider
from tdk.auth._token_store import LOCK_HOLD, InMemoryTokenStore, TokenStore
from tdk.auth._tokens import TokenSet
from tdk.auth._urls import checked_url, seconds_option

__all__ = ["MAX_WAITING", "TOKEN_TIMEOUT", "ProviderError", "UserAuth"]

#: Seconds one exchange with a token endpoint may take, by default.
TOKEN_TIMEOUT: Final = 10.0
#: The errors of a token endpoint that mean the grant is gone: the user must authorize again
#: (GitHub says ``bad_refresh_token`` for an expired or revoked refresh token). Not
#: ``invalid_client``: a wrong client secret would then forget every user's tokens.
_GONE: Final = frozenset({"invalid_grant", "unauthorized_client", "bad_refresh_token"})
#: The most calls of one ``UserAuth`` waiting for a sign-in at once.
MAX_WAITING: Final = 64
#: Seconds between two looks for tokens a sign-in is about to keep (the first; doubled to 2 s).
_FIRST_LOOK: Final = 0.25
_LAST_LOOK: Final = 2.0


class UserAuth:
    """Users' tokens at OAuth 2.0 providers, for a runner's tools that act as the user.

    ::

        runner = ToolRunner(
            toolkit,
            user_auth=UserAuth(
                RedisTokenStore(redis_client, sealer=TokenSealer([key])),
                redirect_uri="https://tools.example.com/oauth/callback",
            ),
            state_key=os.environ["TDK_STATE_KEY"],
        )

    - ``store``: where the tokens are kept, sealed (default: an :class:`InMemoryTokenStore`,
      for one worker).
    - ``redirect_uri``: where the provider sends the user's browser back with the code, as
      registered at the provider: ``tdk serve --http`` answers at its path, or your own web
      server calls ``runner.complete_authorization()`` there. ``https``, or ``http`` on
      loopback.
    - ``secrets``: where the providers' client ids and secrets are read, by the names the
      providers give (default: the environment).
    - ``refresh_margin``: seconds before its expiry an access token is refreshed.
    - ``timeout``: seconds one exchange with a token endpoint may take.
    - ``sign_in_wait``: seconds a call sent again after the sign-in ask waits for the
      provider's callback when it has not come yet (a host may send it again as soon as the
      user opens the link; 0: ask again at once).

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        store: TokenStore | None = None,
        *,
        redirect_uri: str,
        secrets: Mapping[str, str] | None = None,
        refresh_margin: float = 60.0,
        timeout: float = TOKEN_TIMEOUT,
        sign_in_wait: float = 120.0,
    ) -> None:
        self.store: Final = store if store is not None else InMemoryTokenStore()
        """Where the tokens are kept."""
        self.redirect_uri: Final = checked_url(redirect_uri, "redirect_uri")
        """Where the provider sends the browser back."""
        self.refresh_margin: Final = seconds_option(refresh_margin, "refresh_margin", zero=True)
        """Seconds before expiry a token is refreshed."""
        self.sign_in_wait: Final = seconds_option(sign_in_wait, "sign_in_wait", zero=True)
        """Seconds a call sent again waits for the sign-in to complete."""
        self._timeout = seconds_option(timeout, "timeout")
        self._waiting = 0  # (calls waiting for a sign-in now: see signed_in)
        self._secrets: Mapping[str, str] = os.environ if secrets is None else dict(secrets)
        self._refreshing: set[asyncio.Future[TokenSet | None]] = set()

    def missing_secrets(self, provider: OAuthProvider) -> list[str]:
        """The names of ``provider``'s client secrets that are not set."""
        return [name for name in provider.secrets if not self._secrets.get(name)]

    async def current(self, user: str, provider: OAuthProvider) -> TokenSet | None:
        """The tokens of ``user`` at ``provider``, refreshed first when they expire within
        ``refresh_margin`` seconds; None when there are none, or the refresh was refused (the
        user must authorize again). Raises :class:`ProviderError` (unavailable) and
        :class:`~tdk.auth.TokenStoreError`."""
        tokens = await self.store.get(user, provider.name)
        if tokens is None or not tokens.expires_within(self.refresh_margin):
            return tokens
        if tokens.refresh_token is None:  # expiring, and nothing to renew it with
            return None if tokens.expires_within(0) else tokens
        return await self._refreshed(user, provider, tokens)

    async def signed_in(self, user: str, provider: OAuthProvider) -> TokenSet | None:
        """The tokens of ``user`` at ``provider`` once the provider's callback has kept them,
        waited for ``sign_in_wait`` seconds at most (read again after 0.25 s, then less and
        less often, up to every 2 s); None when they have not come. At most
        :data:`MAX_WAITING` calls wait at once (the wait comes before any limit of the
        runner's applies): others look once."""
        if self._waiting >= MAX_WAITING:
            return await self.current(user, provider)
        deadline = time.monotonic() + self.sign_in_wait
        pause = _FIRST_LOOK
        self._waiting += 1
        try:
            while True:
                tokens = await self.current(user, provider)
                if tokens is not None or time.monotonic() >= deadline:
                    return tokens
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause = min(pause * 2, _LAST_LOOK)
        finally:
            self._waiting -= 1

    async def renewed(self, user: str, provider: OAuthProvider, used: str) -> TokenSet | None:
        """New tokens of ``user`` at ``provider`` after the upstream refused the access
        token ``used`` (a 401): refreshed, unless another call did so meanwhile; None when
        they cannot be (no refresh token, or the refresh was refused)."""
        tokens = await self.store.get(user, provider.name)
        if tokens is None:
            return None
        if tokens.access_token != used:  # renewed by another call already
            return tokens
        if tokens.refresh_token is None:  # refused, and nothing to renew it with: forgotten
            return await self._forgotten(user, provider, used)  # (not tried on the next call)
        return await self._refreshed(user, provider, tokens)

    async def _forgotten(self, user: str, provider: OAuthProvider, used: str) -> TokenSet | None:
        """Forget the tokens of ``user`` at ``provider`` whose access token ``used`` was
        refused, under the store's lock; those a sign-in kept meanwhile are kept (and given)."""
        async with self._locked(user, provider):
            tokens = await self.store.get(user, provider.name)
            if tokens is None or tokens.access_token != used:
                return tokens
            await self.store.delete(user, provider.name)
            return None

    async def _refreshed(
        self, user: str, provider: OAuthProvider, stale: TokenSet
    ) -> TokenSet | None:
        """``stale`` refreshed under the store's lock, once for every waiting call. A call
        cancelled meanwhile does not cancel the refresh (bounded by the lock's wait and the
        exchange's timeout): the provider may have taken the refresh token already, and
        rotated it, and the tokens it answers must be kept, or the user signs in again."""
        refresh = asyncio.ensure_future(self._refresh_locked(user, provider, stale))
        self._refreshing.add(refresh)  # (held: the loop keeps only a weak reference)
        refresh.add_done_callback(self._ended)
        return await asyncio.shield(refresh)

    def _ended(self, refresh: asyncio.Future[TokenSet | None]) -> None:
        """A refresh ended: let it go, its failure retrieved (the call that waited for it
        may have been cancelled: nobody else reads it)."""
        self._refreshing.discard(refresh)
        if not refresh.cancelled():
            refresh.exception()

    async def _refresh_locked(
        self, user: str, provider: OAuthProvider, stale: TokenSet
    ) -> TokenSet | None:
        """See :meth:`_refreshed`: the refresh itself, under the store's lock."""
        async with self._locked(user, provider):
            tokens = await self.store.get(user, provider.name)
            if tokens is None:
                return None  # forgotten meanwhile (refused, signed out)
            if tokens.access_token != stale.access_token:
                return tokens  # another worker refreshed while this one waited
            assert tokens.refresh_token is not None
            extra = (
                {"scope": " ".join(sorted(tokens.scopes))} if provider.refresh_sends_scope else {}
            )
            try:
                answer = await self._token_request(
                    provider,
                    provider.token_url,
                    grant_type="refresh_token",
                    refresh_token=tokens.refresh_token,
                    **extra,
                )
            except ProviderError as failed:
                if failed.reason == "refused":
                    await self.store.delete(user, provider.name)
                    return None
                raise
            renewed = _token_set(answer, previous=tokens)
            await self.store.put(user, provider.name, renewed)  # (rotated: both in one write)
            return renewed

    def _locked(
        self, user: str, provider: OAuthProvider
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """The store's lock of the tokens of ``user`` at ``provider``, for a change that
        must not interleave with a refresh."""
        # (held longer than the exchange may take: expired meanwhile, another worker would
        # refresh with the same refresh token, refused once rotated, and forget the tokens)
        hold = max(LOCK_HOLD, self._timeout * 2)
        return self.store.lock(user, provider.name, hold=hold, wait=self._timeout * 3)

    def authorization_url(
        self, provider: OAuthProvider, scopes: tuple[str, ...], state: str, verifier: str
    ) -> str:
        """Where to send the user to authorize ``scopes`` at ``provider``: its authorization
        endpoint with this client, ``redirect_uri``, ``state`` and the S256 challenge of
        ``verifier`` (when the provider uses PKCE)."""
        pkce = {}
        if provider.pkce:
            pkce = {
                "code_challenge": create_s256_code_challenge(verifier),
                "code_challenge_method": "S256",
            }
        url: str = prepare_grant_uri(
            provider.authorize_url,
            client_id=self._secrets.get(provider.client_id_from, ""),
            response_type="code",
            redirect_uri=self.redirect_uri,
            scope=" ".join(scopes) or None,
            state=state,
            **pkce,
            **dict(provider.authorize_params),
        )
        return url

    async def exchange(
        self, provider: OAuthProvider, code: str, verifier: str, scopes: tuple[str, ...]
    ) -> TokenSet:
        """The tokens ``code`` is traded for at ``provider`` (asked with ``scopes``: the
        scopes kept when the answer names none). Raises :class:`ProviderError`."""
        pkce = {"code_verifier": verifier} if provider.pkce else {}
        answer = await self._token_request(
            provider,
            provider.token_url,
            grant_type="authorization_code",
            code=code,
            redirect_uri=self.redirect_uri,
            **pkce,
        )
        if "scope" not in answer and scopes:
            answer = {**answer, "scope": " ".join(scopes)}
        return _token_set(answer, previous=None)

    async def keep(self, user: str, provider: OAuthProvider, tokens: TokenSet) -> None:
        """Keep ``tokens`` (a sign-in's) as those of ``user`` at ``provider``, under the
        store's lock: a refresh of the tokens they replace, in progress, cannot write over
        them after. Raises :class:`~tdk.auth.TokenStoreError` and ``TimeoutError``."""
        async with self._locked(user, provider):
            await self.store.put(user, provider.name, tokens)

    async def sign_out(self, user: str, provider: OAuthProvider) -> None:
        """Forget the tokens of ``user`` at ``provider``, revoking them there first when the
        provider has a revocation endpoint (RFC 7009; a failure to revoke does not keep
        them). Under the store's lock: a refresh in progress cannot keep them again after."""
        async with self._locked(user, provider):
            tokens = await self.store.get(user, provider.name)
            await self.store.delete(user, provider.name)
        if tokens is None or provider.revocation_url is None:
            return
        hints = (("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token))
        for hint, token in hints:
            if token:
                with contextlib.suppress(ProviderError):  # (forgotten here either way)
                    await self._post(
                        provider, provider.revocation_url, {"token": token, "token_type_hint": hint}
                    )

    async def _token_request(
        self, provider: OAuthProvider, url: str, **form: str
    ) -> dict[str, Any]:
        """The token endpoint's answer to ``form`` (RFC 6749 section 5): the tokens; else
        :class:`ProviderError`, ``"refused"`` for a grant that is gone."""
        answer = await self._post(provider, url, form)
        error = answer.get("error")
        if error is not None:
            gone = isinstance(error, str) and error in _GONE  # (an object is no code at all)
            raise ProviderError(
                "refused" if gone else "unavailable",
                f"the token endpoint of '{provider.name}' refused the request "
                f"({_error_code(error)})",
            )
        if not isinstance(answer.get("access_token"), str):
            raise ProviderError(
                "unavailable", f"the token endpoint of '{provider.name}' gave no access token"
            )
        return answer

    async def _post(
        self, provider: OAuthProvider, url: str, form: Mapping[str, str]
    ) -> dict[str, Any]:
        """The JSON object ``url`` answers to ``form`` sent as this application's client of
        ``provider``; else :class:`ProviderError` (unavailable), in tdk's words."""
        client_id = self._secrets.get(provider.client_id_from, "")
        secret = self._secrets.get(provider.client_secret_from or "") or None
        headers: dict[str, str] = {}
        body = dict(form)
        if secret is None:  # a public client names itself (PKCE proves the rest)
            body["client_id"] = client_id
        elif provider.token_auth == "client_secret_post":  # noqa: S105 (a method's name)
            body.update(client_id=client_id, client_secret=secret)
        else:
            headers["Authorization"] = client_basic(client_id, secret)
        try:
            async with httpx.AsyncClient(trust_env=False) as client:
                return await fetch_json(
                    client,
                    url,
                    form=body,
                    headers=headers,
                    timeout=self._timeout,
                    limit=MAX_TOKEN_ANSWER,
                    statuses=TOKEN_STATUSES,
                )
        except FetchError as failed:  # (its text is tdk's own, without the URL)
            raise ProviderError(
                "unavailable", f"the endpoint of '{provider.name}' gave no answer: {failed}"
            ) from None


def _token_set(answer: Mapping[str, Any], *, previous: TokenSet | None) -> TokenSet:
    try:
        return TokenSet.from_token_response(answer, previous=previous)
    except ValueError:
        raise ProviderError("unavailable", "the token endpoint gave no access token") from None


def _error_code(code: object) -> str:
    """An OAuth error code as a message may show it (RFC 6749: printable ASCII, short)."""
    if not isinstance(code, str):  # (an object's text is the provider's, not a code)
        return "an error code"
    text = code[:64]
    return text if text.isascii() and text.isprintable() else "an error code"
