"""Event loops of tdk's own: one long-lived loop for the sync API, and a loop per run for
the ``tdk`` command.

**The sync API** (``Tool.run_sync``, ``Toolkit.run_sync``, ``ToolRunner.run_sync`` and
``run_many_sync``) runs every call on one event loop that tdk keeps running in a daemon thread
(:func:`run_blocking`). A loop per call would close after each call, and everything bound to
it would break on the next one: the pooled connections of a module-level
``httpx.AsyncClient`` ("Event loop is closed"), a ``redis.asyncio`` client, a runner's locks.
The loop starts with the first sync call, serves every thread at once (each call is a task
of its own, in a copy of its caller's context), and lives as long as the process; a forked
child starts its own. A caller that is itself inside a running loop is refused: blocking that
loop until the call ends would stall everything else on it (await the call there instead).

The calling thread waits for its call only: tasks the call leaves behind keep running on
tdk's loop (as on any application's loop) without holding the caller, and so does a thread
of ``asyncio.to_thread`` blocked for good (the loop's default executor runs each job in a
daemon thread). A caller interrupted while it waits (Ctrl-C) cancels its call, gives it
:data:`WIND_DOWN_SECONDS` to end, and raises. ``KeyboardInterrupt`` and ``SystemExit`` raised
in the call reach its caller, never tdk's loop, which keeps running (also when a body calls
``loop.stop()``).

**The ``tdk`` command** runs its one call (``tdk run``) or its server (``tdk serve``) with
:func:`run_in_new_loop`: like ``asyncio.run()``, but it winds down within a bound. asyncio.run()
waits for every task still pending (after cancelling it) and for every thread of the default
executor; here leftover tasks are cancelled and given :data:`WIND_DOWN_SECONDS`, and the
default executor's threads are daemons that nothing waits for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from tdk._execution.threads import blocking, call_ended, waiting_context

__all__ = ["WIND_DOWN_SECONDS", "refuse_running_loop", "run_blocking", "run_in_new_loop"]

#: Seconds the tasks a call left behind (``tdk run``), or a call its caller gave up on (the
#: sync API), get to end once cancelled.
WIND_DOWN_SECONDS: Final = 1.0

_T = TypeVar("_T")


def refuse_running_loop(what: str, instead: str) -> None:
    """Raise ``RuntimeError`` when this thread runs an event loop: ``what()`` would block it
    (await ``instead()`` there).

    Called before the call's coroutine is made (a refused call leaves none unawaited)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        f"{what}() cannot be called from a running event loop (it would block the loop "
        f"until the call ends); await {instead}() there"
    )


