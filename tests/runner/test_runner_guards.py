"""ToolRunner's guards: the rate limiter, the circuit breaker, the bulkheads and their store.

Most tests run twice: with the default in-process store, and with a store that implements
``StateStore.update`` and nothing else, as a store shared between processes would. The guards
hold against what breaks them too: probes lost in a store's round trip, clocks that step back,
bodies that outlive their attempts in their threads, and stores that keep their state as JSON.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
import time as real_time
from collections import deque
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from _runner_support import FakeTime, in_loop, until

from tdk import (
    Bulkhead,
    CircuitBreaker,
    RateLimit,
    RetryPolicy,
    Tool,
    Toolkit,
    ToolResult,
    ToolRunner,
    tool,
)
from tdk.errors import (
    ErrorCategory,
    ErrorKind,
    FatalToolError,
    NetworkTransportError,
    ToolTimeoutError,
    UpstreamAuthError,
    UpstreamNotFoundError,
    UpstreamRateLimitError,
    UpstreamServerError,
    UpstreamValidationError,
)
from tdk.runner import CircuitState, InMemoryStore, StateStore
from tdk.runner._breaker import Circuit
from tdk.runner._bulkhead import Compartment


class RemoteStore:
    """A store with nothing but ``update``, like one shared between processes."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.keys: set[str] = set()

    async def update(self, key: str, change: Callable[..., Any], *args: Any) -> Any:
        self.keys.add(key)
        await asyncio.sleep(0)  # a round trip
        return await self.inner.update(key, change, *args)


STORES = pytest.mark.parametrize("remote", [False, True], ids=["in_process", "remote"])


