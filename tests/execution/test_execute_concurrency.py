"""Running tools on threads and the event loop: time limits, cancellation and interrupts."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from _execute_support import (
    run,
)

from tdk import ToolResult, tool
from tdk.errors import (
    ErrorKind,
)


def test_sync_tools_do_not_block_the_event_loop() -> None:
    """A sync tool waiting in its thread lets the loop run a coroutine that releases it."""
    released = threading.Event()

    @tool
    def wait_for_release() -> bool:
        """Block until released."""
        return released.wait(timeout=10)

    async def scenario() -> ToolResult:
        running = asyncio.create_task(wait_for_release.run({}))
        await asyncio.sleep(0)
        released.set()  # only reachable while the tool waits, if the loop is not blocked
        return await running

    result = asyncio.run(scenario())
    assert result.value is True


def test_several_sync_tools_run_concurrently() -> None:
    """Two sync tools that each wait for the other both finish."""
    barrier = threading.Barrier(2, timeout=10)

    @tool
    def meet() -> bool:
        """Wait at a barrier for a second caller."""
        barrier.wait()
        return True

    async def scenario() -> list[ToolResult]:
        return list(await asyncio.gather(meet.run({}), meet.run({})))

    assert [r.value for r in asyncio.run(scenario())] == [True, True]


@tool(timeout=0.05, read_only=True)  # (a write's time limit: test_writes_everywhere.py)
async def stuck() -> int:
    """Wait forever."""
    await asyncio.Event().wait()
    return 1


@pytest.mark.parametrize(
    ("options", "limit"),
    [
        pytest.param({}, 0.05, id="decorator-timeout"),
        pytest.param({"timeout": 0.01}, 0.01, id="per-call-override"),
    ],
)
def test_time_limit(options: dict[str, Any], limit: float) -> None:
    """A tool past its limit yields TOOL_RUNTIME_TIMEOUT with details['timeout']."""
    result = run(stuck, {}, **options)
    assert result.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert result.retryable
    assert result.error is not None
    assert result.error.details == {"timeout": limit}


def test_per_call_none_lifts_the_limit() -> None:
    """timeout=None on the call removes the tool's own limit."""

    @tool(timeout=0.001)
    async def quick_enough() -> int:
        """Sleep a little longer than the decorator allows."""
        await asyncio.sleep(0.02)
        return 1

    assert run(quick_enough, {}).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert run(quick_enough, {}, timeout=None).value == 1


def test_sync_tool_overrun_yields_timeout() -> None:
    """A sync tool past its limit gives a timeout result; its thread finishes later."""
    release = threading.Event()
    finished = threading.Event()

    @tool
    def blocking() -> int:
        """Block until released."""
        release.wait(timeout=10)
        finished.set()
        return 1

    async def scenario() -> ToolResult:
        result = await blocking.run({}, timeout=0.02)
        release.set()  # before asyncio.run() waits for the worker threads to finish
        return result

    assert asyncio.run(scenario()).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert finished.wait(timeout=10)


def test_cancelling_the_caller_propagates() -> None:
    """Cancelling the task awaiting run() raises CancelledError in it; nothing is swallowed."""
    started = asyncio.Event()
    reached_end = False

    @tool
    async def forever() -> int:
        """Wait forever."""
        nonlocal reached_end
        started.set()
        await asyncio.Event().wait()
        reached_end = True
        return 1

    async def scenario() -> None:
        task = asyncio.create_task(forever.run({}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(scenario())
    assert not reached_end


def test_cancelling_a_sync_tools_caller_propagates() -> None:
    """The same for a sync tool waiting in its thread."""
    release = threading.Event()

    @tool
    def blocking() -> int:
        """Block until released."""
        release.wait(timeout=10)
        return 1

    async def scenario() -> None:
        task = asyncio.create_task(blocking.run({}))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()  # before asyncio.run() waits for the worker threads to finish

    asyncio.run(scenario())


def test_inner_cancellation_is_a_result() -> None:
    """Inner work cancelled while the caller is not yields TOOL_RUNTIME_CANCELLED."""

    @tool
    async def gives_up() -> int:
        """Cancel an inner task and let it propagate."""
        inner = asyncio.create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        inner.cancel()
        await inner
        return 1

    result = run(gives_up, {})
    assert result.kind is ErrorKind.TOOL_RUNTIME_CANCELLED
    assert result.retryable is False


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit], ids=lambda t: t.__name__)
@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_interrupts_propagate(exc_type: type[BaseException], flavour: str) -> None:
    """KeyboardInterrupt and SystemExit are never turned into results."""
    if flavour == "async":

        @tool
        async def interrupted() -> int:
            """Interrupt."""
            raise exc_type

    else:

        @tool
        def interrupted() -> int:
            """Interrupt."""
            raise exc_type

    with pytest.raises(exc_type):
        run(interrupted, {})


def test_inline_sync_tool_runs_on_the_loop_thread() -> None:
    """@tool(inline=True) skips the thread hop: the body runs on the event loop's thread."""

    @tool(inline=True)
    def where(label: Annotated[str, "A label."]) -> list[object]:
        """Report the thread it runs on."""
        return [label, threading.get_ident()]

    @tool
    def where_threaded() -> int:
        """Report the thread it runs on."""
        return threading.get_ident()

    async def scenario() -> tuple[ToolResult, ToolResult, int]:
        return await where.run({"label": "x"}), await where_threaded.run(), threading.get_ident()

    inline, threaded, loop_thread = asyncio.run(scenario())
    assert inline.value == ["x", loop_thread]
    assert threaded.value != loop_thread


def test_cancellation_survives_a_failing_cleanup() -> None:
    """A body whose cleanup raises while the caller cancels it still ends cancelled."""
    started = asyncio.Event()

    @tool
    async def messy() -> int:
        """Fail while cleaning up."""
        try:
            started.set()
            await asyncio.sleep(10)
        finally:
            raise RuntimeError("cleanup failed")
        return 1

    async def scenario() -> None:
        task = asyncio.create_task(messy.run({}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()

    asyncio.run(scenario())


def test_caller_timeout_fires_through_a_failing_cleanup() -> None:
    """The caller's own asyncio.timeout still raises TimeoutError."""

    @tool
    async def messy() -> int:
        """Fail while cleaning up."""
        try:
            await asyncio.sleep(10)
        finally:
            raise RuntimeError("cleanup failed")
        return 1

    async def scenario() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.02):
                await messy.run({})

    asyncio.run(scenario())
