"""OpenTelemetry spans and metrics of tool calls (``tdk/_execution/telemetry.py``), read back
through the SDK's in-memory span exporter and metric reader.

How the providers are set without leaking into the rest of the suite: OpenTelemetry lets an
application set its global providers once per process (``set_tracer_provider`` warns and
ignores a second call), and every other test module must run with NO provider, tdk's fast
path. So this module never calls the public setters. The fixtures put the providers straight
into the API's own globals (``opentelemetry.trace._TRACER_PROVIDER`` and
``opentelemetry.metrics._internal._METER_PROVIDER``, each with its ``..._SET_ONCE`` guard) for
the length of ONE test, and put the previous values back afterwards (None and the untouched
guards): between two tests of this module, as after it, nothing is set, whatever the order
the tests run in. The public setters would also bind the API's proxy meters for good, which
is why they are not used. One ``TracerProvider`` (with a ``SimpleSpanProcessor`` over an
``InMemorySpanExporter``, cleared before each test) lives as long as the module; each test
gets a fresh ``MeterProvider`` with its own ``InMemoryMetricReader``, so that counts start
at zero. One more leak is closed at the end of the module: a ``ProxyTracer`` made at import
time (the ``mcp`` SDK keeps one) remembers the real tracer the first time it sees a
provider; those bound to this module's provider are unbound, so the MCP tests that follow
record nothing either.

Why not a subprocess per scenario: the spans would have to cross as JSON and lose their
types, every scenario would pay an interpreter start with the SDK's import, and the module
would still need the same care to prove that nothing leaks; swapping the globals in process
is a few attribute writes, and the fixtures check on entry and on exit that the globals are
unset. The two tests of tdk's own loading (the API missing, or keeping its providers
elsewhere) swap ``tdk._execution.telemetry``'s private state with ``monkeypatch``, which puts it
back.

Tests of the runner use a fake clock and sleep (``FakeTime``): no test sleeps for real.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, TypeVar

import mcp
import opentelemetry.metrics
import pytest
from _runner_support import FakeTime
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from opentelemetry import trace
from opentelemetry.metrics import _internal as metrics_state
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import ProxyTracer, SpanKind, StatusCode
from opentelemetry.util._once import Once

from tdk import (
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
from tdk._execution import telemetry
from tdk._execution.execute import execute
from tdk.errors import ErrorKind, RetryableToolError, UpstreamServerError
from tdk.hosts import mcp as tdk_mcp

T = TypeVar("T")

#: Bound of every scenario, in seconds: a hang fails the test instead of the run.
SCENARIO_TIMEOUT = 30.0
SECRET = "planted-secret-9f3a"
FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=False)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` in a new event loop, failing it after ``SCENARIO_TIMEOUT`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, SCENARIO_TIMEOUT))


# --- providers -------------------------------------------------------------------------------


def _guard(*, used: bool) -> Once:
    """A ``..._SET_ONCE`` guard: already used while a provider is in place (so that a stray
    public setter warns, as it would in an application), fresh otherwise."""
    guard = Once()
    if used:
        guard.do_once(lambda: None)
    return guard


@contextmanager
def providers_set(tracers: TracerProvider | None, meters: MeterProvider | None) -> Iterator[None]:
    """The API's global providers replaced by ``tracers`` and ``meters`` (None: unset) for the
    length of the block, then put back as they were. Test plumbing: the API's private globals,
    since its public setters work once per process."""
    saved = (
        trace._TRACER_PROVIDER,
        trace._TRACER_PROVIDER_SET_ONCE,
        metrics_state._METER_PROVIDER,
        metrics_state._METER_PROVIDER_SET_ONCE,
    )
    trace._TRACER_PROVIDER = tracers
    trace._TRACER_PROVIDER_SET_ONCE = _guard(used=tracers is not None)
    metrics_state._METER_PROVIDER = meters
    metrics_state._METER_PROVIDER_SET_ONCE = _guard(used=meters is not None)
    try:
        yield
    finally:
        (
            trace._TRACER_PROVIDER,
            trace._TRACER_PROVIDER_SET_ONCE,
            metrics_state._METER_PROVIDER,
            metrics_state._METER_PROVIDER_SET_ONCE,
        ) = saved


def _unbind_proxy_tracers(provider: TracerProvider) -> int:
    """Forget the real tracer each ``ProxyTracer`` took from ``provider`` (they keep the first
    one they see for good); how many were bound to it."""
    unbound = 0
    for each in gc.get_objects():
        if type(each) is ProxyTracer:
            real = each._real_tracer
            if real is not None and getattr(real, "span_processor", None) is (
                provider._active_span_processor
            ):
                each._real_tracer = None
                unbound += 1
    return unbound


@dataclass
class Tracing:
    """The module's tracer provider and the exporter holding its finished spans."""

    provider: TracerProvider
    exporter: InMemorySpanExporter


@pytest.fixture(scope="module")
def tracing() -> Iterator[Tracing]:
    """One ``TracerProvider`` for the module, set nowhere yet (see :func:`otel`); at the end,
    shut down, with the proxy tracers that took a tracer from it unbound."""
    assert trace._TRACER_PROVIDER is None, "a tracer provider was set before this module"
    assert metrics_state._METER_PROVIDER is None, "a meter provider was set before this module"
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing(provider, exporter)
    _unbind_proxy_tracers(provider)
    provider.shutdown()
    assert trace._TRACER_PROVIDER is None
    assert metrics_state._METER_PROVIDER is None


@dataclass
class Otel:
    """What one test recorded: its finished spans and its metrics."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        """The spans finished so far, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        """The one finished span called ``name``."""
        found = [each for each in self.spans() if each.name == name]
        assert len(found) == 1, [each.name for each in self.spans()]
        return found[0]

    def points(self, metric: str) -> list[tuple[dict[str, Any], float]]:
        """``(attributes, value)`` of each data point of ``metric`` (the count, for a
        histogram)."""
        data = self.reader.get_metrics_data()
        found: list[tuple[dict[str, Any], float]] = []
        for resource in [] if data is None else data.resource_metrics:
            for scope in resource.scope_metrics:
                for each in scope.metrics:
                    if each.name != metric:
                        continue
                    for point in each.data.data_points:
                        value = getattr(point, "count", None)
                        if value is None:
                            value = point.value
                        found.append((dict(point.attributes or {}), value))
        return found

    def text(self) -> str:
        """Everything recorded, as JSON text: each span's ``to_json()`` and the metrics'."""
        data = self.reader.get_metrics_data()
        metrics_text = "" if data is None else data.to_json()
        return "\n".join([*(each.to_json() for each in self.spans()), metrics_text])


