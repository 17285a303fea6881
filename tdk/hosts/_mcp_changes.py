"""The tools a server offers, and who is told when they change.

``tools/list`` answers the tools whose circuit is not open (``runner.available``), in the
toolkit's order: the same list on every replica that shares the runner's store. When a
circuit opens or closes the list changes, and the clients that follow it are told:

- a 2025-era client that listed the tools gets ``notifications/tools/list_changed`` on its
  connection (the stdio pipe, or its streamable HTTP session's GET stream);
- a 2026-07-28 client that listens (``subscriptions/listen`` with ``toolsListChanged``) gets
  it on its listen stream (the SDK's ``ListenHandler``, fed by this server's bus).

Both eras' capabilities say so (``tools.listChanged``). How a change is noticed:

- the runner's own events in this process (a circuit that opened or closed): looked at at
  once;
- a circuit that is open (or half-open with its probes out) comes back with time, not with an
  event: while a tool is left out, the list is looked at again every quarter of its
  ``reset_timeout``;
- with a ``RedisStore``, the process that saw a circuit move announces it on Redis pub/sub
  and every process sharing the store looks again (:mod:`tdk.runner._redis_news`).

A look is one ``runner.available()``: with a ``RedisStore``, one read of each circuit. It
runs while the server is served (its lifespan), one at a time; a look that fails (the store)
is skipped, and the next event or timer looks again. A ``tools/list`` whose look fails
answers every tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

from mcp import types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tdk._compat.mcp_connection import connection_of
from tdk._define.toolkit import Toolkit
from tdk.runner import CircuitState, ToolRunner
from tdk.runner._events import CircuitChanged, Event

__all__ = ["ToolList"]

logger = logging.getLogger("tdk.hosts.mcp")

#: The shortest wait between two looks at a tool left out (a tiny ``reset_timeout``).
_SHORTEST_RECHECK: Final = 0.05
_HALF_OPEN: Final = CircuitState.HALF_OPEN


class ToolList:
    """The tools one server offers, and the clients told when they change (see the
    module)."""

    def __init__(self, toolkit: Toolkit, runner: ToolRunner) -> None:
        self._toolkit = toolkit
        self._runner = runner
        self._bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self._bus)
        """The handler of ``subscriptions/listen`` (2026-07-28)."""
        self._offered: tuple[str, ...] = tuple(item.name for item in toolkit)
        """The names offered, as clients were last told."""
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        """2025-era connections that listed the tools."""
        self._serving = 0
        self._stop_hearing: Callable[[], None] | None = None
        self._news: asyncio.Task[None] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._dirty = False
        self._to_announce = False
        self._shared: Any = None
        """The runner's ``RedisStore`` while served, else None."""

    async def listed(self, request: ServerRequestContext[Any, Any]) -> list[str]:
        """The names of the tools offered now, for ``tools/list`` (its client's connection is
        told of later changes)."""
        connection = connection_of(request.session)
        if connection is not None and connection.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._connections.add(connection)
        try:
            names = tuple(each.name for each in await self._runner.available(self._toolkit))
        except Exception as failed:  # a store that fails: the list, not an error
            logger.debug("tools listed without their circuits: %s", type(failed).__name__)
            return [item.name for item in self._toolkit]
        if names != self._offered and self._serving:
            self._poke()  # (another process's change, not heard yet: the others are told)
        return list(names)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[dict[str, Any]]:
        """The server's lifespan: the runner's events heard, Redis news listened to, and the
        timers of tools left out run, while any connection of the server is served."""
        self._serving += 1
        if self._serving == 1:
            self._start()
        try:
            yield {}
        finally:
            self._serving -= 1
            if self._serving == 0:
                await self._stop()

    def _start(self) -> None:
        self._stop_hearing = self._runner._heard_by(self._heard)
        shared = self._shared = _redis_store_of(self._runner)
        if shared is not None:
            self._news = asyncio.get_running_loop().create_task(_listened(shared, self._poke))
        self._poke()  # (a circuit may have opened before the server started)

    async def _stop(self) -> None:
        if self._stop_hearing is not None:
            self._stop_hearing()
            self._stop_hearing = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.listen.close()
        for task in (self._news, self._worker):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._news = self._worker = None

    def _heard(self, event: Event) -> None:
        """The runner's instrument: a circuit that opened or closed in this process. (One
        that goes half-open lets a probe through: the tool was offered again when its reset
        timeout passed, and is not taken off the list for the length of a probe.)"""
        if type(event) is CircuitChanged and event.after is not _HALF_OPEN:
            self._poke(announce=True)

    def _poke(self, *, announce: bool = False) -> None:
        """Look at the circuits soon (``announce``: then tell the other processes too)."""
        self._dirty = True
        self._to_announce = self._to_announce or announce
        if self._serving and (self._worker is None or self._worker.done()):
            self._worker = asyncio.get_running_loop().create_task(self._looking())

    async def _looking(self) -> None:
        """Look until nothing new asks for a look."""
        while self._dirty:
            self._dirty = False
            announce, self._to_announce = self._to_announce, False
            try:
                await self._look()
                if announce and self._shared is not None:
                    await _announced(self._shared)
            except Exception as failed:  # a store that fails: the next look may do better
                logger.debug("tool list not looked at: %s", type(failed).__name__)

    async def _look(self) -> None:
        names = tuple(each.name for each in await self._runner.available(self._toolkit))
        self._recheck_later(names)
        if names == self._offered:
            return
        self._offered = names
        for connection in list(self._connections):
            await connection.send_tool_list_changed()  # (never raises: best effort)
        await self._bus.publish(ToolsListChanged())

    def _recheck_later(self, names: tuple[str, ...]) -> None:
        """While a tool is left out, look again after a quarter of its circuit's
        ``reset_timeout`` (the shortest of them)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        offered = set(names)
        resets = [
            breaker.reset_timeout
            for item in self._toolkit
            if item.name not in offered
            and (breaker := self._runner.policies(item.name).circuit_breaker) is not None
        ]
        if resets:
            delay = max(_SHORTEST_RECHECK, min(resets) / 4)
            self._timer = asyncio.get_running_loop().call_later(delay, self._poke)


def offered_tools(listing: list[types.Tool], names: list[str]) -> list[types.Tool]:
    """The tools of ``listing`` (the toolkit's, rendered) that are offered: in ``names``."""
    if len(names) == len(listing):
        return listing
    kept = set(names)
    return [tool for tool in listing if tool.name in kept]


def _redis_store_of(runner: ToolRunner) -> Any:
    """The runner's store when it is a ``RedisStore`` (the extra loaded), else None."""
    try:
        from tdk.runner._redis import RedisStore
    except ImportError:  # (no redis: no RedisStore either)
        return None
    store = runner._shared_store()
    return store if isinstance(store, RedisStore) else None


async def _listened(store: Any, heard: Callable[[], None]) -> None:
    from tdk.runner._redis_news import listen

    await listen(store, heard)


async def _announced(store: Any) -> None:
    from tdk.runner._redis_news import announce

    await announce(store)
