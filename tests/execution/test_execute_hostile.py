"""Hostile tool bodies: whatever a body does, ``run()`` returns one well-formed result in time.

Every wait in these tests is bounded (an event loop in a thread that is joined with a
timeout, subprocess timeouts), so that a regression fails instead of hanging the suite: a
body that swallows cancellation would hang ``asyncio.wait_for`` itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import gc
import html
import json
import logging
import math
import os
import re
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Union
from urllib.parse import quote

import anyio
import httpx
import pytest
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
    WrapSerializer,
    computed_field,
    model_serializer,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import core_schema
from typing_extensions import TypedDict

import tdk.http
from tdk import (
    Bulkhead,
    CircuitBreaker,
    RateLimit,
    RetryPolicy,
    Tool,
    ToolContext,
    Toolkit,
    ToolResult,
    ToolRunner,
    tool,
)
from tdk.errors import (
    ErrorKind,
    RetryableToolError,
    ToolDefinitionError,
    ToolError,
    ToolkitLoadError,
)

#: The size of asyncio's default executor, which tdk used for sync tools before it kept its
#: own threads (docs/execution.md states the same default for tdk's pool).
DEFAULT_THREADS = min(32, (os.cpu_count() or 1) + 4)


def run(awaitable: Any, within: float = 10.0) -> Any:
    """Run a coroutine in a new loop in a thread; fail instead of hanging after ``within``
    seconds (the thread is a daemon: a hung loop is left behind)."""
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((True, asyncio.run(awaitable)))
        except BaseException as exc:
            outcome.append((False, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(within)
    assert outcome, f"still running after {within} s"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


# ---------------------------------------------------------------------------------------------
# Exceptions that asyncio cannot carry, or that mean something to generators


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
    result = run(call())
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

    kinds = [result.kind for result in run(twice())]
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


# ---------------------------------------------------------------------------------------------
# Return values that JSON cannot carry


class Reading(BaseModel):
    """A reading."""

    value: float


class Row(TypedDict):
    """A row."""

    id: int


@dataclasses.dataclass
class Spot:
    """A dataclass."""

    x: int


class Open(BaseModel):
    """A model that keeps keys it does not declare, on purpose."""

    model_config = ConfigDict(extra="allow")

    a: int


class Table(TypedDict):
    """A table."""

    rows: list[Row]


def _cycle() -> list[Any]:
    items: list[Any] = []
    items.append(items)
    return items


def _deep() -> list[Any]:
    items: list[Any] = []
    for _ in range(100_000):
        items = [items]
    return items


BAD_OUTPUTS = [
    pytest.param(int, lambda: 10**5000, id="int-beyond-the-str-limit"),
    pytest.param(float, lambda: math.nan, id="nan"),
    pytest.param(list[float], lambda: [1.0, math.inf], id="infinity-in-a-list"),
    pytest.param(Reading, lambda: Reading(value=math.nan), id="nan-in-a-model"),
    pytest.param(dict[str, Any], lambda: {"x": -math.inf}, id="infinity-under-any"),
    pytest.param(list[Any], lambda: [10**5000], id="huge-int-under-any"),
    pytest.param(list[Any], _cycle, id="cycle"),
    pytest.param(list[Any], _deep, id="too-deep"),
    pytest.param(bytes, lambda: b"\xff\xfe", id="bytes-not-utf8"),
    pytest.param(Row, lambda: {"id": 1, "extra": "dropped?"}, id="typeddict-extra-key"),
    pytest.param(Table, lambda: {"rows": [{"id": 1, "x": 2}]}, id="nested-typeddict-extra-key"),
    pytest.param(Reading, lambda: {"value": 1.0, "unit": "C"}, id="model-from-a-dict-extra-key"),
    pytest.param(list[Spot], lambda: [{"x": 1, "y": 2}], id="dataclass-from-a-dict-extra-key"),
]


@pytest.mark.parametrize(("annotation", "make"), BAD_OUTPUTS)
def test_values_json_cannot_carry_are_bad_output(annotation: Any, make: Callable[[], Any]) -> None:
    """A value that is not JSON (or loses keys on the way) is TOOL_RUNTIME_BAD_OUTPUT_VALUE,
    and the result prints and serialises."""

    def body() -> Any:
        """Return something JSON cannot carry."""
        return make()

    body.__annotations__["return"] = annotation
    result = run(tool(name="bad_output")(body).run({}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE, result
    assert result.value is None
    json.dumps(result.to_dict(), allow_nan=False)
    repr(result)
    str(result)


GOOD_OUTPUTS = [
    pytest.param(str, "NaN Infinity -Infinity", id="words-that-look-like-numbers"),
    pytest.param(str, "7" * 5000, id="long-digit-string"),
    pytest.param(float, 1e308, id="largest-floats"),
    pytest.param(int, 10**4000, id="long-int-within-the-limit"),
    pytest.param(dict[str, Any], {"NaN": [1, 2.5, "Infinity"]}, id="numbers-and-words"),
    pytest.param(Open, {"a": 1, "b": 2}, id="model-that-allows-extra-keys"),
]


@pytest.mark.parametrize(("annotation", "value"), GOOD_OUTPUTS)
def test_values_near_the_line_are_kept(annotation: Any, value: Any) -> None:
    """Text that merely looks like NaN or a long number, and big finite numbers, succeed."""

    def body() -> Any:
        """Return a value near the line."""
        return value

    body.__annotations__["return"] = annotation
    result = run(tool(name="good_output")(body).run({}))
    assert result.is_success, result.error
    assert result.value == value


# ---------------------------------------------------------------------------------------------
# Arguments of run() itself


def test_a_whole_number_of_seconds_is_a_timeout() -> None:
    """``timeout=5`` (an int) is as good as ``5.0``."""
    assert run(lookup.run({"n": 2}, timeout=5)).value == 2


WRONG_CALL_IDS = [
    pytest.param({"call_id": 7}, TypeError, id="call-id-int"),
    pytest.param({"call_id": b"id"}, TypeError, id="call-id-bytes"),
]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        *WRONG_CALL_IDS,
        pytest.param({"timeout": "5"}, TypeError, id="timeout-text"),
        pytest.param({"timeout": True}, TypeError, id="timeout-bool"),
        pytest.param({"timeout": 0}, ValueError, id="timeout-zero"),
        pytest.param({"timeout": -1.0}, ValueError, id="timeout-negative"),
        pytest.param({"timeout": math.nan}, ValueError, id="timeout-nan"),
        pytest.param({"timeout": math.inf}, ValueError, id="timeout-infinite"),
        pytest.param({"timeout": 10**400}, ValueError, id="timeout-beyond-any-float"),
        pytest.param({"timeout": 10**5000}, ValueError, id="timeout-beyond-repr"),
    ],
)
@pytest.mark.parametrize("entry", ["tool.run", "toolkit.run"])
def test_wrong_run_options_raise_before_the_body_runs(
    options: dict[str, Any], error: type[Exception], entry: str
) -> None:
    """A call_id or timeout of the wrong kind is the caller's bug: raised up front."""
    ran: list[bool] = []

    @tool
    async def counted() -> int:
        """Count calls."""
        ran.append(True)
        return 1

    toolkit = Toolkit("options", [counted])
    if entry == "tool.run":
        call = counted.run({}, **options)
    else:
        call = toolkit.run("counted", {}, **options)
    with pytest.raises(error):
        run(call)
    assert ran == []