class Upstream:
    """Tools whose outcomes the test decides: ``fail`` raises the next error queued (or
    succeeds), ``hold`` waits until released. Counts what ran."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.calls = 0
        self.running = 0
        self.peak = 0
        self.release = asyncio.Event()
        self.started: list[int] = []

        @tool(idempotent=True)  # (section 6 retries)
        async def fail(n: Annotated[int, "A number."] = 0) -> int:
            """Fail with the next queued error, if any."""
            self.calls += 1
            if self.errors:
                raise self.errors.pop(0)
            return n

        @tool(idempotent=True)  # (section 6 retries)
        async def hold(n: Annotated[int, "A number."] = 0) -> int:
            """Wait until released; fail with the next queued error, if any."""
            self.calls += 1
            self.started.append(n)
            self.running += 1
            self.peak = max(self.peak, self.running)
            try:
                await self.release.wait()
            finally:
                self.running -= 1
            if self.errors:
                raise self.errors.pop(0)
            return n

        self.tools: list[Tool[..., Any]] = [fail, hold]

    def runner(self, time: FakeTime, *, remote: bool = False, **options: Any) -> ToolRunner:
        return ToolRunner(
            Toolkit("upstream", self.tools),
            clock=time.clock,
            sleep=time.sleep,
            store=RemoteStore() if remote else None,
            **options,
        )


def down() -> UpstreamServerError:
    return UpstreamServerError("down", status_code=503)


# ----------------------------------------------------------------------------- rate limiter


@pytest.mark.parametrize(
    ("limit", "offsets", "retry_after_ms"),
    [
        (RateLimit(calls=2, period=1.0), [0.0, 0.25, 0.5], 500),
        (RateLimit(calls=1, period=1.0), [0.0, 0.0003], 1000),
        (RateLimit(calls=1, period=1.0), [0.0, 0.9999999], 1),
        (RateLimit(calls=3, period=10.0), [0.0, 1.0, 2.0, 2.5], 7500),
        (RateLimit(calls=1, period=0.25), [0.0, 0.125], 125),
        (RateLimit(calls=1, period=1.0), [0.0, 0.7499999996], 251),
    ],
    ids=[
        "half_window",
        "rounds_up",
        "at_least_one_ms",
        "oldest_leaves_first",
        "short_period",
        "sub_microsecond_rest_rounds_up",
    ],
)
@STORES
@in_loop
async def test_a_refused_call_says_exactly_when_it_would_be_admitted(
    limit: RateLimit, offsets: list[float], retry_after_ms: int, remote: bool
) -> None:
    """Beyond the limit, the call is refused at once; ``retry_after_ms`` is the time until
    the oldest call leaves the window, rounded up to whole milliseconds."""
    upstream = Upstream()
    time = FakeTime()
    runner = upstream.runner(time, remote=remote, rate_limit=limit, retry=RetryPolicy())
    start = time.now
    results: list[ToolResult] = []
    for offset in offsets:
        time.now = start + offset
        results.append(await runner.run("fail"))
    assert all(result.is_success for result in results[:-1])
    refused = results[-1]
    assert refused.kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED
    assert refused.category == ErrorCategory.RATE_LIMIT
    assert refused.retryable
    assert refused.retry_after_ms == retry_after_ms
    assert refused.attempts == 0
    assert refused.error is not None
    assert refused.error.details == {"limit": limit.calls, "period": limit.period, "attempts": 0}
    assert refused.error.tool_name == "fail"
    assert upstream.calls == len(offsets) - 1
    assert time.sleeps == []  # a refusal is never retried


@STORES
@in_loop
async def test_the_window_slides(remote: bool) -> None:
    """A call leaves the window exactly ``period`` seconds after it was admitted."""
    upstream = Upstream()
    time = FakeTime()
    runner = upstream.runner(time, remote=remote, rate_limit=RateLimit(calls=2, period=1.0))
    start = time.now
    assert (await runner.run("fail")).is_success
    time.now = start + 0.5
    assert (await runner.run("fail")).is_success
    time.now = start + 0.999
    assert (await runner.run("fail")).retry_after_ms == 1
    time.now = start + 1.0
    assert (await runner.run("fail")).is_success
    assert (await runner.run("fail")).retry_after_ms == 500


@in_loop
async def test_each_tool_has_its_own_window() -> None:
    """The limit applies per tool."""
    upstream = Upstream()
    upstream.release.set()
    runner = upstream.runner(FakeTime(), rate_limit=RateLimit(calls=1, period=1.0))
    assert (await runner.run("fail")).is_success
    assert (await runner.run("hold")).is_success
    assert (await runner.run("fail")).kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED


@STORES
@in_loop
async def test_retries_count_against_the_limit(remote: bool) -> None:
    """Every attempt is a call of the tool: a retry the limiter refuses ends the call with
    the last error, saying why and when the limiter would admit it."""
    upstream = Upstream()
    upstream.errors = [down(), down()]
    time = FakeTime()
    runner = upstream.runner(
        time,
        remote=remote,
        rate_limit=RateLimit(calls=2, period=10.0),
        retry=RetryPolicy(max_attempts=5, initial_delay=1.0, jitter=False),
    )
    result = await runner.run("fail")
    assert result.kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert result.attempts == upstream.calls == 2
    assert time.sleeps == [1.0, 2.0]
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "rate_limited"
    assert result.error.details["retry_wait_ms"] == 7000
    assert runner.stats().rejections[ErrorKind.TOOL_RUNTIME_RATE_LIMITED] == 1


@STORES
@in_loop
async def test_the_limit_is_exact_under_concurrency(remote: bool) -> None:
    """Of 100 concurrent calls, exactly ``calls`` run."""
    upstream = Upstream()
    runner = upstream.runner(FakeTime(), remote=remote, rate_limit=RateLimit(calls=10, period=60))
    results = await runner.run_many([("fail", {"n": n}) for n in range(100)])
    kinds = [result.kind for result in results]
    assert kinds.count(None) == upstream.calls == 10
    assert kinds.count(ErrorKind.TOOL_RUNTIME_RATE_LIMITED) == 90
    assert runner.stats().rejections[ErrorKind.TOOL_RUNTIME_RATE_LIMITED] == 90


# --------------------------------------------------------------------------- circuit breaker

BREAKER = CircuitBreaker(failure_threshold=3, reset_timeout=30.0)


@STORES
@in_loop
async def test_the_circuit_opens_after_consecutive_failures(remote: bool) -> None:
    """After ``failure_threshold`` counted failures, calls fail at once, saying how long."""
    upstream = Upstream()
    upstream.errors = [down(), down(), down()]
    time = FakeTime()
    runner = upstream.runner(time, remote=remote, circuit_breaker=BREAKER)
    for _ in range(3):
        assert (await runner.run("fail")).kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    time.now += 10.0
    refused = await runner.run("fail")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert refused.category == ErrorCategory.CIRCUIT_OPEN
    assert refused.retry_after_ms == 20000
    assert refused.attempts == 0
    assert refused.error is not None
    assert refused.error.details == {
        "failure_count": 3,
        "reset_timeout": 30.0,
        "attempts": 0,
        "state": "open",
    }
    assert upstream.calls == 3
    assert runner.stats().circuits == {"fail": CircuitState.OPEN}


COUNTED = {
    "server_error": down,
    "tool_timeout": lambda: ToolTimeoutError("slow"),
    "transport_timeout": lambda: NetworkTransportError(
        "slow", kind=ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT
    ),
    "unreachable": lambda: NetworkTransportError(
        "gone", kind=ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE
    ),
}
NEUTRAL = {
    "upstream_rate_limit": lambda: UpstreamRateLimitError("slow down", status_code=429),
    "validation": lambda: UpstreamValidationError("bad", status_code=422),
    "not_found": lambda: UpstreamNotFoundError("gone", status_code=404),
    "auth": lambda: UpstreamAuthError("no", status_code=401),
    "fatal": lambda: FatalToolError("bug"),
}


@pytest.mark.parametrize("make", COUNTED.values(), ids=COUNTED.keys())
@in_loop
async def test_these_failures_count(make: Callable[[], BaseException]) -> None:
    """server_error, timeout and connection failures count against the circuit."""
    upstream = Upstream()
    upstream.errors = [make(), make(), make()]
    runner = upstream.runner(FakeTime(), circuit_breaker=BREAKER)
    for _ in range(3):
        await runner.run("fail")
    assert (await runner.run("fail")).kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN


@pytest.mark.parametrize("make", NEUTRAL.values(), ids=NEUTRAL.keys())
@in_loop
async def test_other_failures_neither_count_nor_reset(make: Callable[[], BaseException]) -> None:
    """A failure of another category leaves the count as it was: two counted failures, any
    number of others, then one more counted failure opens the circuit."""
    upstream = Upstream()
    upstream.errors = [down(), down(), make(), make(), make(), make(), down()]
    runner = upstream.runner(FakeTime(), circuit_breaker=BREAKER)
    for _ in range(6):
        await runner.run("fail")
    assert runner.stats().circuits["fail"] == CircuitState.CLOSED
    assert (await runner.run("fail")).kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert (await runner.run("fail")).kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN


@in_loop
async def test_bad_arguments_neither_count_nor_reset() -> None:
    """Arguments that do not validate say nothing about the upstream."""
    upstream = Upstream()
    upstream.errors = [down(), down(), down()]
    runner = upstream.runner(FakeTime(), circuit_breaker=BREAKER)
    await runner.run("fail")
    await runner.run("fail")
    assert (await runner.run("fail", {"n": "x"})).kind == ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    await runner.run("fail")
    assert (await runner.run("fail")).kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN


@in_loop
async def test_a_success_resets_the_count() -> None:
    """Failures must be consecutive: a success in between starts the count again."""
    upstream = Upstream()
    upstream.errors = [down(), down()]
    runner = upstream.runner(FakeTime(), circuit_breaker=BREAKER)
    await runner.run("fail")
    await runner.run("fail")
    assert (await runner.run("fail")).is_success
    upstream.errors = [down(), down()]
    await runner.run("fail")
    await runner.run("fail")
    assert (await runner.run("fail")).is_success
    assert upstream.calls == 6


@STORES
@in_loop
async def test_failed_attempts_count_and_an_open_circuit_stops_retries(remote: bool) -> None:
    """The circuit counts attempts, not calls; a retry the circuit would refuse is not
    waited for: the call ends when its attempt opens the circuit."""
    upstream = Upstream()
    upstream.errors = [down() for _ in range(5)]
    time = FakeTime()
    runner = upstream.runner(
        time,
        remote=remote,
        circuit_breaker=BREAKER,
        retry=RetryPolicy(max_attempts=5, initial_delay=1.0, jitter=False),
    )
    result = await runner.run("fail")
    assert result.kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert result.attempts == upstream.calls == 3
    assert time.sleeps == [1.0, 2.0]
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "circuit_open"
    assert result.error.details["retry_wait_ms"] == 30000
    assert runner.stats().circuits["fail"] == CircuitState.OPEN


@STORES
@in_loop
async def test_a_circuit_opened_during_the_wait_refuses_the_retry(remote: bool) -> None:
    """If other calls open the circuit while a call waits to retry, the retry does not run;
    the call ends with its last error and the time until the circuit half-opens."""
    upstream = Upstream()
    upstream.errors = [down()]
    time = FakeTime()
    waiting = asyncio.Event()
    resume = asyncio.Event()

    async def sleep(seconds: float) -> None:
        time.now += seconds
        waiting.set()
        await resume.wait()

    runner = ToolRunner(
        Toolkit("upstream", upstream.tools),
        circuit_breaker=BREAKER,
        retry=RetryPolicy(max_attempts=5, initial_delay=1.0, jitter=False),
        clock=time.clock,
        sleep=sleep,
        store=RemoteStore() if remote else None,
    )
    retrying = asyncio.create_task(runner.run("fail", {"n": 1}))
    await waiting.wait()
    upstream.errors = [down(), down()]
    runner.configure("fail", retry=None)
    await runner.run("fail")
    await runner.run("fail")  # the third consecutive failure: open
    time.now += 5.0
    resume.set()
    result = await retrying
    assert result.attempts == 1
    assert result.error is not None
    assert result.error.details["retry_stopped"] == "circuit_open"
    assert result.error.details["retry_wait_ms"] == 25000
    assert runner.stats().rejections[ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN] == 1


@in_loop
async def test_a_retry_after_the_reset_timeout_probes() -> None:
    """A wait longer than the reset timeout is worth it: the retry runs as the probe."""
    upstream = Upstream()
    upstream.errors = [down(), down(), down()]
    time = FakeTime()
    runner = upstream.runner(
        time,
        circuit_breaker=CircuitBreaker(failure_threshold=3, reset_timeout=1.0),
        retry=RetryPolicy(max_attempts=5, initial_delay=2.0, jitter=False),
    )
    result = await runner.run("fail", {"n": 4})
    assert (result.value, result.attempts) == (4, 4)
    assert time.sleeps == [2.0, 4.0, 8.0]
    assert runner.stats().circuits["fail"] == CircuitState.CLOSED


async def open_circuit(runner: ToolRunner, upstream: Upstream) -> None:
    upstream.errors = [down(), down(), down()]
    for _ in range(3):
        await runner.run("hold")
    assert runner.stats().circuits["hold"] == CircuitState.OPEN


@STORES
@in_loop
async def test_half_open_lets_one_probe_through_and_its_success_closes(remote: bool) -> None:
    """After the reset timeout, one probe runs; calls meanwhile are refused with the time
    until the probe would count as lost (the reset timeout: the tool has no time limit); the
    probe's success closes the circuit."""
    upstream = Upstream()
    upstream.release.set()
    time = FakeTime()
    runner = upstream.runner(time, remote=remote, circuit_breaker=BREAKER)
    await open_circuit(runner, upstream)
    upstream.release.clear()
    time.now += 30.0
    probe = asyncio.create_task(runner.run("hold", {"n": 1}))
    await until(lambda: upstream.running == 1)
    refused = await runner.run("hold", {"n": 2})
    assert refused.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert refused.retry_after_ms == 30_000
    assert refused.error is not None
    assert refused.error.details["state"] == "half_open"
    upstream.release.set()
    assert (await probe).value == 1
    assert runner.stats().circuits["hold"] == CircuitState.CLOSED
    assert (await runner.run("hold", {"n": 3})).value == 3


