"""ToolRunner.run and run_many: results, batches, unknown tools (whose made-up names are shown
redacted and cut), counters and cancellation.

Cancellation is real: tasks are cancelled with ``Task.cancel()`` while a tool runs, while a
call waits between retries, and while it queues for a bulkhead.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Annotated, Any

import pytest
from _runner_support import in_loop, until

from tdk import (
    Bulkhead,
    CircuitBreaker,
    RateLimit,
    RetryPolicy,
    ToolCall,
    ToolContext,
    Toolkit,
    ToolResult,
    ToolRunner,
    tool,
)
from tdk.errors import ErrorKind, UpstreamServerError
from tdk.runner import CircuitState


class Gate:
    """Tools that record their calls; ``wait`` blocks until ``open`` and notes whether it
    was cancelled; ``flaky`` fails with a 503 while ``failures`` remain."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.entered = 0
        self.cancelled = 0
        self.finished = 0
        self.failures = 0
        self.seen: list[dict[str, Any]] = []

        @tool
        async def wait(n: Annotated[int, "A number."] = 0) -> int:
            """Wait until the gate opens."""
            self.entered += 1
            try:
                await self.opened.wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            self.finished += 1
            return n

        @tool
        def double(n: Annotated[int, "A number."]) -> int:
            """Double a number (a sync tool: it runs in a worker thread)."""
            return 2 * n

        @tool(requires_secrets=["TOKEN"])
        async def whoami(context: ToolContext) -> int:
            """The length of the token."""
            return len(context.get_secret("TOKEN"))

        @tool(idempotent=True)  # (section 6 retries)
        async def flaky(
            n: Annotated[int, "A number."], word: Annotated[str, "A word."] = "x"
        ) -> str:
            """Fail with a 503 while failures remain; the word "wait" waits for the gate."""
            self.seen.append({"n": n, "word": word})
            if word == "wait":
                self.entered += 1
                await self.opened.wait()
            if self.failures:
                self.failures -= 1
                raise UpstreamServerError("down", status_code=503)
            return f"{word}{n}"

        self.toolkit = Toolkit("gate", [wait, double, whoami, flaky])


async def no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


@in_loop
async def test_run_many_keeps_input_order_and_runs_concurrently() -> None:
    """Calls run at the same time (each waits for all to start); results come back in the
    order given, failures in their place."""
    gate = Gate()
    runner = ToolRunner(gate.toolkit)
    batch = asyncio.create_task(
        runner.run_many(
            [
                ("wait", {"n": 1}),
                ToolCall(name="nope", arguments={}, call_id="c2"),
                ToolCall(name="wait", arguments='{"n": 3}', call_id="c3"),
                ("double", {"n": 4}),
                ("wait", {"n": "x"}),
                ("wait", {"n": 6}),
            ]
        )
    )
    await until(lambda: gate.entered == 3)
    gate.opened.set()
    results = await batch
    assert [r.value for r in results] == [1, None, 3, 8, None, 6]
    assert [r.kind for r in results] == [
        None,
        ErrorKind.TOOL_NOT_FOUND,
        None,
        None,
        ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE,
        None,
    ]
    assert [r.call_id for r in results] == [None, "c2", "c3", None, None, None]


@in_loop
async def test_run_many_gives_every_call_the_context() -> None:
    """``context=`` reaches each call of the batch."""
    gate = Gate()
    runner = ToolRunner(gate.toolkit)
    results = await runner.run_many(
        [("whoami", None), ("whoami", {})], context=ToolContext(secrets={"TOKEN": "abcd"})
    )
    assert [r.value for r in results] == [4, 4]
    assert (await runner.run("whoami")).kind == ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT


@in_loop
async def test_an_empty_batch_is_an_empty_list() -> None:
    """Nothing to run, nothing returned."""
    assert await ToolRunner(Gate().toolkit).run_many([]) == []


@pytest.mark.parametrize(
    "bad",
    [{"name": "wait"}, ("wait",), ("wait", {}, "id"), (1, {}), "wait"],
    ids=["dict", "one_item", "three_items", "name_not_text", "bare_name"],
)
@in_loop
async def test_a_malformed_batch_is_refused_before_anything_runs(bad: Any) -> None:
    """Each call must be a ToolCall or a (name, arguments) pair; nothing runs otherwise."""
    gate = Gate()
    runner = ToolRunner(gate.toolkit)
    with pytest.raises(TypeError, match="ToolCall"):
        await runner.run_many([("double", {"n": 1}), bad])
    assert runner.stats().calls == 0