@pytest.mark.parametrize(("options", "error"), WRONG_CALL_IDS)
@pytest.mark.parametrize("name", ["counted", "unknown"])
def test_the_runner_checks_the_call_id_up_front(
    options: dict[str, Any], error: type[Exception], name: str
) -> None:
    """The runner raises for a wrong call_id before its policies or the body see the call."""
    ran: list[bool] = []

    @tool
    async def counted() -> int:
        """Count calls."""
        ran.append(True)
        return 1

    runner = ToolRunner(Toolkit("options", [counted]))
    with pytest.raises(error):
        run(runner.run(name, {}, **options))
    assert ran == []
    assert runner.stats().calls == 0


# ---------------------------------------------------------------------------------------------
# Async bodies that ignore their cancellation


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

    result = run(stubborn.run({}))
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

    result = run(immortal.run({}), within=5.0)
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

    assert run(spinning.run({}), within=5.0).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


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

    assert run(careful.run({})).value == "done"


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

    assert run(messy.run({})).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


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

    run(scenario())


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

    assert run(odd.run({}), within=5.0).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


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

    assert run(clinging.run({}), within=5.0).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


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

    run(scenario())
    assert seen == ["second cancellation"]


# ---------------------------------------------------------------------------------------------
# Sync bodies that outlive their calls


def test_lingering_bodies_do_not_starve_other_sync_tools() -> None:
    """Sync bodies stuck past their limit do not keep an unrelated sync tool from running."""
    release = threading.Event()

    @tool(timeout=0.05)
    def stuck() -> int:
        """Block until released."""
        release.wait(30)
        return 1

    @tool(timeout=5.0)
    def quick(n: Annotated[int, "A number."]) -> int:
        """Return the number."""
        return n

    async def scenario() -> list[ToolResult]:
        stuck_results = await asyncio.gather(*(stuck.run({}) for _ in range(DEFAULT_THREADS + 2)))
        return [*stuck_results, await quick.run({"n": 7})]

    try:
        results = run(scenario())
    finally:
        release.set()
    assert {r.kind for r in results[:-1]} == {ErrorKind.TOOL_RUNTIME_TIMEOUT}
    assert results[-1].value == 7


def test_run_sync_returns_while_a_body_lingers() -> None:
    """``run_sync`` returns at the limit: nothing waits for the body's thread to finish."""
    release = threading.Event()

    @tool(timeout=0.05)
    def stuck() -> int:
        """Block until released."""
        release.wait(30)
        return 1

    outcome: list[ToolResult] = []
    thread = threading.Thread(target=lambda: outcome.append(stuck.run_sync({})), daemon=True)
    thread.start()
    thread.join(10)
    release.set()
    assert not thread.is_alive(), "run_sync() waited for the lingering body"
    assert outcome[0].kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


@pytest.mark.parametrize("from_helpers", [False, True], ids=["own-thread", "helper-threads"])
def test_sync_tools_calling_sync_tools_never_deadlock(from_helpers: bool) -> None:
    """Sync tools taking every thread of tdk's pool at once, each calling another sync tool
    with ``run_sync()`` (from its own thread, or from threads it starts): every call returns
    (a thread blocked on the calls it made lends a place for them)."""
    from tdk._execution.threads import _POOL

    callers = _POOL.max_workers
    all_started = threading.Barrier(callers, timeout=10)

    @tool
    def inner(x: Annotated[int, "A number."]) -> int:
        """Add one."""
        return x + 1

    def add_one(x: int) -> int:
        return int(inner.run_sync({"x": x}).value)

    @tool
    def outer(x: Annotated[int, "A number."]) -> int:
        """Add two, through another tool."""
        all_started.wait()  # every place is taken before any inner call
        if not from_helpers:
            return add_one(add_one(x))
        with concurrent.futures.ThreadPoolExecutor(2) as helpers:
            return sum(helpers.map(add_one, (x, x))) - x

    async def scenario() -> list[Any]:
        results = await asyncio.gather(*(outer.run({"x": n}) for n in range(callers)))
        return [result.value for result in results]

    assert run(scenario(), within=30) == [n + 2 for n in range(callers)]


def test_a_body_that_never_started_counts_no_attempt() -> None:
    """A sync call whose time ran out while every thread was busy never runs its body, and
    its result says ``attempts == 0``."""
    release = threading.Event()
    busy = threading.Semaphore(0)
    started: list[str] = []

    @tool
    def occupy() -> int:
        """Hold a thread until released."""
        busy.release()
        release.wait(30)
        return 1

    @tool(timeout=0.05)
    def late() -> int:
        """Never get a thread."""
        started.append("late")
        return 1

    async def scenario() -> ToolResult:
        holders = [asyncio.create_task(occupy.run({})) for _ in range(DEFAULT_THREADS)]
        for _ in holders:
            await asyncio.to_thread(busy.acquire, True, 10)
        result = await late.run({})
        release.set()
        await asyncio.gather(*holders)
        return result

    try:
        result = run(scenario())
    finally:
        release.set()
    assert result.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert result.attempts == 0
    assert started == []


_ONE_STR_SCHEMA: Final = core_schema.str_schema()


