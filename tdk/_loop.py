"""An event loop of tdk's own, for ``Tool.run_sync`` and the ``tdk`` command.

``asyncio.run()`` does not return until everything the call left behind has ended: it waits
for every task still pending (after cancelling it) and for every thread of the loop's default
executor (``asyncio.to_thread``). A tool body can leave both behind, stuck: a task that ignores
its cancellation, a thread blocked on a socket. ``run_sync()`` must still return at the time
limit, so :func:`run_in_new_loop` runs the call like ``asyncio.run()`` does but winds down
within a bound: leftover tasks are cancelled and given :data:`WIND_DOWN_SECONDS`, and the
default executor runs each job in a daemon thread that nothing waits for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from tdk._threads import blocking

__all__ = ["WIND_DOWN_SECONDS", "run_in_new_loop"]

#: Seconds the tasks a call left behind get to end once cancelled, before the loop closes.
WIND_DOWN_SECONDS: Final = 1.0

_T = TypeVar("_T")


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