@pytest.fixture
def otel(tracing: Tracing) -> Iterator[Otel]:
    """The module's tracer provider and a fresh meter provider set for this test only."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    tracing.exporter.clear()
    with providers_set(tracing.provider, meters):
        yield Otel(tracing.exporter, reader)
    meters.shutdown()
    tracing.exporter.clear()


# --- tools -----------------------------------------------------------------------------------


@tool
async def add(a: Annotated[int, "A number."], b: Annotated[int, "Another."] = 1) -> int:
    """Add two numbers."""
    return a + b


@tool
async def picky(word: Annotated[str, "A word."]) -> str:
    """Ask for another word."""
    raise RetryableToolError(
        f"'{word}' is not known.",
        retry_after_ms=250,
        additional_prompt_content="Try a shorter word.",
    )


@tool
async def broken() -> int:
    """Fail with an exception no one caught."""
    raise ValueError("the body's own text")


class Script:
    """A tool (``flaky``) that raises the given errors in turn (None: succeed), then succeeds."""

    def __init__(self, *outcomes: BaseException | None) -> None:
        self.outcomes = iter(outcomes)
        self.calls = 0
        self.current_spans: list[int] = []

        @tool(idempotent=True)
        async def flaky(n: Annotated[int, "A number."] = 1) -> int:
            """Fail as scripted, then succeed."""
            self.calls += 1
            self.current_spans.append(trace.get_current_span().get_span_context().span_id)
            outcome = next(self.outcomes, None)
            if outcome is not None:
                raise outcome
            return n

        self.tool: Tool[..., Any] = flaky


def outage() -> UpstreamServerError:
    """An upstream 503."""
    return UpstreamServerError("The service is down.", status_code=503)


def runner_for(tools: list[Tool[..., Any]], time: FakeTime, **policies: Any) -> ToolRunner:
    """A runner of ``tools`` on fake time."""
    return ToolRunner(Toolkit("test", tools), clock=time.clock, sleep=time.sleep, **policies)


def events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    """``(name, attributes)`` of each event of ``span``."""
    return [(each.name, dict(each.attributes or {})) for each in span.events]


def parent_id(span: ReadableSpan) -> int | None:
    """The span id of the parent of ``span`` (None for a root)."""
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    """The span id of ``span``."""
    context = span.context
    assert context is not None
    return context.span_id


def trace_id(span: ReadableSpan) -> int:
    """The trace id of ``span``."""
    context = span.context
    assert context is not None
    return context.trace_id


# --- 1. tool.run -----------------------------------------------------------------------------

CALL_SPAN_BASE = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.type": "function",
}

FAILURES = [
    pytest.param(
        add,
        {"a": "not a number"},
        ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE,
        id="bad_arguments",
    ),
    pytest.param(picky, {"word": "abracadabra"}, ErrorKind.TOOL_RUNTIME_RETRY, id="retryable"),
    pytest.param(broken, {}, ErrorKind.TOOL_RUNTIME_FATAL, id="uncaught_exception"),
]


@pytest.mark.parametrize("call_id", ["call-7", None], ids=["with_call_id", "without_call_id"])
def test_tool_run_success_is_one_span(otel: Otel, call_id: str | None) -> None:
    """A successful tool.run is one INTERNAL span with the GenAI attributes and no status."""
    result = run(add.run({"a": 2}, call_id=call_id))

    assert result.value == 3
    [span] = otel.spans()
    assert span.name == "execute_tool add"
    assert span.kind is SpanKind.INTERNAL
    expected = {**CALL_SPAN_BASE, "gen_ai.tool.name": "add", "tdk.attempts": 1}
    if call_id is not None:
        expected["gen_ai.tool.call.id"] = call_id
    assert dict(span.attributes or {}) == expected
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()
    assert span.parent is None


@pytest.mark.parametrize(("fixture", "arguments", "kind"), FAILURES)
def test_tool_run_failure_marks_the_span(
    otel: Otel, fixture: Tool[..., Any], arguments: dict[str, Any], kind: ErrorKind
) -> None:
    """A failed tool.run: error.type is the kind, the status ERROR with the model's message."""
    result = run(fixture.run(arguments, call_id="call-9"))

    assert result.error is not None
    assert result.error.kind is kind
    [span] = otel.spans()
    assert span.name == f"execute_tool {fixture.name}"
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        **CALL_SPAN_BASE,
        "gen_ai.tool.name": fixture.name,
        "gen_ai.tool.call.id": "call-9",
        "tdk.attempts": result.attempts,
        "error.type": kind.value,
    }
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == result.error.message
    assert span.events == ()


def test_uncaught_exception_text_is_not_the_status(otel: Otel) -> None:
    """The status of an uncaught exception is tdk's message for the model, not its text."""
    run(broken.run({}))

    [span] = otel.spans()
    assert span.status.description == "An unhandled ValueError was raised by the tool."
    assert "the body's own text" not in span.to_json()


def test_span_is_current_while_the_body_runs(otel: Otel) -> None:
    """Spans the body makes are children of its call: the call's span is current in it."""
    script = Script(None)

    run(script.tool.run({}))

    [span] = otel.spans()
    assert script.current_spans == [span_id(span)]


def test_calls_inside_a_span_are_its_children(otel: Otel) -> None:
    """A call made inside the application's own span is a child of it, in the same trace."""

    async def scenario() -> int:
        with otel_tracer().start_as_current_span("agent step") as step:
            await add.run({"a": 1})
            return step.get_span_context().span_id

    step_id = run(scenario())

    call = otel.span("execute_tool add")
    assert parent_id(call) == step_id
    assert trace_id(call) == trace_id(otel.span("agent step"))


def otel_tracer() -> trace.Tracer:
    """A tracer of the provider in place (the application's side of a test)."""
    return trace.get_tracer_provider().get_tracer("test")


# --- 2. Toolkit.run --------------------------------------------------------------------------


def test_toolkit_run_of_a_known_tool_is_the_tool_span(otel: Otel) -> None:
    """Toolkit.run of a tool (in any case) is the tool's one span, under its own name."""
    result = run(Toolkit("kit", [add]).run("ADD", {"a": 1}, call_id="c-1"))

    assert result.value == 2
    [span] = otel.spans()
    assert span.name == "execute_tool add"
    assert dict(span.attributes or {}) == {
        **CALL_SPAN_BASE,
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c-1",
        "tdk.attempts": 1,
    }


def test_toolkit_run_of_an_unknown_tool(otel: Otel) -> None:
    """An unknown name is a span with error.type TOOL_NOT_FOUND and the suggestion message;
    its metric series is ``_unknown``, whatever the name."""
    result = run(Toolkit("kit", [add]).run("addd", {"a": 1}, call_id="c-2"))

    assert result.error is not None
    [span] = otel.spans()
    assert span.name == "execute_tool addd"
    assert dict(span.attributes or {}) == {
        **CALL_SPAN_BASE,
        "gen_ai.tool.name": "addd",
        "gen_ai.tool.call.id": "c-2",
        "tdk.attempts": 0,
        "error.type": "TOOL_NOT_FOUND",
    }
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == result.error.message
    assert "Did you mean 'add'?" in result.error.message
    [(attributes, count)] = otel.points("tdk.tool.duration")
    # (a made-up name is no series of its own: a model could make up thousands)
    assert attributes == {"gen_ai.tool.name": "_unknown", "tdk.outcome": "TOOL_NOT_FOUND"}
    assert count == 1


def test_toolkit_run_of_a_name_holding_a_secret(otel: Otel) -> None:
    """A secret of the context in an unknown name is redacted in the span's name and
    attributes, as in the result."""
    context = ToolContext(secrets={"KEY": SECRET})

    result = run(Toolkit("kit", [add]).run(f"get_{SECRET}", {}, context=context))

    assert result.tool == "get_[REDACTED]"
    [span] = otel.spans()
    assert span.name == "execute_tool get_[REDACTED]"
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.name"] == "get_[REDACTED]"
    assert SECRET not in otel.text()


