"""A toolkit served over MCP, on the official ``mcp`` SDK (extra ``tdk-tools[mcp]``).

::

    from tdk.hosts import mcp as tdk_mcp

    server = tdk_mcp.server(toolkit)          # the SDK's low-level Server, tools wired in
    await tdk_mcp.serve(toolkit)              # over stdio; transport="http" for streamable HTTP

The protocol is the SDK's own: tdk supplies the two handlers, ``tools/list`` and
``tools/call``. Every call goes through a :class:`~tdk.ToolRunner` (the one given, or one with
the default policies), so retries, limits and breakers apply, and its result becomes a
``CallToolResult``:

- a success: ``structuredContent`` (the value, or ``{"result": value}`` when the output is not
  an object: MCP wants an object) and one text content, ``result.for_model()``;
- a failure: ``isError``, one text content with ``for_model()``, no ``structuredContent`` (it
  would fail the output schema), and ``_meta["tdk/error"]`` with ``kind``, ``category``,
  ``retryable``, ``retry_after_ms``, ``status_code`` and ``additional_prompt_content`` for
  hosts that act on them. Invalid arguments and unknown tools are such results, not protocol
  errors: the model can fix them.

See ``docs/mcp.md``.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, cast

try:
    import anyio
    from mcp import types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
except ImportError as missing:  # pragma: no cover - the extra is part of the test install
    raise ImportError(
        "tdk.hosts.mcp needs the mcp package: pip install 'tdk-tools[mcp]'"
    ) from missing

from pydantic_core import to_json

from tdk import __version__
from tdk._context import ToolContext
from tdk._definition import ToolDefinition
from tdk._error_info import make_error_info
from tdk._execute import failure_result, shown_name
from tdk._model_text import error_fields, sendable
from tdk._result import ToolResult
from tdk._served_streams import protocol_streams
from tdk._streams import flush_stdout
from tdk._tool import Tool
from tdk._toolkit import Toolkit
from tdk.errors import FatalToolError, ToolOutputError
from tdk.hosts._mcp_http import serve_http
from tdk.hosts._mcp_shape import mcp_tool, output_is_wrapped
from tdk.hosts._source import Source, rendered
from tdk.runner import ToolRunner

__all__ = ["context_from_environment", "result", "serve", "server", "tools"]

logger = logging.getLogger("tdk.hosts.mcp")

#: What ``context=`` takes: one context for every call, or a function making one per call.
ContextSource = ToolContext | Callable[[], ToolContext] | None


def tools(source: Source) -> list[types.Tool]:
    """The tools of ``source`` as MCP ``Tool`` objects: name, description (saying so when the
    tool is deprecated), ``inputSchema``, ``outputSchema`` (wrapped as ``{"result": ...}``
    when the output is not an object) and ``annotations`` from the side-effect marks
    (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``)."""
    return rendered(source, "mcp-objects", _mcp_tool_object)


def result(
    tool_result: ToolResult, *, definition: ToolDefinition | None = None
) -> types.CallToolResult:
    """``tool_result`` as MCP's ``CallToolResult`` (see the module docstring).

    ``definition`` tells whether a success's value goes out wrapped as ``{"result": value}``
    (its output is not an object); without it, any value but a ``dict`` is wrapped.
    """
    if definition is not None:
        wrapped = output_is_wrapped(definition)
    else:
        wrapped = type(tool_result.value) is not dict
    return types.CallToolResult.model_validate(_answer(tool_result, wrapped=wrapped))


def _answer(tool_result: ToolResult, *, wrapped: bool) -> dict[str, Any]:
    """The ``CallToolResult`` of ``tool_result`` in its wire form (as :func:`result` says)."""
    error = tool_result.error
    if error is None:
        value, shown = sendable(tool_result.value)
        if not wrapped and type(value) is not dict:  # an output schema that says "object" wrongly
            return _answer(_bad_output(tool_result), wrapped=False)
        return {
            **_DEFAULTS,
            "content": [{"type": "text", "text": shown}],
            "structuredContent": {"result": value} if wrapped else value,
            "isError": False,
        }
    fields = error_fields(error)  # (the texts redacted once more, as the model reads them)
    text = [{"type": "text", "text": to_json(fields).decode()}]
    facts = {
        "kind": fields["kind"],
        "category": error.category.value,
        "retryable": error.retryable,
        "retry_after_ms": fields.get("retry_after_ms"),
        "status_code": error.status_code,
        "additional_prompt_content": fields.get(
            "additional_prompt_content", error.additional_prompt_content
        ),
    }
    return {**_DEFAULTS, "content": text, "isError": True, "_meta": {"tdk/error": facts}}


def _bad_output(tool_result: ToolResult) -> ToolResult:
    """The failed result of a tool whose value is not the object its output schema says."""
    return tool_result.model_copy(
        update={
            "value": None,
            "error": make_error_info(
                ToolOutputError,
                "The tool failed: it returned a result that does not match its declared type.",
                tool_result.tool,
                details={"reason": "the output schema says object; the value is not one"},
            ),
        }
    )


#: The fields of an empty ``CallToolResult`` in their wire form (``resultType`` in the SDK's
#: protocol versions that have it), read from the SDK installed.
_DEFAULTS: Final = types.CallToolResult(content=[]).model_dump(
    by_alias=True, mode="json", exclude_none=True, exclude={"content", "is_error"}
)


def server(
    source: Source,
    *,
    runner: ToolRunner | None = None,
    context: ContextSource = None,
    name: str | None = None,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) offering the tools of ``source``.

    ``source`` is a ``Toolkit`` or an iterable of tools (``ToolDefinition``s cannot run).
    ``runner`` runs the calls (its toolkit must be ``source`` when both are given); without
    one, a ``ToolRunner`` with its defaults (no retries, no limits: give one to have them).
    ``context`` is the ``ToolContext`` of every call, or a function returning one per call.
    ``name`` defaults to the toolkit's.
    """
    toolkit = _toolkit_of(source, runner, name)
    running = runner if runner is not None else ToolRunner(toolkit)
    wraps: dict[str, bool] = {}  # tool name -> whether its value goes out as {"result": ...}

    async def list_tools(
        _request: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools(toolkit))

    async def call_tool(
        request: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        call_id = None if request.request_id is None else str(request.request_id)
        started = time.perf_counter()
        try:
            each = await _context_for_call(context)
            outcome = await running.run(
                params.name, params.arguments, context=each, call_id=call_id
            )
        except (Exception, SystemExit, KeyboardInterrupt) as broken:
            # A tool body that exits (argparse on the model's input), a context function or
            # a state store that fails: the call's answer, never the server's end.
            outcome = failure_result(
                shown_name(params.name, None),
                broken
                if isinstance(broken, SystemExit | KeyboardInterrupt)
                else FatalToolError(
                    "The call failed outside the tool.",
                    developer_message=f"{type(broken).__name__} from the context or the runner",
                ),
                call_id=call_id,
                context=None,
                attempts=0,
                started=started,
                include_stacktrace=False,
            )
        wrapped = outcome.error is None and (
            wraps[outcome.tool]
            if outcome.tool in wraps
            else wraps.setdefault(
                outcome.tool, output_is_wrapped(toolkit.get(outcome.tool).definition)
            )
        )
        # The wire form: the SDK takes a handler's result as a dict too, and validates it
        # (once, instead of a model built here and dumped there).
        return cast(types.CallToolResult, _answer(outcome, wrapped=wrapped))

    def input_schema(tool_name: str) -> Mapping[str, Any] | None:
        # (the SDK checks a modern client's Mcp-Param headers with it, instead of listing
        # every tool on every call)
        return toolkit.get(tool_name).definition.input_schema if tool_name in toolkit else None

    return Server(
        name or toolkit.name,
        version=toolkit.version or __version__,
        description=toolkit.description,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _context_for_call(context: ContextSource) -> ToolContext | None:
    """The context of one call: ``context``, or what the function ``context`` returns (awaited
    when it is a coroutine); ``TypeError`` for anything else."""
    each: Any = context() if callable(context) else context
    if inspect.isawaitable(each):
        each = await each
    if each is not None and not isinstance(each, ToolContext):
        raise TypeError(f"context= gave a {type(each).__name__}, not a ToolContext")
    return each


async def serve(
    source: Source,
    transport: Literal["stdio", "http"] = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    runner: ToolRunner | None = None,
    context: ContextSource = None,
    name: str | None = None,
) -> None:
    """Serve the tools of ``source`` until the client goes (stdio) or the task is cancelled:
    over the process's stdin and stdout, or, with ``transport="http"``, over streamable HTTP
    at ``http://{host}:{port}/mcp``. The other options are :func:`server`'s."""
    mcp_server = server(source, runner=runner, context=context, name=name)
    if transport == "stdio":
        async with stdio_server(*_reserved_streams()) as (read, write):
            try:
                await mcp_server.run(read, write, mcp_server.create_initialization_options())
            finally:
                # What tools printed and Python still buffers goes to stderr now: once the
                # SDK points fd 1 back at the protocol, it would reach the client.
                flush_stdout()
        return
    if transport != "http":
        raise ValueError(f"transport must be 'stdio' or 'http', not {transport!r}")
    await serve_http(mcp_server, host, port)


def _reserved_streams() -> tuple[anyio.AsyncFile[str] | None, anyio.AsyncFile[str] | None]:
    """The protocol's streams that ``tdk serve`` reserved for the whole life of the server
    (see ``tdk._served_streams``), or none: the SDK then takes stdin and stdout itself (and
    points fd 1 at stderr while it serves)."""
    reserved = protocol_streams()
    if reserved is None:
        return None, None
    return anyio.wrap_file(reserved.input), anyio.wrap_file(reserved.output)


def context_from_environment(
    source: Iterable[Tool[..., Any]] | Toolkit, environ: Mapping[str, str] | None = None
) -> ToolContext:
    """A context holding each secret the tools require, read from the environment variable
    of the same name (``os.environ`` by default); a secret not set (or set empty) is left
    out, and a call needing it is answered ``TOOL_RUNTIME_MISSING_REQUIREMENT``."""
    found = os.environ if environ is None else environ
    names = {secret for item in source for secret in item.definition.requirements.secrets}
    # (an empty value is no secret: the tool would be told it is missing all the same)
    return ToolContext(secrets={name: found[name] for name in sorted(names) if found.get(name)})


def _mcp_tool_object(definition: ToolDefinition) -> types.Tool:
    return types.Tool.model_validate(mcp_tool(definition))


def _toolkit_of(source: Source, runner: ToolRunner | None, name: str | None) -> Toolkit:
    if isinstance(source, Toolkit):
        toolkit = source
    else:
        items: list[Tool[..., Any]] = []
        for item in source:
            if not isinstance(item, Tool):
                raise TypeError(
                    f"server() takes a Toolkit or tools, not {type(item).__name__}: a "
                    "definition alone cannot run"
                )
            items.append(item)
        if runner is None:
            return Toolkit(name or "tdk", items)
        toolkit = runner.toolkit
        if any(item.name not in toolkit or toolkit.get(item.name) is not item for item in items):
            raise ValueError(
                f"the runner runs toolkit '{toolkit.name}', which does not hold the tools given"
            )
    if runner is not None and runner.toolkit is not toolkit:
        raise ValueError(f"the runner runs toolkit '{runner.toolkit.name}', not the one given")
    return toolkit
