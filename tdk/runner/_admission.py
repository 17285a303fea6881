"""The rate-limit guard: admission of each attempt, and waiting for it.

Every attempt asks its limiter (:mod:`tdk.runner._limiter` holds the rule) to admit it now;
the answer is 0.0, or the seconds until it would. With the in-process store the plan holds
the live log and the runner asks it inline (:func:`~tdk.runner._limiter.admit`, no await);
with any other store the question is the store's named operation ``admit``. An attempt not
admitted may wait while the limiter would admit it within its ``max_wait`` and before the
deadline (:meth:`Admission.wait`); a circuit that opens meanwhile ends the wait.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from tdk.runner._deadline import Deadline
from tdk.runner._events import Waiting
from tdk.runner._gate import Gate
from tdk.runner._limiter import admit
from tdk.runner._plan import Plan
from tdk.runner._policies import RateLimit
from tdk.runner._store import StateStore

__all__ = ["CIRCUIT_OPENED", "Admission"]

#: What :meth:`Admission.wait` answers when the call's circuit opened while it waited.
CIRCUIT_OPENED = -1.0


class Admission:
    """The limiters of one runner's calls."""

    __slots__ = ("_clock", "_gate", "_sleep", "_store")

    def __init__(
        self,
        store: StateStore,
        gate: Gate,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[object]],
    ) -> None:
        self._store = store
        self._gate = gate
        self._clock = clock
        self._sleep = sleep

    async def ask(self, plan: Plan, limiter: RateLimit) -> float:
        """Admit an attempt now (0.0) or the seconds until the limiter would."""
        now = self._clock()
        if plan.log is not None:
            return admit(plan.log, limiter, now)[1]
        return await self._store.admit(plan.limiter_key, limiter, now)

    async def wait(
        self, plan: Plan, limiter: RateLimit, wait: float, deadline: Deadline | None
    ) -> float:
        """Wait while the limiter would admit the call within its ``max_wait`` (waits added
        up) and before the deadline, asking it again after each wait: 0.0 once admitted, else
        the wait it last answered; :data:`CIRCUIT_OPENED` when the call's circuit opened
        meanwhile (a call admitted before it opened must not run after)."""
        waited = 0.0
        circuit = plan.circuit  # (in process: any change of it since is a change of state)
        generation = None if circuit is None else circuit.generation
        while wait:
            if waited + wait > limiter.max_wait or (
                deadline is not None and not deadline.leaves(wait)
            ):
                return wait
            self._gate.instruments.emit(Waiting(plan.name, wait))
            if deadline is not None:
                deadline.waited(wait)
            await self._sleep(wait)
            waited += wait
            changed = (
                circuit.generation != generation  # in process: any transition since
                if circuit is not None
                else await self._gate.refuses_now(plan)  # shared: whether it admits now
            )
            if changed:
                return CIRCUIT_OPENED
            wait = await self.ask(plan, limiter)
        return 0.0
