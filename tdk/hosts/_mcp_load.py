"""How much one MCP server holds at once: the calls it runs, and the messages it has handed to
its transports that are not written out yet (a client that does not read its answers).

Both are bounded. A ``tools/call`` that would exceed either bound is not run: it is answered
at once with a ``TOOL_RUNTIME_BULKHEAD_FULL`` result (retryable: the server is busy, not
broken). tdk's stdio transport also stops reading requests while the client leaves too many
answers unread, so that a client that writes without reading cannot make the server hold an
answer (even a small one saying "busy") for each line it writes.
"""

from __future__ import annotations

from typing import Final, Generic, TypeVar

import anyio
from anyio.abc import AsyncResource

from tdk._compat.mcp_streams import WriteStream
from tdk.errors import ToolBulkheadFullError

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "DEFAULT_MAX_UNREAD", "Load"]

#: Calls one server runs at once, by default: far above what one host asks of it, far below
#: what exhausts a process (a call in flight holds its task, arguments and runner state).
DEFAULT_MAX_IN_FLIGHT: Final = 256
#: Messages written by the server that a client may leave unread, by default (each may hold
#: a large answer).
DEFAULT_MAX_UNREAD: Final = 32

T = TypeVar("T")


class Load:
    """What one server holds: ``running`` calls (at most ``max_in_flight``) and ``waiting``
    messages its transports have not written out yet (at most ``max_unread``, as far as
    calls go)."""

    __slots__ = ("_freed", "max_in_flight", "max_unread", "running", "waiting")

    def __init__(self, max_in_flight: int, max_unread: int) -> None:
        for option, value in (("max_in_flight", max_in_flight), ("max_unread", max_unread)):
            if type(value) is not int or value < 1:
                raise ValueError(f"{option} must be a positive int, not {value!r}")
        self.max_in_flight = max_in_flight
        self.max_unread = max_unread
        self.running = 0
        self.waiting = 0
        self._freed: anyio.Event | None = None

    def refusal(self) -> ToolBulkheadFullError | None:
        """Why a call arriving now is not run (the server is busy), or None."""
        if self.running >= self.max_in_flight:
            return ToolBulkheadFullError(
                "The server is busy: it is running as many calls as it takes at once. "
                "Try again shortly.",
                developer_message=(
                    f"{self.running} calls in flight: the server's max_in_flight is "
                    f"{self.max_in_flight}"
                ),
                max_concurrent=self.max_in_flight,
            )
        if self.waiting >= self.max_unread:
            return ToolBulkheadFullError(
                "The server is busy: earlier answers have not been read yet. Try again shortly.",
                developer_message=(
                    f"{self.waiting} messages wait for the client to read them: the server's "
                    f"max_unread is {self.max_unread}"
                ),
            )
        return None

    async def room(self) -> None:
        """Wait until fewer than ``max_unread`` messages wait to be written."""
        while self.waiting >= self.max_unread:
            if self._freed is None:
                self._freed = anyio.Event()
            await self._freed.wait()

    def counted(self, stream: WriteStream[T]) -> _Counted[T]:
        """``stream``, counting in ``waiting`` each message being sent through it."""
        return _Counted(stream, self)

    def _written(self) -> None:
        self.waiting -= 1
        freed = self._freed
        if freed is not None and self.waiting < self.max_unread:
            self._freed = None
            freed.set()


class _Counted(AsyncResource, Generic[T]):
    """A write stream counting the messages in its ``send()`` (written out, for a transport
    whose ``send`` writes; taken by the transport's writer, for the SDK's own transports)."""

    __slots__ = ("_load", "_stream")

    def __init__(self, stream: WriteStream[T], load: Load) -> None:
        self._stream = stream
        self._load = load

    async def send(self, item: T, /) -> None:
        """Send ``item``, counted as waiting until the stream has taken it."""
        self._load.waiting += 1
        try:
            await self._stream.send(item)
        finally:
            self._load._written()

    async def aclose(self) -> None:
        """Close the stream."""
        await self._stream.aclose()
