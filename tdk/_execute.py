"""Running a tool: arguments in, one :class:`~tdk.ToolResult` out, whatever happens.

A call goes arguments -> requirements -> validation -> function -> output validation ->
``ToolResult``. A failure goes exception -> the one table of :mod:`tdk._failures.table` ->
:meth:`ErrorInfo.from_exception` (where redaction happens) -> ``ToolResult``; arguments that
do not validate are described by :mod:`tdk._arguments`. A failure of a tool that may write
which may have acted is not offered for repeating (:mod:`tdk._writes`: what the body's
requests did is noted while it runs, :mod:`tdk._exchanges`). Everything that needs reflection
was done by ``@tool``; nothing here inspects the function.

This is the hot path of every call, and is written to cost little above pydantic's own
validate-call-serialise floor (``bench/bench_execute.py`` measures it). So: pydantic's core
validators and serializers are called directly (``__pydantic_validator__``, the adapter's
``validator`` and ``serializer``) where the model constructors and ``TypeAdapter`` methods
would add a Python frame each; ``Tool.run`` hands back the coroutine of :func:`execute`
itself; a failure is read straight into its ``ErrorInfo`` fields, without building a tdk
exception first, and each text is redacted once, where it is made; the caller's cancellation
count is read once before the body and once after; the log record is built only when a
handler will see it; and a few small things are inline (a ``try`` rather than
``contextlib.suppress``, tuples rather than ``X | Y`` in ``isinstance``) for the same reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from tdk._arguments import (
    Arguments,
    few_unknown_keys,
    invalid_arguments,
    null_failed,
    unreadable_arguments,
    validate_arguments,
    validate_with_null_defaults,
)
from tdk._compat.running_task import TASK_OF
from tdk._context import ToolContext, secrets_of
from tdk._default import DEFAULT, Default
from tdk._exchanges import CURRENT, NOTHING_NOTED, NOTING, Exchanges, unwatch
from tdk._failures.foreign import describe
from tdk._failures.info import error_info_from_exception
from tdk._failures.log_line import log_token as _log_token
from tdk._failures.table import to_tool_error
from tdk._model_text import utf8_copy
from tdk._records import maker
from tdk._redact import call_secrets, end_call_secrets, redact_text
from tdk._result import ToolResult
from tdk._seconds import finite, shown
from tdk._threads import DROPPED, FINISHED, Job, run_in_worker
from tdk._time_limit import await_coroutine, await_job
from tdk._writes import may_have_acted, not_repeated
from tdk.errors import (
    ErrorInfo,
    ErrorKind,
    FatalToolError,
    ToolError,
    ToolOutputError,
    ToolRequirementError,
)

if TYPE_CHECKING:
    from tdk._definition import ToolSpec

logger: Final = logging.getLogger("tdk")
"""The ``tdk`` logger: one record per failed call (WARNING; ERROR for tool bugs)."""
logger.addHandler(logging.NullHandler())  # a library never prints unless the app configures it


#: Makes a ToolResult from a complete record, in field order, of values already checked.
_new_result: Final = maker(ToolResult)


_CancelledError: Final = asyncio.CancelledError

_running_loop: Final = asyncio.get_running_loop
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
    timeout: float | Default | None = DEFAULT,
    include_stacktrace: bool = False,
    lingering: list[Job] | None = None,
    attempt: tuple[int, int] | None = None,
    exchanges: Exchanges | None = None,
) -> ToolResult:
    """Run one call of a tool and return its result; only the caller's cancellation,
    ``KeyboardInterrupt``, ``SystemExit`` and (before anything runs) a ``TypeError`` or
    ``ValueError`` for a wrong ``call_id`` or ``timeout`` escape. ``lingering``: see
    :func:`_wait_for`. A runner passes ``attempt=(n, of)`` (logged) and ``exchanges``, its
    record of the attempt's requests (:mod:`tdk._exchanges`): it judges a failure itself."""
    start = perf_counter()
    if (call_id is not None and type(call_id) is not str) or (
        timeout is not DEFAULT
        and timeout is not None
        and (type(timeout) is not float or not 0.0 < timeout < math.inf)
    ):
        timeout = _checked_options(call_id, timeout)
    secrets = () if context is None else secrets_of(context)
    ambient = call_secrets(secrets) if secrets else None  # (scrubbed from all it redacts)
    watched = exchanges or (Exchanges() if spec.writes and NOTING.on else None)  # a write's own
    watching = None if watched is None else (CURRENT.set(watched), watched)
    try:
        attempts = 0
        job: Job | None = None
        task = TASK_OF(_running_loop())  # (without a Python frame: tdk._compat.running_task)
        cancelling = task.cancelling() if task is not None else 0  # requests made before this call
        try:
            if spec.requirements.secrets or spec.requirements.metadata:
                _check_requirements(spec, context)
            validated = _validated(spec, name, arguments, secrets)
            if type(validated) is ErrorInfo:
                return _logged_failure(name, validated, call_id, 0, start, log=(secrets, attempt))
            kwargs = validated.__dict__ if spec.plain else spec.arguments(validated, context)
            attempts = 1
            if spec.inline:  # trivial sync tool: no thread hop, and no time limit can apply
                value = fn(**kwargs)
            elif spec.is_async:
                limit = spec.timeout if timeout is DEFAULT else timeout
                value = await (
                    fn(**kwargs) if limit is None else await_coroutine(fn(**kwargs), limit)
                )
            else:
                job = run_in_worker(fn, kwargs)
                await _wait_for(job, spec.timeout if timeout is DEFAULT else timeout, lingering)
                value = job.outcome()  # here: a StopIteration must not cross a coroutine's end
            output = _checked_output(spec, value)
        except _ALWAYS_PROPAGATE:
            raise
        except BaseException as exc:
            if task is not None and task.cancelling() > cancelling:
                _raise_if_cancelling(exc)  # the caller is being cancelled: never swallow that
            return failure_result(  # (in here: leaving it unbinds exc, no reference cycle)
                name,
                exc,
                call_id=call_id,
                context=context,
                attempts=0 if job is not None and job.state is DROPPED else attempts,
                started=start,
                include_stacktrace=include_stacktrace,
                attempt=attempt,
                writes=watched or NOTHING_NOTED if spec.writes and exchanges is None else None,
            )
        if _RELIABLE_CANCELLING and task is not None and task.cancelling() > cancelling:
            # The body swallowed its caller's cancellation (tested on Python 3.13 and up).
            raise asyncio.CancelledError  # pragma: no cover
        return _result(name, call_id, output, None, attempts, started=start)
    finally:
        if ambient is not None:
            end_call_secrets(ambient)
        if watching is not None:
            unwatch(*watching)