@STORES
@in_loop
async def test_a_failed_probe_opens_the_circuit_again(remote: bool) -> None:
    """The probe's failure re-opens the circuit for another reset timeout."""
    upstream = Upstream()
    upstream.release.set()
    time = FakeTime()
    runner = upstream.runner(time, remote=remote, circuit_breaker=BREAKER)
    await open_circuit(runner, upstream)
    time.now += 31.0
    upstream.errors = [down()]
    assert (await runner.run("hold")).kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    time.now += 5.0
    refused = await runner.run("hold")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert refused.retry_after_ms == 25000
    assert refused.error is not None
    assert refused.error.details["failure_count"] == 4


@in_loop
async def test_half_open_admits_the_configured_number_of_probes() -> None:
    """``half_open_max_calls`` probes run at once; the next call is refused."""
    upstream = Upstream()
    upstream.release.set()
    time = FakeTime()
    breaker = CircuitBreaker(failure_threshold=3, reset_timeout=30.0, half_open_max_calls=2)
    runner = upstream.runner(time, circuit_breaker=breaker)
    await open_circuit(runner, upstream)
    upstream.release.clear()
    time.now += 30.0
    probes = [asyncio.create_task(runner.run("hold", {"n": n})) for n in (1, 2)]
    await until(lambda: upstream.running == 2)
    assert (await runner.run("hold")).kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    upstream.release.set()
    assert [(await probe).value for probe in probes] == [1, 2]
    assert runner.stats().circuits["hold"] == CircuitState.CLOSED


@in_loop
async def test_a_probe_that_says_nothing_lets_another_through() -> None:
    """A probe ending in a failure that does not count frees its place: the circuit stays
    half-open and the next call probes."""
    upstream = Upstream()
    upstream.release.set()
    time = FakeTime()
    runner = upstream.runner(time, circuit_breaker=BREAKER)
    await open_circuit(runner, upstream)
    time.now += 30.0
    upstream.errors = [UpstreamNotFoundError("no such item", status_code=404)]
    assert (await runner.run("hold")).kind == ErrorKind.UPSTREAM_RUNTIME_NOT_FOUND
    assert runner.stats().circuits["hold"] == CircuitState.HALF_OPEN
    assert (await runner.run("hold", {"n": 5})).value == 5
    assert runner.stats().circuits["hold"] == CircuitState.CLOSED


