"""The front door of every call: how a call's result is made, and how a failure is reported.

Every way into a call (``Tool.run``, ``Toolkit.run``, ``ToolRunner.run``, an MCP host's
``tools/call``) answers with a :class:`~tdk.ToolResult` made here. A failure, whatever refused
or broke the call (the tool's body, its arguments, an unknown name, a policy of the runner, an
answer MCP cannot send), becomes its result in one place: the error classified and redacted
(:func:`failure_result` from an exception, :func:`failed` from an ``ErrorInfo`` already made),
with the call's name, id, attempts and duration, and one log record, built only when a handler
will see it. A host or a runner never logs a failure itself, nor builds its result by hand.

The names here are tdk's internal API between its front doors; nothing here imports them.
"""

from __future__ import annotations

import logging
from time import perf_counter
from typing import Any, Final

from tdk._execution.asks import Pending
from tdk._execution.context import ToolContext, secrets_of
from tdk._execution.exchanges import Exchanges
from tdk._execution.result import ToolResult
from tdk._execution.telemetry import active
from tdk._execution.writes import may_have_acted, not_repeated
from tdk._failures.info import error_info_from_exception
from tdk._failures.log_line import log_token
from tdk._failures.records import maker
from tdk._failures.redact import redact_text
from tdk.errors import ErrorInfo, ErrorKind, FatalToolError, ToolInputRequiredError

__all__ = [
    "MAX_SHOWN_NAME",
    "check_call_id",
    "failed",
    "failed_instead",
    "failure_result",
    "logged_call_id",
    "logger",
    "new_result",
    "pending_of",
    "shown_name",
    "traced_failure",
]

logger: Final = logging.getLogger("tdk")
"""The ``tdk`` logger: one record per failed call (WARNING; ERROR for tool bugs)."""
logger.addHandler(logging.NullHandler())  # a library never prints unless the app configures it


#: Makes a ToolResult from a complete record, in field order, of values already checked.
_new_result: Final = maker(ToolResult)

#: Kinds that are bugs in the tool rather than failures of the call: logged at ERROR.
_TOOL_BUG_KINDS: Final = frozenset(
    {ErrorKind.TOOL_RUNTIME_FATAL, ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE}
)


def new_result(
    name: str,
    call_id: str | None,
    value: Any,
    error: ErrorInfo | None,
    attempts: int,
    *,
    started: float,
) -> ToolResult:
    """A call's result; ``started``: ``perf_counter()`` at the start of the call."""
    return _new_result(
        {
            "tool": name,
            "call_id": call_id,
            "value": value,
            "error": error,
            "attempts": attempts,
            "duration_ms": (perf_counter() - started) * 1000,
            "pending": None,
        }
    )


def failed(
    name: str,
    info: ErrorInfo,
    call_id: str | None,
    attempts: int,
    started: float,
    *,
    secrets: tuple[str, ...] = (),
    attempt: tuple[int, int] | None = None,
) -> ToolResult:
    """The result of a call (or of a runner's attempt ``(n, of)``) that failed with ``info``,
    logged once (its id redacted with the call's ``secrets``)."""
    _log_failure(info, call_id, secrets, attempt)
    return new_result(name, call_id, None, info, attempts, started=started)


def failed_instead(result: ToolResult, info: ErrorInfo) -> ToolResult:
    """``result``, a success that cannot be delivered as it is (a host cannot send its value),
    as the failure ``info``, logged once: its value dropped, its attempts and duration kept."""
    _log_failure(info, result.call_id, (), None)
    return result.model_copy(update={"value": None, "error": info})


async def traced_failure(result: ToolResult, context: ToolContext | None) -> ToolResult:
    """``result``, a failure made without running anything (an unknown tool's), in its span
    with its duration recorded, as any call's, when OpenTelemetry records."""
    telemetry = active()
    if telemetry is None:
        return result
    return await telemetry.call(_ready(result), result.tool, result.call_id, context)


async def _ready(result: ToolResult) -> ToolResult:
    return result


def failure_result(
    name: str,
    exc: BaseException,
    *,
    call_id: str | None,
    context: ToolContext | None,
    attempts: int,
    started: float,
    include_stacktrace: bool,
    attempt: tuple[int, int] | None = None,
    writes: Exchanges | None = None,
) -> ToolResult:
    """The result of a call that failed with ``exc``: classified, redacted and logged once.

    ``started`` is the ``perf_counter()`` reading at the start of the call; ``attempt`` is
    ``(n, of)`` for an attempt of a runner's call. ``writes``: for a call of a tool that may
    write, that no runner judges, what its requests may have done (:mod:`tdk._execution.exchanges`):
    a failure after its body started (``attempts``) that may have acted is then not offered
    for repeating (:mod:`tdk._execution.writes`).
    """
    secrets = secrets_of(context)
    try:
        info = error_info_from_exception(
            exc, name, include_stacktrace=include_stacktrace, secrets=secrets
        )
    except Exception as unreadable:  # pragma: no cover (a bug of tdk's: no known exception
        # reaches here any more; tests/execution/test_execute_failures.py lists those that did)
        info = _type_only_failure(exc, name, unreadable)
    if writes is not None and attempts and info.retryable and may_have_acted(info, writes):
        info = info.model_copy(update=not_repeated(info))  # the write may have happened
    result = failed(name, info, call_id, attempts, started, secrets=secrets, attempt=attempt)
    if type(exc) is ToolInputRequiredError and exc.requests:
        return result.model_copy(update={"pending": pending_of(exc.requests, secrets)})
    return result