def test_long_names_and_call_ids_are_cut(otel: Otel) -> None:
    """An unknown name of 1000 characters is the result's cut name; a call id of 1000 is cut
    after 256 characters (with redact_text's marker)."""
    result = run(Toolkit("kit", [add]).run("x" * 1000, {}, call_id="y" * 1000))

    [span] = otel.spans()
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.name"] == result.tool
    assert span.name == f"execute_tool {result.tool}"
    assert len(result.tool) < 200
    assert span.attributes["gen_ai.tool.call.id"] == "y" * 256 + "... [744 more characters]"


@pytest.mark.parametrize(
    "hidden",
    ["\x1b", "\u2028", "\x85", "\u202e", "\u200b"],
    ids=["esc", "ls", "nel", "rlo", "zwsp"],
)
def test_names_and_call_ids_carry_no_hidden_characters(otel: Otel, hidden: str) -> None:
    """A name or call id a model made up, holding a control character, a line separator or
    a character that reorders or hides text, reaches the span with it replaced by U+FFFD."""
    run(Toolkit("kit", [add]).run(f"evil{hidden}name", {}, call_id=f"c{hidden}1"))

    [span] = otel.spans()
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.name"] == "evil\ufffdname"
    assert span.attributes["gen_ai.tool.call.id"] == "c\ufffd1"
    assert hidden not in span.name


# --- 3. ToolRunner ---------------------------------------------------------------------------


def test_runner_call_retried_once(otel: Otel) -> None:
    """A 503 then a success: one call span, two attempt children, a tdk.retry event."""
    script = Script(outage())
    time = FakeTime()
    runner = runner_for([script.tool], time, retry=FAST_RETRY)

    result = run(runner.run("flaky", {"n": 4}, call_id="c-3"))

    assert result.value == 4
    assert result.attempts == 2
    call = otel.span("execute_tool flaky")
    first = otel.span("attempt 1 flaky")
    second = otel.span("attempt 2 flaky")
    assert [each.name for each in otel.spans()] == [
        "attempt 1 flaky",
        "attempt 2 flaky",
        "execute_tool flaky",
    ]
    assert call.parent is None
    assert parent_id(first) == parent_id(second) == span_id(call)
    assert trace_id(first) == trace_id(second) == trace_id(call)
    assert dict(call.attributes or {}) == {
        **CALL_SPAN_BASE,
        "gen_ai.tool.name": "flaky",
        "gen_ai.tool.call.id": "c-3",
        "tdk.attempts": 2,
    }
    assert call.status.status_code is StatusCode.UNSET
    assert dict(first.attributes or {}) == {
        "gen_ai.tool.name": "flaky",
        "tdk.attempt": 1,
        "error.type": "UPSTREAM_RUNTIME_SERVER_ERROR",
        "http.response.status_code": 503,
    }
    assert first.status.status_code is StatusCode.ERROR
    assert first.status.description == "The service is down."
    assert dict(second.attributes or {}) == {"gen_ai.tool.name": "flaky", "tdk.attempt": 2}
    assert second.status.status_code is StatusCode.UNSET
    assert events(call) == [
        ("tdk.retry", {"tdk.wait_ms": 10, "error.type": "UPSTREAM_RUNTIME_SERVER_ERROR"})
    ]
    assert first.events == second.events == ()
    assert time.sleeps == [0.01]
    # The body sees its attempt's span as the current one.
    assert script.current_spans == [span_id(first), span_id(second)]


def test_runner_call_that_never_succeeds(otel: Otel) -> None:
    """Retries used up: every attempt and the call end ERROR with the last failure's kind."""
    script = Script(outage(), outage(), outage())
    runner = runner_for([script.tool], FakeTime(), retry=FAST_RETRY)

    result = run(runner.run("flaky"))

    assert result.error is not None
    call = otel.span("execute_tool flaky")
    assert call.attributes is not None
    assert call.attributes["error.type"] == "UPSTREAM_RUNTIME_SERVER_ERROR"
    assert call.status.status_code is StatusCode.ERROR
    assert call.status.description == result.error.message
    attempts = [each for each in otel.spans() if each.name.startswith("attempt ")]
    assert [each.name for each in attempts] == [f"attempt {n} flaky" for n in (1, 2, 3)]
    assert all(each.status.status_code is StatusCode.ERROR for each in attempts)
    assert [name for name, _ in events(call)] == ["tdk.retry", "tdk.retry"]
    assert [attributes["tdk.wait_ms"] for _, attributes in events(call)] == [10, 20]


@tool
async def create_issue(title: Annotated[str, "The title."]) -> str:
    """Create an issue (a write) on an upstream that is down."""
    raise UpstreamServerError("The tracker is down.", status_code=503, retry_after_ms=2000)


def outage_after(retry_after_ms: int | None = None) -> UpstreamServerError:
    """An upstream 503, asking for ``retry_after_ms``."""
    return UpstreamServerError(
        "The service is down.", status_code=503, retry_after_ms=retry_after_ms
    )


#: case -> (tool, runner options, attempts, why retries stopped).
STOPS: dict[str, tuple[Callable[[], Tool[..., Any]], dict[str, Any], int, str]] = {
    "a-write-not-repeated": (lambda: create_issue, {"retry": FAST_RETRY}, 1, "not_idempotent"),
    "the-deadline": (
        lambda: Script(outage_after(2000)).tool,
        {"retry": FAST_RETRY, "deadline": 1.0},
        1,
        "deadline",
    ),
    "attempts-used-up": (
        lambda: Script(outage_after(), outage_after(), outage_after()).tool,
        {"retry": FAST_RETRY},
        3,
        "max_attempts",
    ),
}


@pytest.mark.parametrize(
    ("make", "options", "attempts", "reason"), STOPS.values(), ids=STOPS.keys()
)
def test_the_call_span_says_how_retries_ended(
    otel: Otel,
    make: Callable[[], Tool[..., Any]],
    options: dict[str, Any],
    attempts: int,
    reason: str,
) -> None:
    """A runner's failed call span carries the HTTP status (semantic conventions), the
    attempts made and why no retry followed; each attempt span its own status."""
    made = make()
    runner = runner_for([made], FakeTime(), **options)

    result = run(runner.run(made.name, {"title": "t"} if made is create_issue else {}))

    assert result.attempts == attempts
    call = otel.span(f"execute_tool {made.name}")
    assert call.attributes is not None
    assert call.attributes["http.response.status_code"] == 503
    assert call.attributes["tdk.attempts"] == attempts
    assert call.attributes["tdk.retry.stopped"] == reason
    tried = [each for each in otel.spans() if each.name.startswith("attempt ")]
    assert len(tried) == attempts
    assert all((each.attributes or {})["http.response.status_code"] == 503 for each in tried)


def test_runner_without_policies_is_a_call_and_one_attempt(otel: Otel) -> None:
    """A plain runner call is two spans: the call and its one attempt; no events."""
    runner = runner_for([add], FakeTime())

    run(runner.run("add", {"a": 1}))

    assert [each.name for each in otel.spans()] == ["attempt 1 add", "execute_tool add"]
    assert all(each.events == () for each in otel.spans())


