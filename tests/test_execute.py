"""Running tools: every call returns one well-formed ToolResult, and nothing leaks."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import gc
import json
import logging
import threading
import weakref
from typing import Annotated, Any, ClassVar, NotRequired

import httpx
import pytest
from pydantic import AfterValidator, BaseModel, Field
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from tdk import Tool, ToolContext, Toolkit, ToolResult, tool
from tdk.errors import (
    ErrorCategory,
    ErrorKind,
    FatalToolError,
    RetryableToolError,
    ToolTimeoutError,
    UpstreamRateLimitError,
)

REQUEST = httpx.Request("GET", "https://api.example.com/items")


class Item(BaseModel):
    """An item."""

    id: int
    name: str


@dataclasses.dataclass
class Point:
    """A point."""

    x: float
    y: float


class Page(TypedDict):
    """A page of results."""

    items: list[str]
    cursor: NotRequired[str]


@tool
async def search(
    query: Annotated[str, "What to look for."],
    limit: Annotated[int, Field(ge=1, le=50, description="How many results.")] = 10,
) -> list[str]:
    """Search the catalogue."""
    return [f"{query}-{n}" for n in range(limit)]


@tool
def add(a: Annotated[int, "First addend."], b: Annotated[int, "Second addend."]) -> int:
    """Add two numbers."""
    return a + b


@tool
def find(term: Annotated[str, "query", "The search term."]) -> str:
    """Find something; the parameter is advertised as 'query'."""
    return term.upper()


@tool
def when() -> dt.datetime:
    """Return a fixed time."""
    return dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


@tool
def nothing() -> None:
    """Return nothing."""


@tool
def maybe(present: Annotated[bool, "Whether to return a value."]) -> int | None:
    """Return 1 or None."""
    return 1 if present else None


@tool
def page(with_cursor: Annotated[bool, "Include a cursor."]) -> Page:
    """Return a page."""
    result: Page = {"items": ["a"]}
    if with_cursor:
        result["cursor"] = "c2"
    return result


@tool
def items(count: Annotated[int, "How many."]) -> list[Item]:
    """Return items."""
    return [Item(id=n, name=f"n{n}") for n in range(count)]


@tool
def point(item: Annotated[Item, "An item."]) -> Point:
    """Return a point; the item arrives as a model instance."""
    assert isinstance(item, Item)
    return Point(x=item.id, y=0.5)


@tool
def liar() -> int:
    """Claim an int, return something else."""
    return "not a number"  # type: ignore[return-value]


def run(t: Tool[..., Any], arguments: Any = None, **options: Any) -> ToolResult:
    return asyncio.run(t.run(arguments, **options))


# ---------------------------------------------------------------------------------------------
# Success


@pytest.mark.parametrize(
    ("t", "arguments", "value"),
    [
        pytest.param(search, {"query": "py", "limit": 2}, ["py-0", "py-1"], id="async-mapping"),
        pytest.param(search, '{"query": "py", "limit": 1}', ["py-0"], id="json-string"),
        pytest.param(search, b'{"query": "py", "limit": 1}', ["py-0"], id="json-bytes"),
        pytest.param(add, {"a": 2, "b": 3}, 5, id="sync"),
        pytest.param(add, {"a": "2", "b": 3}, 5, id="lax-coercion"),
        pytest.param(find, {"query": "x"}, "X", id="renamed-parameter"),
        pytest.param(when, None, "2026-11-29T12:00:00Z", id="json-mode-datetime"),
        pytest.param(when, "", "2026-11-29T12:00:00Z", id="blank-string-is-empty-object"),
        pytest.param(nothing, {}, None, id="returns-none"),
        pytest.param(maybe, {"present": False}, None, id="optional-none"),
        pytest.param(maybe, {"present": True}, 1, id="optional-value"),
        pytest.param(page, {"with_cursor": False}, {"items": ["a"]}, id="typeddict-notrequired"),
        pytest.param(
            page, {"with_cursor": True}, {"items": ["a"], "cursor": "c2"}, id="typeddict-full"
        ),
        pytest.param(
            items, {"count": 2}, [{"id": 0, "name": "n0"}, {"id": 1, "name": "n1"}], id="models"
        ),
        pytest.param(point, {"item": {"id": 3, "name": "p"}}, {"x": 3.0, "y": 0.5}, id="dataclass"),
    ],
)
def test_success(t: Tool[..., Any], arguments: Any, value: Any) -> None:
    """A good call returns the JSON-mode value, one attempt, and no error."""
    result = run(t, arguments, call_id="c-1")
    assert result.error is None, result.error
    assert result.is_success
    assert result.value == value
    assert result.tool == t.name
    assert result.call_id == "c-1"
    assert result.attempts == 1
    assert result.duration_ms >= 0
    assert (result.kind, result.category, result.retryable, result.retry_after_ms) == (
        None,
        None,
        False,
        None,
    )
    assert json.loads(json.dumps(result.to_dict())) == result.to_dict()


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("t", "arguments", "fragments"),
    [
        pytest.param(search, '{"query": ', ["not valid JSON"], id="malformed-json"),
        pytest.param(search, "[1, 2]", ["must be a JSON object"], id="json-array"),
        pytest.param(search, [1, 2], ["must be a JSON object"], id="list-object"),
        pytest.param(search, {}, ["'query' is required"], id="missing"),
        pytest.param(
            search,
            {"query": "x", "colour": "red"},
            ["'colour' is not a parameter", "Parameters: query, limit"],
            id="unknown",
        ),
        pytest.param(
            search,
            {"query": "x", "limit": "many"},
            ["'limit' should be a valid integer"],
            id="wrong-type",
        ),
        pytest.param(
            search,
            {"query": "x", "limit": 500},
            ["'limit' should be less than or equal to 50"],
            id="constraint",
        ),
        pytest.param(
            add,
            {"b": [1], "c": 1},
            ["'a' is required", "'b' should be a valid integer", "'c' is not a parameter"],
            id="every-field-at-once",
        ),
        pytest.param(find, {"term": "x"}, ["'query' is required", "'term' is not"], id="old-name"),
        pytest.param(
            point,
            {"item": {"id": "x"}},
            ["'item.id' should", "'item.name' is required"],
            id="nested",
        ),
    ],
)
def test_bad_input(t: Tool[..., Any], arguments: Any, fragments: list[str]) -> None:
    """Bad arguments -> TOOL_RUNTIME_BAD_INPUT_VALUE listing every field, body never run."""
    result = run(t, arguments)
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.category is ErrorCategory.VALIDATION
    assert result.retryable is False
    assert result.attempts == 0
    assert result.error is not None
    for fragment in fragments:
        assert fragment in result.error.message
    assert result.error.details["errors"]


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"query": "x", "limit": "SECRET-VALUE-123"}, id="wrong-type"),
        pytest.param({"query": "x", "SECRET-VALUE-123x": 1, "limit": 1}, id="unknown-value"),
        pytest.param('{"query": "SECRET-VALUE-123", "limit": 999}', id="constraint-json"),
        pytest.param('{"query": "SECRET-VALUE-123", ', id="malformed-json"),
    ],
)
def test_bad_input_never_echoes_values(arguments: Any) -> None:
    """Submitted values appear in no message, developer message or details."""
    result = run(search, arguments)
    assert result.error is not None
    error = result.error.to_dict()
    for key in ("message", "developer_message", "details"):
        assert "SECRET-VALUE-123" not in json.dumps(error[key]).replace("SECRET-VALUE-123x", "")


@tool
def tag(labels: Annotated[dict[str, int], "Label -> weight."]) -> int:
    """Sum label weights."""
    return sum(labels.values())


CONTEXT_SECRET = "ctx-secret-4411"
TOKEN = "sk-ant-REALLOOKINGTOKEN0123456789"


@pytest.mark.parametrize(
    ("target", "arguments"),
    [
        pytest.param(search, {"query": "x", CONTEXT_SECRET: 1}, id="unknown-key-is-a-secret"),
        pytest.param(search, {"query": "x", TOKEN: 1}, id="unknown-key-is-a-token"),
        pytest.param(
            search, {"query": "x", f"api_key={CONTEXT_SECRET}": 1}, id="unknown-key-assigns"
        ),
        pytest.param(tag, {"labels": {CONTEXT_SECRET: "heavy"}}, id="mapping-key-is-a-secret"),
        pytest.param(tag, {"labels": {TOKEN: "heavy"}}, id="mapping-key-is-a-token"),
    ],
)
def test_bad_input_redacts_keys_the_model_sent(target: Tool[..., Any], arguments: Any) -> None:
    """A field path is echoed so that the model can fix it, but a path made of what the model
    sent (an unknown key, a mapping key) is redacted first: context secrets and token shapes
    never come back, while the tool's own parameter names do."""
    result = run(target, arguments, context=ToolContext(secrets={"api": CONTEXT_SECRET}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    dumped = json.dumps(result.to_dict())
    assert CONTEXT_SECRET not in dumped
    assert TOKEN not in dumped
    assert "[REDACTED]" in dumped
    assert "Parameters: " in result.error.message  # type: ignore[union-attr]


def _account_id(value: str) -> str:
    if not value.startswith("acct_"):
        # A custom error under the name of a templated pydantic type, quoting the value.
        raise PydanticCustomError(
            "string_pattern_mismatch", "'{v}' is not an account", {"v": value}
        )
    return value


@tool
def lookup(
    account: Annotated[str, AfterValidator(_account_id), "The account id."],
    items: Annotated[list[int] | None, "Item ids."] = None,
) -> str:
    """Look up an account."""
    return account


def _failing_items() -> Any:
    yield 1
    raise RuntimeError(f"failed reading api_key=zzz-{CONTEXT_SECRET}")


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(lambda: {"account": f"{CONTEXT_SECRET} {TOKEN}"}, id="custom-error-quotes"),
        pytest.param(lambda: {"account": "zzz horse battery"}, id="custom-error-plain-value"),
        pytest.param(lambda: {"account": "acct_1", "items": _failing_items()}, id="iteration"),
    ],
)
def test_bad_input_problems_are_redacted_too(arguments: Any) -> None:
    """A problem text that is not pydantic's own (a custom error borrowing a templated type's
    name, an iterator that fails with its own message) brings back no value at all: neither a
    context secret, a token, nor plain text the model sent."""
    result = run(lookup, arguments(), context=ToolContext(secrets={"api": CONTEXT_SECRET}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    dumped = json.dumps(result.to_dict())
    assert CONTEXT_SECRET not in dumped
    assert TOKEN not in dumped
    assert "zzz" not in dumped
    assert "is not valid (" in dumped


# ---------------------------------------------------------------------------------------------
# Bad output


def test_bad_output_is_a_tool_bug() -> None:
    """A return value that does not match the annotation -> BAD_OUTPUT_VALUE, not retryable."""
    result = run(liar)
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE
    assert result.retryable is False
    assert result.attempts == 1
    assert result.error is not None
    assert "does not match its declared type" in result.error.message
    assert "not a number" not in result.error.message
    assert "valid integer" in (result.error.developer_message or "")


# ---------------------------------------------------------------------------------------------
# Failures: one row per row of the mapping table, raised from a real tool body


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


# ---------------------------------------------------------------------------------------------
# Direct calls


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


# ---------------------------------------------------------------------------------------------
# Threads, time limits and cancellation


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


@tool(timeout=0.05)
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


# ---------------------------------------------------------------------------------------------
# Context and requirements


@tool(requires_secrets=["API_KEY"], requires_metadata=["tenant"])
def needs_key(
    q: Annotated[str, "Query."],
    context: ToolContext,
) -> str:
    """Use a secret."""
    return f"{context.metadata['tenant']}:{len(context.get_secret('API_KEY'))}:{q}"


def test_context_reaches_the_tool() -> None:
    """The ToolContext parameter receives the context and is not an argument."""
    context = ToolContext(secrets={"API_KEY": "k-12345"}, metadata={"tenant": "acme"})
    assert run(needs_key, {"q": "x"}, context=context).value == "acme:7:x"
    assert "context" not in needs_key.definition.input_schema["properties"]


@pytest.mark.parametrize(
    ("context", "secrets", "metadata"),
    [
        pytest.param(None, ["API_KEY"], ["tenant"], id="no-context"),
        pytest.param(ToolContext(metadata={"tenant": "a"}), ["API_KEY"], None, id="no-secret"),
        pytest.param(
            ToolContext(secrets={"API_KEY": ""}, metadata={"tenant": "a"}),
            ["API_KEY"],
            None,
            id="empty-secret",
        ),
        pytest.param(ToolContext(secrets={"API_KEY": "k-1"}), None, ["tenant"], id="no-metadata"),
    ],
)
def test_missing_requirements_stop_the_call(
    context: ToolContext | None, secrets: list[str] | None, metadata: list[str] | None
) -> None:
    """Missing secrets or metadata -> a configuration error naming them; the body never runs."""
    result = run(needs_key, {"q": "x"}, context=context)
    assert result.kind is ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT
    assert result.category is ErrorCategory.CONFIGURATION
    assert result.retryable is False
    assert result.attempts == 0
    assert result.error is not None
    assert result.error.details.get("missing_secrets") == secrets
    assert result.error.details.get("missing_metadata") == metadata
    for name in (secrets or []) + (metadata or []):
        assert f"'{name}'" in result.error.message


# ---------------------------------------------------------------------------------------------
# Stack traces, redaction and logging


class Traced(Exception):
    """An exception that records a weak reference to each instance (builtins allow none)."""

    made: ClassVar[list[weakref.ref[Traced]]] = []

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        Traced.made.append(weakref.ref(self))


@tool
async def traced() -> int:
    """Fail with a Traced error."""
    raise Traced("boom")


@tool
def traced_in_thread() -> int:
    """Fail with a Traced error, in a worker thread."""
    raise Traced("boom")


@tool(inline=True)
def traced_inline() -> int:
    """Fail with a Traced error, on the event loop."""
    raise Traced("boom")


@tool(timeout=10)
def traced_with_limit() -> int:
    """Fail with a Traced error, in a worker thread, under a time limit."""
    raise Traced("boom")


@pytest.mark.parametrize(
    "target",
    [traced, traced_in_thread, traced_inline, traced_with_limit],
    ids=["async", "sync-thread", "sync-inline", "sync-time-limit"],
)
@pytest.mark.parametrize("stacktrace", [False, True], ids=["plain", "with-stacktrace"])
def test_a_failed_call_leaves_no_reference_cycle(target: Tool[..., Any], stacktrace: bool) -> None:
    """The exception of a failed call is freed as soon as the result is returned, without the
    garbage collector: a traceback holding the frame that holds the exception (or the future
    that carried it from a worker thread) would make every failure a cycle to collect."""
    gc.collect()
    gc.disable()
    try:
        result = run(target, {}, include_stacktrace=stacktrace)
        assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
        assert Traced.made[-1]() is None
    finally:
        gc.enable()


def test_stacktrace_only_on_request() -> None:
    """Stack traces are captured, but reach the result only when the caller opts in."""

    @tool
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    assert run(broken, {}).error.stacktrace is None  # type: ignore[union-attr]
    traced = run(broken, {}, include_stacktrace=True).error
    assert traced is not None
    assert traced.stacktrace is not None
    assert "in broken" in traced.stacktrace


SECRET = "s3cr3t-planted-value-9876"


def test_a_planted_secret_appears_nowhere(caplog: pytest.LogCaptureFixture) -> None:
    """A context secret planted in every reachable place leaks into no output of the call."""

    @tool(requires_secrets=["TOKEN"])
    def leaky(context: ToolContext) -> int:
        """Fail in every way that could carry the secret."""
        token = context.get_secret("TOKEN")
        url = f"https://user:{token}@api.example.com/x?api_key={token}"
        request = httpx.Request("GET", url, headers={"Authorization": f"Bearer {token}"})
        try:
            raise ValueError(f"inner failure with {token}")
        except ValueError as inner:
            raise RetryableToolError(
                f"Upstream refused token {token}",
                developer_message=f"request {request!r} headers {dict(request.headers)}",
                additional_prompt_content=f"Do not send {token} again",
                details={"url": url, "nested": [{"token": token}]},
            ) from inner

    context = ToolContext(secrets={"TOKEN": SECRET})
    with caplog.at_level(logging.DEBUG, logger="tdk"):
        result = run(leaky, {}, context=context, include_stacktrace=True)
    assert result.kind is ErrorKind.TOOL_RUNTIME_RETRY
    outputs = [
        json.dumps(result.to_dict()),
        repr(result),
        str(result),
        caplog.text,
        json.dumps([getattr(r, "tdk_error", None) for r in caplog.records]),
    ]
    for output in outputs:
        assert SECRET not in output


UNKNOWN_KEY = "k-unknown-to-tdk-4242"


@pytest.mark.parametrize(
    "describe",
    [
        pytest.param(lambda r: f"headers {r.headers!r}", id="repeated-headers-repr"),
        pytest.param(lambda r: f"raw {r.headers.raw}", id="raw-header-tuples"),
        pytest.param(lambda r: f"headers {dict(r.headers)}", id="headers-dict"),
        pytest.param(lambda r: f"url {r.url}", id="path-parameter"),
    ],
)
def test_credentials_the_context_does_not_know_are_redacted(describe: Any) -> None:
    """A key the tool found elsewhere (not in its context, not a known token shape) is still
    scrubbed from a description of the request's headers or URL, by position."""
    request = httpx.Request(
        "GET",
        f"https://api.example.com/app;jsessionid={UNKNOWN_KEY}",
        headers=[("X-Api-Key", UNKNOWN_KEY), ("x-api-key", UNKNOWN_KEY), ("Accept", "*/*")],
    )

    @tool
    def fetch() -> int:
        """Fail, describing the request."""
        raise RuntimeError(describe(request))

    result = run(fetch, {}, include_stacktrace=True)
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert UNKNOWN_KEY not in json.dumps(result.to_dict())
    assert "[REDACTED]" in (result.error.developer_message or "")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("raised", "path_secret", "shown"),
    [
        pytest.param(httpx.ConnectError, "pathsecret-31337", "bot[REDACTED]", id="connect-error"),
        pytest.param(httpx.ReadTimeout, "pathsecret-31337", "bot[REDACTED]", id="read-timeout"),
        pytest.param(httpx.ConnectError, "tok en-1234", "bot[REDACTED]", id="percent-encoded"),
        pytest.param(httpx.ConnectError, "tok en/12:34", "bot[REDACTED]", id="path-encoded"),
    ],
)
def test_a_secret_in_a_url_path_leaves_no_trace(
    raised: type[httpx.RequestError], path_secret: str, shown: str
) -> None:
    """A transport error's ``details["url"]`` keeps the path, but not a context secret in it,
    even in the percent-encoded form httpx gives the URL."""

    @tool
    def fetch(context: ToolContext) -> int:
        """Fail to reach a URL with a secret in its path."""
        url = f"https://api.example.com/bot{context.get_secret('KEY')}/send"
        raise raised("no route", request=httpx.Request("GET", url))

    result = run(fetch, {}, context=ToolContext(secrets={"KEY": path_secret}))
    assert result.error is not None
    assert result.error.details["url"] == f"https://api.example.com/{shown}/send"
    dumped = json.dumps(result.to_dict())
    assert path_secret not in dumped
    assert "tok%20en" not in dumped


def test_a_secret_used_as_a_details_key_is_redacted() -> None:
    """``details`` keys are redacted like values: a secret can be a key by mistake. Keys that
    differed only by a secret are all kept."""

    @tool
    def keyed(context: ToolContext) -> int:
        """Fail with the secret as a details key."""
        secret = context.get_secret("KEY")
        raise RetryableToolError(
            "try again",
            details={secret: "seen", "token=abc123": 1, "token=def456": 2},
        )

    result = run(keyed, {}, context=ToolContext(secrets={"KEY": SECRET}))
    assert result.error is not None
    assert result.error.details == {
        "[REDACTED]": "seen",
        "token=[REDACTED]": 1,
        "token=[REDACTED] (2)": 2,
    }


def test_a_context_that_is_not_a_tool_context_is_refused() -> None:
    """A wrong ``context=`` is the caller's bug, reported as such, before the call runs."""
    with pytest.raises(TypeError, match="context must be a ToolContext or None, not dict"):
        run(add, {"a": 1, "b": 2}, context={"secrets": {}})


def test_empty_and_missing_secret_values_are_harmless() -> None:
    """A context may hold None or empty values (``os.environ.get`` of an unset variable):
    they are not scrubbed, and calls that succeed or fail return their result."""
    context = ToolContext(secrets={"OPTIONAL": None, "EMPTY": "", "API": "realsecret-1234"})  # type: ignore[dict-item]
    assert run(add, {"a": 1, "b": 2}, context=context).value == 3
    failed = run(add, {"a": "x"}, context=context)
    assert failed.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    broken = run(traced, {}, context=context)
    assert broken.kind is ErrorKind.TOOL_RUNTIME_FATAL


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        pytest.param('{"items": 5, "opts": 3}', "'items' should be a valid array", id="json-list"),
        pytest.param('{"items": 5, "opts": 3}', "'opts' should be an object", id="json-dict"),
        pytest.param({"items": 5, "opts": 3}, "'items' should be a valid list", id="python-list"),
        pytest.param({"items": [1], "opts": {"a": 99}}, "less than or equal to 10", id="context"),
    ],
)
def test_pydantics_own_messages_are_kept_for_json_and_python_input(
    arguments: Any, fragment: str
) -> None:
    """pydantic words some messages differently for JSON text and Python data; both are its
    own, and both reach the model (only texts that are not pydantic's are withheld)."""

    @tool
    def sized(
        items: Annotated[list[int], "Items."],
        opts: Annotated[dict[str, Annotated[int, Field(le=10)]], "Options."],
    ) -> int:
        """Count."""
        return len(items) + len(opts)

    result = run(sized, arguments)
    assert result.error is not None
    assert fragment in result.error.message
    assert "is not valid" not in result.error.message