class _Code(str):
    """A string type whose schema is one object, shared wherever the type appears."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return _ONE_STR_SCHEMA


def test_a_type_sharing_one_schema_between_its_parts_runs() -> None:
    """An output type whose parts share one core schema object is defined and runs."""

    @tool
    def pair() -> tuple[_Code, _Code]:
        """Return two codes."""
        return (_Code("a"), _Code("b"))

    assert pair.run_sync({}).value == ["a", "b"]


def _claims_str(value: object) -> Any:
    return Annotated[str, PlainSerializer(lambda _: value, return_type=str)]


class _Reading(BaseModel):
    label: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ratio(self) -> str:  # it says str; it is not (a model's own config writes NaN as null)
        return 10**5000  # type: ignore[return-value]


class _Wrapped(BaseModel):
    label: str

    @model_serializer
    def dump(self) -> dict[str, str]:
        return {"label": 10**5000}  # type: ignore[dict-item]


class _Labelled(BaseModel):
    label: _claims_str(10**5000)  # type: ignore[valid-type]
    note: str


_MODEL_ARGS: Final = {"label": "a", "note": "b"}


@pytest.mark.parametrize(
    ("returns", "value"),
    [
        pytest.param(_claims_str(math.inf), "a", id="plain-serializer-infinity"),
        pytest.param(_claims_str(10**5000), "a", id="plain-serializer-huge-int"),
        pytest.param(
            Annotated[str, WrapSerializer(lambda v, h: math.nan, return_type=str)],
            "a",
            id="wrap-serializer-nan",
        ),
        pytest.param(_Reading, _MODEL_ARGS, id="computed-field"),
        pytest.param(_Wrapped, _MODEL_ARGS, id="model-serializer"),
        pytest.param(_Labelled, _MODEL_ARGS, id="nested-in-a-model"),
        pytest.param(
            Annotated[str, AfterValidator(lambda _: math.inf)], "a", id="validator-returns-a-float"
        ),
        pytest.param(
            Annotated[Any, WithJsonSchema({"type": "string"})],
            math.nan,
            id="json-schema-says-string",
        ),
        pytest.param(Union[str, SkipJsonSchema[Any]], [math.nan], id="left-out-of-json-schema"),  # noqa: UP007
        pytest.param(
            Annotated[int, WithJsonSchema({"type": "string"})], 10**5000, id="int-said-string"
        ),
    ],
)
def test_what_json_cannot_carry_is_bad_output_whatever_the_schema_says(
    returns: Any, value: Any
) -> None:
    """A value JSON cannot carry, where the output's JSON Schema has no number: code of the
    type's own returned it (a serializer, a validator, a computed field, where the type says
    string), or the JSON Schema says other than the type. A bad output, never a result that
    breaks ``json.dumps`` or ``repr``."""

    def body() -> Any:
        """Return a value."""
        return value

    body.__annotations__["return"] = returns
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic says the serializer returned a float
        result = tool(body).run_sync({})
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE
    json.dumps(result.to_dict(), allow_nan=False)


# ---------------------------------------------------------------------------------------------
# Malformed tdk errors


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

    result = run(raises.run({}, include_stacktrace=True))
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

    error = run(raises.run({})).error
    assert error is not None
    details = error.details
    assert (details["n"], details["r"], details["broken"]) == (3, 0.5, "<unreadable _Broken>")
    assert len(details["many"]) <= 10_000  # one budget for the whole of details
    assert details["many"]["..."] == "<cut: too many values>"
    assert details["<_Pair>"] == "pair"


def test_a_secret_in_a_long_key_of_details_is_redacted_whole() -> None:
    """A context secret in the text of a non-string key of details, past its 200th
    character, is redacted whole (the key is not cut before the redaction sees it)."""
    secret = "tok-4f9a1c7e2b8d6a3f0e5c"

    @tool
    def raises(context: ToolContext) -> int:
        """Raise with a long tuple key."""
        raise RetryableToolError("Try again.", details={("x" * 190, secret): "value"})

    error = run(raises.run({}, context=ToolContext(secrets={"api": secret}))).error
    assert error is not None
    (key,) = error.details
    assert secret[:4] not in key
    assert secret[-4:] not in key
    assert "[REDACTED]" in key


_ECHOES: Final[dict[str, Callable[[str], BaseException]]] = {
    "repr": KeyError,
    "repr-in-text": lambda value: KeyError(f"it's {value}"),
    "json": lambda value: ValueError(json.dumps({"detail": f"bad {value}"})),
    "php-json": lambda value: ValueError(json.dumps(value).replace("/", "\\/")),
    "go-json": lambda value: ValueError(_go_json(value)),
    "html": lambda value: ValueError(f"<p>{html.escape(value)}</p>"),
    "url-lower-hex": lambda value: ValueError(re.sub("%[0-9A-F]{2}", _lower, quote(value))),
    "bytes-repr": lambda value: ValueError(repr(value.encode())),
}


def _go_json(value: str) -> str:
    """What Go's ``encoding/json`` writes by default (HTML characters escaped)."""
    escaped = json.dumps(value, ensure_ascii=False)
    return escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _lower(escape: re.Match[str]) -> str:
    return escape[0].lower()


@pytest.mark.parametrize(
    "secret",
    [
        "Xy7\\kLm9PqR2sT5v",
        "Xy7\"kLm9'PqR2sT5v",
        "Xy7\nkLm9PqR2sT5v",
        "Xy7'kLm9\\PqR2sT5v",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYkLm9KEY",
        "pa55&w0rd<kLm9>xyz",
        "caf\u00e9-kLm9-s3cr3t",
    ],
    ids=[
        "backslash",
        "both-quotes",
        "newline",
        "quote-and-backslash",
        "slashes",
        "amp-lt-gt",
        "accent",
    ],
)
@pytest.mark.parametrize("how", list(_ECHOES))
def test_a_context_secret_is_scrubbed_in_its_escaped_forms(secret: str, how: str) -> None:
    """A context secret with characters that writers escape, shown escaped (as ``repr()``
    writes it in a ``KeyError``, as PHP's, Go's or Python's JSON, HTML or a URL write it in an
    upstream's echo), is scrubbed too."""

    @tool
    def fails(context: ToolContext) -> int:
        """Fail with the secret in the text, escaped."""
        raise _ECHOES[how](context.secrets["api"])

    error = run(fails.run({}, context=ToolContext(secrets={"api": secret}))).error
    assert error is not None
    shown = f"{error.message}\n{error.developer_message}\n{json.dumps(error.details)}"
    assert "kLm9" not in shown, shown