def _validated(
    spec: ToolSpec, name: str, arguments: Arguments, secrets: tuple[str, ...]
) -> BaseModel | ErrorInfo:
    """The arguments validated by the tool's input model, or the error saying why not."""
    unlisted = 0
    try:
        if type(arguments) is dict:  # a plain dict, as models send: straight to the validator
            if len(arguments) > spec.most_keys:  # (a flood of unknown keys: cut it first)
                arguments, unlisted = few_unknown_keys(spec, arguments)
            validated: BaseModel = spec.input_model.__pydantic_validator__.validate_python(
                arguments
            )
            return validated
        return validate_arguments(spec.input_model, arguments)
    except ValidationError as invalid:
        found = invalid.errors(include_url=False, include_input=False)
    except Exception as unreadable:  # a mapping whose items cannot be read...
        return unreadable_arguments(unreadable, spec, name)
    names = spec.null_defaults
    if names and null_failed(names, found):
        try:  # a null may have meant "not given"
            return validate_with_null_defaults(spec.input_model, names, arguments)
        except ValidationError as invalid:
            found = invalid.errors(include_url=False, include_input=False)
        except Exception as unreadable:  # (read again: it may fail this time)
            return unreadable_arguments(unreadable, spec, name)
    return invalid_arguments(found, spec, name, secrets, unlisted)


