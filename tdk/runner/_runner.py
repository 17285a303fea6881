"""``ToolRunner``: run tool calls under retry, rate-limit, circuit-breaker and bulkhead policies.

The runner is a facade over four ideas, each a module of its own:

- the plan (:mod:`~tdk.runner._plan`): a tool's policies resolved once, its state keys and
  live state, per tool and per formatted scope;
- the guards, each with a synchronous path for the in-process store and the common case: the
  circuit (:mod:`~tdk.runner._gate`), the bulkhead slots (:mod:`~tdk.runner._slots`) and the
  limiter's admission (:mod:`~tdk.runner._admission`);
- the attempt loop (:mod:`~tdk.runner._retry`): admit, run, report, decide, wait;
- the refusals (:mod:`~tdk.runner._refusals`): every refusal is a ``ToolResult`` built by the
  same ``failure_result()`` as any other failure, so it is classified, redacted and logged once.

One call: :meth:`ToolRunner.run` finds the plan, the circuit gives a ticket (or refuses), the
slots are taken (or queued for), and the attempt loop runs; a refusal hands back what earlier
guards granted, and the slots go back when the call ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import replace
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

from tdk._define.definition import ToolDefinition
from tdk._define.toolkit import Toolkit
from tdk._execution.arguments import Arguments
from tdk._execution.asks import ask_state
from tdk._execution.call import ToolCall
from tdk._execution.call_scope import check_call_id, shown_name
from tdk._execution.context import ToolContext, context_of_call
from tdk._execution.default import DEFAULT, Default
from tdk._execution.loop import refuse_running_loop, run_blocking
from tdk._execution.result import ToolResult
from tdk._execution.telemetry import active
from tdk.auth._authorization import Authorization
from tdk.errors import ToolError, ToolInputError
from tdk.runner._acting import Acting
from tdk.runner._admission import Admission
from tdk.runner._breaker import CircuitState
from tdk.runner._config import Layers, Policies, check_policies
from tdk.runner._events import Instrument, Instruments
from tdk.runner._gate import Gate
from tdk.runner._instruments import DEFAULT_INSTRUMENTS
from tdk.runner._plan import Plan, Plans
from tdk.runner._policies import Bulkhead, CircuitBreaker, RateLimit, RetryPolicy
from tdk.runner._refusals import refusal_result
from tdk.runner._resume import DEFAULT_ASK_EXPIRY, Asks
from tdk.runner._retry import Attempts, Call
from tdk.runner._slots import Slots, give_slots_back
from tdk.runner._stats import Counters, RunnerStats
from tdk.runner._store import (
    CALL_DEADLINE,
    CallDeadline,
    InMemoryStore,
    StateStore,
    UpdateStore,
    applied_in_process,
    named_operations,
)

if TYPE_CHECKING:
    from tdk.auth._user_auth import UserAuth

__all__ = ["ToolCall", "ToolRunner"]

_CLOSED: Final = CircuitState.CLOSED

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[object]]


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
    - ``state_key`` (str or bytes, at least 16 bytes): the key that seals the tokens of
      pending calls (``context.ask()``, approvals); replicas that resume each other's calls
      share it. Without one, a random key of the process (one worker). ``ask_expiry``: how
      long such a token can be resumed, in seconds. The token is used once, consumed in
      ``store`` (see :meth:`resume` and ``docs/asks.md``).
    - ``confirm_destructive``: whether a call of a tool declared ``@tool(destructive=True)``
      needs the user's approval. None (the default): when the call is served
      (``tdk serve``, ``tdk.hosts.mcp``), not when it is run in process; True: always;
      False: never.
    - ``user_auth``: a :class:`~tdk.auth.UserAuth`: the tools declared
      ``@tool(requires_auth=...)`` act as the caller (``context.user_id``) at their
      provider, with the token it keeps for them, refreshed when due; a caller without one is
      asked to sign in (an :class:`~tdk.OpenUrl` under the key ``auth.<provider>``), and
      :meth:`complete_authorization` takes the provider's callback. ``docs/auth.md``.

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
        store: UpdateStore | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        state_key: str | bytes | None = None,
        ask_expiry: float = DEFAULT_ASK_EXPIRY,
        confirm_destructive: bool | None = None,
        user_auth: UserAuth | None = None,
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
        store = _runner_store(max_concurrency, store, confirm_destructive)
        self.toolkit: Final = toolkit
        """The tools this runner runs."""
        self.max_concurrency: Final = max_concurrency
        """Calls running at once across all tools, or None."""
        self.confirm_destructive: Final = confirm_destructive
        """Whether calls of tools declared destructive need approval (None: when served)."""
        self.user_auth: Final = user_auth
        """The users' tokens at the OAuth providers the tools act on (``user_auth=``), or None."""
        self._asks = Asks(toolkit, store, state_key, ask_expiry)
        self._acting = _acting(user_auth, toolkit, state_key, store, ask_expiry)
        self._store = store
        # With the in-process store (not a subclass's own operations), plans hold the live
        # state objects and the guards apply the changes to them: no await, the same rules.
        local = self._local = applied_in_process(store)
        counters = self._counters = Counters()
        swept = store if isinstance(store, InMemoryStore) else None
        plans = self._plans = Plans(toolkit, Layers(Policies(**base)), local, clock, swept)
        self._known: Final = plans.by_name
        """The plans made, by name: what a call looks up first."""
        operations = named_operations(store)
        # Who hears the runner's events: tdk's instruments (and a host, see _heard_by).
        heard_by = Instruments(DEFAULT_INSTRUMENTS)
        gate = self._gate = Gate(operations, local, plans, clock, counters, instruments=heard_by)
        self._slots = Slots(max_concurrency, gate, counters)
        admits = Admission(operations, gate, clock, sleep)
        traced = toolkit.include_stacktrace
        self._attempts = Attempts(gate, admits, clock, sleep, counters, include_stacktrace=traced)

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
        self._plans.configure(pattern, changes)

    async def available(
        self, source: Toolkit | Iterable[ToolDefinition], *, context: ToolContext | None = None
    ) -> list[ToolDefinition]:
        """The definitions of ``source`` (a toolkit, or definitions) whose tools this runner
        would call now: those whose circuit is not open. A host offers the model these, and
        stops offering a tool while its upstream is down. A tool the runner does not run, or
        runs without a circuit, is kept; a circuit kept per context field is judged for
        ``context`` (kept when the context lacks the field)."""
        definitions = source.definitions() if isinstance(source, Toolkit) else list(source)
        kept = []
        for definition in definitions:
            plan = self._plans.find(definition.name)
            if plan is None or not await self._gate.refuses_for(plan, context):
                kept.append(definition)
        return kept

    def _heard_by(self, instrument: Instrument) -> Callable[[], None]:
        """Tell ``instrument`` each of this runner's events from now on (a host watching its
        circuits: ``tdk.hosts._mcp_changes``); the function that stops it."""
        return self._gate.instruments.add(instrument)

    def _shared_store(self) -> UpdateStore:
        """The store the runner keeps its state in (a host learns through it what runners in
        other processes changed)."""
        return self._store

    def policies(self, name: str) -> Policies:
        """The policies that apply to the tool called ``name`` (whether or not it exists)."""
        return self._plans.policies(name)

    def stats(self) -> RunnerStats:
        """The runner's counters: calls, attempts, retries, refusals per kind, and the state
        of each tool's circuit as this runner last saw it."""
        live = self._plans.circuit_states()
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
        plan = self._known.get(name) or self._known.get(name.lower())
        if plan is None or plan.by_context:  # (the common case: neither)
            found = self._plan_of_call(plan, name, context, call_id, started)
            if isinstance(found, ToolResult):
                return found
            plan = found
        if plan.keyed:  # one idempotency key for every attempt of this call
            context = context_of_call(context)
        if plan.tool.spec.declared_destructive:
            context = self._approving(context)
        call = Call(plan, arguments, context, call_id, started)
        deadline = call.deadline
        acting = self._acting if plan.tool.spec.auth is not None else None
        # (the coroutine reads CALL_DEADLINE when it runs, that is once awaited below)
        guarded = self._guarded(call) if acting is None else acting.run(call, self._guarded)
        if deadline is None or self._local is not None:
            result = await guarded
        else:
            # A shared store waits for its server within the deadline (see CallDeadline),
            # which it reads on the loop's clock.
            left = deadline.remaining()
            bound = CALL_DEADLINE.set(CallDeadline(asyncio.get_running_loop().time() + left, left))
            try:
                result = await guarded
            finally:
                CALL_DEADLINE.reset(bound)
        if result.pending is not None:  # the call asked the user: its token, sealed
            return self._asks.sealed(result, plan.tool, arguments, context)
        return result

    def resume(
        self,
        token: str,
        answers: Mapping[str, Any],
        *,
        context: ToolContext | None = None,
        call_id: str | None = None,
    ) -> Coroutine[Any, Any, ToolResult]:
        """Run a pending call again from the start, with the user's ``answers`` (key ->
        answer, for the keys of ``result.pending.requests``).

        ``token`` is ``result.pending.token``; ``context`` is the caller's, as for
        :meth:`run` (its ``user_id`` must be the one the call was made for). The call keeps
        its idempotency key, its ``call_id`` (unless one is given), and every answer given in
        earlier rounds. Refused with
        ``TOOL_RUNTIME_RESUME_INVALID``, before anything runs: a token tampered with,
        truncated, expired, already used, another user's or of a tool that changed; an
        answer that does not fit its request, or under a key that was not asked; and, retryable,
        a store that cannot say whether the token was used. See ``docs/asks.md``.

        .. versionadded:: 0.1.0
        """
        return self._resume(token, answers, context, call_id, None)

    def resume_sync(
        self,
        token: str,
        answers: Mapping[str, Any],
        *,
        context: ToolContext | None = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """:meth:`resume` for synchronous code (see :meth:`run_sync`)."""
        refuse_running_loop("resume_sync", "resume")
        return run_blocking(self.resume(token, answers, context=context, call_id=call_id))

    async def _resume(
        self,
        token: object,
        answers: object,
        context: ToolContext | None,
        call_id: str | None,
        sent: tuple[str, Arguments] | None,
    ) -> ToolResult:
        """:meth:`resume`; ``sent``: the tool and arguments of a call a host sent again with
        the token (MCP), which must be the token's."""
        started = perf_counter()
        opened = await self._asks.opened(token, answers, context, sent)
        if isinstance(opened, ToolError):
            name = sent[0] if sent is not None else "resume"
            return refusal_result(
                shown_name(name, context), opened, context, call_id, started, instruments=None
            )
        call_id = opened.call_id if call_id is None else call_id
        return await self.run(
            opened.tool, opened.arguments, context=opened.context, call_id=call_id
        )

    async def complete_authorization(
        self, params: Mapping[str, object], *, user_id: str | None
    ) -> Authorization:
        """Take a provider's callback: the browser of the user who was asked to sign in
        (``auth.<provider>``) comes back to ``UserAuth.redirect_uri`` with these query
        ``params`` (``code`` and ``state``, or ``error``). ``user_id`` is who opened it, as
        your web server knows them (its session): the tokens are kept only when that is the
        user the link was made for (a link forwarded to someone else attaches nothing), and
        only once (a replayed callback attaches nothing). Never raises for bad input: the
        :class:`~tdk.auth.Authorization` says what happened, and its ``message`` what to show.
        ``tdk serve --http`` answers this callback itself.

        .. versionadded:: 0.1.0
        """
        if self._acting is None:
            raise RuntimeError("this runner was given no user_auth: it keeps no user's tokens")
        return await self._acting.complete(params, user_id)

    def _approving(self, context: ToolContext | None) -> ToolContext | None:
        """``context`` of a call of a tool declared destructive: asking the user's approval
        when the runner says so (``confirm_destructive``; None: when the call is served)."""
        state = ask_state(context)
        confirm = self.confirm_destructive
        if not (state.served if confirm is None else confirm) or state.approve:
            return context
        base = context if context is not None else ToolContext()
        return base._answered(replace(state, approve=True))

    async def _guarded(self, call: Call) -> ToolResult:
        """The call past its guards (the circuit, then the slots), then its attempts; or the
        refusal of the first guard that said no (which hands back what earlier ones gave)."""
        plan = call.plan
        slots = self._slots
        taken = False
        if plan.policies.circuit_breaker is not None:
            circuit = plan.circuit
            if circuit is not None and circuit.state is _CLOSED:
                call.ticket = circuit.generation  # what acquire() answers, without a change
            elif self._gate.enters(plan) and slots.try_take(plan):
                # A shared store, and a limiter too: the ticket is asked with the first
                # attempt's admission, in one round trip (the slots were free: no wait
                # between the two guards, whose order therefore does not show).
                call.entering = taken = True
            else:
                ticket = await self._gate.ticket(plan)
                if isinstance(ticket, ToolError):
                    return self._refused(call, ticket)
                call.ticket = ticket
        if not taken and not slots.try_take(plan):  # (free slots are taken without an await)
            call.waited = True
            refusal = await slots.queue(plan, call.deadline, call.ticket)
            if refusal is not None:
                return self._refused(call, refusal)
        try:
            return await self._attempts.run(call)
        finally:
            give_slots_back(call.lingering, plan.compartment, slots.everyone)

    def _refused(self, call: Call, refusal: ToolError) -> ToolResult:
        return refusal_result(
            call.plan.name,
            refusal,
            call.context,
            call.call_id,
            call.started,
            instruments=self._gate.instruments,
        )

    def _plan_of_call(
        self,
        plan: Plan | None,
        name: str,
        context: ToolContext | None,
        call_id: str | None,
        started: float,
    ) -> Plan | ToolResult:
        """The plan of a call the fast path could not give: a tool's first call, or one
        whose state is kept per formatted scope; or the refusal of an unknown tool or of a
        context that lacks a scope's fields."""
        if plan is None:
            plan = self._plans.find(name)
            if plan is None:
                shown = shown_name(name, context)
                unknown = self.toolkit._not_found(name, shown, context)
                unknown.details["attempts"] = 0
                return refusal_result(shown, unknown, context, call_id, started, instruments=None)
        if not plan.by_context:
            return plan
        scoped = self._plans.scoped(plan, context)
        if isinstance(scoped, ToolError):
            return refusal_result(plan.name, scoped, context, call_id, started, instruments=None)
        return scoped


def _runner_store(
    max_concurrency: object, store: UpdateStore | None, confirm_destructive: object
) -> UpdateStore:
    """The runner's store (a new in-memory one for None), once its options are checked."""
    if max_concurrency is not None:
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
            raise ValueError(f"max_concurrency must be an int or None, got {max_concurrency!r}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
    if confirm_destructive is not None and not isinstance(confirm_destructive, bool):
        raise TypeError(f"confirm_destructive must be a bool or None, not {confirm_destructive!r}")
    if store is None:
        return InMemoryStore()
    if not isinstance(store, StateStore):
        raise TypeError(f"store must have the StateStore method update(), got {store!r}")
    return store


def _acting(
    user_auth: UserAuth | None,
    toolkit: Toolkit,
    state_key: str | bytes | None,
    store: UpdateStore,
    expiry: float,
) -> Acting | None:
    """The runner's part in calls acting as the user, when it is given ``user_auth``."""
    return None if user_auth is None else Acting(user_auth, toolkit, state_key, store, expiry)


def _check_call(name: object, call_id: object) -> None:
    if type(name) is not str:
        raise TypeError(f"the tool name must be a str, not {type(name).__name__}")
    check_call_id(call_id)


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
    return refusal_result(
        shown_name(call.name, context),
        problem,
        context,
        call.call_id,
        perf_counter(),
        instruments=None,
    )