def test_runner_span_uses_the_tools_name(otel: Otel) -> None:
    """A runner's call named in another case is spanned under the tool's own name, as its
    attempts, its result and Toolkit.run's span are."""
    runner = runner_for([add], FakeTime())

    result = run(runner.run("ADD", {"a": 1}))

    assert result.tool == "add"
    names = sorted(each.name for each in otel.spans())
    assert names == ["attempt 1 add", "execute_tool add"]
    call = next(each for each in otel.spans() if each.name.startswith("execute_tool"))
    assert call.attributes is not None
    assert call.attributes["gen_ai.tool.name"] == "add"


def test_concurrent_calls_are_separate_spans(otel: Otel) -> None:
    """run_many: each call is a root span of its own, with its attempts under it."""
    script = Script(outage(), None, None)
    runner = runner_for([script.tool, add], FakeTime(), retry=FAST_RETRY)

    results = run(runner.run_many([("flaky", {"n": 1}), ("add", {"a": 1}), ("flaky", {"n": 2})]))

    assert [result.error for result in results] == [None, None, None]
    spans = otel.spans()
    calls = [each for each in spans if each.name.startswith("execute_tool ")]
    assert sorted(each.name for each in calls) == [
        "execute_tool add",
        "execute_tool flaky",
        "execute_tool flaky",
    ]
    assert all(each.parent is None for each in calls)
    assert len({trace_id(each) for each in calls}) == 3
    by_call = {
        span_id(call): sorted(each.name for each in spans if parent_id(each) == span_id(call))
        for call in calls
    }
    assert sorted(by_call.values()) == [
        ["attempt 1 add"],
        ["attempt 1 flaky"],
        ["attempt 1 flaky", "attempt 2 flaky"],
    ]


def test_rate_limited_call_waits_with_an_event(otel: Otel) -> None:
    """A call the limiter delays within max_wait has a tdk.rate_limit.wait event."""
    time = FakeTime()
    runner = runner_for([add], time, rate_limit=RateLimit(calls=1, period=0.05, max_wait=1.0))

    async def scenario() -> list[ToolResult]:
        return [await runner.run("add", {"a": n}) for n in (1, 2)]

    first, second = run(scenario())

    assert (first.value, second.value) == (2, 3)
    calls = [each for each in otel.spans() if each.name == "execute_tool add"]
    assert [events(each) for each in calls] == [[], [("tdk.rate_limit.wait", {"tdk.wait_ms": 50})]]
    assert all(each.status.status_code is StatusCode.UNSET for each in calls)
    assert time.sleeps == [pytest.approx(0.05)]


def test_refused_call_has_a_refusal_event(otel: Otel) -> None:
    """A call the limiter refuses: tdk.refused, error.type RATE_LIMITED, no attempt span."""
    runner = runner_for([add], FakeTime(), rate_limit=RateLimit(calls=1, period=60.0))

    async def scenario() -> ToolResult:
        await runner.run("add", {"a": 1})
        return await runner.run("add", {"a": 2}, call_id="c-4")

    refused = run(scenario())

    assert refused.error is not None
    assert refused.error.kind is ErrorKind.TOOL_RUNTIME_RATE_LIMITED
    second = [each for each in otel.spans() if each.name == "execute_tool add"][1]
    assert dict(second.attributes or {}) == {
        **CALL_SPAN_BASE,
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c-4",
        "tdk.attempts": 0,
        "error.type": "TOOL_RUNTIME_RATE_LIMITED",
    }
    assert second.status.status_code is StatusCode.ERROR
    assert second.status.description == refused.error.message
    assert events(second) == [("tdk.refused", {"error.type": "TOOL_RUNTIME_RATE_LIMITED"})]
    assert [each.name for each in otel.spans()].count("attempt 1 add") == 1  # the first's
    assert otel.points("tdk.tool.refusals") == [
        ({"gen_ai.tool.name": "add", "error.type": "TOOL_RUNTIME_RATE_LIMITED"}, 1)
    ]


def test_circuit_opening_and_closing(otel: Otel) -> None:
    """A circuit's changes are tdk.circuit events of the calls they happen in; the gauge
    follows (2 while open)."""
    script = Script(outage(), None)
    time = FakeTime()
    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=5.0)
    runner = runner_for([script.tool], time, circuit_breaker=breaker)

    async def scenario() -> list[ToolResult]:
        results = [await runner.run("flaky"), await runner.run("flaky")]
        gauge.append(otel.points("tdk.circuit.state"))
        time.now += 5.0
        results.append(await runner.run("flaky"))
        return results

    gauge: list[list[tuple[dict[str, Any], float]]] = []
    failed, refused, probe = run(scenario())

    assert failed.error is not None
    assert failed.error.kind is ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR
    assert refused.error is not None
    assert refused.error.kind is ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN
    assert probe.error is None
    calls = [each for each in otel.spans() if each.name == "execute_tool flaky"]
    name = {"gen_ai.tool.name": "flaky"}
    assert [events(each) for each in calls] == [
        [("tdk.circuit", {**name, "tdk.from": "closed", "tdk.to": "open"})],
        [("tdk.refused", {"error.type": "TOOL_RUNTIME_CIRCUIT_OPEN"})],
        [
            ("tdk.circuit", {**name, "tdk.from": "open", "tdk.to": "half_open"}),
            ("tdk.circuit", {**name, "tdk.from": "half_open", "tdk.to": "closed"}),
        ],
    ]
    assert [each.attributes.get("error.type") for each in calls if each.attributes] == [
        "UPSTREAM_RUNTIME_SERVER_ERROR",
        "TOOL_RUNTIME_CIRCUIT_OPEN",
        None,
    ]
    assert gauge == [[(name, 2)]]
    assert otel.points("tdk.circuit.state") == [(name, 0)]
    assert otel.points("tdk.tool.refusals") == [
        ({**name, "error.type": "TOOL_RUNTIME_CIRCUIT_OPEN"}, 1)
    ]


def test_circuit_half_open_gauge(otel: Otel) -> None:
    """While the probe of a half-open circuit runs, the gauge is 1."""
    time = FakeTime()
    seen: list[list[tuple[dict[str, Any], float]]] = []

    @tool(idempotent=True)
    async def probed() -> int:
        """Fail the first time; then report the gauge."""
        if not seen:
            seen.append([])
            raise outage()
        seen.append(otel.points("tdk.circuit.state"))
        return 1

    breaker = CircuitBreaker(failure_threshold=1, reset_timeout=5.0)
    runner = runner_for([probed], time, circuit_breaker=breaker)

    async def scenario() -> None:
        await runner.run("probed")
        time.now += 5.0
        await runner.run("probed")

    run(scenario())

    assert seen == [[], [({"gen_ai.tool.name": "probed"}, 1)]]
    assert otel.points("tdk.circuit.state") == [({"gen_ai.tool.name": "probed"}, 0)]


# --- 4. metrics ------------------------------------------------------------------------------


