"""OpenTelemetry spans and metrics of tool calls (extra ``tdk-tools[otel]``: the API only).

Nothing here runs unless ``opentelemetry-api`` is installed AND the application has set a
tracer provider or a meter provider: :func:`active` is the one check on the way of every
call, and without OpenTelemetry it costs a global read. The API is imported the first time a
call asks, never by ``import tdk``.

What is recorded, following the GenAI semantic conventions:

- each call (``tool.run``, ``Toolkit.run``, ``ToolRunner.run``) is a span ``execute_tool
  {name}`` with ``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type``, and ``tdk.attempts`` (how many times the
  body ran); on failure ``error.type`` = the kind, ``http.response.status_code`` when the
  error has one, the status ERROR with the model-safe message and, for a runner's call that
  stopped retrying, ``tdk.retry.stopped`` (why: ``not_idempotent``, ``deadline``,
  ``max_attempts``...). A runner's call has one child span per attempt (``attempt {n}
  {name}``, with the attempt's own kind and status code), and events for its retries (with
  the wait), limiter waits, refusals and circuit changes;
- metrics: ``tdk.tool.duration`` (a histogram of call durations in seconds, by tool and
  outcome: the kind, or ``success``), ``tdk.tool.retries`` and ``tdk.tool.refusals``
  (counters), ``tdk.circuit.state`` (a gauge: 0 closed, 1 half-open, 2 open).

Arguments and values are never recorded; names, call ids and messages are the redacted ones
tdk shows the model. An exception's text never becomes a status: only its type.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Any, Final

from tdk._compat.otel_globals import stand_in_meters, unset_check
from tdk._execution.context import ToolContext, secrets_of
from tdk._execution.progress import listening
from tdk._execution.result import ToolResult
from tdk._failures.hidden import HIDDEN_CHARACTERS
from tdk._failures.redact import redact_text
from tdk.errors import ErrorKind

__all__ = [
    "Telemetry",
    "active",
    "attribute_text",
    "circuit_changed",
    "counted",
    "event",
    "progress_event",
    "traced_attempt",
]

_UNSET: Final = object()


#: Whether neither provider is set, read from the API's own globals (:mod:`tdk._compat`), once
#: the API is loaded and keeps them so.
_unset: Callable[[], bool] | None = None


class _Loaded:
    """What this module keeps: the API (``opentelemetry.trace`` and ``.metrics``; None when
    it is not installed; loaded by the first :func:`active`) and the current telemetry."""

    api: Any = _UNSET
    current: Telemetry | None = None


#: How long a call id or name may be in an attribute.
_MAX_TEXT: Final = 256
#: How long a status description (the model-safe message) may be.
_MAX_MESSAGE: Final = 1024
#: How long the reason retries stopped may be (the runner's are single words).
_MAX_REASON: Final = 64
_CIRCUIT_VALUES: Final = {"closed": 0, "half_open": 1, "open": 2}


def active() -> Telemetry | None:
    """The telemetry of the providers the application set, or None when OpenTelemetry is not
    installed or neither a tracer nor a meter provider is set."""
    if _unset is not None:
        if _unset():
            return None
    elif _Loaded.api is None:
        return None
    try:
        return _configured()
    except Exception:  # a provider that fails to give its tracer or meter: no telemetry
        return None


def _configured() -> Telemetry | None:
    """:func:`active`'s answer past the fast check (unguarded)."""
    api = _Loaded.api if _Loaded.api is not _UNSET else _load()
    if api is None:
        return None
    tracers = api.trace.get_tracer_provider()
    meters = api.metrics.get_meter_provider()
    traced = not isinstance(tracers, api.trace.ProxyTracerProvider)
    measured = not stand_in_meters(meters)
    if not (traced or measured):
        return None
    current = _Loaded.current
    if current is None or current.tracers is not tracers or current.meters is not meters:
        current = _Loaded.current = Telemetry(
            api, tracers, meters, traced=traced, measured=measured
        )
    return current


def event(name: str, attributes: Mapping[str, Any]) -> None:
    """An event on the current span (a runner's retry, wait or refusal), when the call
    running is traced."""
    telemetry = _CALL.get()
    if telemetry is not None and telemetry.tracer is not None:
        with contextlib.suppress(Exception):
            telemetry.api.trace.get_current_span().add_event(name, dict(attributes))


