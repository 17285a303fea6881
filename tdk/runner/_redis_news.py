"""News between processes sharing a ``RedisStore``: "a circuit changed", on Redis pub/sub.

A circuit that opens or closes changes the tools a server offers (``runner.available``). The
process whose call moved it knows at once; every other process that shares the store learns
it here: the first one publishes on the store's channel (:func:`announce`), and each listens
(:func:`listen`) and looks at its circuits again when told. A message says only that
something changed: the state itself is read from the store, so a message lost or doubled
costs at most one look too many or one change noticed late (see ``docs/mcp.md``).

Listening holds one connection of the store's client for as long as it runs. Redis down: the
listener tries again every :data:`RETRY_AFTER` seconds and, subscribed again, has the
circuits looked at once more (what changed meanwhile was not heard). Nothing here ever fails
a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

from redis.exceptions import RedisError

from tdk.runner._redis import RedisStore

__all__ = ["RETRY_AFTER", "announce", "channel_of", "listen"]

logger = logging.getLogger("tdk.runner")

#: Seconds between two tries to listen again while Redis does not answer.
RETRY_AFTER: Final = 1.0
#: How long one wait for a message lasts before the listener waits again (it can be stopped
#: in between, and a dead connection shows).
_POLL: Final = 1.0


def channel_of(store: RedisStore) -> str:
    """The store's channel of circuit news (its prefix's)."""
    return f"{{{store.prefix}}}:circuit-news"


async def announce(store: RedisStore) -> None:
    """Tell every process listening on ``store`` that a circuit changed (best effort: within
    the store's timeout, and a failure is only a DEBUG line)."""
    try:
        async with asyncio.timeout(store.timeout):
            await store.client.publish(channel_of(store), b"changed")
    except (RedisError, OSError, TimeoutError) as failed:
        logger.debug("circuit news not published: %s", type(failed).__name__)


async def listen(store: RedisStore, heard: Callable[[], None]) -> None:
    """Call ``heard()`` whenever a process announces news on ``store`` (and once each time
    listening starts or starts again, for what was missed), until cancelled."""
    while True:
        try:
            await _listening(store, heard)
        except (RedisError, OSError, TimeoutError) as failed:
            logger.debug("circuit news: not listening (%s)", type(failed).__name__)
        await asyncio.sleep(RETRY_AFTER)


async def _listening(store: RedisStore, heard: Callable[[], None]) -> None:
    """One subscription, until its connection fails (or the task is cancelled)."""
    pubsub = store.client.pubsub(ignore_subscribe_messages=True)
    try:
        async with asyncio.timeout(store.timeout):
            await pubsub.subscribe(channel_of(store))
        heard()
        while True:
            message = await pubsub.get_message(timeout=_POLL)
            if message is not None:
                heard()
    finally:
        with contextlib.suppress(RedisError, OSError, RuntimeError):
            await pubsub.aclose()
