"""Users' tokens on Redis, shared by every worker (extra ``tdk-tools[redis]``).

Each (user, provider) is one key holding its sealed set, ``{prefix:tokens:provider:user}``
(the user named by a digest: :func:`~tdk.auth._token_store.user_key`), and its refresh lock
next to it in the same hash slot (Redis Cluster works): ``SET NX PX`` with a random owner,
released only by its owner (a Lua compare-and-delete), expiring by itself after ``hold``
seconds. A set not written for ``idle`` seconds expires.

Part of the outbound half of issue 27 (acting as the user upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from typing import Final

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from tdk.auth._authorization import TokenStoreError
from tdk.auth._token_store import LOCK_HOLD, LOCK_WAIT, user_key
from tdk.auth._tokens import TokenSealer, TokenSet

__all__ = ["RedisTokenStore"]

#: Seconds a set is kept after its last write (90 days: longer than most refresh tokens).
IDLE: Final = 90 * 24 * 3600.0
#: Seconds between two tries of a lock another holds (the first; then doubled, to 0.2 s).
_FIRST_TRY: Final = 0.01
_LAST_TRY: Final = 0.2

#: Delete the lock in KEYS[1] if ARGV[1] still owns it.
_RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisTokenStore:
    """A :class:`~tdk.auth.TokenStore` on Redis (see the module docstring).

    ``client`` is a ``redis.asyncio`` client (yours to close; one per event loop);
    ``sealer`` seals the sets (its keys shared by every worker); ``prefix`` starts every key.
    Redis that cannot be reached is a :class:`~tdk.auth.TokenStoreError`.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        client: aioredis.Redis | aioredis.RedisCluster,
        *,
        sealer: TokenSealer,
        prefix: str = "tdk",
        idle: float = IDLE,
    ) -> None:
        if not prefix or any(char in prefix for char in "{}"):
            raise ValueError("prefix must be non-empty, without '{' or '}'")
        self._client = client
        self._sealer = sealer
        self._prefix = prefix
        self._idle_ms = max(1, int(idle * 1000))
        self._release = client.register_script(_RELEASE)

    def _key(self, user: str, provider: str) -> str:
        return f"{{{self._prefix}:tokens:{provider}:{user_key(user)}}}"

    async def _taken(self, name: str, owner: str, hold: float) -> bool:
        """Whether ``owner`` took the lock ``name`` (for ``hold`` seconds) now."""
        try:
            return bool(await self._client.set(name, owner, nx=True, px=max(1, int(hold * 1000))))
        except (RedisError, OSError) as failed:  # (a TimeoutError of the socket too)
            raise _unreachable(failed) from None

    async def get(self, user: str, provider: str) -> TokenSet | None:
        """See :meth:`TokenStore.get`."""
        try:
            blob = await self._client.get(self._key(user, provider))
        except (RedisError, OSError) as failed:
            raise _unreachable(failed) from None
        if not isinstance(blob, bytes):
            return None
        return self._sealer.open(blob, user=user, provider=provider)

    async def put(self, user: str, provider: str, tokens: TokenSet) -> None:
        """See :meth:`TokenStore.put`."""
        blob = self._sealer.seal(tokens, user=user, provider=provider)
        try:
            await self._client.set(self._key(user, provider), blob, px=self._idle_ms)
        except (RedisError, OSError) as failed:
            raise _unreachable(failed) from None

    async def delete(self, user: str, provider: str) -> None:
        """See :meth:`TokenStore.delete`."""
        try:
            await self._client.delete(self._key(user, provider))
        except (RedisError, OSError) as failed:
            raise _unreachable(failed) from None

    @contextlib.asynccontextmanager
    async def lock(
        self, user: str, provider: str, *, hold: float = LOCK_HOLD, wait: float = LOCK_WAIT
    ) -> AsyncIterator[None]:
        """See :meth:`TokenStore.lock`: across every worker on this Redis."""
        name = self._key(user, provider) + ":refresh"
        owner = os.urandom(16).hex()
        deadline = time.monotonic() + wait
        pause = _FIRST_TRY
        while not await self._taken(name, owner, hold):
            if time.monotonic() + pause > deadline:
                raise TimeoutError(f"another worker held the tokens for over {wait:g} s")
            await asyncio.sleep(pause)
            pause = min(pause * 2, _LAST_TRY)
        try:
            yield
        finally:
            with contextlib.suppress(RedisError, OSError):  # (it expires by itself anyway)
                await self._release(keys=[name], args=[owner])


def _unreachable(failed: BaseException) -> TokenStoreError:
    return TokenStoreError(f"the token store cannot be reached ({type(failed).__name__})")
