"""The issuer's signing keys: found from its metadata, fetched, kept, and refreshed sparingly.

Keys are read from the JWKS URL given, or from the ``jwks_uri`` of the issuer's metadata
(RFC 8414 ``/.well-known/oauth-authorization-server``, then OpenID Connect's
``/.well-known/openid-configuration``, each where the standards put it for an issuer with a
path), whose ``issuer`` must be the issuer configured. Only public signature keys are kept
(RSA, EC, OKP), each with the algorithms its type allows: a symmetric (``oct``) key
published in a JWKS would let anyone who read it sign tokens, and an algorithm taken from
the token's own header is how ``alg: none`` and HS256-with-the-public-key forgeries work.

A token naming a key id not held makes the set refresh, once at a time (the requests that
arrive meanwhile wait for that one fetch) and at most once per :data:`MIN_REFRESH` seconds,
so that tokens with made-up key ids cannot turn into a flood of fetches. Keys are fetched
again after :data:`MAX_AGE` seconds; when that fetch fails, the keys held are kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx
from jwt import PyJWK

from tdk._failures.redact import redact_url
from tdk.auth._fetch import FetchError, fetch_json
from tdk.auth._urls import checked_url

__all__ = ["MAX_AGE", "MAX_KEYS", "MIN_REFRESH", "Key", "KeySet", "metadata_urls"]

logger = logging.getLogger("tdk.auth")

#: Seconds between two fetches of the keys, at least (a refresh for an unknown key id waits).
MIN_REFRESH: Final = 10.0
#: Seconds after which the keys held are fetched again.
MAX_AGE: Final = 600.0
#: The most keys kept from one JWKS.
MAX_KEYS: Final = 64

#: The signature algorithms each key type allows (no ``none``, no HMAC: see above).
_ALGORITHMS: Final[Mapping[str, tuple[str, ...]]] = {
    "RSA": ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"),
    "EC:P-256": ("ES256",),
    "EC:P-384": ("ES384",),
    "EC:P-521": ("ES512",),
    "EC:secp256k1": ("ES256K",),
    "OKP:Ed25519": ("EdDSA",),
    "OKP:Ed448": ("EdDSA",),
}


@dataclass(frozen=True, slots=True)
class Key:
    """One public signing key and the algorithms a token signed with it may name."""

    kid: str | None
    key: Any
    algorithms: tuple[str, ...]


def metadata_urls(issuer: str) -> list[str]:
    """Where the metadata of ``issuer`` may be, in the order to try: RFC 8414's well-known
    path inserted before the issuer's path, then OpenID Connect's, inserted and appended."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")

    def at(well_known: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, well_known, "", ""))

    urls = [
        at(f"/.well-known/oauth-authorization-server{path}"),
        at(f"/.well-known/openid-configuration{path}"),
        at(f"{path}/.well-known/openid-configuration"),
    ]
    return list(dict.fromkeys(urls))


