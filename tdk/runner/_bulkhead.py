"""Compartments: counted slots with a first-come, first-served queue.

Not ``asyncio.Semaphore``, for three reasons. Entering a free compartment must not cost an
await (it is on every call's path). A zero wait must mean "take a free slot or fail now": on
Python 3.11, ``asyncio.wait_for(semaphore.acquire(), 0)`` times out even when slots are free.
And a queued call's time limit is a timer that answers the waiter, not a cancellation of the
caller's task, so there is no cancellation to tell apart from the caller's own.

A slot freed while others wait is handed to the first of them directly, so a newcomer cannot
overtake the queue. A compartment lives in one process: it bounds this process's concurrency,
which is what a bulkhead protects (its threads, sockets and memory).
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Compartment", "take_slots"]


class Compartment:
    """At most ``limit`` holders at once; others may queue for a while."""

    __slots__ = ("_late", "_waiters", "in_use", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        """Slots in all."""
        self.in_use = 0
        """Slots held now."""
        self._waiters: deque[asyncio.Future[bool]] = deque()
        """Queued calls; each future is answered True (a slot was handed over) or False
        (its time ran out)."""
        self._late: deque[None] = deque()
        """Slots given back from another thread (see :meth:`leave_from_thread`)."""

    def try_enter(self) -> bool:
        """Take a free slot now, unless none is free or others are queueing."""
        if self._late:
            self._settle()
        if self.in_use < self.limit and not self._waiters:
            self.in_use += 1
            return True
        return False

    async def enter(self, wait: float) -> bool:
        """Take a slot, queueing up to ``wait`` seconds for one; False if none came.

        Cancellation propagates; a slot handed over just before it is passed on.
        """
        if self.try_enter():
            return True
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(wait, self._expire, waiter)
        try:
            return await waiter
        except BaseException:
            if not waiter.cancelled() and waiter.result():
                self.leave()  # the slot arrived as the caller was cancelled: pass it on
            self._discard(waiter)
            raise
        finally:
            timer.cancel()

    def leave(self) -> None:
        """Give a slot back: to the first in the queue, else to the pool."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(True)
                return
        self.in_use -= 1

    def leave_from_thread(self) -> None:
        """Give a slot back from a thread without the event loop (a body that outlived its
        loop): it is given back for good at the compartment's next use in a loop. (A deque's
        ``append`` is atomic: nothing else here is safe across threads.)"""
        self._late.append(None)

    def _settle(self) -> None:
        """Give back the slots left by :meth:`leave_from_thread`."""
        while self._late:
            self._late.popleft()
            self.leave()

    def _expire(self, waiter: asyncio.Future[bool]) -> None:
        if not waiter.done():
            waiter.set_result(False)
            self._discard(waiter)

    def _discard(self, waiter: asyncio.Future[bool]) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)


async def take_slots(
    own: Compartment | None, shared: Compartment | None, wait: float
) -> Compartment | None:
    """Take a slot in ``own`` (a tool's compartment), then in ``shared`` (the runner's), both
    within one budget of ``wait`` seconds; the compartment that had no slot in time, or None.

    A call refused by ``shared``, or cancelled while it waits for it, gives its slot in
    ``own`` back.
    """
    loop = asyncio.get_running_loop()
    until = loop.time() + wait
    if own is not None and not await _enter(own, wait):
        return own
    if shared is None:
        return None
    entered = False
    try:
        entered = await _enter(shared, until - loop.time())
    finally:
        if not entered and own is not None:
            own.leave()
    return None if entered else shared


async def _enter(compartment: Compartment, wait: float) -> bool:
    """Take a slot, waiting up to ``wait`` seconds (none at all when it is not positive)."""
    return await compartment.enter(wait) if wait > 0 else compartment.try_enter()
