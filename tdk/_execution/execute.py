"""Running a tool: arguments in, one :class:`~tdk.ToolResult` out, whatever happens.

A call goes arguments -> requirements -> validation -> function -> output validation ->
``ToolResult``, made (and a failure logged) by :mod:`tdk._execution.call_scope`, as at every front
door. A failure goes exception -> the one table of :mod:`tdk._failures.table` ->
:meth:`ErrorInfo.from_exception` (where redaction happens) -> ``ToolResult``; arguments that
do not validate are described by :mod:`tdk._execution.arguments`. A failure of a tool that may write
which may have acted is not offered for repeating (:mod:`tdk._execution.writes`: what the body's
requests did is noted while it runs, :mod:`tdk._execution.exchanges`). Everything that needs
reflection was done by ``@tool``; nothing here inspects the function.

This is the hot path of every call, and is written to cost little above pydantic's own
validate-call-serialise floor (``bench/bench_execute.py`` measures it). So: pydantic's core
validators and serializers are called directly (``__pydantic_validator__``, the adapter's
``validator`` and ``serializer``) where the model constructors and ``TypeAdapter`` methods
would add a Python frame each; ``Tool.run`` hands back the coroutine of :func:`execute`
itself; a failure is read straight into its ``ErrorInfo`` fields, without building a tdk
exception first, and each text is redacted once, where it is made; the caller's cancellation
count is read once before the body and once after; and a few small things are inline (a
``try`` rather than ``contextlib.suppress``, tuples rather than ``X | Y`` in ``isinstance``)
for the same reason.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from contextvars import Token
from time import perf_counter
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from tdk._compat.running_task import TASK_OF
from tdk._execution.approval import check_approval
from tdk._execution.arguments import (
    Arguments,
    few_unknown_keys,
    invalid_arguments,
    null_failed,
    unreadable_arguments,
    validate_arguments,
    validate_with_null_defaults,
)
from tdk._execution.call_scope import check_call_id, failed, failure_result, new_result
from tdk._execution.context import ToolContext, secrets_of
from tdk._execution.default import DEFAULT, Default
from tdk._execution.exchanges import NOTHING_NOTED, NOTING, Exchanges, unwatch, watch
from tdk._execution.model_text import utf8_copy
from tdk._execution.result import ToolResult
from tdk._execution.seconds import finite, shown
from tdk._execution.threads import DROPPED, FINISHED, Job, run_in_worker
from tdk._execution.time_limit import await_coroutine, await_job
from tdk._failures.foreign import describe
from tdk._failures.redact import call_secrets, end_call_secrets
from tdk._failures.table import to_tool_error
from tdk.errors import (
    ErrorInfo,
    ToolError,
    ToolOutputError,
    ToolRequirementError,
)

if TYPE_CHECKING:
    from tdk._define.definition import ToolSpec

_CancelledError: Final = asyncio.CancelledError

_running_loop: Final = asyncio.get_running_loop
#: Exceptions that end the program or the thread, never a tool call's result.
_ALWAYS_PROPAGATE: Final = (KeyboardInterrupt, SystemExit)


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
    record of the attempt's requests (:mod:`.exchanges`): it judges a failure itself."""
    start = perf_counter()
    limit = _time_limit(spec, call_id, timeout)
    task = TASK_OF(_running_loop())  # (without a Python frame: tdk._compat.running_task)
    cancelling = task.cancelling() if task is not None else 0  # requests made before this call
    secrets = () if context is None else secrets_of(context)
    ambient = call_secrets(secrets) if secrets else None  # (scrubbed from all it redacts)
    watched = exchanges or (Exchanges() if spec.writes and NOTING.on else None)  # a write's own
    watching = None if watched is None else watch(watched)
    kwargs: dict[str, Any] | ErrorInfo | None = None  # (None: the body has not started)
    job: Job | None = None
    try:
        kwargs = _kwargs(spec, name, arguments, context, secrets)
        if not isinstance(kwargs, dict):  # (an ErrorInfo: why the arguments do not validate)
            return failed(name, kwargs, call_id, 0, start, secrets=secrets, attempt=attempt)
        if spec.inline:  # trivial sync tool: no thread hop, and no time limit can apply
            value = fn(**kwargs)
        elif spec.is_async:
            value = await (fn(**kwargs) if limit is None else await_coroutine(fn(**kwargs), limit))
        else:
            job = run_in_worker(fn, kwargs)
            await _wait_for(job, limit, lingering)
            value = job.outcome()  # here: a StopIteration must not cross a coroutine's end
        if _RELIABLE_CANCELLING and task is not None and task.cancelling() > cancelling:
            raise asyncio.CancelledError  # pragma: no cover (the body swallowed it: 3.13 and up)
        return _result_of(spec, value, name, call_id, start)
    except BaseException as exc:
        _raise_unless_a_failure(exc, task, cancelling)
        return failure_result(  # (in here: leaving it unbinds exc, no reference cycle)
            name,
            exc,
            call_id=call_id,
            context=context,
            attempts=0 if kwargs is None or (job is not None and job.state is DROPPED) else 1,
            started=start,
            include_stacktrace=include_stacktrace,
            attempt=attempt,
            writes=watched or NOTHING_NOTED if spec.writes and exchanges is None else None,
        )
    finally:
        if ambient is not None or watching is not None:
            _end_scope(ambient, watching, watched)