def test_tool_call_is_a_frozen_model() -> None:
    """ToolCall validates its fields and cannot be changed."""
    call = ToolCall(name="wait", arguments={"n": 1})
    assert call.call_id is None
    with pytest.raises(Exception, match="frozen"):
        call.name = "other"  # type: ignore[misc]
    with pytest.raises(Exception, match="extra"):
        ToolCall(name="wait", argument={})  # type: ignore[call-arg]


@in_loop
async def test_an_unknown_tool_is_never_retried() -> None:
    """An unknown name is TOOL_NOT_FOUND with suggestions and no attempt, whatever the policy."""
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    runner = ToolRunner(Gate().toolkit, retry=RetryPolicy(retry_on={"not_found"}), sleep=sleep)
    result = await runner.run("dubble", {"n": 1}, call_id="x")
    assert result.kind == ErrorKind.TOOL_NOT_FOUND
    assert (result.tool, result.call_id, result.attempts) == ("dubble", "x", 0)
    assert result.error is not None
    assert result.error.details["attempts"] == 0
    assert result.error.details["suggestions"] == ["double"]
    assert sleeps == []


@in_loop
async def test_names_are_matched_ignoring_case() -> None:
    """Like the toolkit, the runner finds tools ignoring case; results use the real name."""
    runner = ToolRunner(Gate().toolkit, retry=RetryPolicy())
    for name in ("DOUBLE", "Double", "double"):
        result = await runner.run(name, {"n": 2})
        assert (result.tool, result.value) == ("double", 4)


def flaky_toolkit(state: dict[str, bool]) -> Toolkit:
    @tool(idempotent=True)  # (section 6 retries)
    async def flaky(n: Annotated[int, "A number."] = 0) -> int:
        """Fail while the upstream is down."""
        if state["down"]:
            raise UpstreamServerError("down", status_code=503)
        return n

    return Toolkit("flaky", [flaky])


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


@in_loop
async def test_retries_repeat_the_same_arguments() -> None:
    """The runner repeats the call as it was made; changing arguments is the model's job."""
    gate = Gate()
    gate.failures = 2
    runner = ToolRunner(gate.toolkit, retry=RetryPolicy(), sleep=no_wait)
    result = await runner.run("flaky", '{"n": 5, "word": "w"}')
    assert result.value == "w5"
    assert gate.seen == [{"n": 5, "word": "w"}] * 3


@in_loop
async def test_stats_count_calls_attempts_retries_and_refusals() -> None:
    """The counters add up across calls."""
    gate = Gate()
    gate.failures = 1
    runner = ToolRunner(
        gate.toolkit,
        retry=RetryPolicy(),
        rate_limit=RateLimit(calls=3, period=3600),
        circuit_breaker=CircuitBreaker(),
        sleep=no_wait,
    )
    await runner.run("flaky", {"n": 1})  # fails once, then succeeds: 2 attempts
    await runner.run("double", {"n": 1})
    await runner.run("flaky", {"n": "bad"})  # no attempt
    await runner.run("flaky", {"n": 2})  # refused by the limiter
    await runner.run("nope")
    stats = runner.stats()
    assert (stats.calls, stats.attempts, stats.retries) == (5, 3, 1)
    assert stats.rejections == {
        ErrorKind.TOOL_RUNTIME_RATE_LIMITED: 1,
        ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN: 0,
        ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL: 0,
    }
    assert stats.circuits == {"flaky": CircuitState.CLOSED, "double": CircuitState.CLOSED}
    assert runner.stats() == stats
    assert runner.stats() is not stats


@in_loop
async def test_a_refusal_is_logged_once_like_any_failure(caplog: pytest.LogCaptureFixture) -> None:
    """Refusals go through the same failure path: one WARNING on the ``tdk`` logger."""
    caplog.set_level(logging.WARNING, logger="tdk")
    runner = ToolRunner(Gate().toolkit, rate_limit=RateLimit(calls=1, period=60))
    await runner.run("double", {"n": 1})
    await runner.run("double", {"n": 1})
    records = [r for r in caplog.records if r.name == "tdk"]
    assert len(records) == 1
    assert records[0].tdk_error["kind"] == "TOOL_RUNTIME_RATE_LIMITED"  # type: ignore[attr-defined]


@in_loop
async def test_the_toolkit_decides_on_stack_traces() -> None:
    """``Toolkit(include_stacktrace=True)`` holds for calls made through the runner."""
    gate = Gate()
    gate.failures = 1
    toolkit = Toolkit("traced", list(gate.toolkit), include_stacktrace=True)
    result = await ToolRunner(toolkit).run("flaky", {"n": 1})
    assert result.error is not None
    assert result.error.stacktrace is not None
    assert "UpstreamServerError" in result.error.stacktrace


