"""The runner against what breaks guards: lost probes, clocks that step back, bodies that
outlive their attempts, and names a model makes up."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from _runner_support import FakeTime, in_loop

from tdk import (
    Bulkhead,
    CircuitBreaker,
    RateLimit,
    RetryPolicy,
    Toolkit,
    ToolResult,
    ToolRunner,
    tool,
)
from tdk.errors import ErrorKind, UpstreamServerError
from tdk.runner import CircuitState, InMemoryStore
from tdk.runner._breaker import Circuit


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


BREAKER = CircuitBreaker(failure_threshold=1, reset_timeout=30.0)


def flaky_toolkit(state: dict[str, bool]) -> Toolkit:
    @tool(idempotent=True)  # (section 6 retries)
    async def flaky(n: Annotated[int, "A number."] = 0) -> int:
        """Fail while the upstream is down."""
        if state["down"]:
            raise UpstreamServerError("down", status_code=503)
        return n

    return Toolkit("flaky", [flaky])


# ---------------------------------------------------------------------------------- probes


@in_loop
async def test_a_probe_lost_in_the_stores_round_trip_expires() -> None:
    """A caller cancelled while the store admits its probe leaves a slot that expires: later
    calls are refused with a time (not forever), then a new probe closes the circuit."""
    state = {"down": True}
    time = FakeTime()
    store = SlowAnswerStore()
    runner = ToolRunner(
        flaky_toolkit(state),
        circuit_breaker=BREAKER,
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
        circuit_breaker=BREAKER,
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


# ------------------------------------------------------------------------- clocks stepping back


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
        circuit_breaker=BREAKER,
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


# ---------------------------------------------------------------- bodies outliving attempts


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


# ---------------------------------------------------------------------- names from a model


SECRET = "ctx-secret-0123456789"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(SECRET, id="a-context-secret"),
        pytest.param("x" * 95 + SECRET, id="a-secret-across-the-cut"),
        pytest.param("https://bob:" + SECRET + "@h/", id="a-url-with-credentials"),
        pytest.param("a." * 32_768 + "://", id="64kb-of-pathological-text"),
    ],
)
@pytest.mark.parametrize("entry", ["toolkit.run", "runner.run"])
def test_an_unknown_name_is_shown_redacted_and_cut(
    name: str, entry: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A made-up tool name reaches the result, the error and the log only redacted and cut."""
    from tdk import ToolContext

    state = {"down": False}
    toolkit = flaky_toolkit(state)
    context = ToolContext(secrets={"K": SECRET})

    async def call() -> ToolResult:
        if entry == "toolkit.run":
            return await toolkit.run(name, {}, context=context)
        return await ToolRunner(toolkit).run(name, {}, context=context)

    caplog.set_level(logging.WARNING, logger="tdk")
    result = asyncio.run(call())
    assert result.kind is ErrorKind.TOOL_NOT_FOUND
    text = json.dumps(result.to_dict()) + caplog.text
    assert SECRET not in text
    assert SECRET[:12] not in text
    assert len(result.tool) < 200
    assert result.error is not None
    assert result.error.tool_name == result.tool
    assert len(result.error.message) < 400


@pytest.mark.parametrize("entry", ["toolkit.run", "runner.run"])
def test_a_name_that_is_not_text_is_refused(entry: str) -> None:
    """A tool name that is not a str is the caller's bug: TypeError, before anything runs."""
    toolkit = flaky_toolkit({"down": False})
    runner = ToolRunner(toolkit)

    async def call() -> ToolResult:
        if entry == "toolkit.run":
            return await toolkit.run(7, {})  # type: ignore[arg-type]
        return await runner.run(7, {})  # type: ignore[arg-type]

    with pytest.raises(TypeError):
        asyncio.run(call())
    assert runner.stats().calls == 0


# ---------------------------------------------------------------------------------------------
# A store that keeps JSON


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


@in_loop
async def test_a_circuit_state_a_store_mangled_starts_afresh() -> None:
    """A circuit whose stored state is no state at all (``"bogus"``) starts afresh, closed."""
    store = JsonStore()
    store.data["tdk:circuit:flaky"] = json.dumps(
        {"state": "bogus", "failures": 7, "opened_at": 0.0, "probes": 0, "probes_expire": 0.0,
         "generation": 3}
    )  # fmt: skip
    runner = ToolRunner(flaky_toolkit({"down": False}), circuit_breaker=BREAKER, store=store)
    assert (await runner.run("flaky", {"n": 4})).value == 4
    assert runner.stats().circuits["flaky"] is CircuitState.CLOSED
