"""Running a tool: arguments in, one :class:`~tdk.ToolResult` out, whatever happens.

A call goes arguments -> requirements -> validation -> function -> output validation ->
``ToolResult``. A failure goes exception -> the one table of :mod:`tdk._classify` ->
:meth:`ErrorInfo.from_exception` (where redaction happens) -> ``ToolResult``; arguments that
do not validate are described by :mod:`tdk._arguments`. Everything that needs reflection was
done by ``@tool``; nothing here inspects the function.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from tdk._arguments import Arguments, invalid_arguments, validate_arguments
from tdk._classify import to_tool_error
from tdk._context import ToolContext, secret_values
from tdk._redact import call_secrets, end_call_secrets
from tdk._result import ToolResult
from tdk.errors import (
    ErrorInfo,
    ErrorKind,
    ToolError,
    ToolOutputError,
    ToolRequirementError,
    ToolTimeoutError,
)

if TYPE_CHECKING:
    from tdk._definition import ToolSpec

logger: Final = logging.getLogger("tdk")
"""The ``tdk`` logger: one record per failed call (WARNING; ERROR for tool bugs)."""
logger.addHandler(logging.NullHandler())  # a library never prints unless the app configures it


#: ToolResult's own validator, called directly: ``ToolResult(...)`` adds a frame per call.
_new_result: Final[Callable[[dict[str, Any]], ToolResult]] = (
    ToolResult.__pydantic_validator__.validate_python
)


class _Default(enum.Enum):
    DEFAULT = "DEFAULT"


DEFAULT: Final = _Default.DEFAULT
"""Sentinel for "use the tool's own setting" (e.g. ``timeout=DEFAULT``)."""


_CancelledError: Final = asyncio.CancelledError
#: Exceptions that end the program or the thread, never a tool call's result.
_ALWAYS_PROPAGATE: Final = (KeyboardInterrupt, SystemExit)

#: Kinds that are bugs in the tool rather than failures of the call: logged at ERROR.
_TOOL_BUG_KINDS: Final = frozenset(
    {ErrorKind.TOOL_RUNTIME_FATAL, ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE}
)


async def execute(
    fn: Callable[..., Any],
    spec: ToolSpec,
    name: str,
    arguments: Arguments,
    *,
    context: ToolContext | None = None,
    call_id: str | None = None,
    timeout: float | _Default | None = DEFAULT,
    include_stacktrace: bool = False,
) -> ToolResult:
    """Run one call of a tool and return its result; only cancellation of the caller,
    ``KeyboardInterrupt`` and ``SystemExit`` escape."""
    start = perf_counter()
    # The call's secrets are scrubbed from every text redacted while it runs (the HTTP
    # hook's errors, httpx's log lines), not only from its result.
    secrets = () if context is None else _secrets_of(context)
    ambient = call_secrets(secrets) if secrets else None
    try:
        attempts = 0
        task = asyncio.current_task()
        cancelling = task.cancelling() if task is not None else 0  # requests made before this call
        try:
            if spec.requirements.secrets or spec.requirements.metadata:
                _check_requirements(spec, context)
            model = spec.input_model
            try:
                validated = (  # a plain dict, as models send, goes straight to the validator
                    model.__pydantic_validator__.validate_python(arguments)
                    if type(arguments) is dict
                    else validate_arguments(model, arguments)
                )
            except ValidationError as invalid:
                info = invalid_arguments(invalid, spec, name, secrets)
                return _finish(name, info, call_id, 0, start)
            kwargs = spec.arguments(validated, context)
            attempts = 1
            if spec.inline:  # trivial sync tool: no thread hop, and no time limit can apply
                value = fn(**kwargs)
            else:
                limit = spec.timeout if timeout is DEFAULT else timeout
                awaitable = fn(**kwargs) if spec.is_async else _in_thread(fn, kwargs)
                value = await (awaitable if limit is None else _await_with_limit(awaitable, limit))
            adapter = spec.output_adapter
            try:  # the core validator and serializer: the TypeAdapter methods add a frame each
                output = adapter.serializer.to_python(
                    adapter.validator.validate_python(value), mode="json"
                )
            except (ValidationError, PydanticSerializationError) as mismatch:
                raise _output_error(mismatch) from None
        except _CancelledError as exc:
            if task is not None and task.cancelling() > cancelling:
                raise  # the caller is being cancelled: never swallow that
            failure: BaseException = exc
        except _ALWAYS_PROPAGATE:
            raise
        except BaseException as exc:
            if (
                isinstance(exc.__context__, _CancelledError)
                and task is not None
                and task.cancelling() > cancelling
            ):
                # The body turned the caller's cancellation into another error (a cleanup that
                # failed while the cancellation was in flight): the cancellation still wins. (The
                # context check matters on 3.11, where a failed TaskGroup leaves its own
                # cancellation request counted.)
                raise asyncio.CancelledError from exc
            failure = exc
        else:
            return _new_result(
                {
                    "tool": name,
                    "call_id": call_id,
                    "value": output,
                    "error": None,
                    "attempts": attempts,
                    "duration_ms": (perf_counter() - start) * 1000,
                }
            )
        result = failed(
            name,
            failure,
            call_id=call_id,
            context=context,
            attempts=attempts,
            started=start,
            include_stacktrace=include_stacktrace,
        )
        # The exception's traceback holds this frame, which holds the exception (and, for a sync
        # tool, the future that carried it): without this, every failed call would leave a
        # reference cycle for the garbage collector.
        del failure
        awaitable = None
        return result
    finally:
        if ambient is not None:
            end_call_secrets(ambient)


def failed(
    name: str,
    exc: BaseException,
    *,
    call_id: str | None,
    context: ToolContext | None,
    attempts: int,
    started: float,
    include_stacktrace: bool,
) -> ToolResult:
    """The result of a call that failed with ``exc``: classified, redacted and logged once.

    ``started`` is the ``perf_counter()`` reading at the start of the call.
    """
    info = ErrorInfo.from_exception(
        exc, name, include_stacktrace=include_stacktrace, secrets=_secrets_of(context)
    )
    return _finish(name, info, call_id, attempts, started)


def _finish(
    name: str, info: ErrorInfo, call_id: str | None, attempts: int, started: float
) -> ToolResult:
    """The result of a failed call, logged once."""
    _log_failure(info)
    return _new_result(
        {
            "tool": name,
            "call_id": call_id,
            "value": None,
            "error": info,
            "attempts": attempts,
            "duration_ms": (perf_counter() - started) * 1000,
        }
    )


async def _await_with_limit(awaitable: Any, limit: float) -> Any:
    try:
        async with asyncio.timeout(limit) as scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise ToolTimeoutError(
                f"The tool did not finish within {limit:.3g} s.", timeout=limit
            ) from None
        raise  # a TimeoutError of the tool's own: mapped by the table
    finally:
        awaitable = None  # the future holds the exception whose traceback holds this frame


def _in_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
    """Run a sync tool in the loop's default worker pool, with the caller's context vars.

    A sync tool that overruns its time limit yields a timeout result at once, but its thread
    cannot be stopped: it runs to completion in the background.
    """
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, **kwargs)
    return loop.run_in_executor(None, call)


def _check_requirements(spec: ToolSpec, context: ToolContext | None) -> None:
    secrets = context.secrets if context is not None else {}
    metadata = context.metadata if context is not None else {}
    missing_secrets = [n for n in spec.requirements.secrets if not secrets.get(n)]
    missing_metadata = [n for n in spec.requirements.metadata if n not in metadata]
    if missing_secrets or missing_metadata:
        missing = [f"secret '{n}'" for n in missing_secrets]
        missing += [f"metadata '{n}'" for n in missing_metadata]
        raise ToolRequirementError(
            f"The tool cannot run: {', '.join(missing)} missing from its context.",
            missing_secrets=missing_secrets or None,
            missing_metadata=missing_metadata or None,
            developer_message=(
                "Pass the missing values in ToolContext(secrets={...}, metadata={...}) "
                "when calling the tool."
            ),
        )


def _output_error(exc: ValidationError | PydanticSerializationError) -> ToolOutputError:
    """The error for a return value that does not match the return annotation."""
    problems = (
        "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        )
        if isinstance(exc, ValidationError)
        else type(exc).__name__
    )
    return ToolOutputError(
        "The tool failed: it returned a result that does not match its declared type.",
        developer_message=f"The return value does not match the return annotation: {problems}",
    )


def _secrets_of(context: ToolContext | None) -> tuple[str, ...]:
    """The exact values to scrub for a call with ``context`` (computed once per context)."""
    if context is None:
        return ()
    try:
        return context._secret_values  # tdk's own attribute, computed by ToolContext
    except AttributeError:
        if isinstance(context, ToolContext):  # a subclass whose __post_init__ skipped ours
            return secret_values(context)
        raise TypeError(
            f"context must be a ToolContext or None, not {type(context).__name__}"
        ) from None


def _log_failure(info: ErrorInfo) -> None:
    """One record per failure, built only when a handler will see it.

    The message is the error's log line (formatted lazily, by the handler); the record's
    ``tdk_error`` attribute is its ``to_dict()``. With logging unconfigured this costs a few
    attribute lookups: tdk's own handler is a ``NullHandler``.
    """
    level = logging.ERROR if info.kind in _TOOL_BUG_KINDS else logging.WARNING
    if not logger.isEnabledFor(level) or not _has_listener(level):
        return
    record = logger.makeRecord(
        logger.name,
        level,
        __file__,
        0,
        "%s",
        (_LogLine(info),),
        None,
        func="execute",
        extra={"tdk_error": info.to_dict()},
    )
    logger.handle(record)


def _has_listener(level: int) -> bool:
    """Whether a handler other than a NullHandler would receive a record at ``level``."""
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if level >= handler.level and not isinstance(handler, logging.NullHandler):
                return True
        current = current.parent if current.propagate else None
    return False


class _LogLine:
    """Formats an error's log line only when a handler asks for the message."""

    __slots__ = ("info",)

    def __init__(self, info: ErrorInfo) -> None:
        self.info = info

    def __str__(self) -> str:
        return self.info.to_log_line()


def map_direct_call_error(
    exc: Exception, name: str, args: Iterable[object], kwargs: Mapping[str, object]
) -> ToolError:
    """The tdk error a direct call of a tool raises for ``exc``; ``exc`` itself when it is a
    tdk error. Secrets of a ``ToolContext`` among the call's arguments are redacted."""
    contexts = [a for a in (*args, *kwargs.values()) if isinstance(a, ToolContext)]
    error = to_tool_error(exc, secrets=[s for c in contexts for s in _secrets_of(c)])
    if error.tool_name is None:
        error.tool_name = name
    return error
