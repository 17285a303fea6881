"""Stdout set aside while a command loads and runs code that is not its own.

``tdk schema`` and ``tdk run`` write one JSON document on stdout: what a tool module prints
while it is imported, and a tool while it runs, must go elsewhere. (``tdk serve`` keeps its
streams aside for its whole life: see ``tdk._cli.served_streams``.)

:func:`streams_aside` points file descriptor 1 at stderr for the block (what C code and child
processes write), and makes ``sys.stdout`` a stream of the block's own on stderr's descriptor
(what Python prints, in any thread). The module never gets ``sys.stderr`` or the real
``sys.stdout`` object: the common ``sys.stdout = io.TextIOWrapper(sys.stdout.buffer, ...)``
would close what it wraps once dropped, and ``sys.stdout = sys.stderr`` or a ``StringIO``
would take the command's output away. After the block ``sys.stdout`` is the command's own
again. Closed standard streams are tolerated (``<&-``, ``>&-``, ``2>&-``).
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["duplicate", "flush_stdout", "on_descriptor", "open_stderr", "streams_aside"]


@contextlib.contextmanager
def streams_aside() -> Iterator[None]:
    """Stdout to stderr while the block runs, then back. What Python still buffers is
    flushed to stderr before stdout is given back, and ``sys.stdout`` is the command's own
    again whatever the block set it to."""
    flush_stdout()
    open_stderr()
    saved_out = duplicate(1)
    if saved_out is None:  # no stdout: nothing to keep clean
        yield
        return
    # The block's own stdout: stderr's descriptor, which closing this stream (or a wrapper
    # of its buffer) leaves open, and which stays valid for a module that keeps it.
    private = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), line_buffering=True, errors="backslashreplace"
    )
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(private):  # (restores ``sys.stdout`` on the way out)
            yield
    finally:
        flush_stdout()  # (to stderr still)
        with contextlib.suppress(Exception):
            private.flush()
        os.dup2(saved_out, 1)
        os.close(saved_out)
        if sys.stdout is None or sys.stdout.closed:  # the module closed sys.__stdout__
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)


def open_stderr() -> None:
    """Fd 2 on /dev/null when it is closed (``2>&-``), as a daemon's is: what the block
    prints has somewhere to go, and no descriptor opened later can take its number."""
    try:
        os.fstat(2)
    except OSError:
        nothing = os.open(os.devnull, os.O_WRONLY)
        if nothing != 2:
            os.dup2(nothing, 2)
            os.close(nothing)


def duplicate(fd: int) -> int | None:
    """A duplicate of ``fd`` above the standard three (so that a closed standard descriptor
    is never taken for it), or None when ``fd`` is closed."""
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return None


def flush_stdout() -> None:
    """Flush ``sys.stdout`` and ``sys.__stdout__`` (written to directly, or the one a module
    replaced), whatever a module left there (None, closed, or replaced)."""
    streams: tuple[Any, ...] = (sys.stdout, sys.__stdout__)
    for stream in streams:
        with contextlib.suppress(Exception):  # (None has no flush either)
            stream.flush()


def on_descriptor(stream: Any, fd: int) -> bool:
    """Whether ``stream`` (a standard stream, or what a module put in its place) writes to
    or reads from descriptor ``fd`` itself."""
    try:
        return bool(stream.fileno() == fd)
    except (AttributeError, OSError, ValueError):
        return False