def progress_event(
    done: float | None, total: float | None, message: str | None, secrets: tuple[str, ...]
) -> None:
    """A report of ``ToolContext.progress()`` as an event of the traced call's span (the
    runner's own reports, ``done`` None, have events of their own)."""
    if done is None:
        return
    attributes: dict[str, Any] = {"tdk.progress.done": done}
    if total is not None:
        attributes["tdk.progress.total"] = total
    if message is not None:
        attributes["tdk.progress.message"] = attribute_text(message, secrets)
    event("tdk.progress", attributes)


class Telemetry:
    """The tracer and instruments of one pair of providers. Every use of them is guarded:
    telemetry that fails (a broken exporter, a provider that raises) costs its record, never
    the call."""

    def __init__(
        self, api: Any, tracers: Any, meters: Any, *, traced: bool, measured: bool
    ) -> None:
        from tdk import __version__

        self.api = api
        self.tracers = tracers
        """The tracer provider as read (compared, to see it change; a proxy when not set)."""
        self.meters = meters
        self.tracer = tracers.get_tracer("tdk", __version__) if traced else None
        meter = meters.get_meter("tdk", __version__) if measured else None
        self.duration = meter and meter.create_histogram(
            "tdk.tool.duration", unit="s", description="Duration of tool calls"
        )
        self.retries = meter and meter.create_counter(
            "tdk.tool.retries", description="Retries of tool calls by the runner"
        )
        self.refusals = meter and meter.create_counter(
            "tdk.tool.refusals", description="Calls the runner's own policies refused"
        )
        self.circuits = meter and meter.create_gauge(
            "tdk.circuit.state", description="Circuit state: 0 closed, 1 half-open, 2 open"
        )

    async def call(
        self,
        running: Coroutine[Any, Any, ToolResult],
        name: str,
        call_id: object,
        context: ToolContext | None,
    ) -> ToolResult:
        """``running`` (a call of ``name``, as called, with ``context``) inside its span, with
        its duration recorded. Names and ids are redacted with the context's secrets too."""
        secrets = secrets_of(context) if isinstance(context, ToolContext) else ()
        started = time.perf_counter()
        shown = attribute_text(name, secrets)
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": shown,
            "gen_ai.tool.type": "function",
        }
        if type(call_id) is str:  # (any other is refused by the call itself)
            attributes["gen_ai.tool.call.id"] = attribute_text(call_id, secrets)
        token = _CALL.set(self)  # the attempts, events and counts of this call use it
        try:
            with (
                self._span(f"execute_tool {shown}", attributes) as span,
                listening(progress_event) if self.tracer is not None else contextlib.nullcontext(),
            ):
                result = await running
                if span is not None:
                    with contextlib.suppress(Exception):
                        if result.tool != name:  # the tool's own name (ADD called, add ran)
                            tool_name = attribute_text(result.tool, secrets)
                            span.update_name(f"execute_tool {tool_name}")
                            span.set_attribute("gen_ai.tool.name", tool_name)
                        span.set_attribute("tdk.attempts", result.attempts)
                        self._close(span, result)
                        self._stopped(span, result)
        finally:
            _CALL.reset(token)
        if self.duration is not None:
            error = result.error
            known = error is None or error.kind is not ErrorKind.TOOL_NOT_FOUND
            with contextlib.suppress(Exception):  # (any name a model made up is one series)
                self.duration.record(
                    time.perf_counter() - started,
                    {
                        "gen_ai.tool.name": attribute_text(result.tool) if known else "_unknown",
                        "tdk.outcome": "success" if error is None else error.kind.value,
                    },
                )
        return result

    async def attempt(
        self, running: Coroutine[Any, Any, ToolResult], name: str, number: int
    ) -> ToolResult:
        """One attempt of a runner's call, as a child span of the call's."""
        shown = attribute_text(name)
        attributes = {"gen_ai.tool.name": shown, "tdk.attempt": number}
        with self._span(f"attempt {number} {shown}", attributes) as span:
            result = await running
            if span is not None:
                with contextlib.suppress(Exception):
                    self._close(span, result)
        return result

    @contextlib.contextmanager
    def _span(self, name: str, attributes: dict[str, Any]) -> Iterator[Any]:
        """The current span ``name`` while the block runs (None when there is no tracer or it
        fails to make one); an exception out of the block marks it by its type only: its
        text may quote anything."""
        manager: Any = None
        span: Any = None
        if self.tracer is not None:
            try:
                manager = self.tracer.start_as_current_span(
                    name,
                    kind=self.api.trace.SpanKind.INTERNAL,
                    attributes=attributes,
                    record_exception=False,
                    set_status_on_exception=False,
                )
                span = manager.__enter__()
            except Exception:  # a tracer or a span processor that fails: no span
                manager = None
        if manager is None:
            yield None
            return
        try:
            yield span
        except BaseException as stopped:
            with contextlib.suppress(Exception):
                span.set_status(self._status(type(stopped).__name__))
                manager.__exit__(type(stopped), stopped, stopped.__traceback__)
            raise
        with contextlib.suppress(Exception):
            manager.__exit__(None, None, None)

    def _status(self, description: str) -> Any:
        return self.api.trace.Status(self.api.trace.StatusCode.ERROR, description)

    def _close(self, span: Any, result: ToolResult) -> None:
        """A failure's kind, HTTP status and model-safe message on the span of the call or
        attempt that ended with it."""
        error = result.error
        if error is None:
            return
        span.set_attribute("error.type", error.kind.value)
        if type(error.status_code) is int:
            span.set_attribute("http.response.status_code", error.status_code)
        span.set_status(self._status(attribute_text(error.message, limit=_MAX_MESSAGE)))

    @staticmethod
    def _stopped(span: Any, result: ToolResult) -> None:
        """Why a runner's call ended without another retry (``tdk.retry.stopped``: a write
        not repeated, the deadline, the attempts used up...), on the call's span."""
        error = result.error
        reason = None if error is None else error.details.get("retry_stopped")
        if type(reason) is str:  # (a reason of the runner's, but details may carry any text)
            span.set_attribute("tdk.retry.stopped", attribute_text(reason, limit=_MAX_REASON))


