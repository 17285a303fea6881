"""The attempt loop of one call: admit, run, report; after a failure, decide, wait, ask again.

For each attempt: the deadline cuts its time limit (:mod:`tdk.runner._deadline`), the rate
limiter admits it (:mod:`tdk.runner._admission`), the tool runs (``execute``, traced), and the
circuit hears how it ended (:mod:`tdk.runner._gate`). After a failure, :meth:`Attempts._decide`
gives the wait before the next attempt, or why there is none: an error not to retry, a write
that may have happened (the rule of :mod:`tdk._execution.writes`, the same with or without a
runner), attempts used up, a circuit this attempt opened, a deadline the wait would pass. The
wait is slept, the bodies of earlier attempts still running are waited for (a retry never overlaps
them), and the circuit is asked again. A retry that cannot run gives the last failure back,
with ``error.details["retry_stopped"]`` saying why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from time import perf_counter
from typing import Any, Final

from tdk._execution.arguments import Arguments
from tdk._execution.context import ToolContext
from tdk._execution.default import Default
from tdk._execution.exchanges import Exchanges
from tdk._execution.execute import execute
from tdk._execution.result import ToolResult
from tdk._execution.telemetry import traced_attempt
from tdk._execution.threads import Job
from tdk._execution.writes import may_have_acted, not_repeated
from tdk.errors import ErrorInfo, ErrorKind, ToolError
from tdk.runner._admission import CIRCUIT_OPENED, Admission
from tdk.runner._breaker import CircuitState
from tdk.runner._deadline import Deadline
from tdk.runner._events import RetryScheduled, RetryStopped
from tdk.runner._gate import Gate, changes_the_circuit
from tdk.runner._limiter import admit, wait_ms
from tdk.runner._plan import Plan
from tdk.runner._policies import RateLimit
from tdk.runner._refusals import circuit_open, deadline_passed, rate_limited, refusal_result
from tdk.runner._slots import bodies_ended
from tdk.runner._stats import Counters

__all__ = ["Attempts", "Call"]

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
#: Reasons of a decision to retry; any other reason is why a retry did not happen.
_RETRYING: Final = frozenset({"backoff", "retry_after"})
_OPEN: Final = CircuitState.OPEN
_CLOSED: Final = CircuitState.CLOSED


class Call:
    """One call in progress: what it was given, and where its attempts stand."""

    __slots__ = (
        "arguments",
        "attempts",
        "call_id",
        "context",
        "deadline",
        "entering",
        "exchanges",
        "last",
        "lingering",
        "plan",
        "started",
        "ticket",
        "tries",
        "waited",
    )

    def __init__(
        self,
        plan: Plan,
        arguments: Arguments,
        context: ToolContext | None,
        call_id: str | None,
        started: float,
    ) -> None:
        self.plan = plan
        self.arguments = arguments
        self.context = context
        self.call_id = call_id
        self.started = started
        """``perf_counter()`` when the call began: its duration counts from there."""
        limit = plan.policies.deadline
        # (on the monotonic clock, whatever clock the policies' state reads: see _deadline)
        self.deadline = None if limit is None else Deadline(limit)
        self.lingering: list[Job] | None = [] if plan.threaded else None
        """Sync bodies of its attempts still running in their threads past their time
        limit: they keep the call's slots until they end."""
        self.ticket: int | None = None
        """The circuit's ticket of the next attempt (None: no circuit, or used)."""
        self.entering = False
        """Whether the next attempt asks for its circuit's ticket with its limiter's
        admission, in one step of a shared store (``Gate.enter``)."""
        self.waited = False
        """Whether the call waited for anything (slots, the limiter, a retry)."""
        self.tries = 0
        """Attempts started."""
        self.attempts = 0
        """Invocations of the tool body, as the results count them."""
        self.last: ToolResult | None = None
        """The last failure, once an attempt failed."""
        self.exchanges: Exchanges | None = None
        """What the requests of the latest attempt may have done upstream (a tool that may
        write; None for one that may not, or before any attempt)."""


