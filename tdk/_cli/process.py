"""The ``tdk`` command's process, against what a tool module does to it while imported.

- **A fork at import.** A module that forks while imported returns from the import twice:
  the child would run the command again (``tdk run`` calling the tool twice, ``tdk schema``
  printing two documents). :func:`import_guard` ends such a child quietly, with
  ``os._exit(0)`` (nothing of the parent's buffers is written twice), before it reaches the
  command. A child that never returns from the import (a worker the module starts) is the
  module's own business.
- **Signals.** A module that ignores or blocks SIGINT (or SIGTERM, SIGHUP, SIGPIPE) while
  imported would make the command deaf to Ctrl-C: :func:`import_guard` puts back the
  handlers and the signal mask the command had before the import.
- **An exit that skips everything** (``os._exit(0)`` at import, a C extension's
  ``exit()``). Nothing in a process survives it, so the process cannot tell: the command
  would end with status 0 and print nothing. :func:`supervised` runs a short command (``tdk
  check``, ``schema``, ``run``) in a forked child that tells its parent when the command has
  run to its end; a child that ends without saying so ends the command with status 1 (or
  its own non-zero status), saying why. ``tdk serve`` is not supervised: a host watches and
  signals the process it started, which a supervisor in between would break, and a server
  that ends before answering ``initialize`` is no success to any host.
- **A thread that never ends.** A module that starts a thread (not a daemon) at import would
  hold the command for ever after it printed its result: Python waits for such threads
  before it ends. The supervised child gives them :data:`THREADS_GRACE` seconds, then ends
  without them, its exit handlers run (as ``tdk serve`` leaves when its server has ended).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

__all__ = ["THREADS_GRACE", "can_supervise", "import_guard", "supervised", "threads_held"]

#: Seconds threads the module started (not daemons) get to end once the command has run,
#: before the command's process ends without them.
THREADS_GRACE: Final = 1.0

#: The signals whose handlers a module's import may not change for the command.
_GUARDED: Final = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGPIPE")
    if hasattr(signal, name)
)

#: What the supervised child writes to its parent once the command has run to its end.
_DONE: Final = b"done"


@contextlib.contextmanager
def import_guard() -> Iterator[None]:
    """Import a module in the block: a child it forked ends at the block's end; the signal
    handlers and mask are the command's own again (see the module docstring)."""
    pid = os.getpid()
    main = threading.current_thread() is threading.main_thread()
    handlers = {number: signal.getsignal(number) for number in _GUARDED} if main else {}
    masking = hasattr(signal, "pthread_sigmask")
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, []) if masking else None
    try:
        yield
    finally:
        if os.getpid() != pid:
            os._exit(0)  # a child the module forked: it never runs the command
        for number, handler in handlers.items():
            if handler is not None and signal.getsignal(number) is not handler:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(number, handler)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def can_supervise() -> bool:
    """Whether :func:`supervised` can run here (it needs ``fork``, and the main thread)."""
    return (
        hasattr(os, "fork")
        and hasattr(signal, "sigwaitinfo")
        and threading.current_thread() is threading.main_thread()
    )


def supervised(command: Callable[[], int], name: str, target: str) -> int:
    """Run ``command`` in a forked child and return its status; a child that ends without
    having run the command to its end (see the module docstring) gives 1, or its own
    non-zero status, and a line on stderr naming ``name`` and ``target``."""
    reading, writing = _pipe()
    _flush()
    forwarding = _Forwarding()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, seen by the tests from outside
        # The child goes on as the command's process: it returns the status to the caller
        # and ends as any process does (atexit handlers, a telemetry exporter's flush).
        forwarding.release()
        os.close(reading)
        try:
            status = command()
        finally:
            _said_done(writing)
        if threads_held(THREADS_GRACE):
            _leave_now(status)
        return status
    os.close(writing)
    try:
        status = forwarding.wait(child)
    finally:
        forwarding.restore()
    os.set_blocking(reading, False)
    try:
        done = os.read(reading, len(_DONE)) == _DONE
    except BlockingIOError:  # a grandchild holds the pipe open and nothing was written
        done = False
    finally:
        os.close(reading)
    if status < 0:  # ended by a signal: this process ends by it too, as it would have
        _die_by(-status)
        return 128 - status
    if not done:
        print(
            f"tdk {name}: the process ended (status {status}) while running {target}, "
            "before the command could finish: the module (or a tool) ended it, "
            "with os._exit() or from C code",
            file=sys.stderr,
        )
        return status or 1
    return status


def threads_held(grace: float) -> bool:
    """Whether a thread other than this one (not a daemon) is still running after up to
    ``grace`` seconds of waiting for them all."""
    ends = time.monotonic() + grace
    held = False
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, ends - time.monotonic()))
            held = held or thread.is_alive()
    return held


def _leave_now(status: int) -> None:  # pragma: no cover - in the child
    """End the process with ``status`` now, without the threads that hold it: the exit
    handlers run first (a telemetry exporter's flush), as they would have."""
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    _flush()
    os._exit(status)


def _die_by(number: int) -> None:
    """End this process by the signal ``number`` (its default action), when that ends it."""
    _flush()
    with contextlib.suppress(OSError, ValueError):
        signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)


def _pipe() -> tuple[int, int]:
    """A pipe whose ends are above the standard descriptors (one of those may be closed, and
    the pipe must not take its place)."""
    ends = os.pipe()
    try:
        return fcntl.fcntl(ends[0], fcntl.F_DUPFD_CLOEXEC, 3), fcntl.fcntl(
            ends[1], fcntl.F_DUPFD_CLOEXEC, 3
        )
    finally:
        for end in ends:
            os.close(end)


def _said_done(writing: int) -> None:  # pragma: no cover - in the child
    """The child's side: the command has run to its end (a failure of its own included);
    said to the parent through ``writing``, after what it printed."""
    _flush()
    with contextlib.suppress(OSError):
        os.write(writing, _DONE)
        os.close(writing)


class _Forwarding:
    """The parent's side while its child runs the command. From before the fork (so that no
    signal falls between), SIGINT, SIGTERM, SIGHUP and SIGCHLD are blocked and taken one by
    one: a signal sent to the parent by a process (``kill``) is passed on to the child; one
    the kernel sent (Ctrl-C or a hangup of the terminal, which signals the whole foreground
    process group) reached the child too, and is not sent twice."""

    _WATCHED: Final = frozenset(
        getattr(signal, name)
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGCHLD")
        if hasattr(signal, name)
    )

    def __init__(self) -> None:
        self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, self._WATCHED)

    def wait(self, child: int) -> int:
        """The exit code of ``child`` (negative: the signal that ended it)."""
        while True:
            info = signal.sigwaitinfo(self._WATCHED)
            if info.si_signo == signal.SIGCHLD:
                ended, wait_status = os.waitpid(child, os.WNOHANG)
                if ended == child:
                    return os.waitstatus_to_exitcode(wait_status)
            elif info.si_code <= 0:  # SI_USER, SI_QUEUE, SI_TKILL: aimed at this process
                with contextlib.suppress(OSError):
                    os.kill(child, info.si_signo)

    def restore(self) -> None:
        """The signal mask from before."""
        signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)

    def release(self) -> None:  # pragma: no cover - runs in the child
        """In the child: the mask from before, less the signals watched. The command's
        process takes Ctrl-C, SIGTERM and a hangup even when it was started with them
        blocked (a mask is inherited: a parent blocking SIGINT while it starts tdk would
        otherwise leave a command that forwards Ctrl-C to a child deaf to it)."""
        signal.pthread_sigmask(signal.SIG_SETMASK, self._mask - self._WATCHED)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
