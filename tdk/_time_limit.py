"""Time limits on tool bodies: past its limit, a call is a timeout, whatever the body does.

A sync body in a worker thread cannot be stopped: at the limit its caller stops waiting
(:meth:`Job.abandon <tdk._threads.Job.abandon>`) and the body runs on in its thread. An async
body is cancelled at the limit, but it may ignore the cancellation (catch ``CancelledError``
and carry on). :func:`await_coroutine` drives such a body inside the caller's own task (no
task of its own: the body sees the caller's context and ``current_task()``, and costs no
scheduling), and once a cancellation has reached the body, gives it a short grace to finish
its cleanup; a body still running after that is let go of, and the cancellation goes on as
if the body had honoured it. Either way the caller's cancellation is never swallowed.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Final

from tdk._threads import DROPPED, Job
from tdk.errors import ToolTimeoutError

__all__ = ["MAX_GRACE", "await_coroutine", "await_job"]

#: Seconds a cancelled async body may keep running to clean up (at most its limit).
MAX_GRACE: Final = 1.0


async def await_job(job: Job, limit: float) -> None:
    """Wait for a worker-thread job for at most ``limit`` seconds; raise
    :class:`~tdk.errors.ToolTimeoutError` past it (the body goes on in its thread)."""
    try:
        async with asyncio.timeout(limit) as scope:
            await job.future
    except TimeoutError:
        if not scope.expired():  # pragma: no cover (only the limit ends this wait)
            raise
        job.abandon()
        if job.state is DROPPED:
            raise _timeout(
                limit, "It never started: every worker thread was busy with other calls."
            ) from None
        raise _timeout(
            limit, "The sync body is still running in its worker thread (it cannot be stopped)."
        ) from None


async def await_coroutine(coro: Coroutine[Any, Any, Any], limit: float) -> Any:
    """``await coro`` for at most ``limit`` seconds; raise
    :class:`~tdk.errors.ToolTimeoutError` past it, whatever the body does with the
    cancellation (see the module docstring).

    The body's first step runs before the limit is set up: a body that finishes without ever
    waiting (nothing could have interrupted it) costs no timer.
    """
    try:
        first = coro.send(None)
    except StopIteration as finished:
        return finished.value
    try:
        async with asyncio.timeout(limit) as scope:
            return await _Relinquishing(coro, first, min(limit, MAX_GRACE), scope.expired)
    except TimeoutError:
        if scope.expired():
            raise _timeout(limit, None) from None
        raise  # a TimeoutError of the body's own: mapped by the table


def _timeout(limit: float, developer_message: str | None) -> ToolTimeoutError:
    return ToolTimeoutError(
        f"The tool did not finish within {limit:.3g} s.",
        timeout=limit,
        developer_message=developer_message,
    )


class _Relinquishing:
    """Awaits a coroutine as ``await`` does (same task, same context), but lets go of it when
    it keeps running for ``grace`` seconds after an ``expired()`` time limit cancelled it.

    Only the limit's cancellation counts: a body may cancel its own work and catch that (an
    ``asyncio.timeout`` or an anyio cancel scope inside it cancels this same task). A plain
    future the body awaits is handed to the task as it is: cancelling the task cancels it,
    and the cancellation reaches the body at once. Anything else (a task, a gathering) may
    not end when cancelled, so the task waits for it through a future of tdk's own, which
    the limit can always end.
    """

    __slots__ = ("_coro", "_expired", "_first", "_grace")

    def __init__(
        self,
        coro: Coroutine[Any, Any, Any],
        first: Any,
        grace: float,
        expired: Callable[[], bool],
    ) -> None:
        self._coro = coro
        self._first = first  # what the body's first step awaits
        self._grace = grace
        self._expired = expired

    def __await__(self) -> Generator[Any, None, Any]:
        coro = self._coro
        cancelled: BaseException | None = None  # the limit's cancellation, once it reached us
        until = math.inf  # when the grace ends (loop time)
        throw: BaseException | None = None
        awaited, self._first = self._first, None
        while True:
            try:
                if throw is not None:
                    awaited = coro.throw(throw)
                    throw = None
                elif awaited is _STEP:
                    awaited = coro.send(None)
            except StopIteration as returned:
                if cancelled is not None:
                    raise cancelled from None  # it returned instead of honouring it
                return returned.value
            except BaseException as exc:
                if cancelled is not None and exc is not cancelled and isinstance(exc, Exception):
                    raise cancelled from exc  # a failed cleanup: the cancellation still wins
                raise
            if cancelled is None and (
                awaited is None
                or type(awaited) is _FUTURE
                or getattr(awaited, "_asyncio_future_blocking", None) is None
            ):
                try:  # the common case (and what asyncio cannot wait for): the task handles it
                    yield awaited
                except BaseException as exc:  # thrown in by the task
                    throw = exc
                    if isinstance(exc, asyncio.CancelledError) and self._expired():
                        cancelled = exc
                        until = asyncio.get_running_loop().time() + self._grace
                awaited = _STEP
                continue
            try:  # a task, a gathering, or any wait within the grace: through our own future
                ended = yield from _wait_until(awaited, until)
            except BaseException as exc:  # the task was cancelled while it waited
                if (
                    cancelled is None
                    and isinstance(exc, asyncio.CancelledError)
                    and self._expired()
                ):
                    # ``awaited`` was cancelled in turn, as the task would have done; the body
                    # goes on waiting for it, within the grace.
                    cancelled = exc
                    until = asyncio.get_running_loop().time() + self._grace
                elif cancelled is not None or not isinstance(exc, asyncio.CancelledError):
                    throw = exc  # a further cancellation in the grace: the body gets it
                # (A cancellation of the caller while waiting on a task: as asyncio does, the
                # task was cancelled in turn and the body goes on waiting for its outcome.)
                continue
            if not ended:
                _let_go(coro)
                raise cancelled if cancelled is not None else asyncio.CancelledError()
            awaited = _STEP


#: Stands for "step the body" in :meth:`_Relinquishing.__await__` (what it awaits otherwise).
_STEP: Final = object()
#: The plain future of asyncio's C implementation (or its Python one, if that is what runs).
_FUTURE: Final = asyncio.Future


def _wait_until(awaited: Any, until: float) -> Generator[Any, None, bool]:
    """Wait for what the body awaits, as the task would, but not past ``until`` (loop time;
    ``inf``: no end); whether it ended in time. A cancellation of the task cancels
    ``awaited`` (as the task's own would) and is raised."""
    loop = asyncio.get_running_loop()
    if loop.time() >= until:
        return False
    if awaited is None:  # a bare yield (``asyncio.sleep(0)``): the task steps again at once
        yield None
        return True
    if getattr(awaited, "_asyncio_future_blocking", None) is None:
        return False  # nothing asyncio could wait for: let go
    awaited._asyncio_future_blocking = False
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(*_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    awaited.add_done_callback(wake)
    timer = loop.call_at(until, wake) if until < math.inf else None
    try:
        waiter._asyncio_future_blocking = True  # what a future's __await__ sets for the task
        yield waiter
    except BaseException:
        awaited.cancel()  # as the task's own cancellation would have done
        raise
    finally:
        if timer is not None:
            timer.cancel()
        awaited.remove_done_callback(wake)
    return bool(awaited.done())


def _let_go(coro: Coroutine[Any, Any, Any]) -> None:
    """Close a body that ignored its cancellation; whatever its ``finally`` blocks do."""
    try:
        coro.close()
    except Exception:  # "coroutine ignored GeneratorExit", or a failing cleanup
        return
