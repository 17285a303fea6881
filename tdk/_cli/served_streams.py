"""The standard streams of ``tdk serve``, for the whole life of the server.

Two promises, kept from before the tool module is imported until the server has ended:

- **Over stdio, stdout is the protocol's alone.** The descriptors the host gave (fd 0 and
  fd 1) are duplicated to private descriptors that only the protocol's reader and writer use;
  fd 1 then points at stderr and fd 0 at ``/dev/null``, and stay so. Whatever the module does
  (a ``print()`` at import, a thread of its own printing at any time, C code or a child
  process writing to fd 1, a read of stdin) reaches stderr or reads nothing: there is no
  moment between the import and the protocol taking stdout when a stray line could reach
  the host.
- **Writing never blocks the server.** ``sys.stdout``, ``sys.stderr`` and the log handler
  write into a :class:`~tdk._cli.drain.Drain`: a host that never reads stderr costs dropped (and
  counted) lines, never a frozen event loop.

Over HTTP only the second holds (stdout is then the process's own, drained the same way).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any, Final

from tdk._cli.drain import Drain
from tdk._cli.streams import duplicate, flush_stdout, on_descriptor, open_stderr

__all__ = ["SETTLE_SECONDS", "Protocol", "ServedStreams", "protocol_streams", "served_streams"]

#: Seconds the server's last output gets to reach a slow reader when the server ends.
SETTLE_SECONDS: Final = 2.0


class Protocol:
    """The two text streams of the MCP protocol over stdio: ``input`` (what the host sends)
    and ``output`` (what only the protocol's writer writes), and the host's leaving (the end
    of ``input``)."""

    def __init__(self, input: IO[str], output: IO[str]) -> None:
        self.input = input
        self.output = output
        self._ended = False
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def when_ended(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (in the reading thread, or now) once the host has closed the
        protocol's input."""
        with self._lock:
            if not self._ended:
                self._callbacks.append(callback)
                return
        callback()

    def end_of_input(self) -> None:
        """The host closed the protocol's input: call the callbacks (once)."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


class ServedStreams:
    """What :func:`served_streams` gives the server: the protocol's streams (over stdio), a
    line to say on stderr without blocking, and the stdout to take back after the import."""

    def __init__(self, protocol: Protocol | None, errors: Drain, outs: Drain) -> None:
        self.protocol = protocol
        self._errors = errors
        self._outs = outs

    def say(self, line: str) -> None:
        """``line`` on stderr, queued (never blocks)."""
        self._errors.put(f"{line}\n".encode(errors="backslashreplace"))

    def log_stream(self) -> IO[str]:
        """A stream on stderr for the server's log handler (of its own: a module that closes
        ``sys.stderr`` does not close it)."""
        return self._errors.stream()

    def take_back(self) -> None:
        """After the module's import: over stdio, ``sys.stdout`` is the server's again
        (whatever the module set it to: a tool's ``print()`` never reaches the protocol's
        writer); on both transports, a stream the module closed or dropped is replaced."""
        flush_stdout()
        if self.protocol is not None or _unusable(sys.stdout):
            sys.stdout = self._outs.stream()
        if _unusable(sys.stderr):
            sys.stderr = self._errors.stream()

    def settle(self, timeout: float = SETTLE_SECONDS) -> bool:
        """Wait up to ``timeout`` seconds for what is queued to be written; whether it was."""
        flush_stdout()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        settled = self._errors.settle(timeout)
        return (self._outs.settle(timeout) if self._outs is not self._errors else True) and settled

    @property
    def dropped(self) -> int:
        """Lines dropped so far because a reader did not keep up."""
        return self._errors.dropped + (self._outs.dropped if self._outs is not self._errors else 0)


#: The protocol's streams while :func:`served_streams` reserves them (one at most).
_reserved: list[Protocol] = []


def protocol_streams() -> Protocol | None:
    """The protocol's streams while :func:`served_streams` reserves them (``tdk serve`` over
    stdio), else None (``serve()`` then takes the process's stdin and stdout itself)."""
    return _reserved[-1] if _reserved else None


@contextlib.contextmanager
def served_streams(*, stdio: bool, keep: bool = False) -> Iterator[ServedStreams]:
    """The server's streams (see the module docstring) until the block ends; then, once
    what is queued has had :data:`SETTLE_SECONDS` to be written, the process's own again,
    unless ``keep``: the process ends with the server, and a thread still printing must not
    reach the host then either."""
    flush_stdout()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    open_stderr()
    errors = Drain(_target(sys.stderr, 2), "stderr")
    outs = errors if stdio else Drain(_target(sys.stdout, 1), "stdout")
    saved = (sys.stdin, sys.stdout, sys.stderr)
    saved_originals = (sys.__stdout__, sys.__stderr__)
    undo: list[Callable[[], None]] = []
    served = ServedStreams(None, errors, outs)
    try:
        if stdio:
            source, watched = _protocol_input(undo)
            served.protocol = Protocol(source, _protocol_output(undo))
            if watched is not None:
                watched.protocol = served.protocol
            sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (closed below)
            undo.append(sys.stdin.close)
        # (``sys.__stdout__`` and ``sys.__stderr__`` too: a module may write to them, and
        # flushing them must never wait for a reader either)
        setattr(sys, "__stdout__", outs.stream())  # noqa: B010 (typed as final)
        setattr(sys, "__stderr__", errors.stream())  # noqa: B010
        sys.stdout = outs.stream()
        sys.stderr = errors.stream()
        if served.protocol is not None:
            _reserved.append(served.protocol)
        yield served
    finally:
        if served.protocol is not None:
            _reserved.remove(served.protocol)
        served.settle()
        if not keep:
            sys.stdin, sys.stdout, sys.stderr = saved
            setattr(sys, "__stdout__", saved_originals[0])  # noqa: B010
            setattr(sys, "__stderr__", saved_originals[1])  # noqa: B010
            errors.close()
            outs.close()
            for each in reversed(undo):
                with contextlib.suppress(OSError, ValueError):
                    each()


def _target(stream: IO[str] | None, fd: int) -> int | IO[str]:
    """What a drain for the standard stream ``fd`` writes to: the descriptor, unless Python's
    stream is something else (a test's capture, an embedding program's file)."""
    return stream if stream is not None and not on_descriptor(stream, fd) else fd


def _unusable(stream: Any) -> bool:
    return stream is None or getattr(stream, "closed", True) is True


def _protocol_output(undo: list[Callable[[], None]]) -> IO[str]:
    """The protocol's output: a private duplicate of fd 1, which then points at stderr for
    everything else; or ``sys.stdout``'s buffer when it is not fd 1 (in process)."""
    stream: Any = sys.stdout
    if on_descriptor(stream, 1):
        private = duplicate(1)
        if private is not None:
            os.dup2(2, 1)
            undo.append(lambda: _give_back(1, private))
            raw = io.FileIO(private, "wb", closefd=False)
            return io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8")
    if stream is None:
        return open(os.devnull, "w", encoding="utf-8")  # (lives as the server)
    buffer = getattr(stream, "buffer", None)
    return stream if buffer is None else _Unowned(buffer, encoding="utf-8")


def _protocol_input(undo: list[Callable[[], None]]) -> tuple[IO[str], _Watched | None]:
    """The protocol's input: a private duplicate of fd 0, which then reads ``/dev/null``; or
    ``sys.stdin``'s buffer when it is not fd 0 (in process). Its end is the host leaving,
    which the :class:`_Watched` under it tells."""
    stream: Any = sys.stdin
    source: Any
    if on_descriptor(stream, 0) and (private := duplicate(0)) is not None:
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, 0)
        os.close(nothing)
        undo.append(lambda: _give_back(0, private))
        source = io.FileIO(private, "rb", closefd=False)
    elif stream is None:
        source = io.FileIO(os.devnull, "rb")
    elif (source := getattr(stream, "buffer", None)) is None:
        return stream, None  # (a text stream of a test: its end goes unseen)
    watched = _Watched(source)
    return _Unowned(io.BufferedReader(watched), encoding="utf-8", errors="replace"), watched