def _kwargs(
    spec: ToolSpec,
    name: str,
    arguments: Arguments,
    context: ToolContext | None,
    secrets: tuple[str, ...],
) -> dict[str, Any] | ErrorInfo:
    """The keyword arguments of the call, validated by the tool's input model, or the error
    saying why the arguments do not validate; raises
    :class:`~tdk.errors.ToolRequirementError` first if a secret, metadata value or scope the
    tool requires is missing from ``context``. A call that needs the user's approval gets its
    arguments once it has it (else the pending or declined error is raised: the body does not
    run, see :mod:`tdk._execution.approval`)."""
    if spec.requirements.needed:
        _check_requirements(spec, context)
    unlisted = 0
    try:
        if type(arguments) is dict:  # a plain dict, as models send: straight to the validator
            if len(arguments) > spec.most_keys:  # (a flood of unknown keys: cut it first)
                arguments, unlisted = few_unknown_keys(spec, arguments)
            validated: BaseModel = spec.input_model.__pydantic_validator__.validate_python(
                arguments
            )
        else:
            validated = validate_arguments(spec.input_model, arguments)
    except ValidationError as invalid:
        retried = _revalidated(invalid, spec, name, arguments, secrets, unlisted=unlisted)
        if type(retried) is ErrorInfo:
            return retried
        validated = retried
    except Exception as unreadable:  # a mapping whose items cannot be read...
        return unreadable_arguments(unreadable, spec, name)
    if spec.approval is not None or getattr(context, "_asks", None) is not None:
        check_approval(spec, name, validated, context, secrets)
    return validated.__dict__ if spec.plain else spec.arguments(validated, context)


def _revalidated(
    invalid: ValidationError,
    spec: ToolSpec,
    name: str,
    arguments: Arguments,
    secrets: tuple[str, ...],
    *,
    unlisted: int,
) -> BaseModel | ErrorInfo:
    """Arguments that did not validate (``invalid``): validated again with the defaults of
    the parameters sent as null where a null may have meant "not given", else the error
    saying why they do not validate (``unlisted``: unknown keys cut before validation)."""
    found = invalid.errors(include_url=False, include_input=False)
    names = spec.null_defaults
    if names and null_failed(names, found):
        try:  # a null may have meant "not given"
            return validate_with_null_defaults(spec.input_model, names, arguments)
        except ValidationError as again:
            found = again.errors(include_url=False, include_input=False)
        except Exception as unreadable:  # (read again: it may fail this time)
            return unreadable_arguments(unreadable, spec, name)
    return invalid_arguments(found, spec, name, secrets, unlisted)


