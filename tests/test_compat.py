"""Each read of another library's internals (``tdk._compat``) still reads what tdk means, in
the versions installed; and each public fallback gives the same answer.

A test here fails when a library moves or changes an internal tdk reads: the accessor would
then take its fallback silently, slower, and the benchmarks would be the only ones to notice.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from typing import Annotated, Any

import httpx
import mcp
import mcp.shared._stream_protocols as mcp_streams
import pytest
import uvicorn
from _http_server import serve
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp_types import ListToolsResult, PaginatedRequestParams
from pydantic import BaseModel, field_validator, model_validator
from typing_extensions import get_protocol_members

import tdk.http
from tdk import ToolResult, tool
from tdk._compat import frames, httpx_auth, otel_globals
from tdk._compat import mcp_streams as our_streams
from tdk._compat.mcp_connection import connection_of
from tdk._compat.pydantic_slots import (
    SLOTS,
    construct_maker,
    has_validators,
    model_slots,
    slot_maker,
)
from tdk._compat.running_task import TASK_OF, internal_task_of
from tdk._compat.sse_shutdown import app_status, shutdown_flag_restored
from tdk.errors import ErrorInfo, UpstreamAuthError

# --- asyncio: the running task --------------------------------------------------------------


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="current_task is C from 3.12")
def test_the_task_table_is_read_on_3_11() -> None:
    assert internal_task_of() is not None
    assert TASK_OF is not asyncio.current_task


def _task_answers() -> list[tuple[object, object]]:
    """(TASK_OF, asyncio.current_task) in a task, in a callback outside any task, and in a
    task of a second loop running in another thread at the same time."""
    answers: list[tuple[object, object]] = []

    def outside() -> None:
        loop = asyncio.get_running_loop()
        answers.append((TASK_OF(loop), asyncio.current_task(loop)))

    async def inside(ready: threading.Event | None) -> None:
        loop = asyncio.get_running_loop()
        answers.append((TASK_OF(loop), asyncio.current_task()))
        loop.call_soon(outside)
        await asyncio.sleep(0)
        if ready is not None:
            ready.set()

    ready = threading.Event()
    other = threading.Thread(target=asyncio.run, args=(inside(ready),))
    other.start()
    ready.wait(30)
    asyncio.run(inside(None))
    other.join(30)
    return answers


def test_the_running_task_is_asyncio_current_task() -> None:
    answers = _task_answers()
    assert len(answers) == 4
    assert all(ours is theirs for ours, theirs in answers)
    assert sum(ours is None for ours, _ in answers) == 2  # the two callbacks outside a task
    assert len({id(ours) for ours, _ in answers if ours is not None}) == 2


def test_tool_calls_see_their_cancellation_through_the_task_read() -> None:
    """Execution reads the running task to tell the caller's cancellation from the body's."""
    started = asyncio.Event()

    @tool
    async def waits(n: Annotated[int, "A number."]) -> int:
        """Wait until cancelled."""
        started.set()
        await asyncio.sleep(3600)
        return n

    async def cancel_it() -> None:
        running = asyncio.ensure_future(waits.run({"n": 1}))
        await started.wait()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(running, 30)

    asyncio.run(cancel_it())


# --- pydantic: the model slots --------------------------------------------------------------


def test_base_model_keeps_four_slots_with_setters() -> None:
    assert SLOTS is not None
    assert model_slots() == SLOTS


RECORDS: list[Any] = [
    pytest.param(
        ToolResult,
        {
            "tool": "t",
            "call_id": "c",
            "value": [1],
            "error": None,
            "attempts": 2,
            "duration_ms": 1.5,
        },
        id="result",
    ),
    pytest.param(ErrorInfo, ErrorInfo.from_exception(KeyError("k"), "t").__dict__, id="error"),
]


def _same(made: BaseModel, model: type[BaseModel], values: dict[str, Any]) -> None:
    validated = model.model_validate(values)
    assert made == validated
    assert made.__dict__ == validated.__dict__
    assert list(made.__dict__) == list(model.model_fields)
    assert made.model_fields_set == validated.model_fields_set == set(model.model_fields)
    assert made.__pydantic_extra__ is validated.__pydantic_extra__ is None
    assert made.__pydantic_private__ is validated.__pydantic_private__ is None
    assert made.model_dump(mode="json") == validated.model_dump(mode="json")


@pytest.mark.parametrize(("model", "values"), RECORDS)
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda model: slot_maker(model, model_slots()), id="slots"),
        pytest.param(construct_maker, id="fallback-model-construct"),
    ],
)
def test_a_maker_sets_what_validation_and_model_construct_set(
    make: Callable[[type[BaseModel]], Any], model: type[BaseModel], values: dict[str, Any]
) -> None:
    made = make(model)(dict(values))
    _same(made, model, dict(values))
    constructed = model.model_construct(**values)
    assert made.__dict__ == constructed.__dict__
    assert made.model_fields_set == constructed.model_fields_set


class _Plain(BaseModel):
    x: int


class _FieldValidated(BaseModel):
    x: int

    @field_validator("x")
    @classmethod
    def _positive(cls, value: int) -> int:
        return abs(value)


class _ModelValidated(BaseModel):
    x: int

    @model_validator(mode="after")
    def _checked(self) -> _ModelValidated:
        return self


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        pytest.param(_Plain, False, id="plain"),
        pytest.param(_FieldValidated, True, id="field-validator"),
        pytest.param(_ModelValidated, True, id="model-validator"),
        pytest.param(ToolResult, False, id="tool-result"),
        pytest.param(ErrorInfo, False, id="error-info"),
    ],
)
def test_the_decorators_record_tells_validators(model: type[BaseModel], expected: bool) -> None:
    assert has_validators(model) is expected


# --- httpx: a client's callable auth ----------------------------------------------------------


def test_function_auth_is_what_a_client_keeps_for_a_callable() -> None:
    with httpx.Client(auth=lambda request: request) as client:
        assert type(client.auth) is httpx_auth.FUNCTION_AUTH
    assert httpx_auth.function_auth() is httpx_auth.FUNCTION_AUTH


def test_a_callable_auth_flow_sends_its_request_once() -> None:
    """What tdk relies on: the flow of a client's callable auth sends one request, the one the
    callable returns, and asks for no response body."""
    assert httpx_auth.FUNCTION_AUTH is not None
    seen: list[httpx.Request] = []
    auth = httpx_auth.FUNCTION_AUTH(lambda request: seen.append(request) or request)  # type: ignore[call-arg]
    request = httpx.Request("GET", "https://api.example.com/v1/me")
    flow = auth.sync_auth_flow(request)
    assert next(flow) is request
    with pytest.raises(StopIteration):
        flow.send(httpx.Response(401, request=request))
    assert seen == [request]
    assert not auth.requires_response_body


@pytest.mark.parametrize("use", ["sync", "async"])
def test_a_401_through_a_callable_auth_is_classified(use: str) -> None:
    """A client with ``auth=callable`` over a real server: the 401 is the upstream's answer."""

    def signed(request: httpx.Request) -> httpx.Request:
        request.headers["Authorization"] = "Bearer nope"
        return request

    with serve() as base:  # (``/echo`` answers 401)
        if use == "sync":
            with (
                tdk.http.install(httpx.Client(auth=signed)) as client,
                pytest.raises(UpstreamAuthError),
            ):
                client.get(f"{base}/echo")
        else:

            async def call() -> None:
                client = tdk.http.install(httpx.AsyncClient(auth=signed))
                async with client:
                    with pytest.raises(UpstreamAuthError):
                        await client.get(f"{base}/echo")

            asyncio.run(call())


