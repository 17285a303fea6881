"""The bulkhead guard: a call's slots, in its tool's compartment and in the runner's.

A call takes a slot in its tool's compartment (its bulkhead), then one in the runner's (its
``max_concurrency``). Free slots are taken at once, without an await (:meth:`Slots.try_take`);
otherwise the call queues for them as long as its bulkhead lets it wait and its deadline
leaves (:meth:`Slots.queue`, one budget for both). A call gives its slots back when it ends,
or, when a sync body of it still runs in its thread past its attempt's time limit, once that
body ends: the thread is what the bulkhead protects (:func:`give_slots_back`).
"""

from __future__ import annotations

import asyncio

from tdk._execution.threads import Job
from tdk.errors import ErrorKind, ToolError
from tdk.runner._bulkhead import Compartment, take_slots
from tdk.runner._deadline import Deadline
from tdk.runner._events import Queued
from tdk.runner._gate import Gate
from tdk.runner._plan import Plan
from tdk.runner._refusals import bulkhead_full
from tdk.runner._stats import Counters

__all__ = ["Slots", "bodies_ended", "give_slots_back"]


class Slots:
    """The slots of one runner's calls."""

    __slots__ = ("_counters", "_gate", "everyone")

    def __init__(self, max_concurrency: int | None, gate: Gate, counters: Counters) -> None:
        self.everyone = Compartment(max_concurrency) if max_concurrency is not None else None
        """The runner's compartment (``max_concurrency``), or None."""
        self._gate = gate
        self._counters = counters

    def try_take(self, plan: Plan) -> bool:
        """Take the call's slots if both are free now; else take none."""
        compartment = plan.compartment
        if compartment is not None and not compartment.try_enter():
            return False
        everyone = self.everyone
        if everyone is not None and not everyone.try_enter():
            if compartment is not None:
                compartment.leave()
            return False
        return True

    async def queue(
        self, plan: Plan, deadline: Deadline | None, ticket: int | None
    ) -> ToolError | None:
        """Queue for the call's slots as long as its bulkhead allows (one budget for both
        compartments) and its deadline leaves; the refusal if none came. A refused or
        cancelled call hands its circuit ticket back."""
        try:
            refusal = await self._wait(plan, deadline)
        except BaseException:
            if ticket is not None:
                await self._gate.release(plan, ticket)
            raise
        if refusal is not None:
            self._counters.rejections[ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL] += 1
            if ticket is not None:
                await self._gate.release(plan, ticket)
        return refusal

    async def _wait(self, plan: Plan, deadline: Deadline | None) -> ToolError | None:
        bulkhead = plan.policies.bulkhead
        budget = bulkhead.max_wait if bulkhead is not None else 0.0
        if deadline is not None:
            budget = min(budget, deadline.remaining())
        if budget > 0:
            self._gate.instruments.emit(Queued(plan.name, budget))
        refused = await take_slots(plan.compartment, self.everyone, budget)
        if refused is None:
            return None
        if refused is plan.compartment:
            assert bulkhead is not None
            return bulkhead_full(plan.name, "tool", bulkhead.max_concurrent, bulkhead.max_wait)
        return bulkhead_full(plan.name, "all", refused.limit, max(budget, 0.0))


def give_slots_back(
    lingering: list[Job] | None, compartment: Compartment | None, everyone: Compartment | None
) -> None:
    """Give a call's slots back: now, or once its bodies still running have ended."""
    if lingering:
        _leave_when_ended(lingering, compartment, everyone)
        return
    if compartment is not None:
        compartment.leave()
    if everyone is not None:
        everyone.leave()


async def bodies_ended(jobs: list[Job], within: float | None) -> bool:
    """Wait up to ``within`` seconds for the sync bodies of ``jobs`` still running to end
    (forgetting those that have); whether none is left. (A retry never overlaps them.)"""
    jobs[:] = [job for job in jobs if job.running]
    if not jobs:
        return True
    if within is None:  # pragma: no cover (a body only lingers past a time limit)
        return False
    loop = asyncio.get_running_loop()
    all_ended: asyncio.Future[None] = loop.create_future()

    def one_ended() -> None:
        if not all_ended.done() and not any(job.running for job in jobs):
            all_ended.set_result(None)

    for job in jobs:
        job.when_ended(one_ended)
    try:
        async with asyncio.timeout(within):
            await all_ended
    except TimeoutError:
        return False
    jobs.clear()
    return True


def _leave_when_ended(
    jobs: list[Job], compartment: Compartment | None, everyone: Compartment | None
) -> None:
    """Give the call's slots back once every sync body of ``jobs`` has ended: a body that
    outlived its attempt still holds its thread, which is what the bulkhead protects."""
    pending = [job for job in jobs if job.running]
    left = [compartment, everyone]

    def one_ended() -> None:
        if not left or any(job.running for job in pending):
            return
        in_loop = _in_a_loop()
        for slots in left:
            if slots is not None:
                if in_loop:
                    slots.leave()
                else:  # the loop closed before the body ended: its next use takes it back
                    slots.leave_from_thread()
        left.clear()  # once only, however many bodies report

    for job in pending:
        job.when_ended(one_ended)
    one_ended()


def _in_a_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
