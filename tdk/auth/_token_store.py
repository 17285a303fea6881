"""Where users' tokens are kept, per (user, provider), sealed (:mod:`tdk.auth._tokens`).

:class:`TokenStore` is what the flow that acts as the user needs: read, write and forget a
user's tokens at a provider, and :meth:`TokenStore.lock` them while one worker refreshes
them, so that a refresh happens once at a time per (user, provider) however many calls (and
workers) find them stale together: the others wait, then read what it saved. A refresh
that rotates the refresh token saves both in one write.

:class:`InMemoryTokenStore` keeps them in this process; :class:`~tdk.auth.RedisTokenStore`
shares them between workers. Stores fail closed: a store that cannot be reached raises
:class:`TokenStoreError`, and a call then gets no token (never another user's, never a
stale one).

Part of the outbound half of issue 27 (acting as the user upstream).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Final, Protocol

from tdk.auth._authorization import TokenStoreError
from tdk.auth._tokens import TokenSealer, TokenSet

__all__ = [
    "LOCK_HOLD",
    "LOCK_WAIT",
    "InMemoryTokenStore",
    "TokenStore",
    "TokenStoreError",
    "user_key",
]

#: Seconds a refresh may hold the lock of a (user, provider) before another may take it (a
#: worker that died while refreshing does not lock its user out for longer).
LOCK_HOLD: Final = 30.0
#: Seconds a call waits for another's refresh of the same tokens.
LOCK_WAIT: Final = 30.0


class TokenStore(Protocol):
    """Users' tokens per (user, provider), sealed at rest (see the module docstring).

    .. versionadded:: 0.1.0
    """

    async def get(self, user: str, provider: str) -> TokenSet | None:
        """The tokens of ``user`` at ``provider``; None when there are none (or they do not
        open: tampered, sealed with a key no longer held)."""
        ...

    async def put(self, user: str, provider: str, tokens: TokenSet) -> None:
        """Keep ``tokens`` as those of ``user`` at ``provider`` (in one write)."""
        ...

    async def delete(self, user: str, provider: str) -> None:
        """Forget the tokens of ``user`` at ``provider`` (revoked, refused on refresh)."""
        ...

    def lock(
        self, user: str, provider: str, *, hold: float = LOCK_HOLD, wait: float = LOCK_WAIT
    ) -> AbstractAsyncContextManager[None]:
        """Hold the tokens of ``user`` at ``provider`` for a refresh: entered once no other
        holder has them (``TimeoutError`` after ``wait`` seconds), held ``hold`` seconds at
        most."""
        ...


def user_key(user: str) -> str:
    """What a store names a user by: a digest, so that user ids (emails, often) are not
    written in key names."""
    return hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class InMemoryTokenStore:
    """A :class:`TokenStore` in this process's memory, sealed all the same (by ``sealer``:
    default, a random key of the process), for one worker.

    .. versionadded:: 0.1.0
    """

    def __init__(self, sealer: TokenSealer | None = None) -> None:
        self._sealer = sealer or TokenSealer.ephemeral()
        self._sealed: dict[tuple[str, str], bytes] = {}
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    async def get(self, user: str, provider: str) -> TokenSet | None:
        """See :meth:`TokenStore.get`."""
        blob = self._sealed.get((provider, user_key(user)))
        return None if blob is None else self._sealer.open(blob, user=user, provider=provider)

    async def put(self, user: str, provider: str, tokens: TokenSet) -> None:
        """See :meth:`TokenStore.put`."""
        blob = self._sealer.seal(tokens, user=user, provider=provider)
        self._sealed[(provider, user_key(user))] = blob

    async def delete(self, user: str, provider: str) -> None:
        """See :meth:`TokenStore.delete`."""
        self._sealed.pop((provider, user_key(user)), None)

    @contextlib.asynccontextmanager
    async def lock(
        self, user: str, provider: str, *, hold: float = LOCK_HOLD, wait: float = LOCK_WAIT
    ) -> AsyncIterator[None]:
        """See :meth:`TokenStore.lock` (``hold`` does not apply in one process: the holder
        releases when its block ends, however it ends)."""
        name = (provider, user_key(user))
        lock, users = self._locks.get(name, (asyncio.Lock(), 0))
        self._locks[name] = (lock, users + 1)
        try:
            async with asyncio.timeout(wait):
                await lock.acquire()
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[name]
            if users == 1:
                del self._locks[name]  # (no waiter left: one lock per (user, provider) in use)
            else:
                self._locks[name] = (lock, users - 1)