def _checked_output(spec: ToolSpec, value: object) -> Any:
    """The return value validated by the return annotation and serialised as JSON data (by
    alias, as the output schema names fields), or a :class:`~tdk.errors.ToolOutputError` (a
    mismatch, or a value JSON cannot carry)."""
    adapter = spec.output_adapter
    try:
        output = adapter.serializer.to_python(
            adapter.validator.validate_python(value)
            if spec.output_extra is None
            else adapter.validator.validate_python(value, extra=spec.output_extra),
            mode="json",
            by_alias=True,  # the names the output schema advertises
        )
        if spec.output_numbers:
            try:
                _check_numbers(output)
            except PydanticSerializationError as unwritable:
                if "surrogates not allowed" not in str(unwritable):
                    raise
                output = utf8_copy(output)  # text read with surrogateescape: U+FFFD for each
                _check_numbers(output)
    except Exception as mismatch:
        raise _output_error(mismatch) from None
    return output


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
    write, that no runner judges, what its requests may have done (:mod:`tdk._exchanges`):
    a failure after its body started (``attempts``) that may have acted is then not offered
    for repeating (:mod:`tdk._writes`).
    """
    secrets = secrets_of(context)
    try:
        info = error_info_from_exception(
            exc, name, include_stacktrace=include_stacktrace, secrets=secrets
        )
    except Exception as unreadable:  # pragma: no cover (a bug of tdk's: no known exception
        # reaches here any more; tests/test_execute_hostile.py lists those that did)
        info = _type_only_failure(exc, name, unreadable)
    if writes is not None and attempts and info.retryable and may_have_acted(info, writes):
        info = info.model_copy(update=not_repeated(info))  # the write may have happened
    return _logged_failure(name, info, call_id, attempts, started, log=(secrets, attempt))


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


def _logged_failure(
    name: str,
    info: ErrorInfo,
    call_id: str | None,
    attempts: int,
    started: float,
    *,
    log: tuple[tuple[str, ...], tuple[int, int] | None],
) -> ToolResult:
    """The result of a failed call (or attempt), logged once (``log``: the call's secrets,
    to redact its id with, and its attempt ``(n, of)`` in a runner, else None)."""
    _log_failure(info, call_id, *log)
    return _result(name, call_id, None, info, attempts, started=started)


def logged_call_id(call_id: str | None, secrets: tuple[str, ...]) -> str | None:
    """A call id as log lines show it: redacted with the call's ``secrets``, cut, and
    JSON-quoted unless it is a plain token (a model may send any text, a newline that would
    forge a second record included). None for a call without one."""
    if call_id is None:
        return None
    return _log_token(redact_text(call_id, secrets, limit=MAX_SHOWN_NAME))


def _result(
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
        }
    )


#: Whether a pending cancellation request of the caller can be told from the count alone. On
#: Python 3.11 and 3.12 a TaskGroup that failed inside the body leaves its own request counted
#: (gh-116720), so only a cancellation seen on its way (an exception) is trusted there; from
#: 3.13 on, a body that swallowed its caller's cancellation is caught too.
_RELIABLE_CANCELLING: Final = sys.version_info >= (3, 13)


def _raise_if_cancelling(exc: BaseException) -> None:
    """While the caller is being cancelled: re-raise its cancellation, also when the body
    turned it into another error (a cleanup that failed while the cancellation was in
    flight), or (where the count is reliable) swallowed it and failed otherwise."""
    if isinstance(exc, _CancelledError):
        raise exc
    if isinstance(exc.__context__, _CancelledError) or _RELIABLE_CANCELLING:
        raise asyncio.CancelledError from exc


async def _wait_for(job: Job, limit: float | None, lingering: list[Job] | None) -> None:
    """Wait for a sync body in a worker thread, at most ``limit`` seconds. A body still
    running when the wait ends (past its limit, or its caller cancelled) is abandoned to its
    thread, and listed in ``lingering``."""
    try:
        await (job.future if limit is None else await_job(job, limit))
    finally:
        if job.state is not FINISHED:
            job.abandon()
            if lingering is not None and job.running:
                lingering.append(job)


def check_call_id(call_id: object) -> None:
    """Raise ``TypeError`` unless ``call_id`` is a ``str`` or None (checked before a call
    runs: a wrong one is the caller's bug, not the tool's failure)."""
    if call_id is not None and type(call_id) is not str:
        raise TypeError(f"call_id must be a str or None, not {type(call_id).__name__}")


def _checked_options(call_id: object, timeout: object) -> float | Default | None:
    """``timeout`` checked as seconds (None and DEFAULT as they are), after ``call_id``."""
    check_call_id(call_id)
    return timeout if timeout is None or timeout is DEFAULT else checked_seconds(timeout)


def checked_seconds(timeout: object) -> float:
    """``timeout`` as seconds, or a ``TypeError``/``ValueError`` saying why it is none."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds or None, not {shown(timeout)}")
    seconds = finite(timeout)
    if seconds is None or seconds <= 0:
        raise ValueError(f"timeout must be a finite number of seconds > 0, not {shown(timeout)}")
    return seconds


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