def test_duration_histogram_counts_by_tool_and_outcome(otel: Otel) -> None:
    """tdk.tool.duration counts calls by gen_ai.tool.name and tdk.outcome, in seconds."""

    async def scenario() -> None:
        await add.run({"a": 1})
        await add.run({"a": 2})
        await add.run({"a": "x"})
        await picky.run({"word": "w"})
        await Toolkit("kit", [add]).run("nope")

    run(scenario())

    points = {
        (attributes["gen_ai.tool.name"], attributes["tdk.outcome"]): count
        for attributes, count in otel.points("tdk.tool.duration")
    }
    assert points == {
        ("add", "success"): 2,
        ("add", "TOOL_RUNTIME_BAD_INPUT_VALUE"): 1,
        ("picky", "TOOL_RUNTIME_RETRY"): 1,
        ("_unknown", "TOOL_NOT_FOUND"): 1,
    }
    data = otel.reader.get_metrics_data()
    assert data is not None
    [metric] = [
        each
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for each in scope.metrics
        if each.name == "tdk.tool.duration"
    ]
    assert metric.unit == "s"
    assert all(point.sum < SCENARIO_TIMEOUT for point in metric.data.data_points)


def test_runner_metrics(otel: Otel) -> None:
    """A runner's call retried once counts once in tdk.tool.retries and once in the duration
    histogram (the call, not each attempt)."""
    runner = runner_for([Script(outage()).tool], FakeTime(), retry=FAST_RETRY)

    run(runner.run("flaky"))

    assert otel.points("tdk.tool.retries") == [({"gen_ai.tool.name": "flaky"}, 1)]
    assert otel.points("tdk.tool.duration") == [
        ({"gen_ai.tool.name": "flaky", "tdk.outcome": "success"}, 1)
    ]
    assert otel.points("tdk.tool.refusals") == []


def test_instruments_are_tdks(otel: Otel) -> None:
    """The instruments come from a meter named tdk, with tdk's version."""
    from tdk import __version__

    run(add.run({"a": 1}))

    data = otel.reader.get_metrics_data()
    assert data is not None
    scopes = {
        (scope.scope.name, scope.scope.version)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
    }
    assert scopes == {("tdk", __version__)}
    [span] = otel.spans()
    assert span.instrumentation_scope is not None
    assert (span.instrumentation_scope.name, span.instrumentation_scope.version) == (
        "tdk",
        __version__,
    )


@pytest.mark.parametrize(
    ("traced", "measured"), [(True, False), (False, True)], ids=["tracer_only", "meter_only"]
)
def test_one_provider_without_the_other(tracing: Tracing, traced: bool, measured: bool) -> None:
    """With only a tracer provider there are spans and no metrics; with only a meter provider,
    metrics and no span."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    tracing.exporter.clear()
    runner = runner_for([Script(outage()).tool], FakeTime(), retry=FAST_RETRY)
    breaker_runner = runner_for(
        [Script(outage()).tool], FakeTime(), circuit_breaker=CircuitBreaker(failure_threshold=1)
    )

    async def scenario() -> None:
        await add.run({"a": 1})
        await runner.run("flaky")
        await breaker_runner.run("flaky")
        await breaker_runner.run("flaky")

    try:
        with providers_set(tracing.provider if traced else None, meters if measured else None):
            assert telemetry.active() is not None
            run(scenario())
        recorded = Otel(tracing.exporter, reader)
        names = {each.name for each in recorded.spans()}
        metrics = {
            name
            for name in (
                "tdk.tool.duration",
                "tdk.tool.retries",
                "tdk.tool.refusals",
                "tdk.circuit.state",
            )
            if recorded.points(name)
        }
        if traced:
            assert "execute_tool add" in names
            assert "attempt 2 flaky" in names
            assert metrics == set()
        else:
            assert names == set()
            assert metrics == {
                "tdk.tool.duration",
                "tdk.tool.retries",
                "tdk.tool.refusals",
                "tdk.circuit.state",
            }
    finally:
        meters.shutdown()
        tracing.exporter.clear()


# --- 5. secrets ------------------------------------------------------------------------------


def _raise_holding_secret(where: str) -> None:
    """Raise a 503 whose field ``where`` holds the secret (the others say nothing), or
    every field (``"every"``)."""
    texts: dict[str, Any] = {
        "message": f"down: {SECRET}",
        "developer_message": f"dev: {SECRET}",
        "details": {"token": SECRET, "nested": [f"x{SECRET}x"]},
        "additional_prompt_content": f"prompt: {SECRET}",
    }
    options: dict[str, Any] = {
        name: text for name, text in texts.items() if where in (name, "every")
    }
    message = options.pop("message", "down")
    raise UpstreamServerError(message, status_code=503, retry_after_ms=1, **options)


def secret_tool() -> Tool[..., Any]:
    """A tool requiring the secret KEY that fails as its argument ``where`` says:
    an error field holding the secret, an exception's text, or nothing (success)."""

    @tool(requires_secrets=["KEY"], idempotent=True)
    async def vault(
        where: Annotated[str, "Which field holds the secret."] = "none",
        note: Annotated[str, "Anything."] = "",
    ) -> str:
        """Fail with the secret in the given place."""
        if where == "exception":
            raise RuntimeError(f"boom {SECRET}")
        if where == "model_retry":
            raise RetryableToolError(
                f"again {SECRET}",
                retry_after_ms=1,
                developer_message=f"dev {SECRET}",
                details={"s": SECRET},
                additional_prompt_content=f"apc {SECRET}",
            )
        if where != "none":
            _raise_holding_secret(where)
        return "ok"

    return vault


#: How each entry point runs a call of ``vault`` (or of ``name``) for the secret tests.
Entry = Callable[[Tool[..., Any], str, dict[str, Any], str | None], Coroutine[Any, Any, Any]]


async def _through_tool(
    vault: Tool[..., Any], name: str, arguments: dict[str, Any], call_id: str | None
) -> ToolResult:
    assert name == vault.name
    return await vault.run(arguments, context=ToolContext(secrets={"KEY": SECRET}), call_id=call_id)


async def _through_toolkit(
    vault: Tool[..., Any], name: str, arguments: dict[str, Any], call_id: str | None
) -> ToolResult:
    kit = Toolkit("kit", [vault])
    return await kit.run(
        name, arguments, context=ToolContext(secrets={"KEY": SECRET}), call_id=call_id
    )


async def _through_runner(
    vault: Tool[..., Any], name: str, arguments: dict[str, Any], call_id: str | None
) -> ToolResult:
    time = FakeTime()
    runner = runner_for(
        [vault],
        time,
        retry=FAST_RETRY,
        circuit_breaker=CircuitBreaker(failure_threshold=2, reset_timeout=1.0),
        rate_limit=RateLimit(calls=1, period=0.05, max_wait=1.0),
    )
    context = ToolContext(secrets={"KEY": SECRET})
    results = [
        await runner.run(name, arguments, context=context, call_id=call_id) for _ in range(2)
    ]
    return results[-1]


ENTRIES: dict[str, Entry] = {
    "tool": _through_tool,
    "toolkit": _through_toolkit,
    "runner": _through_runner,
}