@STORES
@in_loop
async def test_the_count_is_exact_under_concurrency(remote: bool) -> None:
    """Twenty calls admitted together all run; the circuit opens at the third failure, and
    the failures that arrive after it opened do not add to its count."""
    upstream = Upstream()
    upstream.errors = [down() for _ in range(20)]
    runner = upstream.runner(FakeTime(), remote=remote, circuit_breaker=BREAKER)
    batch = asyncio.create_task(runner.run_many([("hold", {"n": n}) for n in range(20)]))
    await until(lambda: upstream.running == 20)
    upstream.release.set()
    results = await batch
    assert all(r.kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR for r in results)
    refused = await runner.run("hold")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert refused.error is not None
    assert refused.error.details["failure_count"] == 3
    assert upstream.calls == 20


@in_loop
async def test_a_late_success_does_not_close_an_open_circuit() -> None:
    """A call admitted before the circuit opened reports into an earlier generation."""
    upstream = Upstream()
    runner = upstream.runner(FakeTime(), circuit_breaker=BREAKER)
    slow = asyncio.create_task(runner.run("hold", {"n": 1}))
    await until(lambda: upstream.running == 1)
    upstream.errors = [down(), down(), down()]
    for _ in range(3):
        await runner.run("fail")
    upstream.release.set()
    assert (await slow).is_success
    assert runner.stats().circuits["fail"] == CircuitState.OPEN
    assert (await runner.run("fail")).kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN


@in_loop
async def test_each_transition_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """One INFO record per transition: closed -> open -> half_open -> closed."""
    caplog.set_level(logging.INFO, logger="tdk.runner")
    upstream = Upstream()
    upstream.release.set()
    time = FakeTime()
    runner = upstream.runner(time, circuit_breaker=BREAKER)
    await open_circuit(runner, upstream)
    await runner.run("hold")  # refused: no transition
    time.now += 30.0
    await runner.run("hold")
    records = [r for r in caplog.records if hasattr(r, "tdk_circuit")]
    moves = [(r.tdk_circuit["from"], r.tdk_circuit["to"]) for r in records]  # type: ignore[attr-defined]
    assert moves == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]
    assert records[0].tdk_circuit["failure_count"] == 3  # type: ignore[attr-defined]
    assert all(r.levelno == logging.INFO and r.name == "tdk.runner" for r in records)
    assert (
        records[0].getMessage()
        == "circuit of tool hold: closed -> open (after 3 consecutive failures)"
    )


# ------------------------------------------------------- probes lost in a store's round trip


