"""Running tools that fail: each row of the mapping table from a real tool body; direct calls."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from _execute_support import (
    REQUEST,
    add,
    run,
    search,
)

from tdk import tool
from tdk.errors import (
    ErrorKind,
    FatalToolError,
    RetryableToolError,
    ToolTimeoutError,
    UpstreamRateLimitError,
)


def _status_error() -> httpx.HTTPStatusError:
    response = httpx.Response(429, request=REQUEST, headers={"Retry-After": "7"})
    return httpx.HTTPStatusError("429", request=REQUEST, response=response)


async def _task_group_failure() -> None:
    async def boom(exc: Exception) -> None:
        raise exc

    async with asyncio.TaskGroup() as group:
        group.create_task(boom(KeyError("a")))
        group.create_task(boom(ValueError("b")))


FAILURES = [
    pytest.param(
        lambda: RetryableToolError("Try again.", additional_prompt_content="use q=python"),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="tdk-error-kept",
    ),
    pytest.param(_status_error, ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT, id="http-status"),
    pytest.param(
        lambda: httpx.ReadTimeout("slow", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT,
        id="httpx-timeout",
    ),
    pytest.param(
        lambda: httpx.ConnectError("dns", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE,
        id="httpx-connect",
    ),
    pytest.param(
        lambda: httpx.ReadError("reset", request=REQUEST),
        ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
        id="httpx-transport",
    ),
    pytest.param(TimeoutError, ErrorKind.TOOL_RUNTIME_TIMEOUT, id="builtin-timeout"),
    pytest.param(lambda: KeyError("x"), ErrorKind.TOOL_RUNTIME_FATAL, id="unknown"),
]


@pytest.mark.parametrize(("make", "kind"), FAILURES)
@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_failures_map_by_the_table(make: Any, kind: ErrorKind, flavour: str) -> None:
    """What the body raises becomes exactly one error of the mapped kind, with the tool name."""
    if flavour == "async":

        @tool
        async def failing() -> int:
            """Fail."""
            raise make()

    else:

        @tool
        def failing() -> int:
            """Fail."""
            raise make()

    result = run(failing)
    assert result.kind is kind
    assert result.error is not None
    assert result.error.tool_name == "failing"
    assert result.attempts == 1


def test_upstream_error_keeps_retry_after() -> None:
    """The planner gets the wait the upstream asked for."""

    @tool
    async def limited() -> int:
        """Fail with a rate limit."""
        raise UpstreamRateLimitError("Slow down.", status_code=403, retry_after_ms=7000)

    result = run(limited)
    assert (result.retry_after_ms, result.error and result.error.status_code) == (7000, 403)
    assert result.retryable


def test_exception_group_names_member_types() -> None:
    """A task group's failures become one fatal error naming the member types."""

    @tool
    async def grouped() -> int:
        """Fail in a task group."""
        await _task_group_failure()
        return 1

    result = run(grouped)
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.error is not None
    assert "KeyError, ValueError" in result.error.message
    assert result.error.details["exceptions"] == ["KeyError", "ValueError"]


def test_unknown_exception_message_names_only_the_type() -> None:
    """The model never sees str() of a foreign exception."""

    @tool
    def broken() -> int:
        """Fail."""
        raise ValueError("internal detail 42")

    result = run(broken)
    assert result.error is not None
    assert result.error.message == "An unhandled ValueError was raised by the tool."
    assert result.error.developer_message == "ValueError: internal detail 42"
    assert result.error.cause == "ValueError"


def test_direct_call_is_the_plain_function() -> None:
    """Calling a tool directly calls the function."""
    assert add(2, 3) == 5
    assert asyncio.run(search("q", limit=1)) == ["q-0"]


def test_direct_call_maps_uncaught_exceptions() -> None:
    """An uncaught exception is re-raised as the mapped tdk error, chained to the original."""

    @tool
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    with pytest.raises(FatalToolError) as caught:
        broken()
    assert isinstance(caught.value.__cause__, KeyError)
    assert caught.value.tool_name == "broken"


def test_direct_async_call_maps_uncaught_exceptions() -> None:
    """The same for async tools, when the coroutine is awaited."""

    @tool
    async def slow() -> int:
        """Fail."""
        raise TimeoutError

    with pytest.raises(ToolTimeoutError) as caught:
        asyncio.run(slow())
    assert isinstance(caught.value.__cause__, TimeoutError)


def test_direct_call_keeps_tdk_errors() -> None:
    """A tdk error raised by the body is re-raised as itself, with the tool name."""
    error = RetryableToolError("again")

    @tool
    def picky() -> int:
        """Fail."""
        raise error

    with pytest.raises(RetryableToolError) as caught:
        picky()
    assert caught.value is error
    assert error.tool_name == "picky"


def test_own_timeout_error_under_a_limit_is_mapped_by_the_table() -> None:
    """A TimeoutError raised by the body before the limit is the body's, not the limit's."""

    @tool(timeout=10)
    async def gives_up_early() -> int:
        """Raise a timeout of its own."""
        raise TimeoutError("upstream too slow")

    result = run(gives_up_early, {})
    assert result.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert result.error is not None
    assert result.error.details == {}
    assert result.error.cause == "TimeoutError"


def test_direct_call_keeps_an_existing_tool_name() -> None:
    """A tdk error that already names a tool keeps that name."""

    @tool
    def delegating() -> int:
        """Fail on behalf of another tool."""
        raise RetryableToolError("again", tool_name="inner")

    with pytest.raises(RetryableToolError) as caught:
        delegating()
    assert caught.value.tool_name == "inner"


def test_inline_sync_tool_failures_map_as_usual() -> None:
    """An inline tool's exception becomes the same result as a threaded one's."""

    @tool(inline=True)
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    result = run(broken, {})
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.attempts == 1


def test_direct_call_of_a_tdk_error_is_not_its_own_cause() -> None:
    """Re-raising a tdk error from a direct call keeps its real cause."""

    @tool
    def picky() -> int:
        """Fail."""
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise RetryableToolError("again") from inner

    with pytest.raises(RetryableToolError) as caught:
        picky()
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_malformed_tdk_error_is_a_fatal_result() -> None:
    """A tool raising a tdk error with wrong-typed fields gets a result, not an exception."""

    @tool
    def sloppy() -> int:
        """Raise a malformed error."""
        raise RetryableToolError("x", retry_after_ms="soon")  # type: ignore[arg-type]

    result = run(sloppy, {})
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.error is not None
    assert result.error.cause == "TypeError"