#: place -> (name called, arguments, call id): one place holding the secret each.
PLACES: dict[str, tuple[str, dict[str, Any], str]] = {
    "message": ("vault", {"where": "message"}, "c"),
    "developer_message": ("vault", {"where": "developer_message"}, "c"),
    "details": ("vault", {"where": "details"}, "c"),
    "additional_prompt_content": ("vault", {"where": "additional_prompt_content"}, "c"),
    "exception_text": ("vault", {"where": "exception"}, "c"),
    "every_error_field": ("vault", {"where": "every"}, "c"),
    "model_retry": ("vault", {"where": "model_retry"}, "c"),
    "good_arguments": ("vault", {"where": "none", "note": SECRET}, "c"),
    "arguments_failing": ("vault", {"where": "message", "note": SECRET}, "c"),
    "bad_arguments": ("vault", {"where": 7, "note": SECRET}, "c"),
    "call_id": ("vault", {"where": "none"}, f"call-{SECRET}"),
    "call_id_failing": ("vault", {"where": "message"}, f"call-{SECRET}"),
    "unknown_name": (f"vault_{SECRET}", {}, "c"),
}
#: Every entry with every place, but tool.run with a name (it has none to get wrong).
SECRET_CASES = [
    pytest.param(ENTRIES[entry], *PLACES[place], id=f"{entry}-{place}")
    for entry in ENTRIES
    for place in PLACES
    if not (entry == "tool" and place == "unknown_name")
]


@pytest.mark.parametrize(("entry", "name", "arguments", "call_id"), SECRET_CASES)
def test_planted_secret_is_in_no_span_or_metric(
    otel: Otel,
    entry: Entry,
    name: str,
    arguments: dict[str, Any],
    call_id: str | None,
) -> None:
    """A secret of the call's context, wherever the call carries it, is in no span name,
    attribute, event, status or metric attribute."""
    vault = secret_tool()

    run(entry(vault, name, arguments, call_id))

    assert otel.spans()
    text = otel.text()
    assert SECRET not in text, [line.strip() for line in text.splitlines() if SECRET in line]


def test_planted_secret_everywhere_at_once(otel: Otel) -> None:
    """Everything at once through a runner with every policy: the secret is nowhere."""
    vault = secret_tool()

    run(_through_runner(vault, "vault", {"where": "every", "note": SECRET}, call_id="plain-id"))

    names = [each.name for each in otel.spans()]
    assert "attempt 2 vault" in names
    seen = {name for span in otel.spans() for name, _ in events(span)}
    assert seen == {"tdk.retry", "tdk.rate_limit.wait", "tdk.circuit", "tdk.refused"}
    assert SECRET not in otel.text()
    assert "[REDACTED]" in otel.text()


# --- 6. exceptions that end a call -----------------------------------------------------------


@pytest.mark.parametrize("through", ["tool", "toolkit", "runner"])
def test_cancelled_call_status_is_the_type_only(otel: Otel, through: str) -> None:
    """A cancelled call's spans end ERROR with "CancelledError", never the cancel message."""
    started = asyncio.Event()

    @tool
    async def hang() -> int:
        """Wait forever."""
        started.set()
        await asyncio.Event().wait()
        return 0

    kit = Toolkit("kit", [hang])
    calls = {
        "tool": lambda: hang.run({}),
        "toolkit": lambda: kit.run("hang", {}),
        "runner": lambda: ToolRunner(kit).run("hang", {}),
    }

    async def scenario() -> None:
        task = asyncio.ensure_future(calls[through]())
        await started.wait()
        task.cancel(f"stop: {SECRET}")
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())

    spans = otel.spans()
    expected = (
        ["attempt 1 hang", "execute_tool hang"] if through == "runner" else ["execute_tool hang"]
    )
    assert [each.name for each in spans] == expected
    for span in spans:
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description == "CancelledError"
        assert span.attributes is not None
        assert "error.type" not in span.attributes
    assert SECRET not in otel.text()


@pytest.mark.parametrize("stop", [SystemExit, KeyboardInterrupt], ids=lambda t: t.__name__)
@pytest.mark.parametrize("flavour", ["async", "sync"])
def test_exit_status_is_the_type_only(otel: Otel, stop: type[BaseException], flavour: str) -> None:
    """A tool raising SystemExit("secret text") (or KeyboardInterrupt): the exception
    propagates, the span's status says only its type."""
    if flavour == "async":

        @tool
        async def leave() -> int:
            """Exit."""
            raise stop(f"secret text {SECRET}")

    else:

        @tool
        def leave() -> int:
            """Exit."""
            raise stop(f"secret text {SECRET}")

    with pytest.raises(stop):
        run(leave.run({}))
    # The loop's task that the exit escaped from is left in a reference cycle, and its
    # finalizer logs "exception was never retrieved" (formatting a traceback with ast) when
    # the collector runs: collected here, not in the middle of pytest's own use of ast
    # (CPython 3.11's AST recursion bookkeeping is not reentrant: SystemError).
    gc.collect()

    [span] = otel.spans()
    assert span.name == "execute_tool leave"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == stop.__name__
    assert span.events == ()
    assert SECRET not in otel.text()
    assert "secret text" not in otel.text()
    assert otel.points("tdk.tool.duration") == []  # (no result: nothing to measure by)


# --- 7. no provider --------------------------------------------------------------------------


def test_no_provider_no_telemetry(tracing: Tracing) -> None:
    """With no provider set, active() is None, tool.run is the bare call and no span is made,
    though the module's provider exists (set nowhere)."""
    assert trace._TRACER_PROVIDER is None
    assert metrics_state._METER_PROVIDER is None
    tracing.exporter.clear()
    assert telemetry.active() is None

    pending = add.run({"a": 1})
    assert pending.cr_code is execute.__code__  # type: ignore[attr-defined]
    pending.close()

    async def scenario() -> None:
        await add.run({"a": 1})
        await Toolkit("kit", [add]).run("nope")
        runner = runner_for(
            [Script(outage()).tool],
            FakeTime(),
            retry=FAST_RETRY,
            circuit_breaker=CircuitBreaker(failure_threshold=1),
        )
        await runner.run("flaky")
        await runner.run("flaky")

    run(scenario())

    assert tracing.exporter.get_finished_spans() == ()
    assert telemetry.active() is None


def test_active_follows_the_globals(tracing: Tracing) -> None:
    """active() is a Telemetry while a provider is set, None again once it is unset."""
    assert telemetry.active() is None
    with providers_set(tracing.provider, None):
        current = telemetry.active()
        assert current is not None
        assert current.tracer is not None
        assert current.duration is None
    assert telemetry.active() is None


@pytest.mark.parametrize(
    ("traced", "measured"),
    [(True, True), (True, False), (False, True)],
    ids=["both", "tracer_only", "meter_only"],
)
def test_telemetry_is_kept_while_the_providers_stay(
    tracing: Tracing, traced: bool, measured: bool
) -> None:
    """active() answers the same Telemetry call after call while the providers stay the same
    (its tracer and instruments are made once, not on every call)."""
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)
    try:
        with providers_set(tracing.provider if traced else None, meters if measured else None):
            first = telemetry.active()
            assert first is not None
            assert telemetry.active() is first
    finally:
        meters.shutdown()