def run_blocking(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on tdk's long-lived loop and wait for its result (or what it raised).

    Raises ``RuntimeError`` (and closes ``coro``) when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError("tdk cannot wait for its loop inside a running one")
    loop = _TDK_LOOP.get()
    context = waiting_context()
    done: concurrent.futures.Future[_T] = concurrent.futures.Future()
    started: list[asyncio.Task[None]] = []

    def start() -> None:
        try:
            started.append(loop.create_task(_hand_over(coro, done), context=context))
        except BaseException as exc:  # pragma: no cover (tdk's loop refused a task)
            coro.close()
            done.set_exception(exc)

    loop.call_soon_threadsafe(start, context=context)
    try:
        return done.result()
    except BaseException:
        if not done.done():  # pragma: no cover (Ctrl-C while waiting: see the tests)
            # The caller gave up (a signal): the call is cancelled, and given time to end.
            loop.call_soon_threadsafe(_give_up, started)
            concurrent.futures.wait([done], WIND_DOWN_SECONDS)
        raise
    finally:
        call_ended(context)


async def _hand_over(coro: Coroutine[Any, Any, _T], done: concurrent.futures.Future[_T]) -> None:
    """Run the call and hand its outcome to the waiting thread: everything it raises,
    ``KeyboardInterrupt`` and ``SystemExit`` included, goes there and not to tdk's loop."""
    try:
        value = await coro
    except BaseException as exc:
        done.set_exception(exc)
    else:
        done.set_result(value)


def _give_up(started: list[asyncio.Task[None]]) -> None:  # pragma: no cover (as above)
    """Cancel the call its caller gave up on (in tdk's loop)."""
    for task in started:
        task.cancel()


class _TdkLoop:
    """The long-lived loop of the sync API, started by the first call that needs it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._forked_away: list[asyncio.AbstractEventLoop] = []
        """Loops of the parent process, in a forked child: never run, never closed here
        (kept, so that no warning about an unclosed loop comes of them)."""

    def get(self) -> asyncio.AbstractEventLoop:
        """The loop, running in its thread (started now if it is not yet)."""
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:  # pragma: no branch (else another thread started it)
                loop = asyncio.new_event_loop()
                loop.set_default_executor(_DaemonExecutor())
                threading.Thread(
                    target=_keep_running, args=(loop,), name="tdk-loop", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def _after_fork(self) -> None:  # pragma: no cover (run in a forked child, see the tests)
        """In a forked child: the parent's loop thread does not exist here."""
        self._lock = threading.Lock()
        if self._loop is not None:
            self._forked_away.append(self._loop)
            self._loop = None


def _keep_running(loop: asyncio.AbstractEventLoop) -> None:
    """The loop's thread: run it for as long as the process lives."""
    asyncio.set_event_loop(loop)
    while not loop.is_closed():  # pragma: no branch (nothing closes it)
        try:
            loop.run_forever()  # returns when a body calls loop.stop(): run on
        except BaseException:  # noqa: S112 (KeyboardInterrupt or SystemExit out of a task)
            # It reached its caller through the task that raised it; the loop runs on.
            continue


_TDK_LOOP: Final = _TdkLoop()
if hasattr(os, "register_at_fork"):  # pragma: no branch (every POSIX system has it)
    os.register_at_fork(after_in_child=_TDK_LOOP._after_fork)


def run_in_new_loop(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` in a new event loop and return its result, as ``asyncio.run()`` does,
    without waiting past :data:`WIND_DOWN_SECONDS` for what it leaves behind.

    Raises ``RuntimeError`` (and closes ``coro``) when a loop already runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError("tdk cannot run its own event loop inside a running one")
    loop = asyncio.new_event_loop()
    loop.set_default_executor(_DaemonExecutor())
    asyncio.set_event_loop(loop)
    try:
        with blocking():  # this thread waits for the sync calls made here
            return _run_to_end(loop, loop.create_task(coro))
    finally:
        try:
            _wind_down(loop)
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _run_to_end(loop: asyncio.AbstractEventLoop, future: asyncio.Future[_T]) -> _T:
    """``loop.run_until_complete(future)``, run again whenever something in it stops the loop
    before ``future`` is done (a body calling ``loop.stop()``): the loop is tdk's."""
    while True:
        try:
            return loop.run_until_complete(future)
        except RuntimeError:
            if future.done():
                raise  # the future's own error


def _wind_down(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks left in ``loop`` and wait a little for them and for the async
    generators to close; what does not end in time is left to the garbage collector."""
    leftovers = asyncio.all_tasks(loop)
    for task in leftovers:
        task.cancel()
    closing = loop.create_task(loop.shutdown_asyncgens())
    done, _ = _run_to_end(
        loop, loop.create_task(asyncio.wait({*leftovers, closing}, timeout=WIND_DOWN_SECONDS))
    )
    for task in done:  # their outcome is nobody's concern now: read it, so none is "lost"
        if not task.cancelled():
            task.exception()


class _DaemonExecutor(concurrent.futures.ThreadPoolExecutor):
    """A default executor that runs each job in a daemon thread, and whose shutdown waits for
    nothing (a thread blocked for good cannot keep the loop, or the process, from ending).

    A ``ThreadPoolExecutor`` only because asyncio accepts nothing else as a default executor:
    none of its own threads or queue is used."""

    def submit(
        self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future[_T]:
        """Run ``fn(*args, **kwargs)`` in a new daemon thread."""
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()

        def work() -> None:
            if not future.set_running_or_notify_cancel():  # pragma: no cover (cancelled early)
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # (as ThreadPoolExecutor's workers do)
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=work, name="tdk-to-thread", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Wait for nothing: the threads are daemons."""