def pending_of(requests: dict[str, dict[str, Any]], secrets: tuple[str, ...]) -> Pending:
    """What a call that asked ``requests`` waits for (no token yet: a runner seals one). A
    message is redacted as every text of a failure is; the rest is the tool's own data."""
    shown = {
        key: {**request, "message": redact_text(str(request.get("message", "")), secrets)}
        for key, request in requests.items()
    }
    return Pending(requests=shown)


def _type_only_failure(  # pragma: no cover (see failure_result())
    exc: BaseException, name: str, unreadable: Exception
) -> ErrorInfo:
    """A fatal error naming only the type of ``exc``, when describing it failed: ``run()``
    returns a result whatever the tool raised."""
    cause = type(exc).__name__[:200]
    record = {
        "error": FatalToolError.__name__,
        "kind": ErrorKind.TOOL_RUNTIME_FATAL,
        "category": FatalToolError.category,
        "message": redact_text(f"An unhandled {cause} was raised by the tool."),
        "developer_message": (
            f"tdk could not describe the {redact_text(cause)}: reading it raised "
            f"{type(unreadable).__name__}."
        ),
        "retryable": False,
        "tool_name": name,
        "cause": redact_text(cause),
    }
    info: ErrorInfo = ErrorInfo.__pydantic_validator__.validate_python(record)
    return info


#: Longest unknown tool name that results, messages and logs repeat (a valid name has at
#: most 64 characters; a model may send anything).
MAX_SHOWN_NAME: Final = 100


def shown_name(name: str, context: ToolContext | None) -> str:
    """An unknown tool name as a result may repeat it: redacted (the model sent it, and it may
    carry anything, a secret of the call's context included) and cut."""
    return redact_text(name, secrets_of(context), limit=MAX_SHOWN_NAME)


def logged_call_id(call_id: str | None, secrets: tuple[str, ...]) -> str | None:
    """A call id as log lines show it: redacted with the call's ``secrets``, cut, and
    JSON-quoted unless it is a plain token (a model may send any text, a newline that would
    forge a second record included). None for a call without one."""
    if call_id is None:
        return None
    return log_token(redact_text(call_id, secrets, limit=MAX_SHOWN_NAME))


def check_call_id(call_id: object) -> None:
    """Raise ``TypeError`` unless ``call_id`` is a ``str`` or None (checked before a call
    runs: a wrong one is the caller's bug, not the tool's failure)."""
    if call_id is not None and type(call_id) is not str:
        raise TypeError(f"call_id must be a str or None, not {type(call_id).__name__}")


def _log_failure(
    info: ErrorInfo,
    call_id: str | None,
    secrets: tuple[str, ...],
    attempt: tuple[int, int] | None,
) -> None:
    """One record per failure, built only when a handler will see it.

    The message is the error's log line and the call's id and attempt (``call_id=c-7
    attempt="2 of 3"``, formatted lazily, by the handler); the record's ``tdk_error``
    attribute is the error's ``to_dict()``, and ``tdk_call`` the call's ``call_id`` (as the
    line shows it), ``attempt`` and ``max_attempts`` (None outside a runner). With logging
    unconfigured this costs a few attribute lookups: tdk's own handler is a ``NullHandler``.
    """
    level = logging.ERROR if info.kind in _TOOL_BUG_KINDS else logging.WARNING
    if not logger.isEnabledFor(level) or not _has_listener(level):
        return
    try:
        shown = logged_call_id(call_id, secrets)
        number, of = attempt if attempt is not None else (None, None)
        record = logger.makeRecord(
            logger.name,
            level,
            __file__,
            0,
            "%s",
            (_LogLine(info, shown, attempt),),
            None,
            func="execute",
            extra={
                "tdk_error": info.to_dict(),
                "tdk_call": {"call_id": shown, "attempt": number, "max_attempts": of},
            },
        )
        logger.handle(record)
    except Exception:  # noqa: S110
        # A handler that fails (or logging's own report of it, on a closed stderr): the
        # call's result is what matters, and the caller has it.
        pass


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
    """Formats an error's log line only when a handler asks for the message: the error's
    own (:meth:`ErrorInfo.to_log_line`), then the call's id and attempt, when known."""

    __slots__ = ("attempt", "call_id", "info")

    def __init__(
        self, info: ErrorInfo, call_id: str | None, attempt: tuple[int, int] | None
    ) -> None:
        self.info = info
        self.call_id = call_id
        self.attempt = attempt

    def __str__(self) -> str:
        line = self.info.to_log_line()
        if self.call_id is not None:
            line += f" call_id={self.call_id}"
        if self.attempt is not None:
            line += f' attempt="{self.attempt[0]} of {self.attempt[1]}"'
        return line
