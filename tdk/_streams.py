"""Stdout set aside while a command loads and runs code that is not its own.

``tdk schema`` and ``tdk run`` write one JSON document on stdout, and ``tdk serve`` over
stdio writes the MCP protocol there: what a tool module prints while it is imported, and a
tool while it runs, must go elsewhere. :func:`streams_aside` points file descriptor 1 at
stderr for the block (what Python, C code and child processes write), and gives an in-process
``sys.stdout`` that is not file descriptor 1 (a test's capture, an embedding application's
stream) a stream of its own on stderr. The module never gets ``sys.stderr`` itself as its
stdout: the common ``sys.stdout = io.TextIOWrapper(sys.stdout.buffer, ...)`` would then close
stderr when that wrapper goes. Closed standard streams are tolerated (``2>&-``, ``<&-``).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["flush_stdout", "streams_aside"]


@contextlib.contextmanager
def streams_aside(*, stdin: bool) -> Iterator[None]:
    """Stdout to stderr (or to /dev/null when stderr is closed) while the block runs, then
    back; with ``stdin``, fd 0 from /dev/null too. What Python still buffers is flushed to
    stderr before stdout is given back."""
    flush_stdout()
    # Stderr first: with fd 2 closed, the next descriptor opened would be 2 (a duplicate of
    # stdout, say), and what the module prints would go to stdout after all.
    sink = _duplicate(2)
    if sink is None:
        sink = os.open(os.devnull, os.O_WRONLY)
    saved_out = _duplicate(1)
    if saved_out is None:  # no stdout: nothing to keep clean
        os.close(sink)
        yield
        return
    saved_in = _duplicate(0) if stdin else None
    private: io.TextIOWrapper | None = None
    try:
        os.dup2(sink, 1)
        if saved_in is not None:
            nothing = os.open(os.devnull, os.O_RDONLY)
            os.dup2(nothing, 0)
            os.close(nothing)
        if not _writes_to_fd(sys.stdout, 1):
            private = io.TextIOWrapper(
                io.FileIO(os.dup(sink), "w"), line_buffering=True, errors="backslashreplace"
            )
        with contextlib.redirect_stdout(private) if private else contextlib.nullcontext():
            yield
    finally:
        flush_stdout()  # (to stderr still)
        if private is not None:
            with contextlib.suppress(Exception):
                private.close()
        os.dup2(saved_out, 1)
        os.close(saved_out)
        if saved_in is not None:
            os.dup2(saved_in, 0)
            os.close(saved_in)
        os.close(sink)
        if sys.stdout is None or sys.stdout.closed:  # the module closed it, or dropped it
            sys.stdout = io.TextIOWrapper(io.FileIO(os.dup(1), "w"), line_buffering=True)


def _duplicate(fd: int) -> int | None:
    """A duplicate of ``fd``, or None when it is closed."""
    try:
        return os.dup(fd)
    except OSError:
        return None


def _writes_to_fd(stream: Any, fd: int) -> bool:
    try:
        return bool(stream.fileno() == fd)
    except Exception:  # no fileno (a capture, None), or a closed stream
        return False


def flush_stdout() -> None:
    """Flush ``sys.stdout`` and ``sys.__stdout__`` (written to directly, or the one a module
    replaced), whatever a module left there (None, closed, or replaced)."""
    streams: tuple[Any, ...] = (sys.stdout, sys.__stdout__)
    for stream in streams:
        with contextlib.suppress(Exception):  # (None has no flush either)
            stream.flush()