# ------------------------------------------------------------------------------ cancellation


@in_loop
async def test_cancelling_run_cancels_the_attempt_and_frees_its_slot() -> None:
    """The tool sees the cancellation, ``run()`` raises it, and the bulkhead slot is free."""
    gate = Gate()
    runner = ToolRunner(gate.toolkit, bulkhead=Bulkhead(max_concurrent=1))
    call = asyncio.create_task(runner.run("wait", {"n": 1}))
    await until(lambda: gate.entered == 1)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert gate.cancelled == 1
    gate.opened.set()
    assert (await runner.run("wait", {"n": 2})).value == 2
    assert gate.finished == 1


@in_loop
async def test_cancelling_during_the_wait_between_retries_stops_for_good() -> None:
    """Cancelled while waiting to retry: no further attempt, now or later."""
    gate = Gate()
    gate.failures = 5
    waits: list[float] = []

    async def sleep_until_cancelled(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.Event().wait()

    runner = ToolRunner(
        gate.toolkit,
        retry=RetryPolicy(initial_delay=0.01, jitter=False),
        sleep=sleep_until_cancelled,
    )
    call = asyncio.create_task(runner.run("flaky", {"n": 1}))
    await until(lambda: waits == [0.01])
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await asyncio.sleep(0.05)
    assert len(gate.seen) == 1


@in_loop
async def test_cancelling_run_many_cancels_every_call() -> None:
    """``run_many()`` raises the cancellation once all its calls have stopped."""
    gate = Gate()
    runner = ToolRunner(gate.toolkit)
    batch = asyncio.create_task(runner.run_many([("wait", {"n": n}) for n in range(10)]))
    await until(lambda: gate.entered == 10)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert gate.cancelled == 10
    assert asyncio.all_tasks() == {asyncio.current_task()}


@in_loop
async def test_cancelling_a_queued_call_leaves_the_queue() -> None:
    """A call cancelled while it queues for a slot leaves no trace in the bulkhead."""
    gate = Gate()
    runner = ToolRunner(gate.toolkit, bulkhead=Bulkhead(max_concurrent=1, max_wait=60))
    holder = asyncio.create_task(runner.run("wait", {"n": 1}))
    await until(lambda: gate.entered == 1)
    queued = asyncio.create_task(runner.run("wait", {"n": 2}))
    await asyncio.sleep(0.001)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    gate.opened.set()
    assert (await holder).value == 1
    assert (await runner.run("wait", {"n": 3})).value == 3
    assert gate.entered == 2


@in_loop
async def test_a_cancelled_probe_hands_its_place_back() -> None:
    """Cancelling a half-open circuit's probe lets the next call probe."""
    gate = Gate()
    gate.failures = 1
    now = [0.0]
    runner = ToolRunner(
        gate.toolkit,
        circuit_breaker=CircuitBreaker(failure_threshold=1, reset_timeout=10),
        clock=lambda: now[0],
    )
    await runner.run("flaky", {"n": 1})
    assert (await runner.run("flaky", {"n": 1})).kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    now[0] = 10.0
    probe = asyncio.create_task(runner.run("flaky", {"n": 2, "word": "wait"}))
    await until(lambda: gate.entered == 1)
    assert (await runner.run("flaky", {"n": 9})).kind == ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
    assert (await runner.run("flaky", {"n": 3})).value == "x3"
    assert runner.stats().circuits["flaky"] == CircuitState.CLOSED


@in_loop
async def test_cancelling_while_queued_for_all_tools_releases_everything() -> None:
    """Cancelled while waiting for the runner's compartment: the tool's slot and the
    circuit's probe are handed back."""
    gate = Gate()
    runner = ToolRunner(
        gate.toolkit,
        max_concurrency=1,
        bulkhead=Bulkhead(max_concurrent=1, max_wait=60),
        circuit_breaker=CircuitBreaker(),
    )
    holder = asyncio.create_task(runner.run("wait", {"n": 1}))
    await until(lambda: gate.entered == 1)
    queued = asyncio.create_task(runner.run("double", {"n": 2}))
    await asyncio.sleep(0.001)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    gate.opened.set()
    await holder
    results = await asyncio.wait_for(runner.run_many([("double", {"n": 3})]), 1.0)
    assert results[0].value == 6
    assert runner.stats().circuits["double"] == CircuitState.CLOSED