def _result_of(
    spec: ToolSpec, value: object, name: str, call_id: str | None, start: float
) -> ToolResult:
    """The result of a call whose body returned ``value``: the value validated by the return
    annotation and serialised as JSON data (by alias, as the output schema names fields), or
    a :class:`~tdk.errors.ToolOutputError` (a mismatch, or a value JSON cannot carry)."""
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
    return new_result(name, call_id, output, None, 1, started=start)


#: Whether a pending cancellation request of the caller can be told from the count alone. On
#: Python 3.11 and 3.12 a TaskGroup that failed inside the body leaves its own request counted
#: (gh-116720), so only a cancellation seen on its way (an exception) is trusted there; from
#: 3.13 on, a body that swallowed its caller's cancellation is caught too.
_RELIABLE_CANCELLING: Final = sys.version_info >= (3, 13)


def _raise_unless_a_failure(
    exc: BaseException, task: asyncio.Task[Any] | None, cancelling: int
) -> None:
    """Re-raise what is not the call's failure: ``KeyboardInterrupt`` and ``SystemExit``, and
    the caller's cancellation while it is being cancelled (``task`` counts more requests to
    cancel than ``cancelling``, its count when the call began)."""
    if isinstance(exc, _ALWAYS_PROPAGATE):
        raise exc
    if task is not None and task.cancelling() > cancelling:
        _raise_if_cancelling(exc)  # the caller is being cancelled: never swallow that


def _end_scope(
    ambient: Token[tuple[str, ...]] | None,
    watching: Token[Exchanges | None] | None,
    watched: Exchanges | None,
) -> None:
    """End what a call began around its body: its secrets made ambient (``ambient``), and the
    watch of its requests (``watching``, noted in ``watched``)."""
    if ambient is not None:
        end_call_secrets(ambient)
    if watching is not None and watched is not None:
        unwatch(watching, watched)


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


def _time_limit(spec: ToolSpec, call_id: object, timeout: object) -> float | None:
    """The call's time limit in seconds (None: none), ``timeout`` or, for ``DEFAULT``, the
    tool's own; a ``TypeError`` or ``ValueError`` for a wrong ``call_id`` or ``timeout``."""
    if call_id is not None and type(call_id) is not str:
        check_call_id(call_id)
    if timeout is DEFAULT:
        return spec.timeout
    if timeout is None or (type(timeout) is float and 0.0 < timeout < math.inf):
        return timeout
    return checked_seconds(timeout)


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
    scopes = context.scopes if context is not None else frozenset()
    missing_secrets = [n for n in spec.requirements.secrets if not secrets.get(n)]
    missing_metadata = [n for n in spec.requirements.metadata if n not in metadata]
    missing_scopes = [n for n in spec.requirements.scopes if n not in scopes]
    auth = spec.requirements.auth
    # (a runner with user_auth= puts the user's token there before the call comes here)
    missing_auth = auth.provider if auth is not None and not _carries_token(context) else None
    if missing_secrets or missing_metadata or missing_scopes or missing_auth:
        missing = [f"secret '{n}'" for n in missing_secrets]
        missing += [f"metadata '{n}'" for n in missing_metadata]
        missing += [f"scope '{n}'" for n in missing_scopes]
        if missing_auth:
            missing.append(f"the user's authorization at '{missing_auth}'")
        raise ToolRequirementError(
            f"The tool cannot run: {', '.join(missing)} missing from its context.",
            missing_secrets=missing_secrets or None,
            missing_metadata=missing_metadata or None,
            missing_scopes=missing_scopes or None,
            missing_auth=missing_auth,
            developer_message=(
                # (no "name=" in this text: redaction would take the word after it for a
                # credential's value)
                "Pass the missing values in the ToolContext (its secrets, metadata, scopes or "
                "auth_token) when calling the tool; over tdk serve --http --auth, the scopes "
                "are those of the caller's token; a runner given a UserAuth gives a tool "
                "declared with requires_auth the user's token."
            ),
        )


def _carries_token(context: ToolContext | None) -> bool:
    """Whether ``context`` carries a token for a tool acting as the user."""
    return context is not None and bool(context.auth_token)


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
