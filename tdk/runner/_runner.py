"""``ToolRunner``: run tool calls under retry, rate-limit, circuit-breaker and bulkhead policies.

One call goes through stages, as a request goes through httpx's ``send()`` chain:
:meth:`ToolRunner.run` looks the tool up, asks the circuit (:meth:`~ToolRunner._gate`) and
takes the bulkhead slots (the tool's, then the runner's); :meth:`~ToolRunner._attempts` is the
retry loop: for each attempt, deadline -> rate limiter -> ``tool.run()`` -> report to the
circuit; after a failure, decide, then :meth:`~ToolRunner._prepare_retry` waits and asks the
circuit again. Where no await is needed (a closed circuit, free slots, the in-process store)
a stage runs inline: each further coroutine would cost 0.1-0.3 us, about 3% of a call. A
refusal hands back what earlier guards granted. Every refusal is a ``ToolResult`` built by
the same ``failure_result()`` as any other failure, so it is classified, redacted and logged once
like the rest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Final

from tdk._arguments import Arguments
from tdk._call import ToolCall
from tdk._context import ToolContext, context_of_call
from tdk._default import DEFAULT, Default
from tdk._definition import ToolDefinition
from tdk._exchanges import Exchanges
from tdk._execute import check_call_id, execute, failure_result, shown_name
from tdk._loop import refuse_running_loop, run_blocking
from tdk._result import ToolResult
from tdk._telemetry import active, counted, event, traced_attempt
from tdk._threads import Job
from tdk._tool import Tool
from tdk._toolkit import Toolkit
from tdk._writes import may_have_acted, not_repeated
from tdk.errors import (
    ErrorInfo,
    ErrorKind,
    ToolError,
    ToolInputError,
    ToolNotFoundError,
)
from tdk.runner._breaker import (
    NEUTRAL,
    Circuit,
    CircuitState,
    Verdict,
    acquire,
    outcome_of,
    peek,
    record,
    refuses,
)
from tdk.runner._bulkhead import Compartment, take_slots
from tdk.runner._config import Layers, Policies, check_policies
from tdk.runner._deadline import Deadline
from tdk.runner._limiter import admit, wait_ms
from tdk.runner._policies import Bulkhead, CircuitBreaker, RateLimit, RetryPolicy
from tdk.runner._refusals import (
    bulkhead_full,
    circuit_open,
    deadline_passed,
    log_decision,
    log_transition,
    rate_limited,
    scope_fields_missing,
)
from tdk.runner._scopes import context_values, scope_fields, scope_key
from tdk.runner._stats import REFUSAL_KINDS, Counters, RunnerStats
from tdk.runner._store import CALL_DEADLINE, CallDeadline, InMemoryStore, StateStore

__all__ = ["ToolCall", "ToolRunner"]

#: Retryable kinds the runner still never repeats: the model retries TOOL_RUNTIME_RETRY with
#: new arguments, and repeating a refusal of the runner's own policies cannot help.
_NEVER_REPEATED: Final = frozenset(
    {
        ErrorKind.TOOL_RUNTIME_RETRY,
        ErrorKind.TOOL_RUNTIME_RATE_LIMITED,
        ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN,
        ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL,
    }
)

_OPEN: Final = CircuitState.OPEN
_CLOSED: Final = CircuitState.CLOSED

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[object]]
#: A call as its refusals and log lines need it: its context, its id, its start.
_Caller = tuple[ToolContext | None, str | None, float]


@dataclass(slots=True)
class _Plan:
    """What the runner needs on every call of one tool, resolved once per configuration."""

    tool: Tool[..., Any]
    name: str
    policies: Policies
    compartment: Compartment | None
    attempt_timeout: float | Default
    """The ``timeout=`` of each attempt without a deadline."""
    own_timeout: float | None
    """The per-attempt limit that a deadline may shorten."""
    limiter_key: str
    breaker_key: str
    threaded: bool
    """Whether the body runs in a worker thread (and may outlive its attempt)."""
    repeatable: bool
    """Whether the tool is read-only or idempotent: any retryable failure may be retried.
    Otherwise only failures where the upstream certainly did not act are."""
    attempts_allowed: int
    """Attempts a call may make at most (its retry policy's ``max_attempts``; 1 without),
    as log lines count them: "attempt 2 of 3"."""
    keyed: bool
    """Whether the tool reads its context: each call then gets its idempotency key here,
    the same for all its attempts."""
    probe_lifetime: float | None
    """How long a half-open probe may take before it counts as lost: the attempt's limit,
    when there is one."""
    circuit: Circuit | None
    """With the in-process store: the live circuit state, changed in place."""
    log: deque[float] | None
    """With the in-process store: the live limiter log, changed in place."""
    scoped_by: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    """The context fields the limiter's and the breaker's scopes name: when any, each call
    runs under the plan of its formatted scopes (:meth:`ToolRunner._scoped`)."""
    scoped: dict[tuple[tuple[str, str], ...], _Plan] = field(default_factory=dict)
    """Those plans, by the values of the fields (a few thousand at most)."""
    context_fields: tuple[str, ...] = ()
    """Every field the two scopes name, each once."""
    by_context: bool = False
    """Whether any scope names context fields (``scoped_by`` is not empty)."""
    watched: bool = False
    """Whether the requests each attempt sends are noted (see :mod:`tdk._exchanges`): for a
    tool that may write, whose failures are retried, or marked not to retry, by what its
    requests may have done."""


def _changes_the_circuit(plan: _Plan, ticket: int, done: ToolResult | None) -> bool:
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


class ToolRunner:
    """Runs a toolkit's tools with retries, rate limits, circuit breakers and bulkheads.

    Every policy is off unless given; each applies to every tool unless :meth:`configure`
    changes it for some. Durations are seconds.

    - ``timeout``: limit of each attempt (None: the tool's own ``@tool(timeout=...)``).
    - ``deadline``: limit of the whole call: queueing, attempts and waits between retries.
    - ``retry``: a :class:`RetryPolicy`; ``rate_limit``: a :class:`RateLimit` per tool;
      ``circuit_breaker``: a :class:`CircuitBreaker` per tool; ``bulkhead``: a
      :class:`Bulkhead` per tool.
    - ``max_concurrency``: calls running at once across all tools. A call waits for a slot as
      long as its tool's bulkhead lets it wait (without a bulkhead: not at all).
    - ``store``: where limiter and circuit state lives (default: a new :class:`InMemoryStore`).
    - ``clock`` (monotonic seconds) and ``sleep`` (an async sleep): what the policies read the
      time with, and wait with between retries. Tests pass fakes; runners sharing a store
      between processes need a clock they share, such as ``time.time``.

    :meth:`run` and :meth:`run_many` never raise for a failed call: refusals and failures are
    results. Cancelling them cancels the attempt or wait in progress; nothing runs on.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        toolkit: Toolkit,
        *,
        timeout: float | None = None,
        deadline: float | None = None,
        retry: RetryPolicy | None = None,
        rate_limit: RateLimit | None = None,
        circuit_breaker: CircuitBreaker | None = None,
        bulkhead: Bulkhead | None = None,
        max_concurrency: int | None = None,
        store: StateStore | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if not isinstance(toolkit, Toolkit):
            raise TypeError(f"ToolRunner takes a Toolkit, not {type(toolkit).__name__}")
        base = check_policies(
            {
                "timeout": timeout,
                "deadline": deadline,
                "retry": retry,
                "rate_limit": rate_limit,
                "circuit_breaker": circuit_breaker,
                "bulkhead": bulkhead,
            }
        )
        if max_concurrency is not None:
            if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
                raise ValueError(f"max_concurrency must be an int or None, got {max_concurrency!r}")
            if max_concurrency < 1:
                raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
        if store is None:
            store = InMemoryStore()
        elif not isinstance(store, StateStore):
            raise TypeError(f"store must have the StateStore method update(), got {store!r}")
        self.toolkit: Final = toolkit
        """The tools this runner runs."""
        self.max_concurrency: Final = max_concurrency
        """Calls running at once across all tools, or None."""
        self._layers = Layers(Policies(**base))
        self._store = store
        # With the in-process store, plans hold the live state objects and apply the changes
        # to them directly: no await, no round trip, the same rules.
        self._local = store if isinstance(store, InMemoryStore) else None
        self._clock = clock
        self._sleep = sleep
        self._all = Compartment(max_concurrency) if max_concurrency is not None else None
        self._plans: dict[str, _Plan] = {}
        self._compartments: dict[tuple[str, Bulkhead], Compartment] = {}
        self._counters = Counters()
        self._live_circuits: dict[str, Circuit] = {}
        self._per_context: dict[str, RateLimit | CircuitBreaker] = {}
        """In-process state kept per context value (per user): key -> its policy."""

    def configure(
        self,
        pattern: str,
        *,
        timeout: float | Default | None = DEFAULT,
        deadline: float | Default | None = DEFAULT,
        retry: RetryPolicy | Default | None = DEFAULT,
        rate_limit: RateLimit | Default | None = DEFAULT,
        circuit_breaker: CircuitBreaker | Default | None = DEFAULT,
        bulkhead: Bulkhead | Default | None = DEFAULT,
    ) -> None:
        """Change policies for the tools whose names match ``pattern``: a name or a glob
        such as ``"search_*"``, compared ignoring case.

        An argument passed as None turns that policy off for those tools; arguments not
        passed are inherited. Where several ``configure`` calls match a tool, later ones win.
        Calls already running keep the policies they started with.
        """
        changes = check_policies(
            {
                "timeout": timeout,
                "deadline": deadline,
                "retry": retry,
                "rate_limit": rate_limit,
                "circuit_breaker": circuit_breaker,
                "bulkhead": bulkhead,
            }
        )
        self._layers.add(pattern, changes)
        self._plans.clear()

    async def available(
        self, source: Toolkit | Iterable[ToolDefinition], *, context: ToolContext | None = None
    ) -> list[ToolDefinition]:
        """The definitions of ``source`` (a toolkit, or definitions) whose tools this runner
        would call now: those whose circuit is not open. A host offers the model these, and
        stops offering a tool while its upstream is down. A tool the runner does not run, or
        runs without a circuit, is kept; a circuit kept per context field is judged for
        ``context`` (kept when the context lacks the field)."""
        definitions = source.definitions() if isinstance(source, Toolkit) else list(source)
        return [d for d in definitions if not await self._circuit_refuses(d.name, context)]

    async def _circuit_refuses(self, name: str, context: ToolContext | None) -> bool:
        plan = self._plans.get(name) or self._plans.get(name.lower()) or self._plan_or_none(name)
        if plan is None:
            return False
        breaker = plan.policies.circuit_breaker
        if breaker is None:
            return False
        if not plan.by_context:
            return await self._circuit_now_refuses(plan)
        fields = plan.scoped_by[1]  # (the breaker's own: a limiter's fields do not matter)
        values = context_values(fields, context)
        if isinstance(values, list):
            return False
        key = scope_key(plan.breaker_key, fields, fields, values)
        if self._local is not None:  # (read only: no state is made for a mere question)
            return refuses(self._local.get(key), breaker, self._clock())
        answer: bool = await self._store.update(key, peek, breaker, self._clock)
        return answer

    def policies(self, name: str) -> Policies:
        """The policies that apply to the tool called ``name`` (whether or not it exists)."""
        return self._layers.resolve(name)

    def stats(self) -> RunnerStats:
        """The runner's counters: calls, attempts, retries, refusals per kind, and the state
        of each tool's circuit as this runner last saw it."""
        live = {name: circuit.state for name, circuit in self._live_circuits.items()}
        store = self._store
        status = getattr(store, "status", "local" if isinstance(store, InMemoryStore) else "custom")
        return self._counters.snapshot(live, status if isinstance(status, str) else "custom")

    async def run_many(
        self,
        calls: Iterable[ToolCall | tuple[str, Arguments]],
        *,
        context: ToolContext | None = None,
    ) -> list[ToolResult]:
        """Run calls concurrently and return their results in the order given.

        Each call is a :class:`ToolCall` or a ``(name, arguments)`` pair; ``context`` goes to
        every call. Each call is a logical call of its own: given an idempotency key, the
        context gives call number ``n`` (from 0) the key ``"<key>:<n>"``, the same each time
        the same batch is run. One call's failure never affects the others. Cancelling
        ``run_many()`` cancels every call still running and returns once all have stopped.
        """
        batch = [_unpack(call) for call in calls]
        key = None if context is None else context._given()
        if context is None or key is None:
            contexts = [context] * len(batch)
        else:  # a key of its own for each call
            contexts = [context._with_key(f"{key}:{n}") for n in range(len(batch))]
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(
                    self.run(call.name, call.arguments, context=each, call_id=call.call_id)
                    if call.problem is None
                    else _answer_malformed(call, each)
                )
                for call, each in zip(batch, contexts, strict=True)
            ]
        return [task.result() for task in tasks]

    def run_many_sync(
        self,
        calls: Iterable[ToolCall | tuple[str, Arguments]],
        *,
        context: ToolContext | None = None,
    ) -> list[ToolResult]:
        """:meth:`run_many` for synchronous code: runs the batch on tdk's own event loop (see
        :meth:`run_sync`) and waits for its results. Raises ``RuntimeError`` when called from
        a running event loop (await :meth:`run_many` there)."""
        refuse_running_loop("run_many_sync", "run_many")
        return run_blocking(self.run_many(calls, context=context))

    def run_sync(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        context: ToolContext | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """:meth:`run` for synchronous code (scripts, a Flask view): runs the call on tdk's
        own event loop, which lives as long as the process, and waits for its result. Every
        sync call of every runner runs on that one loop, so the runner's state and what its
        tools bind to the loop (a module-level ``httpx.AsyncClient``) work call after call,
        from any number of threads. Raises ``RuntimeError`` when called from a running event
        loop (await :meth:`run` there)."""
        refuse_running_loop("run_sync", "run")
        return run_blocking(self.run(name, arguments, context=context, call_id=call_id))

    def run(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        context: ToolContext | None = None,
        call_id: str | None = None,
    ) -> Coroutine[Any, Any, ToolResult]:
        """Run one call of the tool called ``name`` (ignoring case) under its policies.

        Returns the tool's result; or its last failure, when no retry was allowed or possible
        (``error.details`` say why); or the runner's refusal (``TOOL_RUNTIME_RATE_LIMITED``,
        ``TOOL_RUNTIME_CIRCUIT_OPEN``, ``TOOL_RUNTIME_BULKHEAD_FULL``; ``TOOL_NOT_FOUND`` for
        an unknown name) with ``attempts == 0``. ``result.attempts`` and, on failure,
        ``error.details["attempts"]`` count invocations of the tool body. Never raises for a
        failed call; cancellation propagates.
        """
        running = self._run(name, arguments, context=context, call_id=call_id)
        telemetry = active()  # (None unless OpenTelemetry is installed and configured)
        if telemetry is None:
            return running
        return telemetry.call(running, name if type(name) is str else "", call_id, context)

    async def _run(
        self,
        name: str,
        arguments: Arguments,
        *,
        context: ToolContext | None,
        call_id: str | None,
    ) -> ToolResult:
        started = perf_counter()
        if type(name) is not str or (call_id is not None and type(call_id) is not str):
            _check_call(name, call_id)
        self._counters.calls += 1
        plan = self._plans.get(name) or self._plans.get(name.lower())
        if plan is None or plan.by_context:  # (the common case: neither)
            found = self._plan_of_call(plan, name, context, call_id, started)
            if isinstance(found, ToolResult):
                return found
            plan = found
        if plan.keyed:  # one idempotency key for every attempt of this call
            context = context_of_call(context)
        policies = plan.policies
        # (on the monotonic clock, whatever clock the policies' state reads: see _deadline)
        deadline = None if policies.deadline is None else Deadline(policies.deadline)
        if deadline is None or self._local is not None:
            return await self._run_planned(
                plan, arguments, context, call_id, started, deadline=deadline
            )
        # A shared store waits for its server within the deadline (see CallDeadline), which
        # it reads on the loop's clock.
        left = deadline.remaining()
        bound = CALL_DEADLINE.set(CallDeadline(asyncio.get_running_loop().time() + left, left))
        try:
            return await self._run_planned(
                plan, arguments, context, call_id, started, deadline=deadline
            )
        finally:
            CALL_DEADLINE.reset(bound)

    async def _run_planned(
        self,
        plan: _Plan,
        arguments: Arguments,
        context: ToolContext | None,
        call_id: str | None,
        started: float,
        *,
        deadline: Deadline | None,
    ) -> ToolResult:
        """:meth:`run` once the call's plan and deadline are known."""
        policies = plan.policies
        # The circuit: a closed circuit of this process answers without a change.
        ticket = None
        if policies.circuit_breaker is not None:
            circuit = plan.circuit
            if circuit is not None and circuit.state is _CLOSED:
                ticket = circuit.generation  # what acquire() answers, without a change
            else:
                gate = await self._gate(plan)
                if isinstance(gate, ToolError):
                    return _refused(plan.name, gate, context, call_id, started)
                ticket = gate
        # The slots: taken now if they are free (no await on the common path).
        compartment = plan.compartment
        everyone = self._all
        waited = False
        if compartment is not None and not compartment.try_enter():
            waited = True
        elif everyone is not None and not everyone.try_enter():
            if compartment is not None:
                compartment.leave()
            waited = True
        if waited:
            refusal = await self._queue(plan, deadline, ticket)
            if refusal is not None:
                return _refused(plan.name, refusal, context, call_id, started)
        # The attempts. Sync bodies still running in their threads after their attempt ended
        # (past its time limit) keep the call's slots until they end.
        lingering: list[Job] | None = [] if plan.threaded else None
        try:
            return await self._attempts(
                plan,
                arguments,
                context,
                call_id,
                started,
                deadline=deadline,
                ticket=ticket,
                waited=waited,
                lingering=lingering,
            )
        finally:
            _give_slots_back(lingering, compartment, everyone)

    def _plan_of_call(
        self,
        plan: _Plan | None,
        name: str,
        context: ToolContext | None,
        call_id: str | None,
        started: float,
    ) -> _Plan | ToolResult:
        """The plan of a call the fast path could not give: a tool's first call, or one
        whose state is kept per formatted scope; or the refusal of an unknown tool or of a
        context that lacks a scope's fields."""
        if plan is None:
            plan = self._plan_or_none(name)
            if plan is None:
                shown = shown_name(name, context)
                unknown = self.toolkit._not_found(name, shown)
                unknown.details["attempts"] = 0
                return _refused(shown, unknown, context, call_id, started)
        if plan.scoped_by == ((), ()):
            return plan
        scoped = self._scoped(plan, context)
        if isinstance(scoped, ToolError):
            return _refused(plan.name, scoped, context, call_id, started)
        return scoped

    async def _gate(self, plan: _Plan) -> int | ToolError:
        """The circuit's ticket for a call's first attempt, or its refusal."""
        breaker = plan.policies.circuit_breaker
        assert breaker is not None
        if plan.circuit is not None:
            verdict = acquire(plan.circuit, breaker, self._clock, plan.probe_lifetime)[1]
        else:
            verdict = await self._store.update(
                plan.breaker_key, acquire, breaker, self._clock, plan.probe_lifetime
            )
            self._counters.circuits[plan.name] = verdict[2]
        ticket = verdict[0]
        if ticket is None or verdict[1] is not verdict[2]:
            self._saw_verdict(plan, verdict)
        if ticket is None:
            return circuit_open(plan.name, breaker, verdict[3], verdict[2], verdict[4])
        return ticket

    async def _attempts(
        self,
        plan: _Plan,
        arguments: Arguments,
        context: ToolContext | None,
        call_id: str | None,
        started: float,
        *,
        deadline: Deadline | None,
        ticket: int | None,
        waited: bool,
        lingering: list[Job] | None,
    ) -> ToolResult:
        """The retry loop: admit an attempt (``ticket``: the circuit's, for the first), run it
        (traced), tell the circuit; after a failure, decide, prepare the retry; a result."""
        limiter = plan.policies.rate_limit
        caller = (context, call_id, started)  # (for a refusal, and log lines)
        tries = attempts = 0
        last: ToolResult | None = None
        while True:
            result: ToolResult | None = None
            try:
                limit = plan.attempt_timeout
                if deadline is not None:
                    cut = self._within_deadline(plan, deadline)
                    if cut is None:
                        return self._turned_away(plan, last, attempts, caller, "deadline")
                    limit = cut
                if limiter is not None:
                    now = self._clock()
                    wait = (
                        admit(plan.log, limiter, now)[1]
                        if plan.log is not None
                        else await self._store.update(plan.limiter_key, admit, limiter, now)
                    )
                    if wait:  # waited for within max_wait, or refused
                        admitted = await self._limited(
                            plan, wait, deadline, last, attempts, caller=caller
                        )
                        if isinstance(admitted, ToolResult):
                            return admitted
                        limit, waited = admitted if deadline is not None else limit, True
                tries += 1
                self._counters.retries += last is not None
                # What this attempt's requests may do upstream, for a tool that may write.
                exchanges = Exchanges() if plan.watched else None
                result = await self._start(
                    plan, arguments, caller, tries, exchanges, limit=limit, lingering=lingering
                )
            finally:  # the circuit's ticket, used or handed back
                opened = False
                if ticket is not None:
                    if _changes_the_circuit(plan, ticket, result):
                        opened = await self._report(plan, ticket, result)
                    ticket = None
            attempts += result.attempts
            self._counters.attempts += result.attempts
            if result.error is None:
                if tries == 1 and not waited:
                    return result  # the common case: the tool's own result, as it is
                return result.model_copy(
                    update={"attempts": attempts, "duration_ms": _ms_since(started)}
                )
            decision = self._decide(
                plan, result.error, tries, deadline, opened, exchanges=exchanges, caller=caller
            )
            if not isinstance(decision, float):
                return _retries_stopped(result, attempts, started, **decision)
            last, waited = result, True
            prepared = await self._prepare_retry(
                plan, last, attempts, caller, wait=decision, lingering=lingering, deadline=deadline
            )
            if isinstance(prepared, ToolResult):
                return prepared
            ticket = prepared

    def _start(
        self,
        plan: _Plan,
        arguments: Arguments,
        caller: _Caller,
        tries: int,
        exchanges: Exchanges | None,
        *,
        limit: float | Default | None,
        lingering: list[Job] | None,
    ) -> Coroutine[Any, Any, ToolResult]:
        """Attempt number ``tries`` of the call ``caller``, with the time limit ``limit``,
        its requests noted in ``exchanges`` (if any), traced (not started: the coroutine to
        await)."""
        context, call_id, _ = caller
        attempt = execute(
            plan.tool.fn,
            plan.tool.spec,
            plan.name,
            arguments,
            context=context,
            call_id=call_id,
            timeout=limit,
            include_stacktrace=self.toolkit.include_stacktrace,
            lingering=lingering,
            attempt=(tries, plan.attempts_allowed),
            exchanges=exchanges,
        )
        return traced_attempt(attempt, plan.name, tries)

    async def _prepare_retry(
        self,
        plan: _Plan,
        last: ToolResult,
        attempts: int,
        caller: _Caller,
        *,
        wait: float,
        lingering: list[Job] | None,
        deadline: Deadline | None,
    ) -> int | ToolResult | None:
        """Wait ``wait`` seconds before a retry, then for the bodies of earlier attempts
        still running (a retry never overlaps them), then ask the circuit: its ticket for the
        retry (None without a circuit), or the last failure if the retry cannot run."""
        kind = last.error.kind.value if last.error is not None else ""
        event("tdk.retry", {"tdk.wait_ms": wait_ms(wait), "error.type": kind})
        counted("retries", plan.name)
        if deadline is not None:
            deadline.waited(wait)
        await self._sleep(wait)
        if lingering and not await _bodies_ended(lingering, plan.own_timeout):
            return self._gave_up(plan, last, attempts, caller, reason="still_running")
        breaker = plan.policies.circuit_breaker
        if breaker is None:
            return None
        verdict = await self._store.update(
            plan.breaker_key, acquire, breaker, self._clock, plan.probe_lifetime
        )
        ticket = self._saw_verdict(plan, verdict)
        if ticket is None:
            return self._gave_up(
                plan, last, attempts, caller, reason="circuit_open", wait=verdict[4]
            )
        return ticket

    def _turned_away(
        self,
        plan: _Plan,
        last: ToolResult | None,
        attempts: int,
        caller: _Caller,
        reason: str,
        *,
        wait: float | None = None,
    ) -> ToolResult:
        """An attempt that the deadline or the rate limit (``reason``; ``wait``: the limiter's
        answer) turned away: a retry gives the last failure back; a first attempt is the
        call's refusal (``caller``: the call's context, id and start)."""
        context, call_id, started = caller
        if last is not None:
            return self._gave_up(plan, last, attempts, caller, reason=reason, wait=wait)
        policies = plan.policies
        refusal: ToolError
        if reason == "deadline":
            assert policies.deadline is not None
            refusal = deadline_passed(plan.name, policies.deadline)
        elif reason == "circuit_open":
            breaker = policies.circuit_breaker
            assert breaker is not None
            failures = plan.circuit.failures if plan.circuit is not None else 0
            refusal = circuit_open(plan.name, breaker, failures, _OPEN, breaker.reset_timeout)
        else:
            assert policies.rate_limit is not None
            assert wait is not None
            refusal = rate_limited(plan.name, policies.rate_limit, wait)
        return _refused(plan.name, refusal, context, call_id, started)

    async def _limited(
        self,
        plan: _Plan,
        wait: float,
        deadline: Deadline | None,
        last: ToolResult | None,
        attempts: int,
        *,
        caller: _Caller,
    ) -> float | ToolResult:
        """An attempt the rate limiter would admit in ``wait`` seconds: waited for while the
        limiter would admit it within its ``max_wait`` (all waits added up) and before the
        deadline, asking again after each wait; then its time limit (what the deadline
        leaves). Else the call's refusal, or the last failure of a retry."""
        limiter = plan.policies.rate_limit
        assert limiter is not None
        circuit = plan.circuit
        # (A probe never waits: its lifetime runs while it does, and others would be let in.)
        if limiter.max_wait and (circuit is None or circuit.state is _CLOSED):
            wait = await self._wait_for_admission(plan, limiter, wait, deadline)
        if wait < 0:  # the circuit opened while the call waited
            self._counters.rejections[ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN] += 1
            return self._turned_away(plan, last, attempts, caller, "circuit_open")
        if wait:
            self._counters.rejections[ErrorKind.TOOL_RUNTIME_RATE_LIMITED] += 1
            return self._turned_away(plan, last, attempts, caller, "rate_limited", wait=wait)
        cut = None if deadline is None else self._within_deadline(plan, deadline)
        if cut is None and deadline is not None:
            return self._turned_away(plan, last, attempts, caller, "deadline")
        return cut if cut is not None else 0.0

    async def _wait_for_admission(
        self, plan: _Plan, limiter: RateLimit, wait: float, deadline: Deadline | None
    ) -> float:
        """Wait while the limiter would admit the call within its ``max_wait`` (waits added
        up) and before the deadline, asking it again after each wait: 0.0 once admitted, else
        the wait it last answered; -1.0 when the call's circuit opened meanwhile (a call
        admitted before it opened must not run after)."""
        waited = 0.0
        circuit = plan.circuit  # (in process: any change of it since is a change of state)
        generation = None if circuit is None else circuit.generation
        while wait:
            if waited + wait > limiter.max_wait or (
                deadline is not None and not deadline.leaves(wait)
            ):
                return wait
            event("tdk.rate_limit.wait", {"tdk.wait_ms": wait_ms(wait)})
            if deadline is not None:
                deadline.waited(wait)
            await self._sleep(wait)
            waited += wait
            changed = (
                circuit.generation != generation  # in process: any transition since
                if circuit is not None
                else await self._circuit_now_refuses(plan)  # shared: whether it admits now
            )
            if changed:
                return -1.0
            now = self._clock()
            wait = (
                admit(plan.log, limiter, now)[1]
                if plan.log is not None
                else await self._store.update(plan.limiter_key, admit, limiter, now)
            )
        return 0.0

    async def _circuit_now_refuses(self, plan: _Plan) -> bool:
        """Whether the plan's circuit would refuse a call now (it changes nothing)."""
        breaker = plan.policies.circuit_breaker
        if breaker is None:
            return False
        if plan.circuit is not None:
            return refuses(plan.circuit, breaker, self._clock())
        answer: bool = await self._store.update(plan.breaker_key, peek, breaker, self._clock)
        return answer

    def _within_deadline(self, plan: _Plan, deadline: Deadline) -> float | None:
        """The time limit of an attempt starting now: its own, cut to what the deadline
        leaves; None if the deadline has passed."""
        remaining = deadline.remaining()
        if remaining <= 0:
            return None
        own = plan.own_timeout
        return remaining if own is None or remaining < own else own

    def _decide(
        self,
        plan: _Plan,
        error: ErrorInfo,
        tries: int,
        deadline: Deadline | None,
        opened: bool,
        *,
        exchanges: Exchanges | None,
        caller: _Caller,
    ) -> float | dict[str, object]:
        """After attempt number ``tries`` failed with ``error`` (and ``opened`` the circuit;
        ``exchanges``: what its requests may have done): the wait before the next one, or the
        details saying why there is none (nothing, for an error not to retry)."""
        if not error.retryable or error.kind in _NEVER_REPEATED:
            return {}
        if not plan.repeatable and may_have_acted(error, exchanges):
            # A write may have happened: repeating it is the caller's decision, not ours (nor
            # the model's, unaware: see _retries_stopped). Whatever the retry policy says. (The
            # same rule as a call without a runner, tdk._writes: every front door agrees.)
            self._log(plan, caller, tries, error, reason="not_idempotent", wait=None)
            return {"retry_stopped": "not_idempotent"}
        retry = plan.policies.retry
        if retry is None or error.category not in retry.retry_on:
            return {}
        allowed = min(retry.max_attempts, 1 + error.max_retry_attempts)
        if tries >= allowed:
            self._log(plan, caller, tries, error, reason="max_attempts", wait=None)
            return {"retry_stopped": "max_attempts", "max_attempts": allowed}
        backoff = retry.backoff(tries)
        hint = error.retry_after_ms / 1000 if error.retry_after_ms else 0.0
        wait = float(max(backoff, hint))
        breaker = plan.policies.circuit_breaker
        if opened and breaker is not None and wait < breaker.reset_timeout:
            # The circuit this attempt opened would refuse the retry: do not wait for it.
            self._log(plan, caller, tries, error, reason="circuit_open", wait=None)
            return {
                "retry_stopped": "circuit_open",
                "retry_wait_ms": wait_ms(breaker.reset_timeout),
            }
        if deadline is not None and not deadline.leaves(wait):
            self._log(plan, caller, tries, error, reason="deadline", wait=wait)
            return {
                "retry_stopped": "deadline",
                "retry_wait_ms": wait_ms(wait),
                "deadline": plan.policies.deadline,
            }
        self._log(
            plan,
            caller,
            tries,
            error,
            reason="retry_after" if hint > backoff else "backoff",
            wait=wait,
        )
        return wait

    @staticmethod
    def _log(
        plan: _Plan,
        caller: _Caller,
        attempt: int,
        error: ErrorInfo,
        *,
        reason: str,
        wait: float | None,
    ) -> None:
        """Log the decision after attempt number ``attempt`` of the call ``caller``."""
        context, call_id, _ = caller
        log_decision(
            plan.name,
            (attempt, plan.attempts_allowed),
            error,
            reason,
            wait,
            call_id=call_id,
            context=context,
        )

    def _gave_up(
        self,
        plan: _Plan,
        last: ToolResult,
        attempts: int,
        caller: _Caller,
        *,
        reason: str,
        wait: float | None = None,
    ) -> ToolResult:
        """The last failure, returned because its retry could not run (``reason``; ``wait``:
        the refusing policy's ``retry_after``, in seconds)."""
        assert last.error is not None
        started = caller[2]
        self._log(plan, caller, attempts, last.error, reason=reason, wait=wait)
        if wait is None:
            return _retries_stopped(last, attempts, started, retry_stopped=reason)
        return _retries_stopped(
            last, attempts, started, retry_stopped=reason, retry_wait_ms=wait_ms(wait)
        )

    def _plan_or_none(self, name: str) -> _Plan | None:
        """The plan of the tool called ``name``, made now; None if there is no such tool."""
        try:
            return self._plan(name)
        except ToolNotFoundError:
            return None

    def _plan(self, name: str) -> _Plan:
        """Resolve and remember the plan of the tool called ``name``."""
        tool = self.toolkit.get(name)
        key = tool.name.lower()
        policies = self._layers.resolve(tool.name)
        compartment = None
        if policies.bulkhead is not None:
            compartment = self._compartments.setdefault(
                (key, policies.bulkhead), Compartment(policies.bulkhead.max_concurrent)
            )
        timeout = policies.timeout
        limiter, breaker = policies.rate_limit, policies.circuit_breaker
        limiter_scope = limiter.scope if limiter is not None else None
        breaker_scope = breaker.scope if breaker is not None else None
        plan = _Plan(
            tool=tool,
            name=tool.name,
            policies=policies,
            compartment=compartment,
            attempt_timeout=DEFAULT if timeout is None else timeout,
            own_timeout=tool.spec.timeout if timeout is None else timeout,
            limiter_key=_state_key("rate_limit", key, limiter_scope)
            + ("" if limiter is None else f"/{limiter.calls}/{float(limiter.period)!r}"),
            breaker_key=_state_key("circuit", key, breaker_scope),
            threaded=not (tool.spec.is_async or tool.spec.inline),
            repeatable=tool.definition.annotations.repeatable,
            attempts_allowed=1 if policies.retry is None else policies.retry.max_attempts,
            keyed=tool.spec.context_parameter is not None,
            probe_lifetime=tool.spec.timeout if timeout is None else timeout,
            circuit=None,
            log=None,
            scoped_by=(scope_fields(limiter_scope), scope_fields(breaker_scope)),
        )
        plan.by_context = plan.scoped_by != ((), ())
        plan.context_fields = tuple(dict.fromkeys((*plan.scoped_by[0], *plan.scoped_by[1])))
        plan.watched = not plan.repeatable
        if plan.scoped_by == ((), ()):
            self._bind_state(plan)
        self._plans[key] = self._plans[tool.name] = plan
        return plan

    def _bind_state(self, plan: _Plan) -> None:
        """With the in-process store: give ``plan`` its live state objects."""
        local = self._local
        if local is None:
            return
        if plan.policies.circuit_breaker is not None:
            plan.circuit = local.live(plan.breaker_key, Circuit)
            self._live_circuits[plan.name] = plan.circuit
        if plan.policies.rate_limit is not None:
            plan.log = local.live(plan.limiter_key, deque)

    def _forget_idle(self) -> None:
        """Drop from the in-process store the per-user state (of scopes naming context fields)
        that is as good as none: a limiter log with nothing left in its window, a clean closed
        circuit. State kept per user would otherwise grow with every user ever seen. (A call
        in flight across this keeps its own state object: a report it makes after is lost.)"""
        if self._local is not None:
            self._local.forget_idle(self._per_context, self._clock())

    def _scoped(self, plan: _Plan, context: ToolContext | None) -> _Plan | ToolError:
        """The plan of a call whose scopes name context fields: its state keys formatted
        for ``context``; or the error naming the fields the context lacks."""
        named = plan.context_fields
        values = context_values(named, context)
        if isinstance(values, list):
            return scope_fields_missing(plan.name, values)
        found = plan.scoped.get(values)
        if found is None:
            limiter_fields, breaker_fields = plan.scoped_by
            keys = (
                scope_key(plan.limiter_key, limiter_fields, named, values),
                scope_key(plan.breaker_key, breaker_fields, named, values),
            )
            if len(plan.scoped) >= _MAX_SCOPED_PLANS:
                for each in self._plans.values():  # (no plan keeps a state forgotten here)
                    each.scoped.clear()
                self._forget_idle()
            found = dataclasses.replace(
                plan,
                limiter_key=keys[0],
                breaker_key=keys[1],
                scoped_by=((), ()),
                scoped={},
                by_context=False,
            )
            self._bind_state(found)
            policies = plan.policies
            if self._local is not None:  # (idle per-user state is swept in this process only)
                if limiter_fields and policies.rate_limit is not None:
                    self._per_context[keys[0]] = policies.rate_limit
                if breaker_fields and policies.circuit_breaker is not None:
                    self._per_context[keys[1]] = policies.circuit_breaker
            plan.scoped[values] = found
        return found

    def _saw_verdict(self, plan: _Plan, verdict: Verdict) -> int | None:
        ticket, before, after, failures, _ = verdict
        self._counters.circuits[plan.name] = after
        if before is not after:
            log_transition(plan.name, before, after, failures)
        if ticket is None:
            self._counters.rejections[ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN] += 1
        return ticket

    async def _report(self, plan: _Plan, ticket: int, done: ToolResult | None) -> bool:
        """Tell the circuit how the attempt admitted with ``ticket`` ended (``done``: its
        result, None if it did not finish); whether that opened the circuit."""
        breaker = plan.policies.circuit_breaker
        assert breaker is not None
        outcome = outcome_of(done)
        circuit = plan.circuit
        if circuit is not None:
            before, after, failures = record(circuit, breaker, self._clock, ticket, outcome)[1]
        else:
            before, after, failures = await self._store.update(
                plan.breaker_key, record, breaker, self._clock, ticket, outcome
            )
            self._counters.circuits[plan.name] = after
        if before is after:
            return False
        log_transition(plan.name, before, after, failures)
        return after is _OPEN

    async def _release(self, plan: _Plan, ticket: int) -> None:
        """Hand back the circuit's ticket of an attempt that did not run."""
        breaker = plan.policies.circuit_breaker
        # Only probes report from a half-open circuit, and a neutral one moves nothing.
        _, after, _ = await self._store.update(
            plan.breaker_key, record, breaker, self._clock, ticket, NEUTRAL
        )
        self._counters.circuits[plan.name] = after

    async def _queue(
        self, plan: _Plan, deadline: Deadline | None, ticket: int | None
    ) -> ToolError | None:
        """Queue for the call's slots as long as its bulkhead allows (one budget for both
        compartments) and its deadline leaves; the refusal if none came. A refused or
        cancelled call hands its circuit ticket back."""
        try:
            refusal = await self._wait_for_slots(plan, deadline)
        except BaseException:
            if ticket is not None:
                await self._release(plan, ticket)
            raise
        if refusal is not None:
            self._counters.rejections[ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL] += 1
            if ticket is not None:
                await self._release(plan, ticket)
        return refusal

    async def _wait_for_slots(self, plan: _Plan, deadline: Deadline | None) -> ToolError | None:
        bulkhead = plan.policies.bulkhead
        budget = bulkhead.max_wait if bulkhead is not None else 0.0
        if deadline is not None:
            budget = min(budget, deadline.remaining())
        refused = await take_slots(plan.compartment, self._all, budget)
        if refused is None:
            return None
        if refused is plan.compartment:
            assert bulkhead is not None
            return bulkhead_full(plan.name, "tool", bulkhead.max_concurrent, bulkhead.max_wait)
        return bulkhead_full(plan.name, "all", refused.limit, max(budget, 0.0))


def _refused(
    name: str,
    error: ToolError,
    context: ToolContext | None,
    call_id: str | None,
    started: float,
) -> ToolResult:
    """The result of a call refused before the tool body ran: classified, redacted and
    logged once, like every failure."""
    if error.kind in REFUSAL_KINDS:  # the runner's own (not an unknown tool's name, say)
        event("tdk.refused", {"error.type": error.kind.value})
        counted("refusals", name, **{"error.type": error.kind.value})
    return failure_result(
        name,
        error,
        call_id=call_id,
        context=context,
        attempts=0,
        started=started,
        include_stacktrace=False,
    )


def _retries_stopped(
    result: ToolResult, attempts: int, started: float, **reason: object
) -> ToolResult:
    """A failed result with the call's attempts and duration, and why retries stopped."""
    error = result.error
    assert error is not None
    details = {**error.details, "attempts": attempts, **reason}
    changes: dict[str, object] = {"details": details}
    if reason.get("retry_stopped") == "not_idempotent":
        changes.update(not_repeated(error))
    return result.model_copy(
        update={
            "error": error.model_copy(update=changes),
            "attempts": attempts,
            "duration_ms": _ms_since(started),
        }
    )


def _ms_since(started: float) -> float:
    return (perf_counter() - started) * 1000


#: Plans of formatted scopes a tool keeps at most (then they are made again).
_MAX_SCOPED_PLANS: Final = 4096


def _state_key(policy: str, tool_key: str, scope: str | None) -> str:
    """The store key of a policy's state: per tool, or per scope (to which a call appends
    the values of the fields a scope names, see :func:`scope_key`). Tool names hold no
    ``:``, so the two never meet. (A limiter's key also carries its limits: tools sharing a
    scope share one quota when their limits are equal, and only then.)"""
    return f"tdk:{policy}:{tool_key}" if scope is None else f"tdk:{policy}:scope:{scope}"


def _check_call(name: object, call_id: object) -> None:
    if type(name) is not str:
        raise TypeError(f"the tool name must be a str, not {type(name).__name__}")
    check_call_id(call_id)


async def _bodies_ended(jobs: list[Job], within: float | None) -> bool:
    """Wait up to ``within`` seconds for the sync bodies of ``jobs`` still running to end
    (forgetting those that have); whether none is left."""
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


def _give_slots_back(
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


def _unpack(call: object) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    if isinstance(call, tuple) and len(call) == 2 and isinstance(call[0], str):
        return ToolCall.model_construct(name=call[0], arguments=call[1], call_id=None, problem=None)
    raise TypeError(f"each call must be a ToolCall or a (name, arguments) pair, not {call!r}")


async def _answer_malformed(call: ToolCall, context: ToolContext | None) -> ToolResult:
    """The answer to a call a host could not read whole (see :attr:`ToolCall.problem`): bad
    input, and the tool does not run."""
    problem = ToolInputError(f"{call.problem} Fix the call and make it again.")
    return _refused(shown_name(call.name, context), problem, context, call.call_id, perf_counter())