def _output_error(exc: Exception) -> ToolOutputError:
    """The error for a return value that does not match the return annotation, or that JSON
    cannot carry (a cycle, nesting too deep, bytes that are not UTF-8, NaN...)."""
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}"
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        )
        return ToolOutputError(
            "The tool failed: it returned a result that does not match its declared type.",
            developer_message=f"The return value does not match the return annotation: {problems}",
        )
    return ToolOutputError(
        "The tool failed: it returned a result that cannot be sent as JSON.",
        developer_message=f"The return value cannot be serialised as JSON: {describe(exc)}",
    )


#: Text a JSON encoding of a value holds only when the value is not JSON: ``NaN``,
#: ``Infinity``, or an integer longer than Python writes out (int-to-str limit).
_INT_DIGITS_LIMIT: Final = 4300
_DIGIT_RUNS: Final = bytes.maketrans(b"0123456789", b"0" * 10)


def _check_numbers(output: object) -> None:
    """Raise ``ValueError`` if ``output`` (JSON-mode data) holds NaN, an infinity, or an
    integer too long to write out: ``json.dumps`` and ``repr()`` would fail on it, or write
    what no JSON parser reads. A cheap scan of pydantic's own encoding decides whether the
    exact check runs."""
    encoded = to_json(output)
    suspect = b"NaN" in encoded or b"Infinity" in encoded
    if not suspect and len(encoded) > _INT_DIGITS_LIMIT:
        suspect = b"0" * (_INT_DIGITS_LIMIT + 1) in encoded.translate(_DIGIT_RUNS)
    if suspect:
        try:
            json.dumps(output, allow_nan=False)
        except ValueError:
            raise ValueError(
                f"it holds NaN, an infinity, or an integer of more than {_INT_DIGITS_LIMIT} digits"
            ) from None


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


def map_direct_call_error(
    exc: Exception, name: str, args: Iterable[object], kwargs: Mapping[str, object]
) -> ToolError:
    """The tdk error a direct call of a tool raises for ``exc``; ``exc`` itself when it is a
    tdk error. Secrets of a ``ToolContext`` among the call's arguments are redacted."""
    contexts = [a for a in (*args, *kwargs.values()) if isinstance(a, ToolContext)]
    error = to_tool_error(exc, secrets=[s for c in contexts for s in secrets_of(c)])
    if getattr(error, "tool_name", None) is None:  # (an __init__ may have skipped ours)
        error.tool_name = name
    return error