def test_a_group_of_thousands_of_types_names_a_few() -> None:
    """An exception group of 20,000 types (with 64 KB names) gives a short message."""

    def many() -> list[Exception]:
        return [type(f"E{n}" + "x" * 65_536, (Exception,), {})() for n in range(20_000)]

    @tool
    def fails() -> int:
        """Fail in many ways."""
        raise ExceptionGroup("many", many())

    error = run(fails.run({})).error
    assert error is not None
    assert error.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert len(error.message) < 2_000
    assert error.message.endswith("and 19990 other types).")
    assert len(error.details["exceptions"]) == 10


def test_thousands_of_exception_types_keep_the_type_table_small() -> None:
    """Mapping exceptions of ever new types (classes made on the fly) remembers at most a
    bounded number of them."""
    from tdk._failures.table import _MAX_REMEMBERED_TYPES, _ROW_OF_TYPE, to_tool_error

    for n in range(_MAX_REMEMBERED_TYPES + 10):
        error = to_tool_error(type(f"Made{n}", (LookupError,), {})())
        assert error.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert len(_ROW_OF_TYPE) <= _MAX_REMEMBERED_TYPES


def test_a_malformed_error_says_which_fields() -> None:
    """The developer message names what could not be read."""

    @tool
    def raises() -> int:
        """Raise a malformed error."""
        raise _Lazy("nope")

    error = run(raises.run({})).error
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
    results = run(runner.run_many([("broken", {}), ("slow", {}), ("broken", {})]))
    assert [r.kind for r in results] == [
        ErrorKind.TOOL_RUNTIME_FATAL,
        None,
        ErrorKind.TOOL_RUNTIME_FATAL,
    ]
    assert results[1].value == "finished"


# ---------------------------------------------------------------------------------------------
# Arguments from a hostile model


@tool
def lookup(n: Annotated[int, "A number."]) -> int:
    """Return the number."""
    return n


def test_a_64kb_key_is_cut_in_the_message() -> None:
    """An unknown 64 KB key is named, cut to a hundred characters: the model is told which
    key without its context being flooded."""
    result = run(lookup.run('{"n": 1, "' + "k" * 65_536 + '": 1}'))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.error is not None
    assert len(result.error.message) < 400
    assert "'" + "k" * 100 + "... [65436 more characters]' is not a parameter" in (
        result.error.message
    )


def test_thousands_of_unknown_keys_list_twenty() -> None:
    """Twenty problems are described, and the message says how many more there were."""
    arguments = {"n": 1, **{f"k{i}": i for i in range(5_000)}}
    result = run(lookup.run(arguments))
    assert result.error is not None
    assert len(result.error.details["errors"]) == 20
    assert "and 4980 more problems" in result.error.message
    assert len(result.error.message) < 2_000


def test_a_direct_call_reraises_a_malformed_error_as_it_is() -> None:
    """Calling a tool directly re-raises even an error whose ``__init__`` skipped ours."""

    @tool
    def raises() -> int:
        """Raise a malformed error."""
        raise _Lazy("nope")

    with pytest.raises(_Lazy) as caught:
        raises()
    assert caught.value.tool_name == "raises"


def test_header_pairs_in_details_lose_their_credentials() -> None:
    """``details={"h": list(headers.items())}`` keeps the header names and loses the key."""
    key = "k-1234567890abcdef"

    @tool
    def raises() -> int:
        """Raise with the request's headers in the details."""
        headers = {"x-api-key": key, "accept": "application/json"}
        raise RetryableToolError("Try again.", details={"h": list(headers.items())})

    result = run(raises.run({}))
    assert result.error is not None
    assert result.error.details["h"] == [
        ["x-api-key", "[REDACTED]"],
        ["accept", "application/json"],
    ]
    assert key not in json.dumps(result.to_dict())


# ---------------------------------------------------------------------------------------------
# Exceptions that lie


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

    result = run(raises.run({}))
    assert result.error is not None
    json.dumps(result.to_dict())
    result.error.to_log_line()


# ---------------------------------------------------------------------------------------------
# Bodies waiting on tasks


async def _stubborn_child(stop: asyncio.Event) -> None:
    """A task that ignores cancellation until told to stop (so that the test loop can end)."""
    while not stop.is_set():
        try:
            await stop.wait()
        except asyncio.CancelledError:
            continue


@pytest.mark.parametrize("gathered", [False, True], ids=["a-task", "a-gather"])
def test_a_body_waiting_on_a_stubborn_task_is_let_go_of(gathered: bool) -> None:
    """A body awaiting a task that ignores its cancellation is a timeout at the limit plus the
    grace, not a call that never returns."""
    stop = asyncio.Event()

    @tool(timeout=0.1)
    async def waits() -> int:
        """Await a stubborn task."""
        if gathered:
            await asyncio.gather(_stubborn_child(stop), asyncio.sleep(0))
        else:
            await asyncio.create_task(_stubborn_child(stop))
        return 1

    async def scenario() -> ToolResult:
        try:
            return await waits.run({})
        finally:
            stop.set()

    assert run(scenario(), within=5.0).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def test_a_deadline_lets_go_of_a_body_waiting_on_a_stubborn_task() -> None:
    """The same under a runner's deadline."""
    stop = asyncio.Event()

    @tool
    async def waits() -> int:
        """Await a stubborn task."""
        await asyncio.create_task(_stubborn_child(stop))
        return 1

    runner = ToolRunner(Toolkit("stubborn", [waits]), deadline=0.1)

    async def scenario() -> ToolResult:
        try:
            return await runner.run("waits", {})
        finally:
            stop.set()

    assert run(scenario(), within=5.0).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def test_a_body_waiting_on_a_task_gets_its_result_under_a_limit() -> None:
    """Under a time limit, a body awaiting a well-behaved task gets the task's result."""

    async def child() -> int:
        await asyncio.sleep(0.01)
        return 41

    @tool(timeout=5.0)
    async def waits() -> int:
        """Await a child task."""
        return await asyncio.create_task(child()) + 1

    assert run(waits.run({})).value == 42


def test_cancelling_the_caller_cancels_the_task_its_body_waits_on() -> None:
    """Cancelling the caller of a time-limited body cancels the task the body waits on, as
    asyncio does, and the caller ends cancelled."""
    started = asyncio.Event()
    child_cancelled: list[bool] = []

    async def child() -> None:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            child_cancelled.append(True)
            raise

    @tool(timeout=5.0)
    async def waits() -> int:
        """Await a child task."""
        await asyncio.create_task(child())
        return 1

    async def scenario() -> None:
        call = asyncio.create_task(waits.run({}))
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    run(scenario())
    assert child_cancelled == [True]


