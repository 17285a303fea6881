"""A user's tokens at a provider, and their sealing for storage (AES-256-GCM).

A :class:`TokenSet` is what a token endpoint answered, as tdk keeps it. A store never holds
one as it is: :class:`TokenSealer` seals it with authenticated encryption under a key ring
(the first key seals, every key opens: rotate by putting a new key first), bound to the user
and the provider it belongs to, so that a sealed set copied under another user's or another
provider's name opens as nothing. A blob that does not open (tampered, another key, another
owner) is None: the user authorizes again.

Part of the outbound half of issue 27 (acting as the user upstream).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tdk._execution.seconds import finite

__all__ = ["KEY_SIZE", "TokenSealer", "TokenSet"]

#: The size of a sealing key, in bytes (AES-256).
KEY_SIZE: Final = 32
#: The format of a sealed set: one version byte, then the key's id, the nonce, the sealed JSON.
_VERSION: Final = b"\x01"
_KEY_ID: Final = 8
_NONCE: Final = 12


@dataclass(frozen=True, slots=True)
class TokenSet:
    """A user's tokens at a provider. ``repr()`` never shows the tokens.

    .. versionadded:: 0.1.0
    """

    access_token: str = field(repr=False)
    """The access token, sent upstream as ``Authorization: Bearer ...``."""
    refresh_token: str | None = field(default=None, repr=False)
    """The refresh token, when the provider gave one."""
    expires_at: float | None = None
    """When the access token expires (seconds since the epoch); None when not said."""
    scopes: frozenset[str] = frozenset()
    """The scopes granted."""
    token_type: str = "Bearer"  # noqa: S105 (a type's name)
    """The token's type, as the provider names it."""

    @classmethod
    def from_token_response(
        cls,
        answer: Mapping[str, Any],
        *,
        previous: TokenSet | None = None,
        now: float | None = None,
    ) -> TokenSet:
        """The set a token endpoint's JSON ``answer`` gives (RFC 6749 section 5.1): a refresh
        answer without ``refresh_token`` keeps ``previous``'s (the provider did not rotate
        it), one without ``scope`` keeps its scopes. A ``ValueError`` for an answer without
        an access token."""
        access = answer.get("access_token")
        if not isinstance(access, str) or not access:
            raise ValueError("the token endpoint's answer holds no access_token")
        refresh = answer.get("refresh_token")
        if not isinstance(refresh, str) or not refresh:
            refresh = previous.refresh_token if previous is not None else None
        lifetime = finite(answer.get("expires_in"))
        expires_at = None
        if lifetime is not None and lifetime >= 0:
            expires_at = (time.time() if now is None else now) + lifetime
        scope = answer.get("scope")
        if isinstance(scope, str):
            scopes = frozenset(scope.replace(",", " ").split())
        else:
            scopes = previous.scopes if previous is not None else frozenset()
        kind = answer.get("token_type")
        return cls(access, refresh, expires_at, scopes, kind if isinstance(kind, str) else "Bearer")

    def expires_within(self, seconds: float, *, now: float | None = None) -> bool:
        """Whether the access token expires within ``seconds`` (never, when its expiry is not
        known)."""
        if self.expires_at is None:
            return False
        return self.expires_at - (time.time() if now is None else now) <= seconds

    def _plain(self) -> bytes:
        return json.dumps(
            {
                "access_token": self.access_token,
                "refresh_token": self.refresh_token,
                "expires_at": self.expires_at,
                "scopes": sorted(self.scopes),
                "token_type": self.token_type,
            }
        ).encode()

    @classmethod
    def _from_plain(cls, plain: bytes) -> TokenSet:
        data = json.loads(plain)
        return cls(
            data["access_token"],
            data["refresh_token"],
            data["expires_at"],
            frozenset(data["scopes"]),
            data["token_type"],
        )


class TokenSealer:
    """Seals token sets with AES-256-GCM under a ring of keys (see the module docstring).

    ``keys``: 32-byte keys, the first sealing; every one opens. Share them between the
    workers of one deployment, keep them out of the code (a secret manager, the
    environment), and rotate by putting a new key first (drop the old one once every set
    sealed with it has been sealed again, or has expired).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_ring",)

    def __init__(self, keys: Sequence[bytes]) -> None:
        if isinstance(keys, bytes | str) or not keys:
            raise ValueError("keys is a list of 32-byte keys, the first sealing")
        ring: dict[bytes, AESGCM] = {}
        for key in keys:
            if not isinstance(key, bytes) or len(key) != KEY_SIZE:
                raise ValueError(f"each key is {KEY_SIZE} random bytes (os.urandom({KEY_SIZE}))")
            ring.setdefault(hashlib.sha256(key).digest()[:_KEY_ID], AESGCM(key))
        self._ring = ring

    @classmethod
    def ephemeral(cls) -> TokenSealer:
        """A sealer with a random key of this process (for one worker, in memory)."""
        return cls([os.urandom(KEY_SIZE)])

    def seal(self, tokens: TokenSet, *, user: str, provider: str) -> bytes:
        """``tokens`` sealed for ``user`` at ``provider``."""
        key_id, cipher = next(iter(self._ring.items()))
        nonce = os.urandom(_NONCE)
        sealed = cipher.encrypt(nonce, tokens._plain(), _owner(user, provider))
        return _VERSION + key_id + nonce + sealed

    def open(self, blob: bytes, *, user: str, provider: str) -> TokenSet | None:
        """The set sealed in ``blob`` for ``user`` at ``provider``; None when it does not
        open (tampered, sealed with a key no longer held, or for another owner)."""
        head = 1 + _KEY_ID + _NONCE
        if len(blob) <= head or blob[:1] != _VERSION:
            return None
        cipher = self._ring.get(blob[1 : 1 + _KEY_ID])
        if cipher is None:
            return None
        try:
            plain = cipher.decrypt(blob[1 + _KEY_ID : head], blob[head:], _owner(user, provider))
            return TokenSet._from_plain(plain)
        except (InvalidTag, ValueError, KeyError, TypeError):
            return None


def _owner(user: str, provider: str) -> bytes:
    """What a sealed set is bound to (the GCM associated data)."""
    return json.dumps(["tdk/tokens", provider, user]).encode()
