"""Running tools on threads and the event loop: time limits, cancellation and interrupts, and
bodies that ignore or swallow a cancellation (every wait of those is bounded:
``tests/_bounded.py``)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import Annotated, Any

import pytest
from _bounded import run_bounded
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


# -- async bodies that ignore their cancellation --------------------------------------------


def test_a_body_that_returns_after_its_limit_is_a_timeout() -> None:
    """A body that swallows the cancellation of its time limit and returns is still a
    timeout, and its cleanup ran."""
    cleaned: list[bool] = []

    @tool(timeout=0.2)
    async def stubborn() -> int:
        """Ignore the cancellation once."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.01)  # a short cleanup, which the grace allows
            cleaned.append(True)
        return 1

    result = run_bounded(stubborn.run({}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert result.error is not None
    assert result.error.details == {"timeout": 0.2}
    assert cleaned == [True]


def test_a_body_that_never_stops_is_let_go_of() -> None:
    """A body that swallows every cancellation is a timeout within its limit plus the grace."""
    swallowed = 0

    @tool(timeout=0.05)
    async def immortal() -> int:
        """Never stop."""
        nonlocal swallowed
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                swallowed += 1

    result = run_bounded(immortal.run({}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert swallowed >= 1


def test_a_body_that_yields_bare_after_its_limit_is_let_go_of() -> None:
    """The same for a body spinning on ``asyncio.sleep(0)``."""

    @tool(timeout=0.05)
    async def spinning() -> int:
        """Spin."""
        while True:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                continue

    assert run_bounded(spinning.run({})).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def test_a_body_cancelling_its_own_work_is_not_cut_short() -> None:
    """A body's own inner time limit, caught by the body, is none of the call's business."""

    @tool(timeout=5.0)
    async def careful() -> str:
        """Give up on a slow step and carry on."""
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(10)
        except TimeoutError:
            pass
        await asyncio.sleep(0.01)
        return "done"

    assert run_bounded(careful.run({})).value == "done"


def test_a_failed_cleanup_after_the_limit_is_still_a_timeout() -> None:
    """A body whose cleanup raises after its limit reports the timeout, not the cleanup."""

    @tool(timeout=0.02)
    async def messy() -> int:
        """Fail while cleaning up."""
        try:
            await asyncio.sleep(10)
        finally:
            raise RuntimeError("cleanup failed")
        return 1

    assert run_bounded(messy.run({})).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def test_cancelling_the_caller_of_a_limited_body_propagates() -> None:
    """Cancelling a caller whose body has a time limit raises CancelledError in the caller."""
    started = asyncio.Event()

    @tool(timeout=5.0)
    async def waits() -> int:
        """Wait."""
        started.set()
        await asyncio.sleep(10)
        return 1

    async def scenario() -> None:
        task = asyncio.create_task(waits.run({}))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_bounded(scenario())


class _OddYield:
    """An awaitable that yields what no event loop can wait for."""

    def __await__(self) -> Any:
        yield 42


def test_a_body_awaiting_something_odd_after_its_limit_is_let_go_of() -> None:
    """After its limit, a body awaiting what asyncio cannot wait for is let go of at once."""

    @tool(timeout=0.05)
    async def odd() -> int:
        """Await the odd thing once the limit has passed."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await _OddYield()
        return 1

    assert run_bounded(odd.run({})).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def test_a_body_that_refuses_to_close_is_still_let_go_of() -> None:
    """A body that even ignores being closed (it awaits in its ``finally``) is a timeout."""

    @tool(timeout=0.05)
    async def clinging() -> int:
        """Await again while being closed."""
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue
            finally:
                await asyncio.sleep(0)

    assert run_bounded(clinging.run({})).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def test_cancelling_the_caller_during_the_grace_propagates() -> None:
    """A caller cancelled while a stubborn body uses its grace gets its CancelledError, and
    the body sees that cancellation too."""
    in_grace = asyncio.Event()
    seen: list[str] = []

    @tool(timeout=0.5)
    async def stubborn() -> int:
        """Ignore the limit's cancellation, then clean up slowly."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            in_grace.set()
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                seen.append("second cancellation")
                raise
        return 1

    async def scenario() -> None:
        task = asyncio.create_task(stubborn.run({}))
        await in_grace.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_bounded(scenario())
    assert seen == ["second cancellation"]


def test_a_caller_cancelled_whose_body_cleans_up_past_the_limit_ends_cancelled() -> None:
    """The caller is cancelled before the limit; the body honours it after an awaited cleanup
    that lasts past the limit: the call ends cancelled, as without a limit."""

    @tool(timeout=0.2)
    async def cleans_up() -> int:
        """Clean up slowly when cancelled."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)  # closing connections, past the limit
            raise
        return 1

    async def scenario() -> str:
        call = asyncio.create_task(cleans_up.run({}))
        await asyncio.sleep(0.05)
        call.cancel()
        try:
            result = await call
        except asyncio.CancelledError:
            return "cancelled"
        return str(result.kind)

    assert run_bounded(scenario()) == "cancelled"


class _Abort(BaseException):
    """Neither an Exception nor an exit."""


@pytest.mark.parametrize("raised", [RuntimeError, _Abort, GeneratorExit], ids=lambda t: t.__name__)
def test_a_cleanup_raising_anything_after_the_limit_is_a_timeout(
    raised: type[BaseException],
) -> None:
    """A body whose cleanup raises after its limit cancelled it returns a timeout, whatever
    the cleanup raised (but an interrupt or an exit, which end the process)."""

    @tool(timeout=0.05)
    async def fails_to_clean_up() -> int:
        """Fail in cleanup."""
        try:
            await asyncio.sleep(10)
        finally:
            raise raised("cleanup failed")

    result = run_bounded(fails_to_clean_up.run({}))
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def test_a_body_that_never_lets_itself_be_closed_is_left_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A body that catches every request to close it (``except BaseException``) is left
    after a bounded number of tries, with a warning; the call is still a timeout."""

    @tool(timeout=0.05)
    async def unclosable() -> int:
        """Catch the limit's cancellation and tdk's 100 requests to close (then let the
        garbage collector close it quietly)."""
        caught = 0
        while True:
            try:
                await asyncio.sleep(10)
            except BaseException:
                caught += 1
                if caught > 101:
                    raise

    with caplog.at_level(logging.WARNING, logger="tdk"):
        result = run_bounded(unclosable.run({}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert "ignored 100 requests to close" in caplog.text


def test_a_timeout_error_of_the_body_after_waiting_is_its_own() -> None:
    """A ``TimeoutError`` the body raises itself (after waiting once) is mapped by the table,
    not taken for the call's own time limit."""

    @tool(timeout=5.0)
    async def gives_up() -> int:
        """Wait, then give up on its own."""
        await asyncio.sleep(0)
        raise TimeoutError("the upstream took too long")

    error = run_bounded(gives_up.run({})).error
    assert error is not None
    assert error.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert error.developer_message == "TimeoutError: the upstream took too long"


# -- a caller's cancellation that the body swallows -----------------------------------------


def test_a_swallowed_cancellation_of_the_caller() -> None:
    """A body that catches its caller's cancellation and returns: from Python 3.13 the
    caller still ends cancelled; before, the count of pending cancellations cannot be trusted
    (a failed TaskGroup leaves one behind), and the body's value is returned."""
    started = asyncio.Event()

    @tool
    async def stubborn() -> str:
        """Swallow the cancellation."""
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "swallowed"
        return "slept"

    async def scenario() -> str:
        call = asyncio.create_task(stubborn.run({}))
        await started.wait()
        call.cancel()
        try:
            result = await call
        except asyncio.CancelledError:
            return "cancelled"
        return str(result.value)

    expected = "cancelled" if sys.version_info >= (3, 13) else "swallowed"
    assert run_bounded(scenario()) == expected


def test_a_failed_task_group_the_body_caught_is_no_cancellation() -> None:
    """A TaskGroup that failed inside the body, which the body handled, does not make the
    call look cancelled (Python 3.11 and 3.12 leave a request counted then)."""

    async def fails() -> None:
        raise ValueError("child failed")

    @tool
    async def handles() -> str:
        """Run a group that fails, and handle it."""
        handled = "unhandled"
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(fails())
                group.create_task(asyncio.sleep(10))
        except* ValueError:
            handled = "handled"
        return handled

    assert run_bounded(handles.run({})).value == "handled"