def _give_back(fd: int, private: int) -> None:
    os.dup2(private, fd)
    os.close(private)


class _Watched(io.RawIOBase):
    """A readable raw stream over ``source`` that tells its :class:`Protocol` (set once the
    protocol exists) of its end."""

    def __init__(self, source: Any) -> None:
        super().__init__()
        self._read: Callable[[Any], int | None] = getattr(
            source, "readinto1", getattr(source, "readinto", None)
        ) or _reading_into(source)
        self.protocol: Protocol | None = None

    def readable(self) -> bool:
        """Always."""
        return True

    def readinto(self, buffer: Any) -> int | None:
        """One read of the source; at its end, the protocol hears of it."""
        count = self._read(buffer)
        if count == 0 and len(buffer) > 0 and self.protocol is not None:
            self.protocol.end_of_input()
        return count


def _reading_into(source: Any) -> Callable[[Any], int | None]:
    """``readinto`` for a source that only has ``read`` (a test's stand-in for stdin)."""

    def readinto(buffer: Any) -> int | None:
        data = source.read(len(buffer))
        if data is None:
            return None
        buffer[: len(data)] = data
        return len(data)

    return readinto


class _Unowned(io.TextIOWrapper):
    """A text layer over a buffer that is not its own: closing it (or its collection) leaves
    the buffer open."""

    def close(self) -> None:
        """Detach from the buffer instead of closing it."""
        with contextlib.suppress(ValueError):
            self.detach()
