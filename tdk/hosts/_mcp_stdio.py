"""MCP over the process's stdin and stdout: tdk's transport for the SDK's server.

It does what the SDK's ``stdio_server()`` does (one JSON-RPC message a line; while serving,
fd 0 reads the null device and fd 1 writes to stderr, so that what tools read or print never
touches the protocol; both are given back afterwards), and keeps three promises the SDK's
does not:

- every request that carries an id gets one answer: a line the SDK's reader refuses is
  answered with the JSON-RPC error saying why (:mod:`tdk.hosts._mcp_refusal`), where the
  SDK's drops it and the client waits for ever;
- a line is read up to ``MAX_LINE`` bytes (4 MiB, the SDK's bound of an HTTP body); a longer
  one is skipped, without being held, and answered as an invalid request;
- a request read before the client closed stdin is answered, once the server has ended,
  even when the SDK cancelled it before handling it (:mod:`tdk.hosts._mcp_pending`);
- a message that cannot be written (its JSON cannot be made) costs that message, answered
  as an internal error when it had an id, never the server: the SDK's writer dies with it,
  and every call in flight is lost. (tdk's own answers are checked before they get here.)

The reader stops reading while the client leaves ``max_unread`` answers unread
(:class:`~tdk.hosts._mcp_load.Load`): a client that writes requests without reading answers
gets its writes blocked, instead of a server that holds an answer per line.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator
from typing import IO, Any, Final, cast

import anyio
from anyio.abc import AsyncResource
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    jsonrpc_message_adapter,
)

from tdk._cli.served_streams import protocol_streams
from tdk._cli.streams import on_descriptor
from tdk.hosts._mcp_load import Load
from tdk.hosts._mcp_pending import Pending
from tdk.hosts._mcp_refusal import refusal, too_long

__all__ = ["MAX_LINE", "stdio_streams"]

logger = logging.getLogger("tdk.hosts.mcp")

#: The longest line read, in bytes: as long as the SDK lets an HTTP body be.
MAX_LINE: Final = DEFAULT_MAX_REQUEST_BODY_SIZE
#: How much of a line too long is read at a time, to skip it.
_SKIP_CHUNK: Final = 1 << 16


@contextlib.asynccontextmanager
async def stdio_streams(
    load: Load,
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception], _Writer]]:
    """The read and write streams of a server on stdin and stdout, while the block runs;
    once it has ended (the server with it), the requests left unanswered are answered."""
    with _protocol_ends() as (source, sink):
        pending = Pending()
        writer = _Writer(sink, pending)
        sending, receiving = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        async with anyio.create_task_group() as group:
            group.start_soon(_take_lines, source, sending, writer, load, pending)
            yield receiving, writer
        await writer.last_words(pending.closing_answers())


async def _take_lines(
    source: IO[bytes],
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    writer: _Writer,
    load: Load,
    pending: Pending,
) -> None:
    """Hand each message of ``source`` to the server, until the end of the input; answer the
    requests that cannot be handed over."""
    async with messages:
        while True:
            await load.room()
            line = await anyio.to_thread.run_sync(_line_of, source)
            if line is None:
                return
            message, answer = _message_of(line)
            try:
                if message is not None:
                    pending.read(message)
                    await messages.send(SessionMessage(message))
                elif answer is not None:
                    await writer.send(SessionMessage(answer))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the server stopped


def _message_of(line: bytes | _Cut) -> tuple[JSONRPCMessage | None, JSONRPCError | None]:
    """The message of ``line`` for the server, or the error answering it (or neither: a blank
    line, a notification or response that cannot be read)."""
    if isinstance(line, _Cut):
        return None, too_long(line.head, MAX_LINE)
    text = line.decode("utf-8", "replace")
    if not text.strip():
        return None, None
    try:
        message = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception:  # (ValueError too: an integer over 4,300 digits)
        return None, refusal(text)
    # A request whose id is no string or integer (true, 1.5, null) reads as a notification
    # (its id dropped): it is refused, with a null id.
    if isinstance(message, JSONRPCNotification) and '"id"' in text:
        answer = refusal(text)
        if answer is not None:
            return None, answer
    return message, None


class _Cut:
    """A line longer than ``MAX_LINE``: its first ``MAX_LINE`` bytes (the rest was skipped)."""

    __slots__ = ("head",)

    def __init__(self, head: bytes) -> None:
        self.head = head


def _line_of(source: IO[bytes]) -> bytes | _Cut | None:
    """The next line of ``source`` (in a worker thread: it blocks), cut when too long; None at
    the end of the input."""
    line = source.readline(MAX_LINE + 1)
    if not line:
        return None
    if len(line) <= MAX_LINE or line.endswith(b"\n"):
        return line
    rest = line[MAX_LINE:]
    while rest and not rest.endswith(b"\n"):
        rest = source.readline(_SKIP_CHUNK)
    return _Cut(line[:MAX_LINE])


class _Writer(AsyncResource):
    """The write stream of the server: each message one line of ``sink``, one at a time, in
    a worker thread (a client slow to read blocks the writing task, never the loop)."""

    def __init__(self, sink: IO[bytes], pending: Pending) -> None:
        self._sink = sink
        self._pending = pending
        self._turn = anyio.Lock()
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        """Write ``item`` (the internal error of its request instead, when it cannot be
        written); ``ClosedResourceError`` once the stream is closed."""
        if self._closed:
            raise anyio.ClosedResourceError
        data = _line(item)
        if not data:  # a notification that could not be written: dropped
            return
        async with self._turn:
            await anyio.to_thread.run_sync(self._write, data)
        self._pending.written(item.message)

    async def last_words(self, answers: list[JSONRPCError]) -> None:
        """Write ``answers`` once the server has ended (the stream closed by then); a client
        that has stopped reading gets none."""
        if not answers:
            return
        data = b"".join(_encoded(answer) for answer in answers)
        with contextlib.suppress(OSError, ValueError):
            async with self._turn:
                await anyio.to_thread.run_sync(self._write, data)

    def _write(self, data: bytes) -> None:
        self._sink.write(data)
        self._sink.flush()

    async def aclose(self) -> None:
        """Refuse further messages."""
        self._closed = True


def _line(item: SessionMessage) -> bytes:
    """``item`` as a line of JSON; for one whose JSON cannot be made (nested too deep, text
    that is not Unicode), the error answering its request, or nothing (a notification)."""
    message = item.message
    try:
        return _encoded(message)
    except Exception as unwritable:
        request_id = getattr(message, "id", None)
        logger.error(
            "a message to the client could not be written (%s); %s",
            type(unwritable).__name__,
            "answered as an internal error" if request_id is not None else "dropped",
        )
        if request_id is None:
            return b""
        failed = JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=ErrorData(
                code=INTERNAL_ERROR, message="Internal error: the answer could not be written"
            ),
        )
        try:
            return _encoded(failed)
        except Exception:  # (the id itself: a lone surrogate)
            return _encoded(failed.model_copy(update={"id": None}))


def _encoded(message: Any) -> bytes:
    text: str = message.model_dump_json(by_alias=True, exclude_unset=True)
    return text.encode() + b"\n"


@contextlib.contextmanager
def _protocol_ends() -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """The protocol's input and output while the block runs: those ``tdk serve`` reserved
    for the whole life of the server (see :mod:`tdk._cli.served_streams`: the end of their input
    is the host leaving), else stdin and stdout, claimed for the block."""
    reserved = protocol_streams()
    if reserved is not None:
        yield cast(Any, reserved.input).buffer, cast(Any, reserved.output).buffer
        return
    with _claimed(0, sys.stdin, "rb") as source, _claimed(1, sys.stdout, "wb") as sink:
        yield source, sink


@contextlib.contextmanager
def _claimed(fd: int, stream: Any, mode: str) -> Iterator[IO[bytes]]:
    """The protocol's end of standard descriptor ``fd`` (0 or 1) while the block runs.

    When ``stream`` (``sys.stdin`` or ``sys.stdout``) is that descriptor's, the protocol gets
    a private duplicate of it, and ``fd`` itself is pointed elsewhere for the block: stdin at
    the null device, stdout at stderr. Otherwise (a stream an application put in its place)
    the stream's own buffer is the protocol's, as it is."""
    if not on_descriptor(stream, fd):
        yield stream.buffer
        return
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    _divert(fd)
    wire = os.fdopen(private, mode, closefd=False)
    try:
        yield wire
    finally:
        with contextlib.suppress(OSError, ValueError):
            wire.flush()
        os.dup2(private, fd)
        os.close(private)


def _divert(fd: int) -> None:
    """Point ``fd`` away from the protocol: 0 at the null device, 1 at stderr (or the null
    device, when stderr is closed)."""
    if fd == 1:
        with contextlib.suppress(OSError):
            os.dup2(2, 1)
            return
    nothing = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
    try:
        os.dup2(nothing, fd)
    finally:
        os.close(nothing)
