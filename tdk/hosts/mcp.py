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

``tools/list`` offers the tools whose circuit is not open, in the toolkit's order, and the
clients are told when that changes (:mod:`tdk.hosts._mcp_changes`). A ``context=`` function
of one argument receives the call's :class:`CallRequest` (:mod:`tdk.hosts._mcp_request`). A
tool's ``context.progress()`` and the runner's waits reach a client that asked for progress as
``notifications/progress`` (:mod:`tdk.hosts._mcp_progress`).

What a server holds is bounded: ``max_in_flight`` calls at once, and ``max_unread`` answers a
client has not read; a call past either bound is answered at once with a retryable
``TOOL_RUNTIME_BULKHEAD_FULL`` result (see :mod:`tdk.hosts._mcp_load`). A value the client's
JSON reader could not read back (nested deeper than it reads) is that call's
``TOOL_RUNTIME_BAD_OUTPUT_VALUE``, on every transport. Over stdio, tdk's own transport
(:mod:`tdk.hosts._mcp_stdio`) answers every request that carries an id, even one the SDK's
reader refuses. Each message's SERVER span is tdk's (:mod:`tdk.hosts._mcp_spans`): failing
telemetry never costs a message.

Who calls: over HTTP with ``serve(..., auth=verifier)`` (``tdk serve --http --auth``) every
request needs a bearer token (:mod:`tdk.auth`, :mod:`tdk.hosts._mcp_auth`). The context of
each call is completed with the caller's identity (its ``user_id``, ``scopes`` and
``claims``, where the context leaves them empty), and a tool declared with
``requires_scopes=`` is listed only to a caller holding them.

See ``docs/mcp.md`` and ``docs/auth.md``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal, cast

try:
    from mcp import types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.models import InitializationOptions
    from mcp.shared.message import SessionMessage
except ImportError as missing:  # pragma: no cover - the extra is part of the test install
    raise ImportError(
        "tdk.hosts.mcp needs the mcp package: pip install 'tdk-tools[mcp]'"
    ) from missing


from pydantic_core import PydanticSerializationError, to_json

from tdk import __version__
from tdk._cli.streams import flush_stdout
from tdk._compat.mcp_streams import ReadStream, WriteStream
from tdk._define.definition import ToolDefinition
from tdk._define.tool import Tool
from tdk._define.toolkit import Toolkit
from tdk._execution.call_scope import failure_result, shown_name
from tdk._execution.context import ToolContext
from tdk._execution.model_text import utf8_copy
from tdk._execution.result import ToolResult
from tdk.auth._caller import Verifier, current_caller, with_caller
from tdk.errors import FatalToolError
from tdk.hosts._mcp_answer import answer
from tdk.hosts._mcp_asks import pending_meta, served_call
from tdk.hosts._mcp_auth import Protection, scopes_needed
from tdk.hosts._mcp_changes import ToolList, offered_tools
from tdk.hosts._mcp_http import serve_http
from tdk.hosts._mcp_load import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_UNREAD, Load
from tdk.hosts._mcp_progress import with_progress
from tdk.hosts._mcp_request import (
    CallRequest,
    ClientInfo,
    ContextMaker,
    ContextSource,
    context_maker,
)
from tdk.hosts._mcp_shape import mcp_tool, output_is_wrapped
from tdk.hosts._mcp_spans import ServerSpans
from tdk.hosts._mcp_stdio import stdio_streams
from tdk.hosts._source import Source, rendered
from tdk.runner import ToolRunner

__all__ = [
    "CallRequest",
    "ClientInfo",
    "context_from_environment",
    "result",
    "serve",
    "server",
    "tools",
]

logger = logging.getLogger("tdk.hosts.mcp")


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
    return types.CallToolResult.model_validate(answer(tool_result, wrapped=wrapped))