def test_one_log_record_per_failure(caplog: pytest.LogCaptureFixture) -> None:
    """Failures log once: WARNING for call failures, ERROR for tool bugs; success is silent."""

    @tool
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    with caplog.at_level(logging.DEBUG, logger="tdk"):
        run(add, {"a": 1, "b": 2})
        run(add, {"a": "x"})
        run(broken, {})
        run(liar, {})
    records = [r for r in caplog.records if r.name == "tdk"]
    assert [(r.levelname, r.tdk_error["kind"]) for r in records] == [  # type: ignore[attr-defined]
        ("WARNING", "TOOL_RUNTIME_BAD_INPUT_VALUE"),
        ("ERROR", "TOOL_RUNTIME_FATAL"),
        ("ERROR", "TOOL_RUNTIME_BAD_OUTPUT_VALUE"),
    ]
    assert records[1].getMessage().startswith("kind=TOOL_RUNTIME_FATAL tool=broken ")


# ---------------------------------------------------------------------------------------------
# Toolkit and sync convenience


def test_toolkit_runs_by_name() -> None:
    """toolkit.run finds the tool case-insensitively and runs it."""
    toolkit = Toolkit("maths", tools=[add])
    result = asyncio.run(toolkit.run("ADD", {"a": 1, "b": 2}, call_id="7"))
    assert (result.value, result.tool, result.call_id) == (3, "add", "7")