class Attempts:
    """The attempt loop of one runner's calls."""

    __slots__ = ("_admission", "_clock", "_counters", "_gate", "_include_stacktrace", "_sleep")

    def __init__(
        self,
        gate: Gate,
        admission: Admission,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[object]],
        counters: Counters,
        *,
        include_stacktrace: bool,
    ) -> None:
        self._gate = gate
        self._admission = admission
        self._clock = clock
        self._sleep = sleep
        self._counters = counters
        self._include_stacktrace = include_stacktrace

    async def run(self, call: Call) -> ToolResult:
        """Attempts until one succeeds or no retry can run; the call's result."""
        plan = call.plan
        limiter = plan.policies.rate_limit
        while True:
            result: ToolResult | None = None
            exchanges: Exchanges | None = None
            try:
                limit = (
                    plan.attempt_timeout
                    if call.deadline is None
                    else _within_deadline(plan, call.deadline)
                )
                if limit is None:
                    return self._turned_away(call, "deadline")
                if limiter is not None:
                    if plan.log is not None:  # (in process: asked inline, without a coroutine)
                        wait = admit(plan.log, limiter, self._clock())[1]
                    elif call.entering:
                        entered = await self._enter(call, limiter)
                        if isinstance(entered, ToolResult):
                            return entered
                        wait = entered
                    else:
                        wait = await self._admission.ask(plan, limiter)
                    if wait:  # waited for within max_wait, or refused
                        admitted = await self._limited(call, wait)
                        if isinstance(admitted, ToolResult):
                            return admitted
                        limit = admitted if call.deadline is not None else limit
                        call.waited = True
                call.tries += 1
                self._counters.retries += call.last is not None
                # What this attempt's requests may do upstream, for a tool that may write.
                exchanges = call.exchanges = None if plan.repeatable else Exchanges()
                result = await self._start(call, exchanges, limit)
            finally:  # the circuit's ticket, used or handed back
                opened = False
                ticket, call.ticket = call.ticket, None
                if ticket is not None and changes_the_circuit(plan, ticket, result):
                    opened = await self._gate.report(plan, ticket, result)
            call.attempts += result.attempts
            self._counters.attempts += result.attempts
            if result.error is None:
                if call.tries == 1 and not call.waited:
                    return result  # the common case: the tool's own result, as it is
                return result.model_copy(
                    update={"attempts": call.attempts, "duration_ms": _ms_since(call.started)}
                )
            decision = self._decide(call, result.error, opened, exchanges)
            if not isinstance(decision, float):
                return _retries_stopped(result, call.attempts, call.started, **decision)
            call.last, call.waited = result, True
            stopped = await self._prepare_retry(call, decision)
            if stopped is not None:
                return stopped

    def _start(
        self, call: Call, exchanges: Exchanges | None, limit: float | Default | None
    ) -> Coroutine[Any, Any, ToolResult]:
        """The call's next attempt, with the time limit ``limit``, its requests noted in
        ``exchanges`` (if any), traced (not started: the coroutine to await)."""
        plan = call.plan
        attempt = execute(
            plan.tool.fn,
            plan.tool.spec,
            plan.name,
            call.arguments,
            context=call.context,
            call_id=call.call_id,
            timeout=limit,
            include_stacktrace=self._include_stacktrace,
            lingering=call.lingering,
            attempt=(call.tries, plan.attempts_allowed),
            exchanges=exchanges,
        )
        return traced_attempt(attempt, plan.name, call.tries)

    async def _enter(self, call: Call, limiter: RateLimit) -> float | ToolResult:
        """The circuit's ticket of the call's next attempt, asked with its admission: the
        limiter's answer; or, when the circuit refuses, the call's refusal (the last failure
        for a retry)."""
        call.entering = False
        plan = call.plan
        verdict, wait = await self._gate.enter(plan, limiter)
        if verdict.ticket is None or wait is None:
            if call.last is not None:
                return self._gave_up(call, "circuit_open", wait=verdict.retry_after)
            breaker = plan.policies.circuit_breaker
            assert breaker is not None
            refusal = circuit_open(
                plan.name, breaker, verdict.failures, verdict.after, verdict.retry_after
            )
            return refusal_result(
                plan.name,
                refusal,
                call.context,
                call.call_id,
                call.started,
                instruments=self._gate.instruments,
            )
        call.ticket = verdict.ticket
        return wait

    async def _limited(self, call: Call, wait: float) -> float | ToolResult:
        """An attempt the rate limiter would admit in ``wait`` seconds: waited for while the
        limiter would admit it within its ``max_wait`` (all waits added up) and before the
        deadline, asking again after each wait; then its time limit (what the deadline
        leaves). Else the call's refusal, or the last failure of a retry."""
        plan = call.plan
        limiter = plan.policies.rate_limit
        assert limiter is not None
        circuit = plan.circuit
        # (A probe never waits: its lifetime runs while it does, and others would be let in.)
        if limiter.max_wait and (circuit is None or circuit.state is _CLOSED):
            wait = await self._admission.wait(plan, limiter, wait, call.deadline)
        if wait == CIRCUIT_OPENED:
            self._counters.rejections[ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN] += 1
            return self._turned_away(call, "circuit_open")
        if wait:
            self._counters.rejections[ErrorKind.TOOL_RUNTIME_RATE_LIMITED] += 1
            return self._turned_away(call, "rate_limited", wait=wait)
        if call.deadline is None:
            return 0.0
        cut = _within_deadline(plan, call.deadline)
        return self._turned_away(call, "deadline") if cut is None else cut

    def _decide(
        self, call: Call, error: ErrorInfo, opened: bool, exchanges: Exchanges | None
    ) -> float | dict[str, object]:
        """After the call's latest attempt failed with ``error`` (and ``opened`` the circuit;
        ``exchanges``: what its requests may have done): the wait before the next one, or the
        details saying why there is none (nothing, for an error not to retry)."""
        if not error.retryable or error.kind in _NEVER_REPEATED:
            return {}
        plan = call.plan
        if not plan.repeatable and may_have_acted(error, exchanges):
            # A write may have happened: repeating it is the caller's decision, not ours (nor
            # the model's, unaware: see _retries_stopped). Whatever the retry policy says. (The
            # same rule as a call without a runner, tdk._execution.writes: every front door agrees.)
            self._log(call, error, "not_idempotent", None)
            return {"retry_stopped": "not_idempotent"}
        retry = plan.policies.retry
        if retry is None or error.category not in retry.retry_on:
            return {}
        allowed = min(retry.max_attempts, 1 + error.max_retry_attempts)
        if call.tries >= allowed:
            self._log(call, error, "max_attempts", None)
            return {"retry_stopped": "max_attempts", "max_attempts": allowed}
        backoff = retry.backoff(call.tries)
        hint = error.retry_after_ms / 1000 if error.retry_after_ms else 0.0
        wait = float(max(backoff, hint))
        breaker = plan.policies.circuit_breaker
        if opened and breaker is not None and wait < breaker.reset_timeout:
            # The circuit this attempt opened would refuse the retry: do not wait for it.
            self._log(call, error, "circuit_open", None)
            return {
                "retry_stopped": "circuit_open",
                "retry_wait_ms": wait_ms(breaker.reset_timeout),
            }
        deadline = call.deadline
        if deadline is not None and not deadline.leaves(wait):
            self._log(call, error, "deadline", wait)
            return {
                "retry_stopped": "deadline",
                "retry_wait_ms": wait_ms(wait),
                "deadline": plan.policies.deadline,
            }
        self._log(call, error, "retry_after" if hint > backoff else "backoff", wait)
        return wait

    async def _prepare_retry(self, call: Call, wait: float) -> ToolResult | None:
        """Wait ``wait`` seconds before a retry, then for the bodies of earlier attempts
        still running, then ask the circuit for the retry's ticket; the last failure if the
        retry cannot run."""
        plan = call.plan
        last = call.last
        assert last is not None
        assert last.error is not None
        if call.deadline is not None:
            call.deadline.waited(wait)
        await self._sleep(wait)
        if call.lingering and not await bodies_ended(call.lingering, plan.own_timeout):
            return self._gave_up(call, "still_running")
        if plan.policies.circuit_breaker is None:
            return None
        if self._gate.enters(plan):  # asked with the retry's admission, in one step
            call.entering = True
            return None
        verdict = await self._gate.retry_ticket(plan)
        if verdict.ticket is None:
            return self._gave_up(call, "circuit_open", wait=verdict.retry_after)
        call.ticket = verdict.ticket
        return None

    def _turned_away(self, call: Call, reason: str, *, wait: float | None = None) -> ToolResult:
        """An attempt that the deadline, the circuit or the rate limit (``reason``; ``wait``:
        the limiter's answer) turned away: a retry gives the last failure back; a first
        attempt is the call's refusal."""
        if call.last is not None:
            return self._gave_up(call, reason, wait=wait)
        plan = call.plan
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
        return refusal_result(
            plan.name,
            refusal,
            call.context,
            call.call_id,
            call.started,
            instruments=self._gate.instruments,
        )

    def _gave_up(self, call: Call, reason: str, *, wait: float | None = None) -> ToolResult:
        """The last failure, returned because its retry could not run (``reason``; ``wait``:
        the refusing policy's ``retry_after``, in seconds)."""
        last = call.last
        assert last is not None
        assert last.error is not None
        self._log(call, last.error, reason, wait, attempt=call.attempts)
        if wait is None:
            return _retries_stopped(last, call.attempts, call.started, retry_stopped=reason)
        return _retries_stopped(
            last, call.attempts, call.started, retry_stopped=reason, retry_wait_ms=wait_ms(wait)
        )

    def _log(
        self,
        call: Call,
        error: ErrorInfo,
        reason: str,
        wait: float | None,
        *,
        attempt: int | None = None,
    ) -> None:
        """Report the decision after attempt number ``attempt`` (default: the latest) of
        ``call``: a retry after ``wait`` seconds (``reason``: ``backoff`` or ``retry_after``),
        or why there is none."""
        plan = call.plan
        number = call.tries if attempt is None else attempt
        self._gate.instruments.emit(
            RetryScheduled(
                plan.name,
                call.call_id,
                call.context,
                number,
                plan.attempts_allowed,
                error,
                wait,
                reason,
            )
            if wait is not None and reason in _RETRYING
            else RetryStopped(
                plan.name,
                call.call_id,
                call.context,
                number,
                plan.attempts_allowed,
                error,
                wait,
                reason,
            )
        )


def _within_deadline(plan: Plan, deadline: Deadline) -> float | None:
    """The time limit of an attempt starting now: its own, cut to what the deadline leaves;
    None if the deadline has passed."""
    remaining = deadline.remaining()
    if remaining <= 0:
        return None
    own = plan.own_timeout
    return remaining if own is None or remaining < own else own


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