class SlowAnswerStore:
    """A shared store whose answer arrives after the change was applied: a caller cancelled
    during that round trip never learns it was admitted (a probe, say)."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.in_flight = asyncio.Event()
        self.answer = asyncio.Event()
        self.answer.set()

    async def update(self, key: str, change: Callable[..., Any], *args: Any) -> Any:
        answer = await self.inner.update(key, change, *args)
        self.in_flight.set()
        await self.answer.wait()
        return answer


ONE_FAILURE_BREAKER = CircuitBreaker(failure_threshold=1, reset_timeout=30.0)


def flaky_toolkit(state: dict[str, bool]) -> Toolkit:
    @tool(idempotent=True)  # (section 6 retries)
    async def flaky(n: Annotated[int, "A number."] = 0) -> int:
        """Fail while the upstream is down."""
        if state["down"]:
            raise UpstreamServerError("down", status_code=503)
        return n

    return Toolkit("flaky", [flaky])


@in_loop
async def test_a_probe_lost_in_the_stores_round_trip_expires() -> None:
    """A caller cancelled while the store admits its probe leaves a slot that expires: later
    calls are refused with a time (not forever), then a new probe closes the circuit."""
    state = {"down": True}
    time = FakeTime()
    store = SlowAnswerStore()
    runner = ToolRunner(
        flaky_toolkit(state),
        circuit_breaker=ONE_FAILURE_BREAKER,
        store=store,
        clock=time.clock,
        sleep=time.sleep,
    )
    assert (await runner.run("flaky")).kind is ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    state["down"] = False
    time.now += 30.0
    store.answer.clear()
    store.in_flight.clear()
    lost = asyncio.create_task(runner.run("flaky"))
    await store.in_flight.wait()  # the probe slot is taken in the store...
    lost.cancel()  # ...and its caller is gone before it hears so
    with pytest.raises(asyncio.CancelledError):
        await lost
    store.answer.set()

    refused = await runner.run("flaky")
    assert refused.kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert refused.retry_after_ms == 30_000
    time.now += 30.0
    assert (await runner.run("flaky", {"n": 5})).value == 5
    assert runner.stats().circuits["flaky"] is CircuitState.CLOSED


@in_loop
async def test_a_probe_lives_as_long_as_the_attempts_time_limit() -> None:
    """With a time limit, a lost probe expires after that limit, not the reset timeout."""
    state = {"down": True}
    time = FakeTime()
    store = SlowAnswerStore()
    runner = ToolRunner(
        flaky_toolkit(state),
        timeout=2.0,
        circuit_breaker=ONE_FAILURE_BREAKER,
        store=store,
        clock=time.clock,
        sleep=time.sleep,
    )
    await runner.run("flaky")
    state["down"] = False
    time.now += 30.0
    store.answer.clear()
    store.in_flight.clear()
    lost = asyncio.create_task(runner.run("flaky"))
    await store.in_flight.wait()
    lost.cancel()
    with pytest.raises(asyncio.CancelledError):
        await lost
    store.answer.set()
    assert (await runner.run("flaky")).retry_after_ms == 2_000
    time.now += 2.0
    assert (await runner.run("flaky", {"n": 1})).value == 1


# ---------------------------------------------------------------------- clocks stepping back


@pytest.mark.parametrize("store", [None, "shared"], ids=["in_process", "shared"])
@in_loop
async def test_an_open_circuit_never_waits_longer_than_its_reset_timeout(
    store: str | None,
) -> None:
    """A wall clock stepped back an hour does not keep the circuit open for that hour."""
    state = {"down": True}
    time = FakeTime()
    runner = ToolRunner(
        flaky_toolkit(state),
        circuit_breaker=ONE_FAILURE_BREAKER,
        store=SlowAnswerStore() if store else None,
        clock=time.clock,
        sleep=time.sleep,
    )
    await runner.run("flaky")
    time.now -= 3600.0
    refused = await runner.run("flaky")
    assert refused.kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert refused.retry_after_ms == 30_000
    state["down"] = False
    time.now += 30.0
    assert (await runner.run("flaky", {"n": 2})).value == 2


@pytest.mark.parametrize("store", [None, "shared"], ids=["in_process", "shared"])
@in_loop
async def test_the_limiter_never_waits_longer_than_its_period(store: str | None) -> None:
    """A wall clock stepped back an hour does not refuse calls for that hour."""
    state = {"down": False}
    time = FakeTime()
    runner = ToolRunner(
        flaky_toolkit(state),
        rate_limit=RateLimit(calls=1, period=2.0),
        store=SlowAnswerStore() if store else None,
        clock=time.clock,
        sleep=time.sleep,
    )
    assert (await runner.run("flaky")).is_success
    time.now -= 3600.0
    refused = await runner.run("flaky")
    assert refused.kind is ErrorKind.TOOL_RUNTIME_RATE_LIMITED
    assert refused.retry_after_ms == 2_000
    time.now += 2.0
    assert (await runner.run("flaky")).is_success


# --------------------------------------------------------------------------------- bulkheads


@in_loop
async def test_a_zero_wait_takes_a_free_slot() -> None:
    """``max_wait=0`` admits a call when a slot is free (the Python 3.11 ``wait_for`` trap)."""
    upstream = Upstream()
    upstream.release.set()
    runner = upstream.runner(FakeTime(), bulkhead=Bulkhead(max_concurrent=2, max_wait=0.0))
    results = await runner.run_many([("hold", {"n": 1}), ("hold", {"n": 2})])
    assert [r.value for r in results] == [1, 2]
    assert (await runner.run("fail")).is_success


@in_loop
async def test_a_full_bulkhead_with_zero_wait_refuses_at_once() -> None:
    """Beyond ``max_concurrent`` calls of a tool, a call that may not wait is refused."""
    upstream = Upstream()
    runner = upstream.runner(FakeTime(), bulkhead=Bulkhead(max_concurrent=2, max_wait=0.0))
    running = [asyncio.create_task(runner.run("hold", {"n": n})) for n in (1, 2)]
    await until(lambda: upstream.running == 2)
    refused = await runner.run("hold", {"n": 3})
    assert refused.kind == ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    assert refused.category == ErrorCategory.BULKHEAD_FULL
    assert refused.attempts == 0
    assert refused.error is not None
    assert refused.error.details == {
        "max_concurrent": 2,
        "max_wait": 0.0,
        "attempts": 0,
        "scope": "tool",
    }
    assert (await runner.run("fail")).is_success  # another tool, another compartment
    upstream.release.set()
    assert [(await task).value for task in running] == [1, 2]
    assert upstream.calls == 3


@in_loop
async def test_a_queued_call_gets_the_next_free_slot() -> None:
    """A call waits up to ``max_wait`` and runs when a slot frees up."""
    upstream = Upstream()
    runner = upstream.runner(FakeTime(), bulkhead=Bulkhead(max_concurrent=1, max_wait=5.0))
    first = asyncio.create_task(runner.run("hold", {"n": 1}))
    await until(lambda: upstream.running == 1)
    second = asyncio.create_task(runner.run("hold", {"n": 2}))
    await asyncio.sleep(0.01)
    assert upstream.started == [1]
    upstream.release.set()
    assert (await first).value == 1
    queued = await second
    assert queued.value == 2
    assert queued.duration_ms >= 10


@in_loop
async def test_a_queued_call_gives_up_after_max_wait() -> None:
    """No slot within ``max_wait``: refused, and the tool never ran."""
    upstream = Upstream()
    runner = upstream.runner(FakeTime(), bulkhead=Bulkhead(max_concurrent=1, max_wait=0.01))
    first = asyncio.create_task(runner.run("hold", {"n": 1}))
    await until(lambda: upstream.running == 1)
    refused = await runner.run("hold", {"n": 2})
    assert refused.kind == ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    assert refused.error is not None
    assert refused.error.details["max_wait"] == 0.01
    assert refused.duration_ms >= 10
    upstream.release.set()
    await first
    assert upstream.started == [1]
    assert runner.stats().rejections[ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL] == 1


@in_loop
async def test_the_deadline_shortens_the_queue_wait() -> None:
    """A call queues no longer than its deadline leaves. (Only the queued call has a
    deadline: the one holding the slot cannot run out of time on a slow machine.)"""
    upstream = Upstream()
    runner = ToolRunner(
        Toolkit("upstream", upstream.tools),
        bulkhead=Bulkhead(max_concurrent=5, max_wait=60.0),
        max_concurrency=1,
    )
    runner.configure("fail", deadline=0.02)
    first = asyncio.create_task(runner.run("hold"))
    await until(lambda: upstream.running == 1)
    refused = await runner.run("fail")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    assert refused.error is not None
    assert refused.error.details["scope"] == "all"
    assert refused.error.details["max_wait"] <= 0.02  # what the deadline left, not 60 s
    upstream.release.set()
    assert (await first).is_success


@in_loop
async def test_the_bound_is_exact_and_the_queue_first_come_first_served() -> None:
    """Fifty calls through a compartment of five: never more than five at once, all run,
    in the order they queued."""
    upstream = Upstream()
    runner = upstream.runner(FakeTime(), bulkhead=Bulkhead(max_concurrent=5, max_wait=30.0))
    batch = asyncio.create_task(runner.run_many([("hold", {"n": n}) for n in range(50)]))
    await until(lambda: upstream.running == 5)
    upstream.release.set()
    results = await batch
    assert [r.value for r in results] == list(range(50))
    assert upstream.peak == 5
    assert upstream.started == list(range(50))


@in_loop
async def test_max_concurrency_caps_all_tools_together() -> None:
    """The runner's compartment counts calls of every tool; without a tool bulkhead a call
    does not wait for it."""
    upstream = Upstream()
    runner = upstream.runner(FakeTime(), max_concurrency=1)
    holding = asyncio.create_task(runner.run("hold", {"n": 1}))
    await until(lambda: upstream.running == 1)
    refused = await runner.run("fail")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    assert refused.error is not None
    assert refused.error.details == {
        "max_concurrent": 1,
        "max_wait": 0.0,
        "attempts": 0,
        "scope": "all",
    }
    assert "of all tools together" in refused.error.message
    upstream.release.set()
    await holding
    assert (await runner.run("fail")).is_success


@in_loop
async def test_the_tool_bulkhead_wait_covers_both_compartments() -> None:
    """With a tool bulkhead that may wait, a call also waits for the runner's compartment,
    within the same budget."""
    upstream = Upstream()
    runner = upstream.runner(
        FakeTime(), max_concurrency=1, bulkhead=Bulkhead(max_concurrent=5, max_wait=5.0)
    )
    holding = asyncio.create_task(runner.run("hold", {"n": 1}))
    await until(lambda: upstream.running == 1)
    waiting = asyncio.create_task(runner.run("fail", {"n": 2}))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    upstream.release.set()
    assert (await holding).value == 1
    assert (await waiting).value == 2

    runner.configure("fail", bulkhead=Bulkhead(max_concurrent=5, max_wait=0.01))
    upstream.release.clear()
    holding = asyncio.create_task(runner.run("hold", {"n": 3}))
    await until(lambda: upstream.running == 1)
    refused = await runner.run("fail")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    assert refused.error is not None
    assert refused.error.details["scope"] == "all"
    upstream.release.set()
    await holding


@in_loop
async def test_a_call_keeps_its_slot_between_retries() -> None:
    """The slot is held from the first attempt to the last, waits included."""
    upstream = Upstream()
    upstream.errors = [down()]
    resume = asyncio.Event()
    waiting = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waiting.set()
        await resume.wait()

    runner = ToolRunner(
        Toolkit("upstream", upstream.tools),
        bulkhead=Bulkhead(max_concurrent=1),
        retry=RetryPolicy(initial_delay=1.0),
        sleep=sleep,
    )
    retrying = asyncio.create_task(runner.run("fail", {"n": 1}))
    await waiting.wait()
    assert (await runner.run("fail", {"n": 2})).kind == ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    resume.set()
    assert (await retrying).value == 1


@in_loop
async def test_a_refused_attempt_gives_its_slot_back() -> None:
    """A call the limiter refuses after it entered the bulkhead leaves it again."""
    upstream = Upstream()
    time = FakeTime()
    runner = upstream.runner(
        time, bulkhead=Bulkhead(max_concurrent=1), rate_limit=RateLimit(calls=1, period=1.0)
    )
    assert (await runner.run("fail")).is_success
    assert (await runner.run("fail")).kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED
    time.now += 1.0
    assert (await runner.run("fail")).is_success


@STORES
@in_loop
async def test_a_probe_refused_by_the_bulkhead_is_handed_back(remote: bool) -> None:
    """A half-open circuit's probe that finds no slot does not use up the probe."""
    upstream = Upstream()
    time = FakeTime()
    runner = upstream.runner(time, remote=remote, circuit_breaker=BREAKER, max_concurrency=1)
    upstream.errors = [down(), down(), down()]
    for _ in range(3):
        await runner.run("fail")
    time.now += 30.0
    holding = asyncio.create_task(runner.run("hold"))
    await until(lambda: upstream.running == 1)
    assert (await runner.run("fail")).kind == ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    upstream.release.set()
    await holding
    assert (await runner.run("fail", {"n": 4})).value == 4
    assert runner.stats().circuits["fail"] == CircuitState.CLOSED