@pytest.mark.parametrize("limit", [None, 30.0], ids=["no-limit", "limited"])
def test_a_cancellation_arriving_as_the_awaited_task_ends_reaches_the_body(
    limit: float | None,
) -> None:
    """The caller is cancelled in the loop iteration in which the task its body awaits ends:
    as with a plain ``await``, the body gets the CancelledError, not the task's result."""
    went_on: list[bool] = []

    async def quick() -> int:
        await asyncio.sleep(0.01)
        return 42

    async def scenario() -> None:
        inner = asyncio.create_task(quick())

        async def waits() -> int:
            """Await a task, then go on."""
            value = await inner
            went_on.append(True)
            return value

        body = tool(waits) if limit is None else tool(timeout=limit)(waits)
        call = asyncio.create_task(body.run({}))
        inner.add_done_callback(lambda _: call.cancel())  # runs before the body wakes
        with pytest.raises(asyncio.CancelledError):
            await call

    run(scenario())
    assert went_on == []


def test_a_cancellation_right_after_the_awaited_task_woke_the_body_ends_the_call() -> None:
    """The caller is cancelled in the loop iteration in which the task its body awaits ends,
    after the body was woken: limited or not, the call ends cancelled. (Under a limit the body
    resumes one iteration later, as docs/execution.md says, so the cancellation reaches it
    before it goes on.)"""

    async def outcome(limit: float | None) -> tuple[str, list[bool]]:
        went_on: list[bool] = []

        async def quick() -> int:
            await asyncio.sleep(0.01)
            return 42

        inner = asyncio.create_task(quick())

        async def waits() -> int:
            """Await a task, then go on."""
            value = await inner
            went_on.append(True)
            await asyncio.sleep(0)
            return value

        body = tool(waits) if limit is None else tool(timeout=limit)(waits)
        call = asyncio.create_task(body.run({}))
        await asyncio.sleep(0)  # the body waits for the task first: it is woken first
        inner.add_done_callback(lambda _: call.cancel())
        try:
            result = await call
        except asyncio.CancelledError:
            return "cancelled", went_on
        return f"returned {result.value}", went_on

    async def both() -> list[tuple[str, list[bool]]]:
        return [await outcome(None), await outcome(30.0)]

    plain, limited = run(both())
    assert plain == ("cancelled", [True])
    assert limited == ("cancelled", [])


@pytest.mark.parametrize("limit", [None, 30.0], ids=["no-limit", "limited"])
def test_a_cancellation_reaches_the_awaited_task_before_it_starts(limit: float | None) -> None:
    """The caller is cancelled right after the body's first step, while the task it awaits has
    not started: that task is cancelled before it runs, limited or not (a task that started
    could catch the cancellation and hand the body a value)."""
    started: list[bool] = []

    async def child() -> int:
        started.append(True)
        try:
            await asyncio.sleep(1)
        except asyncio.CancelledError:
            return 9  # what a task that had started could do
        return 3

    @tool
    async def waits() -> int:
        """Await a child task."""
        return await asyncio.create_task(child())

    async def scenario() -> str:
        call = asyncio.create_task(waits.run({}, timeout=limit))
        await asyncio.sleep(0)  # the body has made its first step
        call.cancel()
        try:
            await call
        except asyncio.CancelledError:
            return "cancelled"
        return "returned"

    assert run(scenario()) == "cancelled"
    assert started == []


@pytest.mark.parametrize("limit", [None, 0.2], ids=["no-limit", "limited"])
def test_a_caller_cancelled_before_the_limit_ends_cancelled_however_long_the_cleanup(
    limit: float | None,
) -> None:
    """The caller is cancelled well before the limit, and the gathering its body awaits takes
    longer than the limit to honour that: the call ends cancelled (not a timeout)."""

    async def slow_to_honour() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)  # a long cleanup, past the limit and its grace
            raise

    @tool
    async def waits() -> int:
        """Await a gathering."""
        await asyncio.gather(slow_to_honour(), slow_to_honour())
        return 1

    async def scenario() -> str:
        call = asyncio.create_task(waits.run({}, timeout=limit))
        await asyncio.sleep(0.05)
        call.cancel()
        try:
            result = await call
        except asyncio.CancelledError:
            return "cancelled"
        return str(result.kind)

    assert run(scenario()) == "cancelled"


def test_an_anyio_cancel_scope_in_the_body_ends_its_wait_on_a_task() -> None:
    """An anyio scope (which cancels its task again on every loop iteration until the scope
    is left) around ``await task`` in a limited body ends the wait at the scope's deadline,
    and the body returns its value."""

    @tool(timeout=30.0)
    async def gives_up() -> int:
        """Give up on a slow task after 10 ms."""
        with anyio.move_on_after(0.01):
            await asyncio.create_task(asyncio.sleep(30))
        return 6

    result = run(gives_up.run({}))
    assert (result.is_success, result.value) == (True, 6)


def test_a_callers_anyio_cancel_scope_ends_a_limited_call() -> None:
    """An anyio-based host (the MCP SDK, Starlette) cancels a limited call whose body awaits a
    task: the call ends at the host's deadline, not at the tool's limit."""

    @tool(timeout=30.0)
    async def slow() -> int:
        """Await a slow task."""
        await asyncio.create_task(asyncio.sleep(30))
        return 1

    async def scenario() -> bool:
        with anyio.move_on_after(0.01) as scope:
            await slow.run({})
        return scope.cancelled_caught

    assert run(scenario()) is True


class _BareYield:
    """Yields a task without ``await``: the mistake asyncio reports at once."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task

    def __await__(self) -> Any:
        yield self.task


async def _idle() -> None:
    await asyncio.sleep(0.01)


def _foreign_task() -> Any:
    other = asyncio.new_event_loop()  # never runs: its task never ends
    try:
        return other.create_task(_idle())
    finally:
        other.close()


@pytest.mark.parametrize(
    "awaited",
    [
        pytest.param(_foreign_task, id="a-task-of-another-loop"),
        pytest.param(lambda: _BareYield(asyncio.create_task(_idle())), id="a-bare-yield"),
    ],
)
@pytest.mark.parametrize("limit", [None, 30.0], ids=["no-limit", "limited"])
def test_what_asyncio_refuses_to_wait_for_fails_at_once_under_a_limit(
    awaited: Callable[[], Any], limit: float | None
) -> None:
    """A body awaiting what asyncio will not wait for gets asyncio's RuntimeError at once,
    limited or not (not a wait for the whole limit)."""

    async def mistaken() -> int:
        """Await something asyncio will not wait for."""
        await asyncio.sleep(0)
        return int(await awaited())

    body = tool(mistaken) if limit is None else tool(timeout=limit)(mistaken)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the foreign coroutine is never awaited
        result = run(body.run({}))
        gc.collect()
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.error.cause == "RuntimeError"


def test_a_body_waiting_again_after_passing_a_cancellation_on_sees_it() -> None:
    """The limit cancels a body waiting on a task that takes the cancellation: the body
    sees it in the task's outcome and may carry on (within the grace)."""
    seen: list[str] = []

    async def child() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("child")
            raise

    @tool(timeout=0.05)
    async def waits() -> int:
        """Await a child; carry on when it is cancelled."""
        try:
            await asyncio.create_task(child())
        except asyncio.CancelledError:
            seen.append("body")
        return 1

    result = run(waits.run({}))
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert seen == ["child", "body"]