# --- OpenTelemetry: the provider globals (each case in a fresh process: a provider is set once)


OTEL_CASES = [
    pytest.param("", (True, True, True), id="none-set"),
    pytest.param(
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())",
        (False, False, True),
        id="tracer-set",
    ),
    pytest.param(
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "metrics.set_meter_provider(MeterProvider())",
        (False, True, False),
        id="meter-set",
    ),
]

OTEL_PROBE = """
from opentelemetry import metrics, trace
from tdk._compat.otel_globals import stand_in_meters, unset_check
{setup}
unset = unset_check()
print(unset(), isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider),
      stand_in_meters(metrics.get_meter_provider()))
"""


@pytest.mark.parametrize(("setup", "expected"), OTEL_CASES)
def test_the_provider_globals_say_what_the_api_says(
    setup: str, expected: tuple[bool, bool, bool]
) -> None:
    """(neither set, per the globals; no tracer provider, per the API; the meter stand-in)."""
    code = OTEL_PROBE.format(setup=textwrap.dedent(setup))
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == [str(each) for each in expected]


def test_meter_providers_that_are_set_are_not_the_stand_in() -> None:
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.sdk.metrics import MeterProvider

    assert not otel_globals.stand_in_meters(NoOpMeterProvider())
    assert not otel_globals.stand_in_meters(MeterProvider())