# -------------------------------------------------------- bodies that outlive their attempts


class Stuck:
    """A sync tool that blocks until released, counting the bodies running at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.bodies = 0

        @tool(idempotent=True)  # (section 6 retries)
        def stuck(n: Annotated[int, "A number."] = 0) -> int:
            """Block until released."""
            with self.lock:
                self.bodies += 1
                self.running += 1
                self.peak = max(self.peak, self.running)
            try:
                self.release.wait(30)
            finally:
                with self.lock:
                    self.running -= 1
            return n

        self.tool = stuck


@in_loop
async def test_a_bulkhead_counts_bodies_still_running_in_their_threads() -> None:
    """With ``Bulkhead(2)``, retries and timeouts, never more than 2 bodies run at once; the
    slots stay taken until the bodies really end."""
    stuck = Stuck()
    runner = ToolRunner(
        Toolkit("stuck", [stuck.tool]),
        timeout=0.3,
        retry=RetryPolicy(max_attempts=3, initial_delay=0.0, jitter=False),
        bulkhead=Bulkhead(max_concurrent=2),
    )
    try:
        results = await asyncio.gather(*(runner.run("stuck") for _ in range(3)))
        kinds = sorted(r.kind.value for r in results if r.kind is not None)
        assert kinds == [
            "TOOL_RUNTIME_BULKHEAD_FULL",
            "TOOL_RUNTIME_TIMEOUT",
            "TOOL_RUNTIME_TIMEOUT",
        ]
        timed_out = [r for r in results if r.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT]
        assert all(r.error.details["retry_stopped"] == "still_running" for r in timed_out)  # type: ignore[union-attr]
        assert stuck.peak == 2
        late = await runner.run("stuck")  # the bodies still hold their threads
        assert late.kind is ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    finally:
        stuck.release.set()
    for _ in range(1000):  # the slots come back once the bodies' ends reach the loop
        if stuck.running == 0 and (await runner.run("stuck", {"n": 3})).value == 3:
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the slots never came back")
    assert stuck.peak == 2


class _Seen(logging.Handler):
    """Sets an event when a record of ``kind`` is logged."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "tdk_error", {}).get("kind") == self.kind:
            self.event.set()