def server(
    source: Source,
    *,
    runner: ToolRunner | None = None,
    context: ContextSource = None,
    name: str | None = None,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    max_unread: int = DEFAULT_MAX_UNREAD,
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) offering the tools of ``source``.

    ``source`` is a ``Toolkit`` or an iterable of tools (``ToolDefinition``s cannot run).
    ``runner`` runs the calls (its toolkit must be ``source`` when both are given); without
    one, a ``ToolRunner`` with its defaults (no retries, no limits: give one to have them).
    ``context`` is the ``ToolContext`` of every call, or a function returning one per call
    (it may be async): a function of one argument receives the call's :class:`CallRequest`
    (its headers, verified token, ``_meta`` and client). Over HTTP with authentication, the
    verified caller fills a context's empty ``user_id``, ``scopes`` and ``claims``. A tool
    that requires scopes is listed only when the caller holds them (those of a context given
    once, else those of the verified token). ``name`` defaults to the toolkit's.

    ``max_in_flight`` bounds the calls running at once, and ``max_unread`` the messages
    written to a client and not yet read by it (over ``server.run()``'s streams: stdio, or
    your own); a call past either bound is answered at once with a retryable
    ``TOOL_RUNTIME_BULKHEAD_FULL`` result, the tool not run.
    """
    toolkit = _toolkit_of(source, runner, name)
    runner = runner if runner is not None else ToolRunner(toolkit)
    changes = ToolList(toolkit, runner)
    load = Load(max_in_flight, max_unread)
    given = context if isinstance(context, ToolContext) else None
    calls = _Calls(toolkit, runner, context_maker(context), load, changes, given=given)
    served = _Served(
        name or toolkit.name,
        version=toolkit.version or __version__,
        description=toolkit.description,
        lifespan=lambda _server: changes.serving(),
        get_tool_input_schema=calls.input_schema,
        on_list_tools=calls.list_tools,
        on_call_tool=calls.call_tool,
        on_subscriptions_listen=changes.listen,
    )
    served.load = calls.load
    # The SDK's own span of each message is unguarded and records what a client sent as a
    # tool name: tdk's takes its place (see tdk.hosts._mcp_spans).
    served.middleware = [ServerSpans(toolkit, context)]
    return served


class _Calls:
    """The handlers of one server: ``tools/list`` and ``tools/call``."""

    __slots__ = ("changes", "context", "given", "load", "runner", "scoped", "toolkit", "wraps")

    def __init__(
        self,
        toolkit: Toolkit,
        runner: ToolRunner,
        context: ContextMaker,
        load: Load,
        changes: ToolList,
        *,
        given: ToolContext | None,
    ) -> None:
        self.changes = changes
        self.given = given  # (a context given once: its scopes are the caller's, for listing)
        self.toolkit = toolkit
        self.runner = runner
        self.context = context
        self.load = load
        self.wraps: dict[str, bool] = {}  # tool -> whether its value goes out as {"result": ...}
        # tool -> the scopes it needs, for the tools that need some
        self.scoped = {
            item.name: item.definition.requirements.scopes
            for item in toolkit
            if item.definition.requirements.scopes
        }

    async def list_tools(
        self, request: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """The tools offered now, as MCP lists them, in the toolkit's order: those whose
        circuit is not open and whose scopes the caller holds."""
        names = await self.changes.listed(request)
        listed = offered_tools(tools(self.toolkit), names)
        if self.scoped:
            # The caller's scopes: those of a context given once, else the verified token's
            # (a context function makes its contexts per call, not for a listing).
            caller = with_caller(self.given, current_caller())
            held = caller.scopes if caller is not None else frozenset()
            scoped = self.scoped
            listed = [each for each in listed if held.issuperset(scoped.get(each.name, ()))]
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        self, request: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The answer to one call, in its wire form: the SDK takes a handler's result as a
        dict too, and validates it (once, instead of a model built here and dumped there).
        A call that asks the user is answered as :mod:`tdk.hosts._mcp_asks` says."""
        call_id = None if request.request_id is None else str(request.request_id)
        outcome = await self._outcome(request, params, call_id)
        if isinstance(outcome, types.InputRequiredResult):
            return outcome
        if outcome.pending is not None:
            return cast(types.CallToolResult, pending_meta(answer(outcome, wrapped=False), outcome))
        wraps = self.wraps
        wrapped = outcome.error is None and (
            wraps[outcome.tool]
            if outcome.tool in wraps
            else wraps.setdefault(
                outcome.tool, output_is_wrapped(self.toolkit.get(outcome.tool).definition)
            )
        )
        return cast(types.CallToolResult, answer(outcome, wrapped=wrapped))

    async def _outcome(
        self,
        request: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        call_id: str | None,
    ) -> ToolResult | types.InputRequiredResult:
        """The result of the call: run by the runner, or refused (the server is busy), or the
        failure of what went wrong outside the tool."""
        started = time.perf_counter()
        load = self.load
        failed: BaseException | None = load.refusal()
        if failed is None:
            load.running += 1
            try:
                # The verified caller (the request record's ``auth``) fills the fields the
                # call's context leaves empty: user_id, scopes, claims.
                each = with_caller(await self.context(request), current_caller())
                return await with_progress(
                    request, served_call(self.runner, request, params, each, call_id)
                )
            except (SystemExit, KeyboardInterrupt) as stopped:
                # A tool body that exits (argparse on the model's input): the call's answer,
                # never the server's end.
                failed = stopped
            except Exception as broken:  # a context function or a state store that fails
                failed = FatalToolError(
                    "The call failed outside the tool.",
                    developer_message=f"{type(broken).__name__} from the context or the runner",
                )
            finally:
                load.running -= 1
        return failure_result(
            shown_name(params.name, None),
            failed,
            call_id=call_id,
            context=None,
            attempts=0,
            started=started,
            include_stacktrace=False,
        )

    def input_schema(self, tool_name: str) -> Mapping[str, Any] | None:
        """A tool's input schema, or None for an unknown name. (The SDK checks a modern
        client's Mcp-Param headers with it, instead of listing every tool on every call.)"""
        toolkit = self.toolkit
        return toolkit.get(tool_name).definition.input_schema if tool_name in toolkit else None


