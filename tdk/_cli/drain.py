"""Output that never blocks a server: bytes queued for one thread that writes them out, dropped
and counted when the reader does not keep up.

A host that starts ``tdk serve`` may never read the server's stderr. Once the pipe is full
(64 KiB on Linux) a write blocks until the host reads, and a write made on the event loop (a
failed call's log line, an async tool's ``print()``) would stop every call for good. So
``tdk serve`` writes nothing to its standard streams itself: ``sys.stdout``, ``sys.stderr``
and its log handler are streams of a :class:`Drain`, whose writes queue the bytes and return
at once. One daemon thread writes the queue out, blocking as long as the reader makes it.

When :data:`MAX_PENDING` bytes are waiting, what is written next is dropped and counted.
Once a write is taken again, a line saying how many lines were dropped is put where they
were; and when the queue empties (the reader took everything), a count not yet said is said
then. A reader that closed the stream for good (``EPIPE``) gets nothing more: the rest is
dropped quietly.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import io
import os
import select
import threading
import time
from typing import Any, Final, Protocol, cast

__all__ = ["MAX_PENDING", "Drain"]

#: Bytes that may wait for the reader; what is written beyond them is dropped and counted.
MAX_PENDING: Final = 1 << 20


class _Text(Protocol):
    """A text stream to drain into when there is no descriptor (a test's capture)."""

    def write(self, text: str, /) -> int: ...
    def flush(self) -> None: ...


class Drain:
    """A queue of output for ``target`` (a file descriptor, or a text stream), written by a
    daemon thread of its own; ``name`` says which stream it is in the line about drops."""

    def __init__(self, target: int | _Text, name: str) -> None:
        self._target = target
        self._name = name
        self._queue: collections.deque[bytes] = collections.deque()
        self._pending = 0  # bytes queued, and the chunk being written
        self._unsaid = 0  # lines dropped and not said yet
        self._dropped = 0
        self._writing = False
        self._broken = False  # the reader closed the stream: nothing more can be written
        self._closed = False  # nothing more is taken; the thread ends once all is written
        self._lock = threading.Condition()
        threading.Thread(target=self._run, name=f"tdk-{name}", daemon=True).start()

    @property
    def fd(self) -> int | None:
        """The descriptor written to, or None for a text stream."""
        return self._target if isinstance(self._target, int) else None

    @property
    def dropped(self) -> int:
        """The lines dropped so far (a write without a newline counts as one)."""
        return self._dropped

    def put(self, data: bytes) -> None:
        """Queue ``data`` for the thread, or drop and count it when too much waits. Never
        blocks on the reader."""
        if not data:
            return
        with self._lock:
            if self._closed:
                return
            if self._broken or self._pending + len(data) > MAX_PENDING:
                lines = max(1, data.count(b"\n"))
                self._dropped += lines
                if not self._broken:
                    self._unsaid += lines
                return
            if self._unsaid:  # said where they were: before what comes after them
                self._append(self._dropped_line())
            self._append(data)
            self._lock.notify_all()

    def stream(self) -> io.TextIOWrapper:
        """A new text stream (line-buffered, UTF-8) whose writes go to this drain. Closing it
        closes only itself."""
        return io.TextIOWrapper(
            io.BufferedWriter(cast(Any, _Writer(self))),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )

    def settle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for everything queued (and the count of what was
        dropped) to be written; whether it was."""
        ends = time.monotonic() + timeout
        with self._lock:
            while not self._broken and (self._queue or self._writing or self._unsaid):
                left = ends - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return not self._broken

    def close(self) -> None:
        """Take nothing more: the thread ends once what is queued is written."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()

    def _append(self, data: bytes) -> None:
        self._queue.append(data)
        self._pending += len(data)

    def _dropped_line(self) -> bytes:
        count, self._unsaid = self._unsaid, 0
        lines = "line" if count == 1 else "lines"
        return (
            f"tdk serve: {count} {lines} of output dropped here: {self._name} was full "
            "(is it read?)\n"
        ).encode()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._unsaid:
                    self._writing = False
                    self._lock.notify_all()
                    if self._closed:
                        return
                    self._lock.wait()
                queued = bool(self._queue)
                chunk = self._queue.popleft() if queued else self._dropped_line()
                self._writing = True
            written = self._write(chunk)
            with self._lock:
                if queued:
                    self._pending -= len(chunk)
                if not written:
                    self._broken = True
                    self._queue.clear()
                    self._pending = 0
                    self._unsaid = 0

    def _write(self, chunk: bytes) -> bool:
        """Write ``chunk`` whole, blocking as long as the reader makes it; False when the
        stream cannot be written any more."""
        if not isinstance(self._target, int):
            try:
                self._target.write(chunk.decode("utf-8", "replace"))
                self._target.flush()
            except Exception:  # closed, or anything a replaced stream may raise
                return False
            return True
        view = memoryview(chunk)
        while view:
            try:
                view = view[os.write(self._target, view) :]
            except BlockingIOError:  # a non-blocking descriptor given by the parent
                with contextlib.suppress(OSError, ValueError):
                    select.select([], [self._target], [], 1.0)
            except InterruptedError:  # pragma: no cover - retried by Python itself (PEP 475)
                continue
            except OSError as failed:
                if failed.errno == errno.EAGAIN:  # pragma: no cover - as BlockingIOError
                    continue
                return False
        return True


class _Writer(io.RawIOBase):
    """The raw layer of a :meth:`Drain.stream`: every write is taken whole (queued or dropped)."""

    def __init__(self, drain: Drain) -> None:
        super().__init__()
        self._drain = drain

    def writable(self) -> bool:
        """Always."""
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        """Queue ``data`` (or drop it: see :class:`Drain`); the whole of it is taken."""
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        self._drain.put(bytes(data))
        return len(data)

    def fileno(self) -> int:
        """The descriptor the drain writes to (what a child process given this stream gets);
        ``io.UnsupportedOperation`` when it writes to a text stream."""
        fd = self._drain.fd
        if fd is None:
            raise io.UnsupportedOperation("fileno")
        return fd

    def isatty(self) -> bool:
        """Whether the descriptor written to is a terminal."""
        fd = self._drain.fd
        return fd is not None and os.isatty(fd)