@in_loop
async def test_a_retry_waits_for_the_body_it_would_overlap() -> None:
    """A retry starts only after the attempt that timed out has ended in its thread."""
    stuck = Stuck()
    runner = ToolRunner(
        Toolkit("stuck", [stuck.tool]),
        timeout=0.5,
        retry=RetryPolicy(max_attempts=2, initial_delay=0.0, jitter=False),
    )
    seen = _Seen("TOOL_RUNTIME_TIMEOUT")
    logging.getLogger("tdk").addHandler(seen)
    try:
        call = asyncio.create_task(runner.run("stuck", {"n": 4}))
        await asyncio.wait_for(seen.event.wait(), 10)  # the first attempt timed out...
        assert stuck.running == 1  # ...and its body still runs
        stuck.release.set()  # it ends within the retry's wait: the retry runs, alone
        result = await asyncio.wait_for(call, 10)
    finally:
        logging.getLogger("tdk").removeHandler(seen)
        stuck.release.set()
    assert result.value == 4
    assert result.attempts == 2
    assert stuck.bodies == 2
    assert stuck.peak == 1


def test_a_slot_held_past_its_loop_comes_back() -> None:
    """A runner used from one ``asyncio.run`` to the next: a body that outlived its call and
    its loop gives its bulkhead slot back, which the next call finds free."""
    stuck = Stuck()
    runner = ToolRunner(
        Toolkit("stuck", [stuck.tool]), timeout=0.1, bulkhead=Bulkhead(max_concurrent=1)
    )
    first = asyncio.run(runner.run("stuck"))
    assert first.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert stuck.running == 1  # its loop is gone; the body is not
    assert asyncio.run(runner.run("stuck")).kind is ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL
    stuck.release.set()
    for _ in range(1000):  # (the body's end reaches the compartment a moment after it ends)
        if asyncio.run(runner.run("stuck", {"n": 7})).value == 7:
            break
        threading.Event().wait(0.01)
    else:
        raise AssertionError("the slot never came back")
    later = [asyncio.run(runner.run("stuck", {"n": n})).value for n in range(3)]
    assert later == [0, 1, 2]


# ------------------------------------------------------------------------------------ store


@in_loop
async def test_runners_sharing_a_store_share_the_state() -> None:
    """The circuit one runner opened is open for another runner on the same store."""
    store = RemoteStore()
    upstream = Upstream()
    upstream.errors = [down(), down(), down()]
    time = FakeTime()
    options: dict[str, Any] = {"circuit_breaker": BREAKER, "store": store, "clock": time.clock}
    first = ToolRunner(Toolkit("a", upstream.tools), **options)
    second = ToolRunner(Toolkit("b", upstream.tools), **options)
    for _ in range(3):
        await first.run("fail")
    refused = await second.run("fail")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert second.stats().circuits == {"fail": CircuitState.OPEN}
    assert store.keys == {"tdk:circuit:fail"}


def test_the_stores_satisfy_the_protocol() -> None:
    """Anything with an async ``update`` is a store; the runner refuses anything else."""
    assert isinstance(InMemoryStore(), StateStore)
    assert isinstance(RemoteStore(), StateStore)
    with pytest.raises(TypeError, match="StateStore"):
        ToolRunner(Toolkit("x", Upstream().tools), store=object())  # type: ignore[arg-type]


class NamedStore(StateStore):
    """A store that answers the runner's named operations itself (as ``RedisStore`` does
    with a script each) and notes which ran; ``update`` is for other changes only."""

    def __init__(self) -> None:
        self.inner = InMemoryStore()
        self.named: list[str] = []
        self.updates = 0

    async def update(self, key: str, change: Callable[..., Any], *args: Any) -> Any:
        self.updates += 1
        return await self.inner.update(key, change, *args)

    async def admit(self, key: str, limit: RateLimit, now: float) -> float:
        self.named.append("admit")
        return await self.inner.admit(key, limit, now)

    async def acquire(self, key: str, *args: Any) -> Any:
        self.named.append("acquire")
        return await self.inner.acquire(key, *args)

    async def record(self, key: str, *args: Any) -> Any:
        self.named.append("record")
        return await self.inner.record(key, *args)

    async def peek(self, key: str, *args: Any) -> bool:
        self.named.append("peek")
        return await self.inner.peek(key, *args)


@in_loop
async def test_the_runner_asks_a_store_by_the_names_of_its_operations() -> None:
    """A store that implements the named operations gets each question by its name, never
    as a change function handed to ``update`` (whose identity it would have to infer)."""
    store = NamedStore()
    upstream = Upstream()
    runner = ToolRunner(
        Toolkit("n", upstream.tools),
        circuit_breaker=BREAKER,
        rate_limit=RateLimit(calls=100, period=1.0),
        store=store,
    )
    upstream.errors = [down()]
    await runner.run("fail")
    await runner.available(runner.toolkit)
    assert store.named == ["acquire", "admit", "record", "peek", "peek"]
    assert store.updates == 0


class CountedUpdates(InMemoryStore):
    """An in-process store that overrides ``update`` alone (to count, log or share it)."""

    def __init__(self) -> None:
        super().__init__()
        self.named: list[str] = []

    async def update(self, key: str, change: Callable[..., Any], *args: Any) -> Any:
        self.named.append("update")
        return await super().update(key, change, *args)


class CountedAdmissions(InMemoryStore):
    """An in-process store that overrides one named operation."""

    def __init__(self) -> None:
        super().__init__()
        self.named: list[str] = []

    async def admit(self, key: str, limit: RateLimit, now: float) -> float:
        self.named.append("admit")
        return await super().admit(key, limit, now)