class _Duck:
    """The least a future must offer for a task to wait on it (what a plain ``await`` needs):
    no ``done()``, no ``remove_done_callback()``."""

    _asyncio_future_blocking = False

    def __init__(self, loop: asyncio.AbstractEventLoop, after: float) -> None:
        self._loop = loop
        self._callbacks: list[Any] = []
        self._done = False
        loop.call_later(after, self._finish)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def _finish(self) -> None:
        self._done = True
        for callback in self._callbacks:
            self._loop.call_soon(callback, self)

    def add_done_callback(self, callback: Any, *, context: Any = None) -> None:
        self._callbacks.append(callback)

    def cancel(self, msg: Any = None) -> bool:
        return False

    def result(self) -> int:
        return 7

    def __await__(self) -> Any:
        if not self._done:
            self._asyncio_future_blocking = True
            yield self
        return self.result()


class _DuckThatCannotCancel(_Duck):
    def cancel(self, msg: Any = None) -> bool:
        raise RuntimeError("cannot cancel")


class _DuckWithoutALoop(_Duck):
    def get_loop(self) -> asyncio.AbstractEventLoop:
        raise RuntimeError("no loop")


def test_cancelling_a_call_waiting_on_a_future_that_cannot_cancel() -> None:
    """The caller of a limited body waiting on a future-like object whose ``cancel()`` fails
    is cancelled all the same: the body gets the cancellation at once."""
    waiting = asyncio.Event()

    @tool(timeout=30.0)
    async def waits() -> int:
        """Await a future that cannot be cancelled."""
        loop = asyncio.get_running_loop()
        loop.call_soon(waiting.set)
        return int(await _DuckThatCannotCancel(loop, 30))

    async def scenario() -> None:
        call = asyncio.create_task(waits.run({}))
        await waiting.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    run(scenario())


def test_a_future_that_cannot_name_its_loop_in_the_grace_is_let_go_of() -> None:
    """In the grace, a body waiting on a future-like object that cannot say its loop is let
    go of at once (asyncio would not wait for it either)."""

    @tool(timeout=0.05)
    async def cleans_up() -> int:
        """Wait on an odd future in cleanup."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await _DuckWithoutALoop(asyncio.get_running_loop(), 30)
        return 1

    result = run(cleans_up.run({}))
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


@pytest.mark.parametrize("limit", [None, 30.0, 0.05], ids=["no-limit", "limited", "in-grace"])
def test_a_future_like_object_of_the_bodys_own_works_under_a_limit(limit: float | None) -> None:
    """A future-like object that works with a plain ``await`` works under a limit too, and
    in the grace after it (when the body waits for it again to clean up)."""

    async def waits() -> int:
        """Await a duck-typed future (again after a cancellation)."""
        loop = asyncio.get_running_loop()
        try:
            await asyncio.sleep(0.2 if limit == 0.05 else 0)
        except asyncio.CancelledError:
            await _Duck(loop, 0.01)  # cleanup within the grace
            raise
        return int(await _Duck(loop, 0.01))

    body = tool(waits) if limit is None else tool(timeout=limit)(waits)
    result = run(body.run({}))
    if limit == 0.05:
        assert result.error.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    else:
        assert (result.is_success, result.value) == (True, 7)


async def _own_task() -> None:
    await asyncio.sleep(0)
    await asyncio.current_task()  # type: ignore[misc]


@pytest.mark.parametrize("limit", [None, 30.0], ids=["no-limit", "limited"])
def test_a_body_awaiting_its_own_task_fails_at_once(limit: float | None) -> None:
    """A body awaiting the task it runs in gets asyncio's RuntimeError at once, limited or
    not (not a wait for the limit, then a cancellation of its caller)."""

    async def mistaken() -> int:
        """Await the task it runs in."""
        await _own_task()
        return 1

    body = tool(mistaken) if limit is None else tool(timeout=limit)(mistaken)
    result = run(body.run({}))
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_FATAL
    assert result.error.cause == "RuntimeError"


class _AnyioScope:
    """``anyio.move_on_after`` entered as an async context manager."""

    def __init__(self, seconds: float) -> None:
        self.scope = anyio.move_on_after(seconds)

    async def __aenter__(self) -> Any:
        return self.scope.__enter__()

    async def __aexit__(self, *exc: Any) -> Any:
        return self.scope.__exit__(*exc)


@pytest.mark.parametrize(
    "scope",
    [
        pytest.param(lambda: asyncio.timeout(0.3), id="asyncio-timeout"),
        pytest.param(lambda: _AnyioScope(0.3), id="anyio-scope"),
    ],
)
def test_a_body_let_go_of_leaves_nothing_armed_on_its_caller(scope: Any) -> None:
    """A stubborn body whose cleanup awaits (``finally: await ...``) is closed whole when tdk
    lets go of it: a timeout or cancel scope it entered never cancels its caller later, and
    the caller's own anyio scope exits cleanly."""

    @tool(timeout=0.05)
    async def stubborn() -> int:
        """Ignore cancellation under a scope of its own; await in cleanup."""
        async with scope():
            try:
                while True:
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.sleep(10)
            finally:
                await asyncio.sleep(0)

    async def scenario() -> str:
        with anyio.CancelScope():  # the caller's own scope (an anyio-based host)
            result = await stubborn.run({})
        await asyncio.sleep(0.6)  # past the body's own 0.3 s: it must not cancel us
        return str(result.kind)

    assert run(scenario()) == "TOOL_RUNTIME_TIMEOUT"