# --- frames: the code that applied @tool ----------------------------------------------------


def _decorator_reading_the_frame() -> Any:
    return frames.calling_frame()


def _decorator_walking_the_frames() -> Any:
    return frames.walked_frame(1)


@pytest.mark.parametrize(
    "decorator",
    [
        pytest.param(_decorator_reading_the_frame, id="sys-getframe"),
        pytest.param(_decorator_walking_the_frames, id="fallback-inspect"),
    ],
)
def test_the_calling_frame_is_the_code_applying_a_decorator(decorator: Callable[[], Any]) -> None:
    assert decorator() is inspect.currentframe()


def test_a_tool_in_a_function_resolves_its_local_names() -> None:
    """``@tool`` reads the locals of the code applying it (a local model in an annotation)."""

    class Point(BaseModel):
        x: int

    @tool
    def where(point: Annotated[Point, "A point."]) -> int:
        """Where the point is."""
        return point.x

    assert where.run_sync({"point": {"x": 3}}).value == 3


# --- mcp: the stream protocols ---------------------------------------------------------------


def _members(protocol: type) -> dict[str, list[str]]:
    return {
        name: list(inspect.signature(getattr(protocol, name)).parameters)
        for name in sorted(get_protocol_members(protocol))
    }


@pytest.mark.parametrize("name", ["ReadStream", "WriteStream"])
def test_the_stream_protocols_have_the_sdks_members(name: str) -> None:
    assert _members(getattr(our_streams, name)) == _members(getattr(mcp_streams, name))


# --- mcp: the connection of a request ---------------------------------------------------------


def test_a_requests_connection_is_read_from_its_session() -> None:
    """``connection_of`` reads the connection the SDK gives a request's session (the one a
    list-changed notification goes out on)."""
    seen: list[object] = []

    async def listed(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        seen.append(connection_of(ctx.session))
        return ListToolsResult(tools=[])

    async def scenario() -> None:
        async with mcp.Client(Server("compat", on_list_tools=listed), mode="legacy") as client:
            await client.list_tools()

    asyncio.run(scenario())
    [connection] = seen
    assert isinstance(connection, Connection)


# --- sse-starlette: the process's shutdown flag ------------------------------------------------


def test_the_sse_shutdown_flag_is_where_tdk_reads_it() -> None:
    """sse-starlette keeps its process-wide shutdown flag where ``tdk._compat.sse_shutdown``
    puts it back (a bool, clear while nothing shuts down), and uvicorn's handler sets it."""
    status = app_status()
    assert status is not None
    assert status.should_exit is False
    assert uvicorn.Server.handle_exit is status.handle_exit
    with shutdown_flag_restored():
        status.should_exit = True  # (what a signal to a serving uvicorn does)
    assert status.should_exit is False