def _forget_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """tdk._execution.telemetry as before its first call (the API not loaded yet), until the
    test ends."""
    monkeypatch.setattr(telemetry, "_unset", None)
    monkeypatch.setattr(telemetry._Loaded, "api", telemetry._UNSET)
    monkeypatch.setattr(telemetry._Loaded, "current", None)


def test_without_opentelemetry_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the API installed, active() is None (asked once: then a read of what it
    found) and calls run as they do without it."""
    _forget_the_api(monkeypatch)
    for name in ("opentelemetry", "opentelemetry.trace", "opentelemetry.metrics"):
        monkeypatch.setitem(sys.modules, name, None)  # (an import of it fails)

    assert telemetry.active() is None
    assert telemetry._Loaded.api is None
    assert telemetry.active() is None
    assert run(add.run({"a": 1})).value == 2
    telemetry.event("tdk.retry", {"tdk.wait_ms": 1})
    telemetry.counted("retries", "add")
    telemetry.circuit_changed("add", "closed", "open")


def test_api_keeping_its_providers_elsewhere(
    tracing: Tracing, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An API without the globals tdk reads is asked through its functions on every call:
    None with no provider set, a Telemetry with one."""
    _forget_the_api(monkeypatch)
    monkeypatch.setattr(opentelemetry.metrics, "_internal", SimpleNamespace())
    tracing.exporter.clear()

    assert telemetry.active() is None
    assert telemetry._unset is None
    with providers_set(tracing.provider, None):
        assert telemetry.active() is not None
        run(add.run({"a": 1}))
    assert [each.name for each in tracing.exporter.get_finished_spans()] == ["execute_tool add"]
    assert telemetry.active() is None
    tracing.exporter.clear()


# --- 8. MCP ----------------------------------------------------------------------------------

MODES = ["auto", "legacy"]
CLIENT_TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
CLIENT_SPAN = 0x00F067AA0BA902B7


def ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The finished spans above ``span``, nearest first."""
    by_id = {span_id(each): each for each in spans}
    found: list[ReadableSpan] = []
    current = span
    while (above := parent_id(current)) is not None and above in by_id:
        current = by_id[above]
        found.append(current)
    return found


@pytest.mark.parametrize("mode", MODES)
def test_mcp_call_continues_the_clients_span(otel: Otel, mode: str) -> None:
    """Served over MCP, a call made inside a client's span is in the client's trace, tdk's
    span a child of the SDK's server span ``tools/call add``: over JSON-RPC (legacy) by the
    ``traceparent`` the SDK's client puts in ``_meta`` (a remote parent: its CLIENT span);
    in the modern in-process mode by the context itself (no ``_meta`` is written there)."""
    server = tdk_mcp.server(Toolkit("kit", [add]))

    async def scenario() -> int:
        async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
            with otel_tracer().start_as_current_span("client step") as step:
                result = await client.call_tool("add", {"a": 1})
                assert result.structured_content == {"result": 2}
                return step.get_span_context().trace_id

    client_trace = run(scenario())

    spans = otel.spans()
    call = otel.span("execute_tool add")
    server_span = otel.span("tools/call add")
    step = otel.span("client step")
    assert trace_id(call) == trace_id(server_span) == client_trace
    assert parent_id(call) == span_id(server_span)
    assert server_span.kind is SpanKind.SERVER
    assert parent_id(otel.span("attempt 1 add")) == span_id(call)
    above = [each.name for each in ancestors(call, spans)]
    assert server_span.parent is not None
    if mode == "legacy":
        sent = otel.span("MCP send tools/call add")
        assert sent.kind is SpanKind.CLIENT
        assert server_span.parent.is_remote
        assert server_span.parent.span_id == span_id(sent)
        assert above == ["tools/call add", "MCP send tools/call add", "client step"]
    else:
        assert not server_span.parent.is_remote
        assert server_span.parent.span_id == span_id(step)
        assert above == ["tools/call add", "client step"]


def test_mcp_call_continues_the_traceparent_in_meta(otel: Otel) -> None:
    """A ``traceparent`` given in ``_meta`` (modern mode: the SDK passes ``_meta`` as it is)
    is continued: the SDK's server span is its remote child, tdk's span the server span's."""
    server = tdk_mcp.server(Toolkit("kit", [add]))
    traceparent = f"00-{CLIENT_TRACE:032x}-{CLIENT_SPAN:016x}-01"

    async def scenario() -> None:
        async with mcp.Client(server) as client:
            meta: Any = {"traceparent": traceparent}
            result = await client.call_tool("add", {"a": 1}, meta=meta)
            assert result.structured_content == {"result": 2}

    run(scenario())

    call = otel.span("execute_tool add")
    server_span = otel.span("tools/call add")
    assert trace_id(call) == trace_id(server_span) == CLIENT_TRACE
    assert parent_id(call) == span_id(server_span)
    assert server_span.kind is SpanKind.SERVER
    assert server_span.parent is not None
    assert server_span.parent.span_id == CLIENT_SPAN
    assert server_span.parent.is_remote


def test_mcp_legacy_client_sends_its_own_traceparent(otel: Otel) -> None:
    """Over JSON-RPC the SDK's client writes the ``traceparent`` of its own CLIENT span into
    ``_meta`` (over one given by the caller, with no span current): the server, and tdk's
    span, continue that span's trace, not the given one. (The SDK's behaviour, recorded.)"""
    server = tdk_mcp.server(Toolkit("kit", [add]))
    traceparent = f"00-{CLIENT_TRACE:032x}-{CLIENT_SPAN:016x}-01"

    async def scenario() -> None:
        async with mcp.Client(server, mode="legacy") as client:
            meta: Any = {"traceparent": traceparent}
            await client.call_tool("add", {"a": 1}, meta=meta)

    run(scenario())

    call = otel.span("execute_tool add")
    server_span = otel.span("tools/call add")
    sent = otel.span("MCP send tools/call add")
    assert parent_id(call) == span_id(server_span)
    assert server_span.parent is not None
    assert server_span.parent.span_id == span_id(sent)
    assert trace_id(call) == trace_id(sent) != CLIENT_TRACE


def test_mcp_call_without_a_trace_is_a_new_trace(otel: Otel) -> None:
    """Without a client trace, the call is still under the SDK's server span (its own root)."""
    server = tdk_mcp.server(Toolkit("kit", [add]))

    async def scenario() -> None:
        async with mcp.Client(server) as client:
            await client.call_tool("add", {"a": 1})

    run(scenario())

    call = otel.span("execute_tool add")
    server_span = otel.span("tools/call add")
    assert parent_id(call) == span_id(server_span)
    assert server_span.parent is None


# --- the module's own hygiene ----------------------------------------------------------------


def test_proxy_tracers_are_unbound(tracing: Tracing) -> None:
    """The plumbing of the module: a ProxyTracer that took this module's provider forgets it
    when asked, and with no provider set it makes no recording span."""
    proxy = trace.get_tracer("test-proxy")
    assert type(proxy) is ProxyTracer
    with providers_set(tracing.provider, None), proxy.start_as_current_span("bound") as bound:
        assert bound.is_recording()
    assert _unbind_proxy_tracers(tracing.provider) >= 1
    with proxy.start_as_current_span("unbound") as unbound:
        assert not unbound.is_recording()
    tracing.exporter.clear()