class KeySet:
    """The issuer's signing keys (see the module docstring); :meth:`find` gives the keys a
    token's ``kid`` may name."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        issuer: str,
        jwks_url: str | None,
        timeout: float,
        min_refresh: float = MIN_REFRESH,
    ) -> None:
        self._client = client
        self._issuer = issuer
        self._jwks_url = jwks_url
        self._timeout = timeout
        self._min_refresh = min_refresh
        self._keys: tuple[Key, ...] = ()
        self._fetched = -float("inf")  # (monotonic) when the keys were last fetched
        self._tried = -float("inf")  # when a fetch was last tried
        self._fetching: asyncio.Future[None] | None = None  # the fetch in flight
        self._failing = False

    async def find(self, kid: str | None) -> tuple[Key, ...]:
        """The keys a token naming ``kid`` may be signed with: the one of that id (for a
        token without ``kid``, the only key of the set), after one refresh when it is not
        held and a refresh is due; empty when there is none."""
        found = self._matching(kid)
        now = time.monotonic()
        fetching = self._fetching
        if fetching is not None and fetching.get_loop() is not asyncio.get_running_loop():
            fetching = None  # (one left behind by a loop that has ended)
        if fetching is None:
            if (found and now - self._fetched < MAX_AGE) or now - self._tried < self._min_refresh:
                return found
            fetching = self._fetching = asyncio.ensure_future(self._refresh())
            fetching.add_done_callback(self._fetched_now)
        # One fetch at a time: the requests that arrive meanwhile wait for its keys (and a
        # request that goes, cancelled, leaves it running for the others).
        await asyncio.shield(fetching)
        return self._matching(kid)

    def _fetched_now(self, fetch: asyncio.Future[None]) -> None:
        if self._fetching is fetch:
            self._fetching = None

    def _matching(self, kid: str | None) -> tuple[Key, ...]:
        keys = self._keys
        if kid is None:
            return keys if len(keys) == 1 else ()
        return tuple(key for key in keys if key.kid == kid)

    async def _refresh(self) -> None:
        self._tried = time.monotonic()
        try:
            async with asyncio.timeout(self._timeout):  # (discovery and keys, in all)
                url = self._jwks_url or await self._discover()
                keys = usable_keys(await fetch_json(self._client, url, timeout=self._timeout))
        except TimeoutError:
            self._report(f"the signing keys cannot be read within {self._timeout:g} s")
            return
        except FetchError as failed:
            self._report(f"the signing keys cannot be read: {failed}")
            return
        except Exception as failed:  # (httpx's own for a URL it cannot use, say)
            self._report(f"the signing keys cannot be read ({type(failed).__name__})")
            return
        if not keys:
            self._report("the JWKS holds no public signing key tdk can use")
            return
        self._keys, self._fetched = keys, time.monotonic()
        if self._failing:
            logger.warning("tdk.auth: the signing keys of %s are read again", self._shown())
            self._failing = False

    async def _discover(self) -> str:
        """The ``jwks_uri`` of the issuer's metadata (kept once found)."""
        reasons = []
        for url in metadata_urls(self._issuer):
            try:
                metadata = await fetch_json(self._client, url, timeout=self._timeout)
            except FetchError as failed:
                reasons.append(f"{redact_url(url)}: {failed}")
                continue
            if metadata.get("issuer") != self._issuer:
                reasons.append(f"{redact_url(url)}: its issuer is not {self._shown()}")
                continue
            jwks_uri = metadata.get("jwks_uri")
            try:
                self._jwks_url = checked_url(str(jwks_uri), "the jwks_uri of the metadata")
            except ValueError:
                reasons.append(f"{redact_url(url)}: no usable jwks_uri")
                continue
            return self._jwks_url
        raise FetchError("no metadata of the issuer found (" + "; ".join(reasons) + ")")

    def _report(self, problem: str) -> None:
        """Log a failed fetch (one WARNING per outage; DEBUG while it lasts)."""
        level = logging.DEBUG if self._failing else logging.WARNING
        held = "the keys held are kept" if self._keys else "every token is refused meanwhile"
        logger.log(level, "tdk.auth: %s, issuer %s (%s)", problem, self._shown(), held)
        self._failing = True

    def _shown(self) -> str:
        return redact_url(self._issuer)


def usable_keys(jwks: Mapping[str, Any]) -> tuple[Key, ...]:
    """The public signing keys of a JWKS document, each with its algorithms (see the module
    docstring); at most :data:`MAX_KEYS`."""
    listed = jwks.get("keys")
    if not isinstance(listed, list):
        return ()
    keys = []
    for given in listed[:MAX_KEYS]:
        if not isinstance(given, dict) or given.get("use", "sig") != "sig":
            continue
        family = str(given.get("kty"))
        if family != "RSA":
            family = f"{family}:{given.get('crv')}"
        algorithms = _ALGORITHMS.get(family, ())
        alg = given.get("alg")
        if alg is not None:
            algorithms = (alg,) if alg in algorithms else ()
        kid = given.get("kid")
        key = _public_key(given, algorithms[0]) if algorithms else None
        if key is not None and isinstance(kid, str | None):
            keys.append(Key(kid, key, algorithms))
    return tuple(keys)


def _public_key(jwk: dict[str, Any], algorithm: str) -> Any:
    """The key object PyJWT makes of ``jwk`` for ``algorithm``, or None when it cannot read
    it (its error, which may quote the key, is not kept)."""
    try:
        return PyJWK(jwk, algorithm).key
    except Exception:
        return None