class _Served(Server[Any]):
    """The SDK's low-level server, counting in its :class:`~tdk.hosts._mcp_load.Load` the
    messages each connection's write stream has not taken yet."""

    load: Load

    async def run(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
        initialization_options: InitializationOptions,
        raise_exceptions: bool = False,
    ) -> None:
        """Serve one connection over the two streams (the SDK's ``run``)."""
        await super().run(
            read_stream, self.load.counted(write_stream), initialization_options, raise_exceptions
        )

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The SDK's, saying by default that the tool list changes (``tools.listChanged``:
        when a circuit opens or closes, see :mod:`tdk.hosts._mcp_changes`)."""
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


async def serve(
    source: Source,
    transport: Literal["stdio", "http"] = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    runner: ToolRunner | None = None,
    context: ContextSource = None,
    name: str | None = None,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    max_unread: int = DEFAULT_MAX_UNREAD,
    auth: Verifier | None = None,
    resource_url: str | None = None,
) -> None:
    """Serve the tools of ``source`` until the client goes (stdio) or the task is cancelled:
    over the process's stdin and stdout, or, with ``transport="http"``, over streamable HTTP
    at ``http://{host}:{port}/mcp``. The other options are :func:`server`'s (``max_unread``
    applies to stdio: over HTTP each answer has a response of its own).

    ``auth`` (HTTP only): a :class:`~tdk.auth.Verifier` of the bearer token every request
    must carry (``tdk.auth.JWTVerifier``, ``tdk.auth.IntrospectionVerifier``; closing it is
    yours); the token's ``sub``, scopes and claims complete each call's context. The server
    is the protected resource ``resource_url`` (default: the URL it serves), whose metadata
    it publishes at ``/.well-known/oauth-protected-resource/mcp``. See ``docs/auth.md``.

    Over HTTP, a ``runner`` given ``user_auth`` has the provider's callback served at the
    path of its ``redirect_uri``, for the one anonymous user of a server without ``auth``
    (with ``auth``, ``ValueError``: the callback could not know who opens it; your own web
    server calls ``runner.complete_authorization()`` with its session's user instead).
    """
    mcp_server = cast(
        _Served,
        server(
            source,
            runner=runner,
            context=context,
            name=name,
            max_in_flight=max_in_flight,
            max_unread=max_unread,
        ),
    )
    if transport == "stdio":
        if auth is not None:
            raise ValueError("auth= authenticates HTTP requests: serve with transport='http'")
        async with stdio_streams(mcp_server.load) as (read, write):  # (fd 1 to stderr meanwhile)
            try:
                await mcp_server.run(read, write, mcp_server.create_initialization_options())
            finally:
                # What tools printed and Python still buffers goes to stderr now: once fd 1
                # is pointed back at the protocol, it would reach the client.
                flush_stdout()
        return
    if transport != "http":
        raise ValueError(f"transport must be 'stdio' or 'http', not {transport!r}")
    protection = None
    if auth is not None:
        needs = scopes_needed(item.definition for item in _toolkit_of(source, runner, name))
        protection = Protection(auth, resource_url, needs)
    await serve_http(mcp_server, host, port, protection=protection, runner=runner)


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
    shape = mcp_tool(definition)
    try:  # (once per toolkit: the listing is kept)
        to_json(shape)
    except PydanticSerializationError:  # a lone surrogate in a description: U+FFFD, as in a
        shape = utf8_copy(shape)  # value (the listing could not be written at all)
    return types.Tool.model_validate(shape)


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
