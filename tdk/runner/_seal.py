"""The sealed token of a pending call: authenticated encryption of what the call was.

A token is ``tdk1.`` and the URL-safe base64 of a 12-byte nonce and the AES-256-GCM
encryption of a JSON object (the tool, a hash of its definition, the arguments, the user, the
call's idempotency key, an expiry, a random id, the requests asked and the answers so far):
nothing in it can be read or changed without the runner's key. The key is derived (HKDF-SHA256)
from ``ToolRunner(state_key=...)``, which replicas share; without one, from a random key of the
process.

The encryption is ``cryptography``'s (extra ``tdk-tools[asks]``), imported when a token is
first sealed or opened: ``import tdk`` never loads it, and a tool that asks without it gets
a ``TOOL_RUNTIME_MISSING_REQUIREMENT`` result saying what to install.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from typing import Any, Final

from tdk.errors import ToolRequirementError

__all__ = ["MAX_TOKEN_CHARS", "Sealer", "TokenUnreadableError"]

#: The longest token a runner makes or reads: a longer one is refused before decrypting.
MAX_TOKEN_CHARS: Final = 64 * 1024
_PREFIX: Final = "tdk1."
_AAD: Final = b"tdk/asks/token/1"
_NONCE_BYTES: Final = 12
#: The key of this process for runners given none (one worker: tokens die with it).
_PROCESS_KEY: Final = os.urandom(32)


class TokenUnreadableError(ValueError):
    """A token that is not one this runner sealed: malformed, truncated, tampered with, or
    sealed with another key (the text says which, without the token)."""


class Sealer:
    """Seals and opens tokens with one key."""

    __slots__ = ("_aad", "_aead", "_secret")

    def __init__(self, state_key: str | bytes | None, *, purpose: bytes = _AAD) -> None:
        """``purpose``: what the tokens are for, bound into each (a token sealed for one
        purpose never opens for another, though the key is the same)."""
        if state_key is None:
            secret = _PROCESS_KEY
        elif isinstance(state_key, str):
            secret = state_key.encode("utf-8")
        elif isinstance(state_key, bytes):
            secret = state_key
        else:
            raise TypeError(f"state_key must be str or bytes, not {type(state_key).__name__}")
        if len(secret) < 16:
            raise ValueError("state_key must be at least 16 bytes (32 random bytes are best)")
        self._secret = secret
        self._aad = purpose
        self._aead: Any = None  # (made on first use: the extra may be missing)

    def seal(self, payload: dict[str, Any]) -> str:
        """``payload`` (JSON data) as a token."""
        plain = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._cipher().encrypt(nonce, plain, self._aad)
        return _PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode("ascii").rstrip("=")

    def open(self, token: object) -> dict[str, Any]:
        """The payload of ``token``; :class:`TokenUnreadableError` when it is not one this
        key sealed. A token longer than :data:`MAX_TOKEN_CHARS` is refused unread."""
        if not isinstance(token, str) or not token.startswith(_PREFIX):
            raise TokenUnreadableError("it is not a tdk token")
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenUnreadableError("it is longer than any token tdk makes")
        body = token[len(_PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise TokenUnreadableError("it is not base64") from None
        if len(raw) <= _NONCE_BYTES + 16:
            raise TokenUnreadableError("it is truncated")
        cipher = self._cipher()
        try:
            plain = cipher.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], self._aad)
        except Exception:  # InvalidTag: changed, cut, or sealed with another key
            raise TokenUnreadableError("its seal does not verify") from None
        payload = json.loads(plain)
        if not isinstance(payload, dict):  # pragma: no cover (only tdk seals)
            raise TokenUnreadableError("it holds no call")
        return payload

    def _cipher(self) -> Any:
        if self._aead is None:
            try:
                from cryptography.hazmat.primitives import hashes
                from cryptography.hazmat.primitives.ciphers.aead import AESGCM
                from cryptography.hazmat.primitives.kdf.hkdf import HKDF
            except ImportError:
                raise ToolRequirementError(
                    "The tool asked the user, but this server cannot seal the question.",
                    developer_message=(
                        "context.ask() and approvals need the cryptography package: "
                        "pip install 'tdk-tools[asks]'"
                    ),
                ) from None
            key = HKDF(
                algorithm=hashes.SHA256(), length=32, salt=None, info=b"tdk asks token key"
            ).derive(self._secret)
            self._aead = AESGCM(key)
        return self._aead