def test_toolkit_unknown_tool_is_a_result() -> None:
    """An unknown name is a TOOL_NOT_FOUND result with suggestions, zero attempts."""
    toolkit = Toolkit("maths", tools=[add, search])
    result = asyncio.run(toolkit.run("serch", {}))
    assert result.kind is ErrorKind.TOOL_NOT_FOUND
    assert result.attempts == 0
    assert result.tool == "serch"
    assert result.error is not None
    assert result.error.details["suggestions"] == ["search"]


def test_toolkit_stacktrace_flag() -> None:
    """A toolkit can opt in to stack traces for all its calls."""

    @tool
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    toolkit = Toolkit("t", tools=[broken], include_stacktrace=True)
    result = asyncio.run(toolkit.run("broken", {}))
    assert result.error is not None
    assert result.error.stacktrace is not None


def test_run_sync() -> None:
    """run_sync runs a call from synchronous code."""
    assert add.run_sync({"a": 1, "b": 1}).value == 2


def test_run_sync_refuses_a_running_loop() -> None:
    """run_sync inside an event loop says to await run() instead."""

    async def scenario() -> None:
        with pytest.raises(RuntimeError, match="await run"):
            add.run_sync({"a": 1, "b": 1})

    asyncio.run(scenario())


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


def test_custom_validator_messages_are_not_forwarded() -> None:
    """A custom validator's message may quote the value: the model is told only the field."""

    def no_spaces(value: str) -> str:
        if " " in value:
            raise ValueError(f"{value!r} contains spaces")
        return value

    @tool
    def slug(text: Annotated[str, AfterValidator(no_spaces), "A slug."]) -> str:
        """Echo a slug."""
        return text

    result = run(slug, {"text": "SECRET VALUE"})
    assert result.error is not None
    assert "'text' is not valid (value_error)" in result.error.message
    assert "SECRET" not in json.dumps(result.error.to_dict())


