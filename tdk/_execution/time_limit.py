"""Time limits on tool bodies: past its limit, a call is a timeout, whatever the body does.

A sync body in a worker thread cannot be stopped: at the limit its caller stops waiting
(:meth:`Job.abandon <tdk._execution.threads.Job.abandon>`) and the body runs on in its thread.
An async body is cancelled at the limit, but it may ignore the cancellation (catch
``CancelledError`` and carry on). :func:`await_coroutine` drives such a body inside the
caller's own task (no task of its own: the body sees the caller's context and
``current_task()``, and costs no scheduling), and once a cancellation has reached the body,
gives it a short grace to finish its cleanup; a body still running after that is let go of,
and the cancellation goes on as if the body had honoured it. Either way the caller's
cancellation is never swallowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
from collections.abc import Callable, Coroutine, Generator
from typing import Any, Final

from tdk._execution.threads import DROPPED, Job
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
            raise _timeout_error(
                limit, "It never started: every worker thread was busy with other calls."
            ) from None
        raise _timeout_error(
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
    # A CancelledError that asyncio.timeout leaves as it is goes on: a request to cancel the
    # task that nobody withdrew (the caller's) is still counted. (On Python 3.11 and 3.12, a
    # TaskGroup that failed in the body may leave one counted that nobody made, gh-116720:
    # the call then ends cancelled too.)
    try:
        async with asyncio.timeout(limit) as scope:
            return await _Relinquishing(coro, first, min(limit, MAX_GRACE), _past(scope))
    except TimeoutError:
        if scope.expired():
            raise _timeout_error(limit, None) from None
        raise  # a TimeoutError of the body's own: mapped by the table


def _past(scope: asyncio.Timeout) -> Callable[[], bool]:
    """Whether the limit ``scope`` sets has passed: expired, or about to be (its callback
    cancels the task before it marks itself expired)."""
    loop = asyncio.get_running_loop()
    deadline = scope.when()

    def past() -> bool:
        return scope.expired() or (deadline is not None and loop.time() >= deadline)

    return past


def _timeout_error(limit: float, developer_message: str | None) -> ToolTimeoutError:
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

    __slots__ = (
        "_cancelled",
        "_coro",
        "_expired",
        "_first",
        "_grace",
        "_until",
    )

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
        self._cancelled: BaseException | None = None
        """The limit's cancellation, once it has reached the body."""
        self._until = math.inf
        """When the grace ends (loop time)."""

    def __await__(self) -> Generator[Any, None, Any]:
        coro = self._coro
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
                if self._cancelled is not None:
                    raise self._cancelled from None  # it returned instead of honouring it
                return returned.value
            except BaseException as exc:
                cancelled = self._cancelled
                if cancelled is not None and exc is not cancelled and not isinstance(exc, _EXITS):
                    raise cancelled from exc  # a failed cleanup: the cancellation still wins
                raise
            if self._cancelled is None and not _proxied(awaited):
                try:  # the common case: the task handles it (and any mistake in it) itself
                    yield awaited
                except BaseException as exc:  # thrown in by the task
                    throw = exc
                    self._heard(exc)
                awaited = _STEP
                continue
            try:  # a task, a gathering, or any wait within the grace: through our own future
                ended = yield from _wait_until(awaited, self)
            except BaseException as exc:  # thrown in by the task: a cancellation that what
                throw = exc  # the body awaits could not take (it had ended): the body gets it
                self._heard(exc)
                continue
            if not ended:
                _let_go(coro)
                cancelled = self._cancelled
                raise cancelled if cancelled is not None else asyncio.CancelledError()
            awaited = _STEP

    def _passed_on(self, waiter: _Waiter, message: Any) -> None:
        """A cancellation of the task went on to what the body awaits (see :class:`_Waiter`)."""
        if self._note(asyncio.CancelledError(message)):
            waiter.expire_at(self._until)

    def _heard(self, exc: BaseException) -> None:
        """The task threw ``exc`` in."""
        if isinstance(exc, asyncio.CancelledError):
            self._note(exc)

    def _note(self, cancellation: asyncio.CancelledError) -> bool:
        """A cancellation reached the body (or what it awaits): if it is the limit's, and the
        first to arrive, the grace starts (then True)."""
        if self._cancelled is not None or not self._expired():
            return False
        self._cancelled = cancellation
        self._until = asyncio.get_running_loop().time() + self._grace
        return True


#: Stands for "step the body" in :meth:`_Relinquishing.__await__` (what it awaits otherwise).
_STEP: Final = object()
#: What a body may raise in its cleanup that still ends the call (the process is ending).
_EXITS: Final = (KeyboardInterrupt, SystemExit)
#: The plain future of asyncio's C implementation (or its Python one, if that is what runs).
_FUTURE: Final = asyncio.Future


