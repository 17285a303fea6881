"""The SERVER span of each MCP message, in place of the SDK's own.

The SDK's server wraps every message (``initialize`` included) in a span, through the
``OpenTelemetryMiddleware`` it installs by default. That middleware is unguarded: a span
processor that raises fails every request, and it records what a client sent as a tool name
as it is (a secret pasted there included), and the text of any exception as the status.
tdk's servers carry this middleware instead: the same span (its name ``{method} {tool}``,
kind SERVER, the parent a ``traceparent`` in ``_meta`` names, the attributes
``mcp.method.name``, ``mcp.protocol.version``, ``jsonrpc.request.id``,
``gen_ai.operation.name``, ``gen_ai.tool.name``, ``error.type`` and the status), except that:

- telemetry that fails costs the span, never the message (as for tdk's own spans);
- a tool name is recorded only when it names a tool of the toolkit (``_unknown`` otherwise:
  a client may send anything there); the method and the request id are redacted and cut;
- a failure's status says its type or its JSON-RPC code, never an exception's text;
- without a tracer provider set it costs one check (tdk's ``active()``), no span.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from opentelemetry import propagate
from pydantic import ValidationError

from tdk._define.toolkit import Toolkit
from tdk._execution.context import ToolContext, secrets_of
from tdk._execution.telemetry import active, attribute_text

__all__ = ["ServerSpans"]

#: What a span names a tool the toolkit does not have (as tdk's metrics do).
_UNKNOWN: Final = "_unknown"


class ServerSpans:
    """Middleware of the SDK's server: each message in its SERVER span (see the module)."""

    __slots__ = ("_secrets", "_toolkit")

    def __init__(self, toolkit: Toolkit, context: object) -> None:
        self._toolkit = toolkit
        # The secrets known before any call: those of a context given once (a function's
        # contexts are made per call, later; their secrets never reach this span anyway).
        self._secrets = secrets_of(context) if isinstance(context, ToolContext) else ()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        telemetry = active()
        tracer = None if telemetry is None else telemetry.tracer
        if tracer is None:
            return await call_next(ctx)
        span, manager = _started(tracer, telemetry, self._named(ctx), ctx.meta)
        if manager is None:
            return await call_next(ctx)
        try:
            result = await call_next(ctx)
        except MCPError as failed:
            code = str(failed.error.code)
            _end(manager, span, telemetry, code, failed.error.message, status_code=code)
            raise
        except ValidationError:
            code = str(INVALID_PARAMS)
            _end(manager, span, telemetry, code, "Invalid request parameters", status_code=code)
            raise
        except Exception as failed:  # (its text may quote anything: its type only)
            _end(manager, span, telemetry, type(failed).__name__[:100], None)
            raise
        except BaseException:  # cancelled: the span ends as it is
            _end(manager, span, telemetry, None, None)
            raise
        failed_call = ctx.method == "tools/call" and _is_error(result)
        _end(manager, span, telemetry, "tool_error" if failed_call else None, None)
        return result

    def _named(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, dict[str, Any]]:
        """The span's name and attributes for the message of ``ctx``."""
        method = attribute_text(ctx.method, self._secrets)
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            "mcp.protocol.version": attribute_text(str(ctx.protocol_version)),
        }
        if ctx.request_id is not None:
            attributes["jsonrpc.request.id"] = attribute_text(str(ctx.request_id), self._secrets)
        if ctx.method != "tools/call":
            return method, attributes
        name = ctx.params.get("name") if isinstance(ctx.params, Mapping) else None
        tool = name if type(name) is str and name in self._toolkit else _UNKNOWN
        if tool != _UNKNOWN:
            tool = self._toolkit.get(tool).name
        attributes["gen_ai.operation.name"] = "execute_tool"
        attributes["gen_ai.tool.name"] = tool
        return f"{method} {tool}", attributes


def _started(
    tracer: Any, telemetry: Any, named: tuple[str, dict[str, Any]], meta: object
) -> tuple[Any, Any]:
    """The span started (current) and its context manager; (None, None) when the tracer, the
    propagator or a span processor fails."""
    name, attributes = named
    try:
        parent = None
        if isinstance(meta, Mapping) and meta:
            found = propagate.extract(meta)
            if telemetry.api.trace.get_current_span(found).get_span_context().is_valid:
                parent = found
        manager = tracer.start_as_current_span(
            name,
            kind=telemetry.api.trace.SpanKind.SERVER,
            attributes=attributes,
            context=parent,
            record_exception=False,
            set_status_on_exception=False,
        )
        span = manager.__enter__()
    except Exception:
        return None, None
    return span, manager


def _end(
    manager: Any,
    span: Any,
    telemetry: Any,
    error_type: str | None,
    description: str | None,
    *,
    status_code: str | None = None,
) -> None:
    """Mark the span with ``error_type`` (and, for a JSON-RPC error, its ``status_code``) and
    end it; whatever telemetry raises is dropped."""
    with contextlib.suppress(Exception):
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            if status_code is not None:
                span.set_attribute("rpc.response.status_code", status_code)
            status = telemetry.api.trace.StatusCode.ERROR
            shown = None if description is None else attribute_text(description, limit=1024)
            span.set_status(telemetry.api.trace.Status(status, shown))
    with contextlib.suppress(Exception):
        manager.__exit__(None, None, None)


def _is_error(result: HandlerResult) -> bool:
    """Whether a ``tools/call`` result is a failure (``isError``), in either of its forms."""
    if isinstance(result, Mapping):
        return result.get("isError") is True
    return getattr(result, "is_error", None) is True