def test_auth_token_is_redacted() -> None:
    """The context's auth token is scrubbed like its secrets."""

    @tool
    def echo_token(context: ToolContext) -> int:
        """Fail with the token in the message."""
        raise RetryableToolError(f"token {context.auth_token} expired")

    result = run(echo_token, {}, context=ToolContext(auth_token="user-token-77777"))
    assert result.error is not None
    assert result.error.message == "token [REDACTED] expired"


def test_no_log_record_when_logging_is_off(caplog: pytest.LogCaptureFixture) -> None:
    """Failures cost no formatting when the tdk logger is silenced."""
    with caplog.at_level(logging.CRITICAL, logger="tdk"):
        run(add, {"a": "x"})
    assert not [r for r in caplog.records if r.name == "tdk"]


def test_direct_call_keeps_an_existing_tool_name() -> None:
    """A tdk error that already names a tool keeps that name."""

    @tool
    def delegating() -> int:
        """Fail on behalf of another tool."""
        raise RetryableToolError("again", tool_name="inner")

    with pytest.raises(RetryableToolError) as caught:
        delegating()
    assert caught.value.tool_name == "inner"


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


def test_inline_sync_tool_failures_map_as_usual() -> None:
    """An inline tool's exception becomes the same result as a threaded one's."""

    @tool(inline=True)
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    result = run(broken, {})
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.attempts == 1


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


