"""``@tool`` and ``Tool``: a checked definition wrapped around a plain function.

``@tool`` does all its work when the module is imported: it checks the function, builds the
:class:`~tdk.ToolDefinition` and the :class:`~tdk._define.definition.ToolSpec` that execution reads,
and raises one :class:`~tdk.errors.ToolDefinitionError` listing every problem it found.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from contextvars import ContextVar
from types import FrameType
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

from tdk._compat.frames import calling_frame
from tdk._define import ToolOptions, define_tool, function_of
from tdk._define.definition import ApprovalOption, ToolDefinition, ToolSpec
from tdk._execution.arguments import Arguments
from tdk._execution.context import ToolContext
from tdk._execution.default import DEFAULT, Default
from tdk._execution.execute import execute, map_direct_call_error
from tdk._execution.loop import refuse_running_loop, run_blocking
from tdk._execution.result import ToolResult
from tdk._execution.telemetry import active
from tdk.auth._provider import AuthRequirement, OAuthProvider
from tdk.errors import ToolDefinitionError

__all__ = ["Tool", "tool"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Tool(Generic[_P, _R]):
    """A function checked and described by ``@tool``.

    Calling the tool calls the function with the same signature (an ``async def`` tool still
    returns a coroutine). ``definition`` is what a host shows the model; ``spec`` holds what
    execution needs on every call. Tools are built by ``@tool``, not instantiated directly.

    .. versionadded:: 0.1.0
    """

    fn: Callable[_P, _R]
    """The decorated function, unchanged."""
    definition: ToolDefinition
    """Name, description, JSON Schemas and requirements, as shown to the model."""
    spec: ToolSpec
    """Internal: the input model, output adapter and call details execution uses."""

    def __init__(self, fn: Callable[_P, _R], definition: ToolDefinition, spec: ToolSpec) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.definition = definition
        self.spec = spec

    @property
    def name(self) -> str:
        """The tool's name (``definition.name``)."""
        return self.definition.name

    @property
    def description(self) -> str:
        """The tool's description (``definition.description``)."""
        return self.definition.description

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """Call the function as if it were not decorated.

        The one difference: an uncaught exception is re-raised as the tdk error it maps to
        (``raise ... from exc``), as :meth:`run` would report it. For an ``async def`` tool the
        mapping happens when the returned coroutine is awaited.
        """
        if self.spec.is_async:
            return cast(_R, self._call_async(*args, **kwargs))
        try:
            return self.fn(*args, **kwargs)
        except Exception as exc:
            error = map_direct_call_error(exc, self.name, args, kwargs)
            if error is exc:
                raise  # a tdk error already: never its own cause
            raise error from exc

    async def _call_async(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await cast(Awaitable[Any], self.fn(*args, **kwargs))
        except Exception as exc:
            error = map_direct_call_error(exc, self.name, args, kwargs)
            if error is exc:
                raise
            raise error from exc

    def run(
        self,
        arguments: Arguments = None,
        *,
        context: ToolContext | None = None,
        call_id: str | None = None,
        timeout: float | Default | None = DEFAULT,
        include_stacktrace: bool = False,
    ) -> Coroutine[Any, Any, ToolResult]:
        """Run one call as a model would make it, and return its :class:`~tdk.ToolResult`.

        ``arguments`` is a mapping or a JSON object as text (None or blank text mean ``{}``).
        Never raises for a failure of the call: bad arguments, a missing secret, a bad return
        value and every exception of the body become ``result.error``. Only cancellation of
        the caller, ``KeyboardInterrupt`` and ``SystemExit`` propagate.

        ``timeout`` overrides the tool's own limit for this call (None: no limit).
        ``include_stacktrace`` puts the redacted traceback into ``result.error.stacktrace``.
        """
        running = execute(
            self.fn,
            self.spec,
            self.definition.name,
            arguments,
            context=context,
            call_id=call_id,
            timeout=timeout,
            include_stacktrace=include_stacktrace,
        )
        telemetry = active()  # (None unless OpenTelemetry is installed and configured)
        return (
            running if telemetry is None else telemetry.call(running, self.name, call_id, context)
        )

    def run_sync(
        self,
        arguments: Arguments = None,
        *,
        context: ToolContext | None = None,
        call_id: str | None = None,
        timeout: float | Default | None = DEFAULT,
        include_stacktrace: bool = False,
    ) -> ToolResult:
        """:meth:`run` for synchronous code (scripts, tests, a Flask view): runs the call on
        tdk's own event loop and waits for its result.

        That loop lives as long as the process, so what a tool binds to it works call
        after call (a module-level ``httpx.AsyncClient``); any number of threads may call at
        once. Returns when the call ends, at its time limit at the latest, whatever the body
        left behind (a task ignoring its cancellation keeps running on tdk's loop, a thread
        of ``asyncio.to_thread`` blocked for good is not waited for). Raises
        ``RuntimeError`` when called from a running event loop (await :meth:`run` there).
        """
        refuse_running_loop("run_sync", "run")
        return run_blocking(
            self.run(
                arguments,
                context=context,
                call_id=call_id,
                timeout=timeout,
                include_stacktrace=include_stacktrace,
            )
        )

    def __repr__(self) -> str:
        return f"<Tool {self.name!r} of {self.fn.__module__}.{self.fn.__qualname__}>"

    def __reduce__(self) -> str:
        # Pickle by reference, like the function it replaces in its module.
        return self.fn.__qualname__


@overload
def tool(fn: Callable[_P, _R], /) -> Tool[_P, _R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_secrets: Iterable[str] = (),
    requires_metadata: Iterable[str] = (),
    requires_scopes: Iterable[str] = (),
    timeout: float | None = None,
    deprecated: str | None = None,
    inline: bool = False,
    read_only: bool = False,
    idempotent: bool | None = None,
    destructive: bool | None = None,
    open_world: bool = True,
    requires_approval: ApprovalOption = False,
    requires_auth: OAuthProvider | AuthRequirement | None = None,
) -> Callable[[Callable[_P, _R]], Tool[_P, _R]]: ...


def tool(
    fn: Callable[_P, _R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_secrets: Iterable[str] = (),
    requires_metadata: Iterable[str] = (),
    requires_scopes: Iterable[str] = (),
    timeout: float | None = None,
    deprecated: str | None = None,
    inline: bool = False,
    read_only: bool = False,
    idempotent: bool | None = None,
    destructive: bool | None = None,
    open_world: bool = True,
    requires_approval: ApprovalOption = False,
    requires_auth: OAuthProvider | AuthRequirement | None = None,
) -> Tool[_P, _R] | Callable[[Callable[_P, _R]], Tool[_P, _R]]:
    """Turn a function into a :class:`Tool`, checking its definition now.

    Use it bare (``@tool``) or with options (``@tool(name=..., ...)``):

    - ``name``, ``description``: what the model sees (default: the function's name, and its
      docstring without the parameter section);
    - ``requires_secrets``, ``requires_metadata``, ``requires_scopes``: what the
      :class:`~tdk.ToolContext` must hold before the tool runs (scopes: the caller's OAuth
      scopes; over MCP a caller without them does not see the tool: ``docs/auth.md``);
    - ``timeout``: the tool's own time limit in seconds; ``deprecated``: what to use instead;
    - ``inline``: run a trivial sync tool on the event loop (``timeout`` refused);
    - ``read_only``, ``idempotent``, ``destructive``, ``open_world``: what calling it does
      (:class:`~tdk.ToolAnnotations`, MCP's meanings and defaults; a write is retried only
      where the upstream certainly did not act);
    - ``requires_approval``: ``True``, or a function of the arguments (a dict) and the context
      saying whether this call needs the user's confirmation first (``docs/asks.md``);
    - ``requires_auth``: an :class:`~tdk.auth.OAuthProvider` (or ``.with_scopes(...)``) the
      tool acts on as the user, whose token is ``context.auth_token`` (``docs/auth.md``).

    ``fn``: a function, a bound method (``tool(client.search)``) or a staticmethod. Raises
    :class:`~tdk.errors.ToolDefinitionError` (or its input/output subclass) listing every
    problem of the definition at once (``docs/definitions.md``, ``docs/problems.md``).

    .. versionadded:: 0.1.0
    """
    options = ToolOptions(  # (in the order of its fields, which is this signature's)
        name, description, requires_secrets, requires_metadata, requires_scopes, timeout,
        deprecated, inline, read_only, idempotent, destructive, open_world, requires_approval,
        requires_auth,
    )  # fmt: skip
    if fn is None:
        return _Decorator(options)
    return _make_tool(fn, options, calling_frame())


class _Decorator:
    """What ``@tool(...)`` with options returns: it makes a tool of the function it is
    applied to, with those options."""

    __slots__ = ("options",)

    def __init__(self, options: ToolOptions) -> None:
        self.options = options

    def __call__(self, fn: Callable[_P, _R]) -> Tool[_P, _R]:
        return _make_tool(fn, self.options, calling_frame())


def _make_tool(
    fn: Callable[_P, _R], options: ToolOptions, caller: FrameType | None
) -> Tool[_P, _R]:
    """Check ``fn`` and wrap it; ``caller`` is the frame that applied the decorator (None
    where Python keeps no frames: see :mod:`tdk._compat.frames`)."""
    target = cast(Callable[_P, _R], function_of(fn))
    try:
        localns = None
        if caller is not None and caller.f_locals is not caller.f_globals:
            localns = caller.f_locals
        definition, spec = define_tool(target, options, localns, tool_type=Tool)
    except ToolDefinitionError as error:
        collector = _collector.get()  # read on the failure path only
        if collector is None:
            raise
        collector.record(error, caller)
        # The import goes on with the function undecorated; a positional option given by
        # mistake (``@tool("search")``) becomes a decorator that changes nothing.
        return cast(Tool[_P, _R], fn if callable(fn) else _unchanged)
    return Tool(target, definition, spec)


def _unchanged(fn: Any) -> Any:
    return fn


class _Collector:
    """What ``@tool`` recorded instead of raising, in :func:`collect_definition_errors`."""

    __slots__ = ("errors", "imported_before", "modules")

    def __init__(self) -> None:
        self.errors: list[ToolDefinitionError] = []
        self.imported_before = frozenset(sys.modules)
        self.modules: set[str] = set()
        """The modules the errors would have failed: each one being imported at the time."""

    def record(self, error: ToolDefinitionError, caller: FrameType | None) -> None:
        """Record ``error``, raised by ``@tool`` as applied in the frame ``caller``."""
        self.errors.append(error)
        frame: FrameType | None = caller
        while frame is not None:  # the module of the tool and the modules importing it
            name = frame.f_globals.get("__name__", "")
            if frame.f_code.co_name == "<module>" and name not in self.imported_before:
                self.modules.add(name)
            frame = frame.f_back


_collector: ContextVar[_Collector | None] = ContextVar("tdk_collector", default=None)


@contextlib.contextmanager
def collect_definition_errors() -> Iterator[list[ToolDefinitionError]]:
    """Private mode for the ``tdk`` command: report every broken tool of a module, not the first.

    Inside the block, a ``@tool`` that finds problems appends its
    :class:`~tdk.errors.ToolDefinitionError` to the list this yields and returns the function
    undecorated, so that the import goes on to the next tool. On leaving the block, every
    module in which an error was recorded is removed from ``sys.modules``, as a failed import
    would be: importing it later raises as usual instead of handing out plain functions.
    """
    collector = _Collector()
    token = _collector.set(collector)
    try:
        yield collector.errors
    finally:
        _collector.reset(token)
        for name in collector.modules:
            sys.modules.pop(name, None)


def definition_errors_recorded() -> bool:
    """Whether ``@tool`` has recorded an error in the current :func:`collect_definition_errors`
    block (False outside one)."""
    collector = _collector.get()
    return collector is not None and bool(collector.errors)