def test_a_failed_task_group_then_an_overrun() -> None:
    """A body that handled a failed TaskGroup, then runs past its limit: a timeout. On 3.11
    and 3.12 the group leaves a cancellation request counted on the task that nobody made
    (gh-116720), which tdk cannot tell from a caller's: the call ends cancelled there, as
    docs/execution.md says (a caller's cancellation must never be lost)."""

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("child failed")

    @tool(timeout=0.2)
    async def overruns() -> str:
        """Handle a failed group, then sleep too long."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(fails())
                group.create_task(asyncio.sleep(10))
        except* ValueError:
            pass
        await asyncio.sleep(10)
        return "slept"

    async def scenario() -> str:
        try:
            result = await overruns.run({})
        except asyncio.CancelledError:
            outcome = "cancelled"
        else:
            outcome = str(result.kind)
        task = asyncio.current_task()
        assert task is not None
        while task.cancelling():  # (the leaked request, where the bug is: not ours to keep)
            task.uncancel()
        return outcome

    expected = "TOOL_RUNTIME_TIMEOUT" if sys.version_info >= (3, 13) else "cancelled"
    assert run(scenario()) == expected


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

    assert run(scenario()) == "cancelled"


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

    result = run(fails_to_clean_up.run({}))
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT


def test_a_body_stopping_the_loop_of_run_sync_still_gets_a_result() -> None:
    """A body that stops the loop ``run_sync()`` runs it in (``loop.stop()``): the call goes
    on to its end and returns a result (it does not raise)."""

    @tool(timeout=5)
    async def stopper() -> int:
        """Stop the loop it runs on."""
        asyncio.get_running_loop().stop()
        await asyncio.sleep(0.01)
        asyncio.get_running_loop().stop()
        return 1

    result = _run_sync_within(stopper)
    assert (result.is_success, result.value) == (True, 1)


@pytest.mark.parametrize("which", ["run_in_new_loop", "run_blocking"])
def test_tdks_own_loop_refuses_to_run_inside_another(which: str) -> None:
    """tdk's loops, asked to run a call from inside a running loop, raise at once (they never
    spin, nor wait for a loop that the wait would block)."""
    from tdk._execution import loop as _loop

    async def inner() -> int:
        return 1

    async def scenario() -> None:
        with pytest.raises(RuntimeError, match="inside a running one"):
            getattr(_loop, which)(inner())

    run(scenario())


# ---------------------------------------------------------------------------------------------
# run_sync: returning at the limit whatever the body leaves behind


def _run_sync_within(body: Tool[..., Any], seconds: float = 10.0) -> ToolResult:
    outcome: list[ToolResult] = []
    thread = threading.Thread(target=lambda: outcome.append(body.run_sync({})), daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"run_sync() still running after {seconds} s"
    return outcome[0]


def test_run_sync_returns_while_a_to_thread_call_is_stuck() -> None:
    """A body stuck in ``asyncio.to_thread`` past its limit: ``run_sync`` returns the timeout
    (``asyncio.run`` would wait for the default executor's thread)."""
    release = threading.Event()

    @tool(timeout=0.1)
    async def stuck() -> int:
        """Block in a thread of the loop's default executor."""
        await asyncio.to_thread(release.wait, 30)
        return 1

    try:
        assert _run_sync_within(stuck).kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    finally:
        release.set()


def test_run_sync_returns_while_a_task_left_behind_ignores_cancellation() -> None:
    """A body that leaves a task ignoring cancellation behind: ``run_sync`` returns once the
    leftover has had its second to end (``asyncio.run`` would wait for it forever)."""
    stop = threading.Event()

    async def stubborn() -> None:
        while not stop.is_set():
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                continue

    @tool
    async def leaves_a_task() -> int:
        """Start two tasks and return: one ends when cancelled, the other does not."""
        leaves_a_task.left = [  # type: ignore[attr-defined]
            asyncio.create_task(stubborn()),
            asyncio.create_task(asyncio.sleep(30)),
        ]
        return 1

    try:
        assert _run_sync_within(leaves_a_task).value == 1
    finally:
        stop.set()


def test_a_timeout_error_of_the_body_after_waiting_is_its_own() -> None:
    """A ``TimeoutError`` the body raises itself (after waiting once) is mapped by the table,
    not taken for the call's own time limit."""

    @tool(timeout=5.0)
    async def gives_up() -> int:
        """Wait, then give up on its own."""
        await asyncio.sleep(0)
        raise TimeoutError("the upstream took too long")

    error = run(gives_up.run({})).error
    assert error is not None
    assert error.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert error.developer_message == "TimeoutError: the upstream took too long"


# ---------------------------------------------------------------------------------------------
# A caller's cancellation that the body swallows


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
    assert run(scenario()) == expected


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

    assert run(handles.run({})).value == "handled"


# ---------------------------------------------------------------------------------------------
# Text that is not UTF-8


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

    toolkit = Toolkit("surrogates", [calls, lookup])
    results = [
        run(calls.run({})),
        run(toolkit.run("calls\ud800", {})),
        run(lookup.run({"n": 1, "k\udfff": 2})),
    ]
    for result in results:
        assert result.error is not None
        result.model_dump_json()
        json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
        result.error.to_log_line().encode("utf-8")
    assert "\ufffd" in results[0].error.message  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: RetryPolicy(max_delay=10**400), id="retry-max-delay"),
        pytest.param(lambda: RetryPolicy(multiplier=10**5000), id="retry-multiplier"),
        pytest.param(lambda: RateLimit(calls=1, period=10**400), id="rate-limit-period"),
        pytest.param(lambda: Bulkhead(max_wait=10**400), id="bulkhead-max-wait"),
        pytest.param(lambda: CircuitBreaker(reset_timeout=10**400), id="breaker-reset"),
        pytest.param(lambda: ToolRunner(Toolkit("k", [lookup]), deadline=10**400), id="deadline"),
    ],
)
def test_settings_beyond_any_float_are_value_errors(make: Callable[[], Any]) -> None:
    """A duration or factor too big for a float is refused with ``ValueError``, as documented
    (``OverflowError`` escaped before)."""
    with pytest.raises(ValueError, match="finite"):
        make()


def test_a_tool_timeout_beyond_any_float_is_a_definition_problem() -> None:
    """``@tool(timeout=10**5000)`` is an invalid-timeout problem, whose text names the value."""
    with pytest.raises(ToolDefinitionError) as caught:

        @tool(timeout=10**5000)
        def forever() -> int:
            """Never time out."""
            return 1

    assert "an int of 16610 bits" in caught.value.message


