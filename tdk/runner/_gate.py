"""The circuit guard: a ticket for each attempt, or the circuit's refusal, and its report.

Before an attempt runs, the circuit of its tool (or scope) gives it a ticket, or refuses it;
after, the attempt reports how it ended with that ticket (:mod:`tdk.runner._breaker` holds the
rules). With the in-process store the plan holds the live :class:`~tdk.runner._breaker.Circuit`
and the guard applies the rules to it directly; a closed circuit then answers without any
change at all, and a success in a clean closed circuit reports nothing (it would change
nothing). With any other store each question is one of its named operations; an attempt that
has a limiter too asks for its ticket with its admission, in one step (:meth:`Gate.enter`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from tdk._execution.context import ToolContext
from tdk._execution.result import ToolResult
from tdk.errors import ErrorKind, ToolError
from tdk.runner._breaker import (
    NEUTRAL,
    CircuitState,
    Verdict,
    acquire,
    outcome_of,
    record,
    refuses,
)
from tdk.runner._events import CircuitChanged, Instruments
from tdk.runner._plan import Plan, Plans
from tdk.runner._policies import RateLimit
from tdk.runner._refusals import circuit_open
from tdk.runner._stats import Counters
from tdk.runner._store import Entry, InMemoryStore, StateStore

__all__ = ["Gate", "changes_the_circuit"]

_OPEN: Final = CircuitState.OPEN
_CLOSED: Final = CircuitState.CLOSED


def changes_the_circuit(plan: Plan, ticket: int, done: ToolResult | None) -> bool:
    """Whether an attempt that ended with ``done`` must be reported to the circuit: anything
    but a success in a clean, closed circuit of this process (which changes nothing)."""
    circuit = plan.circuit
    return (
        circuit is None
        or done is None
        or done.error is not None
        or circuit.failures != 0
        or circuit.generation != ticket
        or circuit.state is not _CLOSED
    )


class Gate:
    """The circuits of one runner: tickets, reports, and questions that change nothing."""

    __slots__ = ("_clock", "_counters", "_enter", "_local", "_plans", "_store", "instruments")

    def __init__(
        self,
        store: StateStore,
        local: InMemoryStore | None,
        plans: Plans,
        clock: Callable[[], float],
        counters: Counters,
        *,
        instruments: Instruments,
    ) -> None:
        self.instruments = instruments
        """Who hears the circuits change (and, through the gate, every guard's events)."""
        self._store = store
        self._enter = getattr(store, "enter", None)
        """The store's :meth:`~tdk.runner.StateStore.enter`, if it has one."""
        self._local = local
        self._plans = plans
        self._clock = clock
        self._counters = counters

    async def ticket(self, plan: Plan) -> int | ToolError:
        """The circuit's ticket for a call's first attempt, or its refusal. (The runner asks
        a closed circuit of this process itself: its ticket is its generation.)"""
        breaker = plan.policies.circuit_breaker
        assert breaker is not None
        if plan.circuit is not None:
            verdict = acquire(plan.circuit, breaker, self._clock, plan.own_timeout)[1]
        else:
            verdict = await self._store.acquire(
                plan.breaker_key, breaker, self._clock, plan.own_timeout
            )
            self._counters.circuits[plan.name] = verdict.after
        if verdict.ticket is None or verdict.before is not verdict.after:
            self._saw(plan, verdict)
        if verdict.ticket is None:
            return circuit_open(
                plan.name, breaker, verdict.failures, verdict.after, verdict.retry_after
            )
        return verdict.ticket

    def enters(self, plan: Plan) -> bool:
        """Whether an attempt of ``plan`` asks for its circuit's ticket with its limiter's
        admission, in one step of the store (:meth:`enter`): both policies on a store that
        is not applied in process, and that has the operation."""
        policies = plan.policies
        return (
            plan.circuit is None
            and self._enter is not None
            and policies.circuit_breaker is not None
            and policies.rate_limit is not None
        )

    async def enter(self, plan: Plan, limiter: RateLimit) -> Entry:
        """The circuit's verdict on an attempt and, when it gives a ticket, the limiter's
        answer: one operation of the store (see :meth:`enters`)."""
        breaker = plan.policies.circuit_breaker
        assert breaker is not None
        assert self._enter is not None
        entry: Entry = await self._enter(
            plan.breaker_key,
            breaker,
            self._clock,
            plan.own_timeout,
            limiter_key=plan.limiter_key,
            limit=limiter,
        )
        self._saw(plan, entry.verdict)
        return entry

    async def retry_ticket(self, plan: Plan) -> Verdict:
        """The circuit's verdict on a retry (its ``ticket`` is None when it is refused)."""
        breaker = plan.policies.circuit_breaker
        assert breaker is not None
        verdict = await self._store.acquire(
            plan.breaker_key, breaker, self._clock, plan.own_timeout
        )
        self._saw(plan, verdict)
        return verdict

    async def report(self, plan: Plan, ticket: int, done: ToolResult | None) -> bool:
        """Tell the circuit how the attempt admitted with ``ticket`` ended (``done``: its
        result, None if it did not finish); whether that opened the circuit."""
        breaker = plan.policies.circuit_breaker
        assert breaker is not None
        outcome = outcome_of(done)
        circuit = plan.circuit
        if circuit is not None:
            moved = record(circuit, breaker, self._clock, ticket, outcome)[1]
        else:
            moved = await self._store.record(
                plan.breaker_key, breaker, self._clock, ticket, outcome
            )
            self._counters.circuits[plan.name] = moved.after
        if moved.before is moved.after:
            return False
        self.instruments.emit(CircuitChanged(plan.name, moved.before, moved.after, moved.failures))
        return moved.after is _OPEN

    async def release(self, plan: Plan, ticket: int) -> None:
        """Hand back the circuit's ticket of an attempt that did not run."""
        breaker = plan.policies.circuit_breaker
        assert breaker is not None
        # Only probes report from a half-open circuit, and a neutral one moves nothing.
        moved = await self._store.record(plan.breaker_key, breaker, self._clock, ticket, NEUTRAL)
        self._counters.circuits[plan.name] = moved.after

    async def refuses_now(self, plan: Plan) -> bool:
        """Whether the plan's circuit would refuse a call now (it changes nothing)."""
        breaker = plan.policies.circuit_breaker
        if breaker is None:
            return False
        if plan.circuit is not None:
            return refuses(plan.circuit, breaker, self._clock())
        return await self._store.peek(plan.breaker_key, breaker, self._clock)

    async def refuses_for(self, plan: Plan, context: ToolContext | None) -> bool:
        """Whether the circuit a call with ``context`` would ask refuses now; False when the
        context lacks a field its scope names (the call would be refused for that)."""
        breaker = plan.policies.circuit_breaker
        if breaker is None:
            return False
        if not plan.by_context:
            return await self.refuses_now(plan)
        key = self._plans.circuit_key(plan, context)
        if key is None:
            return False
        if self._local is not None:  # (read only: no state is made for a mere question)
            return refuses(self._local.get(key), breaker, self._clock())
        return await self._store.peek(key, breaker, self._clock)

    def _saw(self, plan: Plan, verdict: Verdict) -> None:
        """Note a verdict: the circuit's state, its transition, and a refusal."""
        self._counters.circuits[plan.name] = verdict.after
        if verdict.before is not verdict.after:
            self.instruments.emit(
                CircuitChanged(plan.name, verdict.before, verdict.after, verdict.failures)
            )
        if verdict.ticket is None:
            self._counters.rejections[ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN] += 1