def _proxied(awaited: Any) -> bool:
    """Whether the task should wait for what the body awaits through a future of tdk's own:
    a future of this loop that a cancellation might not end (a task, a gathering). Anything
    else goes to the task as it is: a bare yield, a plain future, and whatever asyncio
    refuses (a future of another loop, a bare ``yield`` of a future), which the task
    answers with the error a plain ``await`` gets."""
    return (
        type(awaited) is not _FUTURE
        and getattr(awaited, "_asyncio_future_blocking", None) is True
        and _of_this_loop(awaited)
        and awaited is not asyncio.current_task()  # (asyncio refuses that: "await on itself")
    )


def _of_this_loop(future: Any) -> bool:
    """Whether ``future`` belongs to the running loop (found as asyncio finds it)."""
    try:
        get_loop = getattr(future, "get_loop", None)
        loop = get_loop() if get_loop is not None else getattr(future, "_loop", None)
    except Exception:  # a future that cannot say: asyncio will not wait for it either
        return False
    return loop is asyncio.get_running_loop()


def _cancel(awaited: Any, message: Any) -> bool:
    """Pass a cancellation of the task on to what the body awaits, with its message, as the
    task does; whether that took it (False: it had already ended)."""
    try:
        return bool(awaited.cancel(msg=message))
    except Exception:  # a future whose cancel() fails cannot carry the cancellation
        return False


class _Waiter(asyncio.Future[bool]):
    """The future of tdk's own that the task waits on instead of what the body awaits; its
    result says whether that ended (True) or the grace ran out (False).

    A cancellation of the task cancels the future it waits on, at once: this one passes it on
    to what the body awaits in the same moment, as the task itself would, and the task goes
    on waiting for that one's outcome (in which the body sees the cancellation). Only when
    that has already ended is this future cancelled, and the body gets the cancellation."""

    def __init__(self, awaited: Any, driver: _Relinquishing) -> None:
        super().__init__(loop=asyncio.get_running_loop())
        self._awaited = awaited
        self._driver = driver
        self._timer: asyncio.TimerHandle | None = None

    def cancel(self, msg: Any = None) -> bool:
        """Cancel what the body awaits, else this future."""
        if self.done():
            return False
        if _cancel(self._awaited, msg):
            self._driver._passed_on(self, msg)
            return True
        return super().cancel(msg=msg)

    def end(self, ended: bool) -> None:
        """Resolve the wait (once)."""
        if not self.done():
            self.set_result(ended)

    def expire_at(self, when: float) -> None:
        """End the wait, unsuccessfully, at ``when`` (loop time)."""
        self.stop_timer()
        self._timer = self.get_loop().call_at(when, self.end, False)

    def stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _wait_until(awaited: Any, driver: _Relinquishing) -> Generator[Any, None, bool]:
    """Wait for what the body awaits, as the task would, but not past the end of the grace
    (once the limit's cancellation has reached the body); whether it ended in time. A
    cancellation of the task that what the body awaits cannot take is raised.

    Only what a task needs of a future is used (``add_done_callback``): a future-like object
    of the body's own that works with a plain ``await`` works here too."""
    until = driver._until
    loop = asyncio.get_running_loop()
    if loop.time() >= until:
        return False
    if awaited is None:  # a bare yield (``asyncio.sleep(0)``): the task steps again at once
        yield None
        return True
    if not (getattr(awaited, "_asyncio_future_blocking", None) is True and _of_this_loop(awaited)):
        return False  # nothing asyncio would wait for: let go
    awaited._asyncio_future_blocking = False
    waiter = _Waiter(awaited, driver)

    def ended(_: object) -> None:
        waiter.end(True)

    future = isinstance(awaited, asyncio.Future)
    if future:
        awaited.add_done_callback(ended)
    else:  # as a task adds its own callback (a late call finds the waiter done)
        awaited.add_done_callback(ended, context=contextvars.copy_context())
    if until < math.inf:
        waiter.expire_at(until)
    try:
        waiter._asyncio_future_blocking = True  # what a future's __await__ sets for the task
        yield waiter
        return waiter.result()
    finally:
        waiter.stop_timer()
        if future:
            awaited.remove_done_callback(ended)


def _let_go(coro: Coroutine[Any, Any, Any]) -> None:
    """Close a body that ignored its cancellation, whatever its ``finally`` blocks do.

    A cleanup that awaits while the body unwinds (``finally: await ...``) stops ``close()``
    short ("coroutine ignored GeneratorExit"), with the frames above it still open: a timeout
    or cancel scope the body entered would stay armed on the caller's task, and cancel it
    later. So ``close()`` is repeated until the body is closed, up to a bound."""
    for _ in range(_CLOSE_ATTEMPTS):
        with contextlib.suppress(Exception):  # "coroutine ignored GeneratorExit", a failure
            coro.close()
        if getattr(coro, "cr_frame", None) is None:
            return
    _LOG.warning(
        "a tool body ignored %d requests to close after its time limit; timeouts or cancel "
        "scopes it entered may still cancel the task that called it",
        _CLOSE_ATTEMPTS,
    )


#: Times ``close()`` is tried on a body that awaits while it unwinds.
_CLOSE_ATTEMPTS: Final = 100
_LOG: Final = logging.getLogger("tdk")