def test_defaults_json_cannot_carry_stay_out_of_the_schema() -> None:
    """A default of NaN, or of an integer too long to write out, is left out of the schema (as
    pydantic leaves out a default it cannot render): a host can write the schema as JSON."""

    @tool
    def odd_defaults(
        n: Annotated[int | None, "A number."] = 10**5000,
        x: Annotated[float, "A ratio."] = math.nan,
        k: Annotated[int, "A plain default."] = 3,
    ) -> int:
        """Accept odd defaults."""
        return k

    properties = odd_defaults.definition.input_schema["properties"]
    assert "default" not in properties["n"]
    assert "default" not in properties["x"]
    assert properties["k"]["default"] == 3
    json.dumps(odd_defaults.definition.model_dump(mode="json"), allow_nan=False)
    assert run(odd_defaults.run({})).value == 3


@pytest.mark.parametrize(
    "raised", ["GeneratorExit", "asyncio.CancelledError", "type('Odd', (BaseException,), {})"]
)
def test_a_module_raising_a_base_exception_is_a_load_error(
    tmp_path: Path, raised: str, request: pytest.FixtureRequest
) -> None:
    """A module that raises a BaseException other than an exit or an interrupt while it is
    imported is a ToolkitLoadError, as any other exception is."""
    name = f"hostile_import_{request.node.callspec.id.replace('-', '_').replace('.', '_')}"
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    path = tmp_path / f"{name}.py"
    path.write_text(f"import asyncio\nraise {raised}()\n")
    with pytest.raises(ToolkitLoadError) as caught:
        Toolkit.from_path(path)
    assert "could not import module" in caught.value.message


@pytest.mark.parametrize(
    "secret", ["tok|en value-123456", "tok{en}^[x]`é-123456", "100%-sure|token value"]
)
def test_a_secret_in_a_url_path_is_scrubbed_as_httpx_encodes_it(secret: str) -> None:
    """A context secret in a URL path leaves no trace in whatever form httpx writes it there
    (it leaves ``|^[]`` as they are and encodes spaces, braces and non-ASCII)."""

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"message": f"no bot {request.url.raw_path!r}"})

    @tool
    def calls(context: ToolContext) -> int:
        """Call an API with the secret in the path."""
        with tdk.http.install(httpx.Client(transport=httpx.MockTransport(upstream))) as client:
            client.get(f"https://api.example.com/bot{context.get_secret('BOT')}/getMe")
        return 1

    result = run(calls.run({}, context=ToolContext(secrets={"BOT": secret})))
    text = json.dumps(result.to_dict())
    assert result.error is not None
    assert result.error.details["url"] == "https://api.example.com/bot[REDACTED]/getMe"
    encoded = httpx.URL(f"https://h/{secret}").raw_path.decode()[1:]
    assert encoded not in text


class _Unreadable(dict[str, Any]):
    """Arguments whose items cannot be read."""

    def items(self) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")

    def __iter__(self) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")

    def keys(self) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")


def test_arguments_that_cannot_be_read_are_bad_input() -> None:
    """Arguments whose reading raises are the caller's bad input, not the tool's failure; the
    exception's text is not repeated."""
    result = run(lookup.run(_Unreadable(n=1)))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.attempts == 0
    assert "sk-live" not in json.dumps(result.to_dict())


class _ArgumentsMapping(Mapping[str, Any]):
    """A mapping (not a dict) whose items cannot be read."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")

    def __iter__(self) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")

    def __len__(self) -> int:
        return 1


def test_a_mapping_that_cannot_be_read_is_bad_input() -> None:
    """The same for a ``Mapping`` that is not a dict."""
    result = run(lookup.run(_ArgumentsMapping()))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.error is not None
    assert result.error.message.startswith(
        "Invalid arguments: The arguments could not be read (RuntimeError)"
    )
    assert "sk-live" not in json.dumps(result.to_dict())


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

    result = run(raises.run({}))
    assert result.error is not None
    assert result.error.error == expected
    json.dumps(result.to_dict())


class _NoRepr:
    """A value whose repr fails."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_timeout_whose_repr_fails_is_named_by_its_type() -> None:
    """The TypeError for a wrong timeout names the value by its type when its repr fails."""
    with pytest.raises(TypeError, match="not a _NoRepr"):
        run(lookup.run({"n": 1}, timeout=_NoRepr()))  # type: ignore[arg-type]


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
        result = run(unclosable.run({}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_TIMEOUT
    assert "ignored 100 requests to close" in caplog.text


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("search\u2028WARNING tdk: forged", id="line-separator"),
        pytest.param("search\x85WARNING tdk: forged", id="next-line"),
        pytest.param("exe.\u202etxt", id="right-to-left-override"),
    ],
)
def test_an_unknown_tool_name_cannot_split_or_reorder_the_log_line(
    caplog: pytest.LogCaptureFixture, name: str
) -> None:
    """A name the model made up, repeated in the failure's log record, leaves it one line
    with nothing hidden: what would split the line or reorder its text is escaped."""
    toolkit = Toolkit("hostile", [lookup])
    with caplog.at_level(logging.WARNING, logger="tdk"):
        result = run(toolkit.run(name, {}))
    assert result.kind is ErrorKind.TOOL_NOT_FOUND
    [record] = [r for r in caplog.records if r.name == "tdk"]
    line = record.getMessage()
    assert len(line.splitlines()) == 1
    assert not set(line) & {"\u2028", "\x85", "\u202e"}


class _ExplodingHandler(logging.Handler):
    """A handler that fails outright (as logging's own error report does when stderr is
    closed: ``ValueError: I/O operation on closed file``)."""

    def handle(self, record: logging.LogRecord) -> bool:
        raise ValueError("I/O operation on closed file.")


def test_a_failing_log_handler_never_costs_a_call_its_result() -> None:
    """The failure's record goes to a handler that raises: the call still returns its
    result (execute's promise: only the caller's cancellation and exits escape)."""

    @tool
    async def fails() -> int:
        """Fail."""
        raise RuntimeError("boom")

    handler = _ExplodingHandler()
    tdk_logger = logging.getLogger("tdk")
    tdk_logger.addHandler(handler)
    try:
        result = run(fails.run({}))
    finally:
        tdk_logger.removeHandler(handler)
    assert result.kind is ErrorKind.TOOL_RUNTIME_FATAL
