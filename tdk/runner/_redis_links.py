"""The clients of a ``RedisStore``: one per event loop, each closed with its loop.

A ``redis.asyncio`` connection belongs to the event loop it was opened in: used from another
(a web framework that runs ``asyncio.run()`` per request) it fails. A store made from a URL
therefore keeps a :class:`Link` (a client and tdk's scripts registered on it) for the loop it
runs in, makes a new one when the loop changes, and closes each in its own loop when
``asyncio.run()`` shuts that loop down (see :func:`_closed_with`). A client given to the
store is used as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Final

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from tdk.runner._redis_scripts import ACQUIRE, ADMIT, ENTER, PEEK, RECORD

__all__ = ["Client", "Link", "client_from"]

Client = aioredis.Redis | aioredis.RedisCluster
"""The clients a store talks through."""


class Link:
    """The store's client in one event loop, with tdk's scripts registered on it."""

    __slots__ = ("acquire", "admit", "client", "enter", "holder", "loop", "peek", "record")

    def __init__(self, client: Client) -> None:
        self.client: Final = client
        self.admit: Final = client.register_script(ADMIT)
        self.acquire: Final = client.register_script(ACQUIRE)
        self.record: Final = client.register_script(RECORD)
        self.peek: Final = client.register_script(PEEK)
        self.enter: Final = client.register_script(ENTER)
        self.loop: asyncio.AbstractEventLoop | None = None
        """The loop whose connections the client holds (None: not bound to one yet)."""
        self.holder: AsyncGenerator[None, None] | None = None
        """What closes the client when its loop is shut down (see :func:`_closed_with`)."""

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Bind a client the store made to ``loop``, the running one: closed with it."""
        self.loop = loop
        self.holder = _closed_with(self.client)


async def _shut(client: Client) -> AsyncGenerator[None, None]:
    """Wait, suspended, for the loop's shutdown, then close ``client``'s connections in it."""
    try:
        yield
    finally:
        with contextlib.suppress(RedisError, OSError, RuntimeError):  # (closing: best effort)
            await client.aclose()


def _closed_with(client: Client) -> AsyncGenerator[None, None]:
    """An async generator, started, that closes ``client`` when the running loop shuts down.

    ``asyncio.run()`` (through ``loop.shutdown_asyncgens()``) closes the async generators
    still open in its loop before it closes the loop, so a client the store made is closed
    in the loop its connections belong to, even if nobody called :meth:`RedisStore.aclose`.
    (A loop closed without that shutdown leaves them to the garbage collector.)
    """
    holder = _shut(client)
    first = holder.__anext__()  # (the running loop's hook now knows it)
    with contextlib.suppress(StopIteration):
        first.send(None)  # up to its yield, which it reaches without awaiting
    return holder


def client_from(url: str, timeout: float) -> aioredis.Redis:
    """A client of its own for the store, on a pool of its own.

    The pool waits (up to the timeout) for a free connection rather than fail at once: a
    burst of calls is no outage. A dropped connection (an idle one a proxy closed) is tried
    once more on a fresh one before it counts as one. Connecting is bounded by the timeout;
    a command's reply is bounded by the store itself (each command runs within the store's
    timeout, or less for a call with a deadline), not by a socket timeout: redis-py would
    run every write of the client as a task of its own under ``wait_for``, and every read
    under a timeout of its own, doubling what the store's one bound does (some 20 us a
    command, the most of the store's cost after the round trip itself).
    """
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        timeout=timeout,
        socket_timeout=None,  # (the connection's default is 5 s: said, not left out)
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 1),
        retry_on_error=[RedisConnectionError],
    )
    return aioredis.Redis.from_pool(pool)  # (closed with the client)