@pytest.mark.parametrize(
    ("store_class", "heard"),
    [
        (CountedUpdates, ["update"] * 6),  # acquire, admit, record; twice
        (CountedAdmissions, ["admit"] * 2),
    ],
    ids=["update_alone", "one_named_operation"],
)
@in_loop
async def test_an_in_memory_store_subclass_runs_its_own_operations(
    store_class: type[CountedUpdates | CountedAdmissions], heard: list[str]
) -> None:
    """A subclass of ``InMemoryStore`` that overrides an operation is asked through it, as
    any store is: the runner's in-process shortcut is for the plain store only."""
    store = store_class()
    upstream = Upstream()
    runner = ToolRunner(
        Toolkit("s", upstream.tools),
        circuit_breaker=BREAKER,
        rate_limit=RateLimit(calls=1, period=60.0),
        store=store,
    )
    assert (await runner.run("fail", {"n": 1})).error is None
    refused = await runner.run("fail", {"n": 2})
    assert refused.kind == ErrorKind.TOOL_RUNTIME_RATE_LIMITED
    assert store.named == heard


@in_loop
async def test_a_store_that_lost_its_state_starts_afresh() -> None:
    """If the shared store forgets a circuit mid-call (a restart), the attempt's outcome
    counts into a fresh, closed circuit."""
    store = RemoteStore()
    upstream = Upstream()
    runner = ToolRunner(Toolkit("u", upstream.tools), circuit_breaker=BREAKER, store=store)
    call = asyncio.create_task(runner.run("hold"))
    await until(lambda: upstream.running == 1)
    store.inner = InMemoryStore()  # the backend restarted, empty
    upstream.errors = [down()]
    upstream.release.set()
    assert (await call).kind == ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    upstream.errors = [down(), down()]
    await runner.run("hold")
    assert runner.stats().circuits["hold"] == CircuitState.CLOSED
    await runner.run("hold")
    assert runner.stats().circuits["hold"] == CircuitState.OPEN


@in_loop
async def test_reconfiguring_keeps_the_state() -> None:
    """``configure`` changes policies, not state: an open circuit stays open."""
    upstream = Upstream()
    upstream.errors = [down(), down(), down()]
    time = FakeTime()
    runner = upstream.runner(time, circuit_breaker=BREAKER, rate_limit=RateLimit(calls=9, period=9))
    for _ in range(3):
        await runner.run("fail")
    runner.configure("fail", circuit_breaker=CircuitBreaker(failure_threshold=3, reset_timeout=60))
    refused = await runner.run("fail")
    assert refused.kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert refused.retry_after_ms == 60000
    assert refused.error is not None
    assert refused.error.details["reset_timeout"] == 60


class JsonStore:
    """A shared store as many are written: every state kept as JSON text (so a circuit's state
    comes back as its value, ``"open"``, not as the enum member)."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    async def update(self, key: str, change: Callable[..., Any], *args: Any) -> Any:
        raw = self.data.get(key)
        state: Any = None
        if raw is not None:
            loaded = json.loads(raw)
            state = Circuit(**loaded) if key.startswith("tdk:circuit:") else deque(loaded)
        new, answer = change(state, *args)
        self.data[key] = json.dumps(
            dataclasses.asdict(new) if isinstance(new, Circuit) else list(new)
        )
        return answer


@in_loop
async def test_a_store_keeping_json_runs_the_same_rules() -> None:
    """With states round-tripped through JSON, the circuit still opens, refuses with a time,
    half-opens and closes, and the limiter still counts."""
    state = {"down": True}
    time = FakeTime()
    runner = ToolRunner(
        flaky_toolkit(state),
        circuit_breaker=CircuitBreaker(failure_threshold=2, reset_timeout=30.0),
        rate_limit=RateLimit(calls=10, period=1.0),
        store=JsonStore(),
        clock=time.clock,
        sleep=time.sleep,
    )
    assert (await runner.run("flaky")).kind is ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert (await runner.run("flaky")).kind is ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    refused = await runner.run("flaky")
    assert refused.kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert refused.retry_after_ms == 30_000
    state["down"] = False
    time.now += 30.0
    assert (await runner.run("flaky", {"n": 3})).value == 3
    assert runner.stats().circuits["flaky"] is CircuitState.CLOSED


@in_loop
async def test_a_circuit_state_a_store_mangled_starts_afresh() -> None:
    """A circuit whose stored state is no state at all (``"bogus"``) starts afresh, closed."""
    store = JsonStore()
    store.data["tdk:circuit:flaky"] = json.dumps(
        {"state": "bogus", "failures": 7, "opened_at": 0.0, "probes": 0, "probes_expire": 0.0,
         "generation": 3}
    )  # fmt: skip
    runner = ToolRunner(
        flaky_toolkit({"down": False}), circuit_breaker=ONE_FAILURE_BREAKER, store=store
    )
    assert (await runner.run("flaky", {"n": 4})).value == 4
    assert runner.stats().circuits["flaky"] is CircuitState.CLOSED


# ------------------------------------------------------------------- the compartment's races


@in_loop
async def test_a_slot_handed_to_a_cancelled_waiter_is_passed_on() -> None:
    """If a queued call is cancelled just after a slot was handed to it, the slot goes to
    the next in line rather than being lost."""
    compartment = Compartment(1)
    assert compartment.try_enter()
    first = asyncio.create_task(compartment.enter(60))
    second = asyncio.create_task(compartment.enter(60))
    await asyncio.sleep(0)
    compartment.leave()  # handed to ``first``...
    first.cancel()  # ...which is cancelled before it could run
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await second
    assert compartment.in_use == 1
    compartment.leave()
    assert compartment.in_use == 0


@in_loop
async def test_a_cancelled_waiter_is_skipped() -> None:
    """A slot freed while a cancelled waiter is still queued goes back to the pool."""
    compartment = Compartment(1)
    assert compartment.try_enter()
    waiting = asyncio.create_task(compartment.enter(60))
    await asyncio.sleep(0)
    waiting.cancel()
    compartment.leave()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert compartment.in_use == 0
    assert compartment.try_enter()


@in_loop
async def test_a_slot_that_arrives_with_the_time_limit_wins() -> None:
    """When the slot is handed over and the wait runs out in the same turn of the loop,
    the waiter keeps the slot."""
    compartment = Compartment(1)
    assert compartment.try_enter()
    waiting = asyncio.create_task(compartment.enter(0.05))
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_later(0.04, compartment.leave)
    real_time.sleep(0.06)  # hold the loop's thread: both timers are due when it next looks
    assert await waiting
    assert compartment.in_use == 1