def test_json_of_spans_is_parseable(otel: Otel) -> None:
    """The text searched for secrets is the exporters' JSON (the check reads real output)."""
    run(add.run({"a": 1}, call_id="c-5"))

    [span] = otel.spans()
    parsed = json.loads(span.to_json())
    assert parsed["name"] == "execute_tool add"
    assert parsed["attributes"]["gen_ai.tool.call.id"] == "c-5"


class _Boom(Exception):
    """Raised by the hostile telemetry below."""


class _FailingProcessor:
    """A span processor that fails when a span starts or ends (given by ``when``)."""

    def __init__(self, when: str) -> None:
        self.when = when

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.when == "start":
            raise _Boom("on_start")

    def on_end(self, span: Any) -> None:
        if self.when == "end":
            raise _Boom("on_end")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@pytest.mark.parametrize("when", ["start", "end"])
def test_failing_telemetry_costs_the_record_never_the_call(when: str) -> None:
    """A span processor that raises (on start or on end) loses its spans; every call still
    returns its result and its body runs once."""
    failing = TracerProvider()
    failing.add_span_processor(_FailingProcessor(when))  # type: ignore[arg-type]
    with providers_set(failing, None):
        _check_calls_survive()
    failing.shutdown()


def _check_calls_survive() -> None:
    calls = [0]

    @tool(read_only=True)
    async def counted_add(a: Annotated[int, "A number."]) -> int:
        """Add one, counting the bodies that ran."""
        calls[0] += 1
        return a + 1

    runner = ToolRunner(Toolkit("kit", [counted_add]), retry=RetryPolicy(jitter=False))
    assert run(counted_add.run({"a": 1})).value == 2
    assert run(runner.run("counted_add", {"a": 2})).value == 3
    assert run(Toolkit("kit", [counted_add]).run("nope")).kind == "TOOL_NOT_FOUND"
    assert calls[0] == 2


# --- MCP: failing telemetry, and names a client sent ----------------------------------------


@pytest.mark.parametrize("when", ["start", "end"])
def test_mcp_serves_every_message_whatever_a_span_processor_raises(when: str) -> None:
    """Served over MCP (the SDK's client in memory), a span processor that raises on start or
    on end costs spans, never a message: ``initialize``, ``tools/list``, a call and a call of
    an unknown tool are all answered, and the call's body runs once. (The SDK's own server
    span failed every message, ``initialize`` included.)"""
    failing = TracerProvider()
    failing.add_span_processor(_FailingProcessor(when))  # type: ignore[arg-type]
    calls = [0]

    @tool(read_only=True)
    async def counted_add(a: Annotated[int, "A number."]) -> int:
        """Add one, counting the bodies that ran."""
        calls[0] += 1
        return a + 1

    server = tdk_mcp.server(Toolkit("kit", [counted_add]))

    async def scenario() -> tuple[list[str], Any, Any]:
        async with mcp.Client(server) as client:
            listed = [each.name for each in (await client.list_tools()).tools]
            done = await client.call_tool("counted_add", {"a": 1})
            unknown = await client.call_tool("nope", {})
            return listed, done, unknown

    with providers_set(failing, None):
        listed, done, unknown = run(scenario())
    _unbind_proxy_tracers(failing)
    failing.shutdown()
    assert listed == ["counted_add"]
    assert done.structured_content == {"result": 2}
    assert unknown.meta["tdk/error"]["kind"] == "TOOL_NOT_FOUND"
    assert calls[0] == 1


#: A tool module that sets, in the process serving it, a tracer provider whose span processor
#: raises on start and on end.
FAILING_TELEMETRY_MODULE = '''
from typing import Annotated

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from tdk import tool


class Failing:
    def on_start(self, span, parent_context=None):
        raise RuntimeError("on_start")

    def on_end(self, span):
        raise RuntimeError("on_end")

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=30000):
        return True


provider = TracerProvider()
provider.add_span_processor(Failing())
trace.set_tracer_provider(provider)


@tool(read_only=True)
def add(a: Annotated[int, "A number."]) -> int:
    """Add one."""
    return a + 1
'''


def test_tdk_serve_over_stdio_with_a_span_processor_that_raises(tmp_path: Path) -> None:
    """``tdk serve`` over stdio in a process whose span processor raises answers
    ``initialize``, ``tools/list`` and calls, through the SDK's stdio client."""
    target = tmp_path / "failing_telemetry.py"
    target.write_text(FAILING_TELEMETRY_MODULE)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tdk", "serve", str(target)], cwd=tmp_path
    )
    log = tmp_path / "server.log"

    async def scenario() -> tuple[list[str], Any]:
        with log.open("w") as errlog:
            async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
                listed = [each.name for each in (await client.list_tools()).tools]
                return listed, await client.call_tool("add", {"a": 1})

    listed, done = run(scenario())
    assert listed == ["add"], log.read_text()
    assert done.structured_content == {"result": 2}
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("mode", MODES)
def test_mcp_server_span_records_no_tool_name_a_client_made_up(otel: Otel, mode: str) -> None:
    """A client's unknown tool name (a secret of the server's context, or a token pasted
    there) reaches no span of the server: its SERVER span says ``tools/call _unknown``, and
    tdk's own span has the name redacted. A known name is recorded as the tool's."""
    server = tdk_mcp.server(Toolkit("kit", [add]), context=ToolContext(secrets={"KEY": SECRET}))
    token = "sk-" + "a1B2c3D4e5" * 3

    async def scenario() -> None:
        async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
            await client.call_tool(SECRET, {})
            await client.call_tool(token, {})
            await client.call_tool("ADD", {"a": 1})

    run(scenario())

    served = [each for each in otel.spans() if each.kind is not SpanKind.CLIENT]
    recorded = "\n".join(each.to_json() for each in served)
    assert SECRET not in recorded
    assert token not in recorded
    names = [each.name for each in served if each.kind is SpanKind.SERVER]
    assert names.count("tools/call _unknown") == 2
    assert "tools/call add" in names
    unknown = [each for each in served if each.name == "tools/call _unknown"]
    assert all(each.attributes["gen_ai.tool.name"] == "_unknown" for each in unknown)
    assert all(each.attributes["error.type"] == "tool_error" for each in unknown)


# --- progress --------------------------------------------------------------------------------


@tool
def reporting(context: ToolContext) -> int:
    """Report two steps (a sync tool, in its worker thread), one message quoting a secret."""
    context.progress(1, 2)
    context.progress(2, 2, f"done with {context.get_secret('KEY')}")
    return 2


def test_progress_is_a_span_event_when_traced(otel: Otel) -> None:
    """Without a host to carry it, a traced call's progress is an event of its span (a
    message redacted with the call's secrets)."""
    secret = "progress-secret-in-span-41"
    result = run(reporting.run({}, context=ToolContext(secrets={"KEY": secret})))
    assert result.value == 2
    [span] = otel.spans()
    assert events(span) == [
        ("tdk.progress", {"tdk.progress.done": 1.0, "tdk.progress.total": 2.0}),
        (
            "tdk.progress",
            {
                "tdk.progress.done": 2.0,
                "tdk.progress.total": 2.0,
                "tdk.progress.message": "done with [REDACTED]",
            },
        ),
    ]
    assert secret not in otel.text()