#: The telemetry of the call running in this context (set by :meth:`Telemetry.call`): its
#: attempts, events and counts go with it, even if a provider is set meanwhile.
_CALL: ContextVar[Telemetry | None] = ContextVar("tdk_telemetry", default=None)


def counted(kind: str, name: str, **labels: str) -> None:
    """Count a runner's retry (``kind="retries"``) or refusal (``"refusals"``) of tool
    ``name`` in the metrics of the call running, when they are on."""
    telemetry = _CALL.get()
    instrument = None if telemetry is None else getattr(telemetry, kind)
    if instrument is not None:
        with contextlib.suppress(Exception):
            instrument.add(1, {"gen_ai.tool.name": attribute_text(name), **labels})


def circuit_changed(name: str, before: str, after: str) -> None:
    """A circuit's change, as an event of the current call's span and the gauge's value."""
    telemetry = _CALL.get()
    if telemetry is None:
        return
    with contextlib.suppress(Exception):
        if telemetry.tracer is not None:
            telemetry.api.trace.get_current_span().add_event(
                "tdk.circuit",
                {"gen_ai.tool.name": attribute_text(name), "tdk.from": before, "tdk.to": after},
            )
        if telemetry.circuits is not None:
            value = _CIRCUIT_VALUES.get(after, 0)
            telemetry.circuits.set(value, {"gen_ai.tool.name": attribute_text(name)})


def attribute_text(value: str, secrets: tuple[str, ...] = (), *, limit: int = _MAX_TEXT) -> str:
    """A name, id or message as an attribute takes it: redacted, cut (a model may send
    anything) and without control characters (a line-based exporter would print them)."""
    return _CONTROL.sub("\ufffd", redact_text(value, secrets, limit=limit))


#: Control characters, and those that split a line or hide text (as a log line escapes them).
_CONTROL: Final = re.compile(f"[\x00-\x1f{HIDDEN_CHARACTERS}]")


def _load() -> Any:
    try:
        from opentelemetry import metrics, trace
    except Exception:  # not installed (or installed broken): no telemetry, ever
        _Loaded.api = None
        return None
    # "None set", the answer of most calls, read where the API keeps the providers rather
    # than asked of its functions (see bench/README.md#no-provider-set).
    global _unset  # noqa: PLW0603 (set once, by the first call that asks)
    _unset = unset_check()
    _Loaded.api = SimpleNamespace(trace=trace, metrics=metrics)
    return _Loaded.api


def traced_attempt(
    running: Coroutine[Any, Any, ToolResult], name: str, number: int
) -> Coroutine[Any, Any, ToolResult]:
    """``running`` (attempt ``number`` of a runner's call) in its span when the call is
    traced; else ``running`` itself (no extra frame on the way of an attempt)."""
    telemetry = _CALL.get()
    return running if telemetry is None else telemetry.attempt(running, name, number)