def test_direct_call_redacts_context_secrets() -> None:
    """A direct call's mapped error scrubs the secrets of the ToolContext it was given."""

    @tool
    def leaky(context: ToolContext, n: Annotated[int, "A number."]) -> int:
        """Fail with the secret in the message."""
        raise KeyError(context.get_secret("K"))

    with pytest.raises(FatalToolError) as caught:
        leaky(ToolContext(secrets={"K": "hunter2-very-secret"}), 1)
    assert "hunter2" not in json.dumps(caught.value.to_dict())
    with pytest.raises(FatalToolError) as caught:
        leaky(n=1, context=ToolContext(secrets={"K": "hunter2-very-secret"}))
    assert "hunter2" not in str(caught.value.developer_message)


def test_unknown_tool_name_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    """A tool name sent by the model is quoted in the log line, so it stays one line."""
    toolkit = Toolkit("t", tools=[add])
    with caplog.at_level(logging.WARNING, logger="tdk"):
        asyncio.run(toolkit.run("nope\nWARNING tdk kind=TOOL_RUNTIME_FATAL tool=a", {}))
    (record,) = [r for r in caplog.records if r.name == "tdk"]
    assert "\n" not in record.getMessage()
    assert 'tool="nope\\nWARNING' in record.getMessage()


@pytest.mark.parametrize("status", [302, 404], ids=["redirect", "not-found"])
def test_raise_for_status_never_leaks_the_url(status: int) -> None:
    """httpx's own message quotes the whole URL; neither the result nor the trace keeps it."""
    token = "q7RkVt-very-secret-token"

    def upstream(request: httpx.Request) -> httpx.Response:
        headers = {"Location": "https://elsewhere.example/"} if status == 302 else {}
        return httpx.Response(status, headers=headers, json={"message": "no"})

    @tool
    def fetch() -> str:
        """Fetch with credentials in the query, under names redaction does not know."""
        with httpx.Client(transport=httpx.MockTransport(upstream)) as client:
            url = f"https://api.example.com/items?mytoken={token}&auth_token={token}&page=2"
            client.get(url).raise_for_status()
        return "ok"

    result = run(fetch, {}, include_stacktrace=True)
    assert result.error is not None
    assert result.error.stacktrace is not None
    assert token not in json.dumps(result.to_dict())
    assert "https://api.example.com/items?mytoken=[REDACTED]" in json.dumps(result.to_dict())


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


def test_a_context_secret_echoed_by_the_upstream_appears_nowhere() -> None:
    """The mapped upstream error (built once, redacted once) never carries a context secret."""
    planted = "ctx-secret-value-777777"

    def upstream(request: httpx.Request) -> httpx.Response:
        body = {"error": {"message": f"bad {planted}", "code": planted, "type": planted}}
        return httpx.Response(400, json=body, headers={"x-request-id": planted})

    @tool
    def echoing(context: ToolContext) -> int:
        """Call an upstream that echoes what it was sent."""
        with httpx.Client(transport=httpx.MockTransport(upstream)) as client:
            client.get("https://api.example.com/x").raise_for_status()
        return 1

    context = ToolContext(secrets={"K": planted})
    result = run(echoing, {}, context=context, include_stacktrace=True)
    assert result.kind is ErrorKind.UPSTREAM_RUNTIME_BAD_REQUEST
    assert planted not in json.dumps(result.to_dict())
