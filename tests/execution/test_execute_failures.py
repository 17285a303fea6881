"""Running tools that fail: each row of the mapping table from a real tool body; direct calls;
and what a body may raise beyond the table: exceptions that asyncio cannot carry, tdk errors
with fields missing, mistyped or cyclic, exceptions that lie about themselves, responses that
cannot be read. Whatever the body raises, ``run()`` returns one well-formed result."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from _bounded import run_bounded
from _execute_support import (
    REQUEST,
    add,
    echo_number,
    run,
    search,
)

import tdk.http
from tdk import Bulkhead, Tool, Toolkit, ToolResult, ToolRunner, tool
from tdk.errors import (
    ErrorKind,
    FatalToolError,
    RetryableToolError,
    ToolError,
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


# -- exceptions that asyncio cannot carry, or that mean something to generators -------------


def _raiser(exc_type: type[BaseException], flavour: str) -> Tool[..., Any]:
    options: dict[str, Any] = {"name": f"raise_{exc_type.__name__}_{flavour}".replace("-", "_")}
    if flavour.endswith("limit"):
        options["timeout"] = 5.0
    if flavour == "sync-inline":
        options["inline"] = True

    if flavour.startswith("async"):

        async def body() -> int:
            """Raise."""
            raise exc_type

    else:

        def body() -> int:  # type: ignore[misc]
            """Raise."""
            raise exc_type

    return tool(**options)(body)


FLAVOURS = ["sync-thread", "sync-time-limit", "sync-inline", "async", "async-time-limit"]
CONTROL_FLOW = [StopIteration, GeneratorExit, StopAsyncIteration]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("exc_type", CONTROL_FLOW, ids=lambda t: t.__name__)
@pytest.mark.parametrize("entry", ["tool.run", "toolkit.run", "runner.run"])
def test_control_flow_exceptions_are_fatal_results(
    exc_type: type[BaseException], flavour: str, entry: str
) -> None:
    """``next(iter([]))`` and its kin in a body give a TOOL_RUNTIME_FATAL result, at once."""
    body = _raiser(exc_type, flavour)
    toolkit = Toolkit("hostile", [body])
    call = {
        "tool.run": lambda: body.run({}),
        "toolkit.run": lambda: toolkit.run(body.name, {}),
        "runner.run": lambda: ToolRunner(toolkit, timeout=5.0).run(body.name, {}),
    }[entry]
    result = run_bounded(call())
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.attempts == 1
    json.dumps(result.to_dict())


@pytest.mark.parametrize("exc_type", CONTROL_FLOW, ids=lambda t: t.__name__)
def test_run_sync_returns_for_control_flow_exceptions(exc_type: type[BaseException]) -> None:
    """``run_sync`` of a sync body raising StopIteration returns its result."""
    body = _raiser(exc_type, "sync-thread")
    outcome: list[ToolResult] = []
    thread = threading.Thread(target=lambda: outcome.append(body.run_sync({})), daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "run_sync() hung"
    assert outcome[0].kind is ErrorKind.TOOL_RUNTIME_FATAL


def test_a_stop_iteration_frees_the_bulkhead_slot() -> None:
    """After a body raised StopIteration, the next call gets the slot (none stays taken)."""
    body = _raiser(StopIteration, "sync-thread")
    runner = ToolRunner(Toolkit("hostile", [body]), bulkhead=Bulkhead(max_concurrent=1))

    async def twice() -> list[ToolResult]:
        return [await runner.run(body.name, {}), await runner.run(body.name, {})]

    kinds = [result.kind for result in run_bounded(twice())]
    assert kinds == [ErrorKind.TOOL_RUNTIME_FATAL, ErrorKind.TOOL_RUNTIME_FATAL]


def test_tdk_run_prints_the_result_of_a_stop_iteration(tmp_path: Path) -> None:
    """``tdk run`` on a body raising StopIteration prints its result and exits 1."""
    module = tmp_path / "hostile_cli_tools.py"
    module.write_text(
        textwrap.dedent(
            '''
            from tdk import tool

            @tool
            def first() -> int:
                """Return the first of nothing."""
                return next(iter([]))
            '''
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "run", str(module), "first"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["error"]["kind"] == "TOOL_RUNTIME_FATAL"


# -- malformed tdk errors -------------------------------------------------------------------


class _Lazy(RetryableToolError):
    """An error whose ``__init__`` forgets ``ToolError.__init__``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Evil(str):
    """Text whose methods lie."""

    def replace(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        return "evil"

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class _BadKey:
    """A key whose ``str()`` fails."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _cyclic() -> dict[str, Any]:
    cyclic: dict[str, Any] = {"name": "loop"}
    cyclic["self"] = cyclic
    return cyclic


def _explosive() -> list[Any]:
    row = [1] * 300
    table = [row] * 300
    return [table] * 300  # 27 million values when walked naively


class _Tally(int):
    """An int subclass (not an enum)."""


class _Ratio(float):
    """A float subclass."""


class _Broken(dict[str, int]):
    """A mapping whose items cannot be read."""

    def items(self) -> Any:
        raise RuntimeError("unreadable")


class _Pair(tuple[int, int]):
    """A tuple (a valid key) whose text fails."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _reassigned(**fields: Any) -> Callable[[], ToolError]:
    def make() -> ToolError:
        error = RetryableToolError("Try again.", additional_prompt_content="Use page=2.")
        for name, value in fields.items():
            setattr(error, name, value)
        return error

    return make


MALFORMED = [
    pytest.param(lambda: _Lazy("nope"), ErrorKind.TOOL_RUNTIME_FATAL, id="init-skipped"),
    pytest.param(
        lambda: RetryableToolError("x", details={1: "a", (1, 2): "b", None: "c"}),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="non-str-keys",
    ),
    pytest.param(
        _reassigned(details={1: object(), _BadKey(): 2}),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="non-str-keys-after-creation",
    ),
    pytest.param(
        lambda: RetryableToolError("x", details=_cyclic()),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="self-referencing-details",
    ),
    pytest.param(
        _reassigned(details=_cyclic()),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="self-referencing-after-creation",
    ),
    pytest.param(
        _reassigned(details={"x": object(), "n": 10**5000, "f": math.nan}),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="unserialisable-values-after-creation",
    ),
    pytest.param(
        _reassigned(details={"rows": _explosive()}),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="shared-rows-that-explode",
    ),
    pytest.param(
        _reassigned(details={"text": _Evil("sk-" + "a" * 30)}),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="str-subclass-with-lying-methods",
    ),
    pytest.param(
        _reassigned(
            details={
                "n": _Tally(3),
                "r": _Ratio(0.5),
                "broken": _Broken(a=1),
                _Pair((1, 2)): "pair",
                "many": {str(i): i for i in range(20_000)},
            }
        ),
        ErrorKind.TOOL_RUNTIME_RETRY,
        id="subclasses-unreadable-too-many-and-a-key-without-text",
    ),
    pytest.param(
        lambda: RetryableToolError("x", details=[("a", 1)]),  # type: ignore[arg-type]
        ErrorKind.TOOL_RUNTIME_FATAL,
        id="details-not-a-mapping-at-creation",
    ),
    pytest.param(_reassigned(message=b"bytes"), ErrorKind.TOOL_RUNTIME_FATAL, id="message-bytes"),
    pytest.param(_reassigned(message=42), ErrorKind.TOOL_RUNTIME_FATAL, id="message-int"),
    pytest.param(_reassigned(message=None), ErrorKind.TOOL_RUNTIME_FATAL, id="message-none"),
    pytest.param(_reassigned(details=[1, 2]), ErrorKind.TOOL_RUNTIME_FATAL, id="details-a-list"),
    pytest.param(_reassigned(kind="RETRY"), ErrorKind.TOOL_RUNTIME_FATAL, id="kind-a-string"),
    pytest.param(
        _reassigned(retry_after_ms=10**400), ErrorKind.TOOL_RUNTIME_FATAL, id="huge-retry-after"
    ),
    pytest.param(
        lambda: RetryableToolError("x", retry_after_ms=10**400),
        ErrorKind.TOOL_RUNTIME_FATAL,
        id="huge-retry-after-at-creation",
    ),
]


@pytest.mark.parametrize(("make", "kind"), MALFORMED)
def test_malformed_tdk_errors_give_a_serialisable_result(
    make: Callable[[], ToolError], kind: ErrorKind
) -> None:
    """A tdk error with missing, mistyped, cyclic or unserialisable fields gives a result
    whose ``to_dict()`` is JSON (a fatal one when the error cannot be read)."""

    @tool
    def raises() -> int:
        """Raise a malformed error."""
        raise make()

    result = run_bounded(raises.run({}, include_stacktrace=True))
    assert result.kind is kind
    text = json.dumps(result.to_dict(), allow_nan=False)
    assert "sk-" + "a" * 30 not in text
    assert "evil" not in text
    repr(result)
    assert result.error is not None
    result.error.to_log_line()


def test_odd_details_are_copied_as_json() -> None:
    """Subclasses become plain values, what cannot be read or is too much is named."""

    @tool
    def raises() -> int:
        """Raise with odd details."""
        raise _reassigned(
            details={
                "n": _Tally(3),
                "r": _Ratio(0.5),
                "broken": _Broken(a=1),
                _Pair((1, 2)): "pair",
                "many": {str(i): i for i in range(20_000)},
            }
        )()

    error = run_bounded(raises.run({})).error
    assert error is not None
    details = error.details
    assert (details["n"], details["r"], details["broken"]) == (3, 0.5, "<unreadable _Broken>")
    assert len(details["many"]) <= 10_000  # one budget for the whole of details
    assert details["many"]["..."] == "<cut: too many values>"
    assert details["<_Pair>"] == "pair"


def test_a_group_of_thousands_of_types_names_a_few() -> None:
    """An exception group of 20,000 types (with 64 KB names) gives a short message."""

    def many() -> list[Exception]:
        return [type(f"E{n}" + "x" * 65_536, (Exception,), {})() for n in range(20_000)]

    @tool
    def fails() -> int:
        """Fail in many ways."""
        raise ExceptionGroup("many", many())

    error = run_bounded(fails.run({})).error
    assert error is not None
    assert error.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert len(error.message) < 2_000
    assert error.message.endswith("and 19990 other types).")
    assert len(error.details["exceptions"]) == 10


def test_a_malformed_error_says_which_fields() -> None:
    """The developer message names what could not be read."""

    @tool
    def raises() -> int:
        """Raise a malformed error."""
        raise _Lazy("nope")

    error = run_bounded(raises.run({})).error
    assert error is not None
    assert error.message == "The tool raised a _Lazy that tdk could not read."
    assert error.developer_message is not None
    assert "message, developer_message" in error.developer_message


def test_a_malformed_error_never_stops_the_rest_of_a_batch() -> None:
    """In ``run_many``, a call failing with a malformed error leaves the others running."""

    @tool
    def broken() -> int:
        """Raise a malformed error."""
        raise _Lazy("nope")

    @tool
    async def slow() -> str:
        """Finish after the broken one."""
        await asyncio.sleep(0.05)
        return "finished"

    runner = ToolRunner(Toolkit("batch", [broken, slow]))
    results = run_bounded(runner.run_many([("broken", {}), ("slow", {}), ("broken", {})]))
    assert [r.kind for r in results] == [
        ErrorKind.TOOL_RUNTIME_FATAL,
        None,
        ErrorKind.TOOL_RUNTIME_FATAL,
    ]
    assert results[1].value == "finished"


def test_a_direct_call_reraises_a_malformed_error_as_it_is() -> None:
    """Calling a tool directly re-raises even an error whose ``__init__`` skipped ours."""

    @tool
    def raises() -> int:
        """Raise a malformed error."""
        raise _Lazy("nope")

    with pytest.raises(_Lazy) as caught:
        raises()
    assert caught.value.tool_name == "raises"


# -- exceptions that lie --------------------------------------------------------------------


def _liar(cls: type) -> Any:
    """An object that claims to be an instance of ``cls``."""

    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:  # type: ignore[override]
            return cls

    return Liar()


class _FalseCause(Exception):
    """An exception whose truth cannot be told."""

    def __bool__(self) -> bool:
        raise RuntimeError("no truth for you")


class _NoModule(Exception):
    """A class that does not say where it was defined."""


_NoModule.__module__ = None  # type: ignore[assignment]


class _Members(ExceptionGroup):  # type: ignore[type-arg]
    """A group whose members cannot be read."""

    @property
    def exceptions(self) -> Any:  # type: ignore[override]
        raise RuntimeError("no members for you")


class _LongText(str):
    """Text whose length cannot be taken."""

    def __len__(self) -> int:
        raise RuntimeError("no length for you")


class _OddText(Exception):
    """An exception whose str() is a str subclass."""

    def __str__(self) -> str:
        return _LongText("odd")


def _with_false_cause() -> None:
    try:
        raise _FalseCause("inner")
    except _FalseCause as inner:
        raise KeyError("outer") from inner


LYING = [
    pytest.param(_reassigned(message=_liar(str)), id="message-claims-to-be-str"),
    pytest.param(_reassigned(status_code=_liar(int)), id="status-claims-to-be-int"),
    pytest.param(_reassigned(kind=_liar(ErrorKind)), id="kind-claims-to-be-a-kind"),
    pytest.param(_reassigned(details={"x": _liar(str), "y": _liar(dict)}), id="details-lie"),
    pytest.param(_with_false_cause, id="cause-without-truth"),
    pytest.param(lambda: _NoModule("x"), id="class-without-module"),
    pytest.param(lambda: _Members("g", [ValueError(1)]), id="group-without-members"),
    pytest.param(_OddText, id="str-subclass-text"),
]


@pytest.mark.parametrize("make", LYING)
def test_exceptions_that_lie_give_a_result(make: Callable[[], Any]) -> None:
    """Objects that lie about their class, truths that raise, classes without a module,
    groups without members: ``run()`` still returns one serialisable result."""

    @tool
    def raises() -> int:
        """Raise something that lies."""
        raised = make()
        if raised is not None:
            raise raised
        return 1

    result = run_bounded(raises.run({}))
    assert result.error is not None
    json.dumps(result.to_dict())
    result.error.to_log_line()


# -- odd responses, and text that is not UTF-8 ----------------------------------------------


class _StatusRaises:
    """A response-like object whose status cannot be read."""

    headers: ClassVar[dict[str, str]] = {}

    @property
    def status_code(self) -> int:
        raise ValueError("no status")


class _BoolStatus:
    """A response-like object whose status is a bool."""

    headers: ClassVar[dict[str, str]] = {}
    status_code = True


class _Unclassifiable:
    """A response-like object that looks readable and is not."""

    status_code = 503

    @property
    def headers(self) -> Any:
        raise RuntimeError("no headers")


class _FailingHeaders:
    def get(self, *args: Any) -> Any:
        raise RuntimeError("no header")


class _OddHeaders:
    """A response-like object whose headers fail when read."""

    status_code = 503
    headers = _FailingHeaders()


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        pytest.param(_StatusRaises(), "UpstreamError", id="status-raises"),
        pytest.param(_BoolStatus(), "UpstreamError", id="status-a-bool"),
        pytest.param(_Unclassifiable(), "UpstreamError", id="headers-raise"),
        # (its status is readable: the hook's classification falls back to it)
        pytest.param(_OddHeaders(), "UpstreamServerError", id="header-reads-fail"),
    ],
)
def test_raise_for_status_with_an_odd_response_is_an_upstream_error(
    response: Any, expected: str
) -> None:
    """``HTTPStatusError`` carrying a response that cannot be read is still an upstream error."""

    @tool
    def raises() -> int:
        """Raise an HTTPStatusError with an odd response."""
        raise httpx.HTTPStatusError(
            "m", request=httpx.Request("GET", "https://h.example/"), response=response
        )

    result = run_bounded(raises.run({}))
    assert result.error is not None
    assert result.error.error == expected
    json.dumps(result.to_dict())


def test_lone_surrogates_never_reach_a_result() -> None:
    """An upstream's ``\\ud800`` escape, a model's tool name or key holding one: every text of
    the result encodes as UTF-8 (the surrogate becomes U+FFFD)."""
    body = b'{"message": "invalid value \\ud800 in field"}'

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, content=body, headers={"Content-Type": "application/json"})

    @tool
    def calls() -> int:
        """Call an upstream that answers with a lone surrogate."""
        with tdk.http.install(httpx.Client(transport=httpx.MockTransport(upstream))) as client:
            client.get("https://api.example.com/v1/items")
        return 1

    toolkit = Toolkit("surrogates", [calls, echo_number])
    results = [
        run_bounded(calls.run({})),
        run_bounded(toolkit.run("calls\ud800", {})),
        run_bounded(echo_number.run({"n": 1, "k\udfff": 2})),
    ]
    for result in results:
        assert result.error is not None
        result.model_dump_json()
        json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
        result.error.to_log_line().encode("utf-8")
    assert "\ufffd" in results[0].error.message  # type: ignore[union-attr]
