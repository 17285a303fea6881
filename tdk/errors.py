"""Every error tdk raises on purpose, and the data a planner reads from them.

Each class fixes a :class:`ErrorKind` (who failed, when, and what); each kind has exactly one
:class:`ErrorCategory` (what a planner should do about it) and a default ``retryable``. Those
three are class attributes, readable without an instance: ``ToolTimeoutError.category``.

The tree::

    ToolError
    ├── ToolkitLoadError
    ├── ToolDefinitionError
    │   ├── ToolInputSchemaError
    │   └── ToolOutputSchemaError
    ├── ToolNotFoundError
    └── ToolRuntimeError
        ├── ToolInputError
        ├── ToolOutputError
        ├── RetryableToolError
        ├── ContextRequiredToolError
        ├── FatalToolError
        ├── ToolTimeoutError
        ├── ToolCancelledError
        ├── UpstreamError
        │   ├── UpstreamBadRequestError
        │   ├── UpstreamAuthError
        │   ├── UpstreamNotFoundError
        │   ├── UpstreamValidationError
        │   ├── UpstreamRateLimitError
        │   └── UpstreamServerError
        ├── NetworkTransportError
        ├── ToolRequirementError
        ├── ToolRateLimitedError
        ├── ToolCircuitOpenError
        ├── ToolBulkheadFullError
        ├── ToolInputRequiredError
        ├── ToolApprovalDeniedError
        └── ToolResumeInvalidError

Errors are plain data: :meth:`ToolError.to_dict` gives fixed keys, :meth:`ToolError.to_error_info`
the frozen :class:`ErrorInfo` that results carry, and every error pickles with all its fields.

This module imports no other tdk module, not even inside a function: every other module may
import it, and it stays the foot of the import graph. What needs more than the error classes
(:meth:`ErrorInfo.from_exception` and its mapping table, :meth:`ErrorInfo.from_error_string`,
:meth:`ErrorInfo.to_log_line`, the cleaning of ``details`` a tool put anything in) is done by
the error pipeline, :mod:`tdk._failures`, which imports this module. The two meet in one slot
here (``_pipeline``): the ``tdk`` package fills it the moment this module is bound to it,
however it is imported (``from tdk.errors import ErrorInfo`` included), with a stand-in that
loads the pipeline on first use, and the pipeline puts itself there once loaded.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import (
    Any,
    ClassVar,
    Final,
    Literal,
    NoReturn,
    Protocol,
    Self,
    TypedDict,
    Unpack,
    cast,
)

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ContextRequiredToolError",
    "ErrorCategory",
    "ErrorInfo",
    "ErrorKind",
    "FatalToolError",
    "NetworkTransportError",
    "RetryableToolError",
    "ToolApprovalDeniedError",
    "ToolBulkheadFullError",
    "ToolCancelledError",
    "ToolCircuitOpenError",
    "ToolDefinitionError",
    "ToolError",
    "ToolInputError",
    "ToolInputRequiredError",
    "ToolInputSchemaError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolOutputSchemaError",
    "ToolRateLimitedError",
    "ToolRequirementError",
    "ToolResumeInvalidError",
    "ToolRuntimeError",
    "ToolTimeoutError",
    "ToolkitLoadError",
    "UpstreamAuthError",
    "UpstreamBadRequestError",
    "UpstreamError",
    "UpstreamNotFoundError",
    "UpstreamRateLimitError",
    "UpstreamServerError",
    "UpstreamValidationError",
]

#: Retries after the first attempt that a retryable error allows unless it says otherwise.
DEFAULT_MAX_RETRY_ATTEMPTS: Final = 3
#: Longest developer message (and stack trace) kept; the rest is cut with a marker.
MAX_DEVELOPER_MESSAGE_CHARS: Final = 4000
#: The largest integer every JSON reader takes exactly (2**53 - 1): the bound of the integer
#: fields of an error (``retry_after_ms``, ``status_code``, ``max_retry_attempts``).
MAX_SAFE_INT: Final = 2**53 - 1


class ErrorCategory(enum.StrEnum):
    """The planner's view of an error: what to do next (see ``docs/errors.md``)."""

    RATE_LIMIT = "rate_limit"
    CIRCUIT_OPEN = "circuit_open"
    BULKHEAD_FULL = "bulkhead_full"
    TIMEOUT = "timeout"
    EXECUTION = "execution"
    CONNECTION = "connection"
    SERVER_ERROR = "server_error"
    VALIDATION = "validation"
    AUTHENTICATION = "authentication"
    NOT_FOUND = "not_found"
    CONTEXT_REQUIRED = "context_required"
    CANCELLED = "cancelled"
    CONFIGURATION = "configuration"
    DECLINED = "declined"


class ErrorKind(enum.StrEnum):
    """Who failed, when, and what. The value equals the name."""

    TOOLKIT_LOAD_FAILED = "TOOLKIT_LOAD_FAILED"
    TOOL_DEFINITION_BAD_DEFINITION = "TOOL_DEFINITION_BAD_DEFINITION"
    TOOL_DEFINITION_BAD_INPUT_SCHEMA = "TOOL_DEFINITION_BAD_INPUT_SCHEMA"
    TOOL_DEFINITION_BAD_OUTPUT_SCHEMA = "TOOL_DEFINITION_BAD_OUTPUT_SCHEMA"
    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    TOOL_RUNTIME_BAD_INPUT_VALUE = "TOOL_RUNTIME_BAD_INPUT_VALUE"
    TOOL_RUNTIME_BAD_OUTPUT_VALUE = "TOOL_RUNTIME_BAD_OUTPUT_VALUE"
    TOOL_RUNTIME_RETRY = "TOOL_RUNTIME_RETRY"
    TOOL_RUNTIME_CONTEXT_REQUIRED = "TOOL_RUNTIME_CONTEXT_REQUIRED"
    TOOL_RUNTIME_FATAL = "TOOL_RUNTIME_FATAL"
    TOOL_RUNTIME_TIMEOUT = "TOOL_RUNTIME_TIMEOUT"
    TOOL_RUNTIME_CANCELLED = "TOOL_RUNTIME_CANCELLED"
    TOOL_RUNTIME_MISSING_REQUIREMENT = "TOOL_RUNTIME_MISSING_REQUIREMENT"
    TOOL_RUNTIME_RATE_LIMITED = "TOOL_RUNTIME_RATE_LIMITED"
    TOOL_RUNTIME_CIRCUIT_OPEN = "TOOL_RUNTIME_CIRCUIT_OPEN"
    TOOL_RUNTIME_BULKHEAD_FULL = "TOOL_RUNTIME_BULKHEAD_FULL"
    TOOL_RUNTIME_INPUT_REQUIRED = "TOOL_RUNTIME_INPUT_REQUIRED"
    TOOL_RUNTIME_APPROVAL_DENIED = "TOOL_RUNTIME_APPROVAL_DENIED"
    TOOL_RUNTIME_RESUME_INVALID = "TOOL_RUNTIME_RESUME_INVALID"
    UPSTREAM_RUNTIME_BAD_REQUEST = "UPSTREAM_RUNTIME_BAD_REQUEST"
    UPSTREAM_RUNTIME_AUTH_ERROR = "UPSTREAM_RUNTIME_AUTH_ERROR"
    UPSTREAM_RUNTIME_NOT_FOUND = "UPSTREAM_RUNTIME_NOT_FOUND"
    UPSTREAM_RUNTIME_VALIDATION_ERROR = "UPSTREAM_RUNTIME_VALIDATION_ERROR"
    UPSTREAM_RUNTIME_RATE_LIMIT = "UPSTREAM_RUNTIME_RATE_LIMIT"
    UPSTREAM_RUNTIME_SERVER_ERROR = "UPSTREAM_RUNTIME_SERVER_ERROR"
    UPSTREAM_RUNTIME_UNMAPPED = "UPSTREAM_RUNTIME_UNMAPPED"
    NETWORK_TRANSPORT_RUNTIME_TIMEOUT = "NETWORK_TRANSPORT_RUNTIME_TIMEOUT"
    NETWORK_TRANSPORT_RUNTIME_UNREACHABLE = "NETWORK_TRANSPORT_RUNTIME_UNREACHABLE"
    NETWORK_TRANSPORT_RUNTIME_UNMAPPED = "NETWORK_TRANSPORT_RUNTIME_UNMAPPED"
    UNKNOWN = "UNKNOWN"

    @property
    def category(self) -> ErrorCategory:
        """The one category of this kind."""
        return _KIND_TABLE[self][0]

    @property
    def default_retryable(self) -> bool:
        """Whether errors of this kind are retryable unless an instance says otherwise."""
        return _KIND_TABLE[self][1]


_C = ErrorCategory
_K = ErrorKind
#: kind -> (category, retryable by default). ``docs/errors.md`` carries the same table; a
#: test keeps the two equal.
_KIND_TABLE: Final[Mapping[ErrorKind, tuple[ErrorCategory, bool]]] = {
    _K.TOOLKIT_LOAD_FAILED: (_C.CONFIGURATION, False),
    _K.TOOL_DEFINITION_BAD_DEFINITION: (_C.CONFIGURATION, False),
    _K.TOOL_DEFINITION_BAD_INPUT_SCHEMA: (_C.CONFIGURATION, False),
    _K.TOOL_DEFINITION_BAD_OUTPUT_SCHEMA: (_C.CONFIGURATION, False),
    _K.TOOL_NOT_FOUND: (_C.NOT_FOUND, False),
    _K.TOOL_RUNTIME_BAD_INPUT_VALUE: (_C.VALIDATION, False),
    _K.TOOL_RUNTIME_BAD_OUTPUT_VALUE: (_C.EXECUTION, False),
    _K.TOOL_RUNTIME_RETRY: (_C.EXECUTION, True),
    _K.TOOL_RUNTIME_CONTEXT_REQUIRED: (_C.CONTEXT_REQUIRED, False),
    _K.TOOL_RUNTIME_FATAL: (_C.EXECUTION, False),
    _K.TOOL_RUNTIME_TIMEOUT: (_C.TIMEOUT, True),
    _K.TOOL_RUNTIME_CANCELLED: (_C.CANCELLED, False),
    _K.TOOL_RUNTIME_MISSING_REQUIREMENT: (_C.CONFIGURATION, False),
    _K.TOOL_RUNTIME_RATE_LIMITED: (_C.RATE_LIMIT, True),
    _K.TOOL_RUNTIME_CIRCUIT_OPEN: (_C.CIRCUIT_OPEN, True),
    _K.TOOL_RUNTIME_BULKHEAD_FULL: (_C.BULKHEAD_FULL, True),
    _K.TOOL_RUNTIME_INPUT_REQUIRED: (_C.CONTEXT_REQUIRED, False),
    _K.TOOL_RUNTIME_APPROVAL_DENIED: (_C.DECLINED, False),
    _K.TOOL_RUNTIME_RESUME_INVALID: (_C.VALIDATION, False),
    _K.UPSTREAM_RUNTIME_BAD_REQUEST: (_C.VALIDATION, False),
    _K.UPSTREAM_RUNTIME_AUTH_ERROR: (_C.AUTHENTICATION, False),
    _K.UPSTREAM_RUNTIME_NOT_FOUND: (_C.NOT_FOUND, False),
    _K.UPSTREAM_RUNTIME_VALIDATION_ERROR: (_C.VALIDATION, False),
    _K.UPSTREAM_RUNTIME_RATE_LIMIT: (_C.RATE_LIMIT, True),
    _K.UPSTREAM_RUNTIME_SERVER_ERROR: (_C.SERVER_ERROR, True),
    _K.UPSTREAM_RUNTIME_UNMAPPED: (_C.EXECUTION, False),
    _K.NETWORK_TRANSPORT_RUNTIME_TIMEOUT: (_C.TIMEOUT, True),
    _K.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE: (_C.CONNECTION, True),
    _K.NETWORK_TRANSPORT_RUNTIME_UNMAPPED: (_C.CONNECTION, True),
    _K.UNKNOWN: (_C.EXECUTION, False),
}
del _C, _K


class ErrorOptions(TypedDict, total=False):
    """Keyword options every :class:`ToolError` accepts."""

    developer_message: str | None
    retry_after_ms: int | None
    status_code: int | None
    details: Mapping[str, Any] | None
    additional_prompt_content: str | None
    tool_name: str | None
    max_retry_attempts: int | None


class RuntimeErrorOptions(ErrorOptions, total=False):
    """Options of :class:`ToolRuntimeError` and below: ``retryable`` may be overridden."""

    retryable: bool | None


def _restore(cls: type[ToolError], message: str) -> ToolError:
    """Recreate an error for unpickling; its fields arrive through ``__setstate__``."""
    return Exception.__new__(cls, message)


#: Option -> the type its value must have when not None. Checked at construction, so that a
#: malformed error raised by a tool is a bug found where it is made (a TypeError, which
#: ``run()`` reports as TOOL_RUNTIME_FATAL), never a failure to build its ErrorInfo later.
_OPTION_TYPES: Final[Mapping[str, type]] = {
    "developer_message": str,
    "retry_after_ms": int,
    "status_code": int,
    "additional_prompt_content": str,
    "tool_name": str,
    "max_retry_attempts": int,
    "retryable": bool,
}


def _check_types(message: object, options: Mapping[str, object]) -> None:
    if not isinstance(message, str):
        raise TypeError(f"message must be a str, not {type(message).__name__}")
    for name, value in options.items():
        expected = _OPTION_TYPES.get(name)
        if expected is None or value is None:
            continue
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise TypeError(f"{name} must be {expected.__name__} or None, not {value!r}")
        if expected is int:
            low = -MAX_SAFE_INT if name == "status_code" else 0
            if not low <= value <= MAX_SAFE_INT:  # type: ignore[operator]
                raise ValueError(f"{name} must be between {low} and 2**53 - 1")


class ToolError(Exception):
    """Root of every error tdk raises on purpose.

    ``message`` is safe to show the model. Every other field is keyword-only; see
    ``docs/errors.md`` for what each means and the ``to_dict()`` shape.
    """

    kind: ErrorKind = ErrorKind.UNKNOWN
    """Who failed, when, and what. Fixed per class (and per instance for a few classes)."""
    category: ErrorCategory = ErrorKind.UNKNOWN.category
    """What a planner should do; always ``kind.category``."""
    retryable: bool = ErrorKind.UNKNOWN.default_retryable
    """Whether the same call may succeed later. Class value is the kind's default."""

    #: How ``str()`` names the subject, as in ``... during execution of tool 'x': ...``.
    _subject_phrase: ClassVar[str] = "during execution of tool"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.category = cls.kind.category
        cls.retryable = cls.kind.default_retryable

    def __init__(self, message: str, **options: Unpack[ErrorOptions]) -> None:
        _check_types(message, options)
        super().__init__(message)
        self.message: str = message
        """The model-facing text; never mutated by formatting."""
        self.developer_message: str | None = options.get("developer_message")
        """Detail for logs and developers; redacted where tdk builds it."""
        self.retry_after_ms: int | None = options.get("retry_after_ms")
        """Milliseconds to wait before retrying; None means unknown."""
        self.status_code: int | None = options.get("status_code")
        """The upstream HTTP status, when there is one."""
        details = options.get("details")
        if details is not None and not isinstance(details, Mapping):
            raise TypeError(f"details must be a mapping or None, not {type(details).__name__}")
        self.details: dict[str, Any] = _pipeline.clean_details(details) if details else {}
        """JSON-safe facts with fixed keys per class (``tool_name``, ``timeout``, ...): a copy,
        cleaned of what JSON cannot carry."""
        self.additional_prompt_content: str | None = options.get("additional_prompt_content")
        """Guidance for the model: what to do differently next time."""
        self.tool_name: str | None = options.get("tool_name")
        """The tool this error belongs to, once known."""
        self._max_retry_attempts = options.get("max_retry_attempts")

    @property
    def max_retry_attempts(self) -> int:
        """Retries allowed after the first attempt: as given, else 3 if retryable, else 0."""
        if self._max_retry_attempts is not None:
            return self._max_retry_attempts
        return DEFAULT_MAX_RETRY_ATTEMPTS if self.retryable else 0

    def _subject(self) -> str | None:
        return self.tool_name

    def __str__(self) -> str:
        head = f"[{self.kind.value}] {type(self).__name__}"
        subject = self._subject()
        if subject:
            return f"{head} {self._subject_phrase} '{subject}': {self.message}"
        return f"{head}: {self.message}"

    def __repr__(self) -> str:
        parts = [repr(self.message)]
        for name, value in self._repr_options():
            shown = f"{type(value).__name__}.{value.name}" if isinstance(value, enum.Enum) else None
            parts.append(f"{name}={shown or repr(value)}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def _repr_options(self) -> Iterable[tuple[str, object]]:
        for name in (
            "developer_message",
            "retry_after_ms",
            "status_code",
            "additional_prompt_content",
            "tool_name",
        ):
            value = getattr(self, name)
            if value is not None:
                yield name, value
        if "retryable" in self.__dict__:
            yield "retryable", self.retryable
        if self._max_retry_attempts is not None:
            yield "max_retry_attempts", self._max_retry_attempts
        if self.details:
            yield "details", self.details

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), self.message), self.__dict__.copy())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict with fixed keys; enum values as strings."""
        record = self._record()
        record["kind"] = self.kind.value
        record["category"] = self.category.value
        return record

    def _record(self) -> dict[str, Any]:
        return {
            "error": type(self).__name__,
            "kind": self.kind,
            "category": self.category,
            "message": self.message,
            "developer_message": self.developer_message,
            "retryable": self.retryable,
            "retry_after_ms": self.retry_after_ms,
            "status_code": self.status_code,
            "additional_prompt_content": self.additional_prompt_content,
            "tool_name": self.tool_name,
            "max_retry_attempts": self.max_retry_attempts,
            "details": dict(self.details),
        }

    def to_error_info(
        self, *, include_stacktrace: bool = False, secrets: Iterable[str] = ()
    ) -> ErrorInfo:
        """This error as the frozen :class:`ErrorInfo` that results carry, redacted like every
        ``ErrorInfo`` (``secrets`` are exact values to scrub as well).

        ``include_stacktrace`` adds the redacted traceback (opt-in: it may reveal code paths).
        """
        return ErrorInfo.from_exception(
            self, include_stacktrace=include_stacktrace, secrets=secrets
        )

    def to_log_line(self) -> str:
        """One line for operators: ``kind=... tool=... category=... retryable=... cause=...``
        (see :meth:`ErrorInfo.to_log_line`)."""
        return self.to_error_info().to_log_line()


class ToolkitLoadError(ToolError):
    """A toolkit (a module or path of tools) could not be loaded; the cause is chained."""

    kind = ErrorKind.TOOLKIT_LOAD_FAILED
    _subject_phrase = "when loading toolkit"

    def __init__(
        self,
        message: str,
        *,
        toolkit: str | None = None,
        module: str | None = None,
        **options: Unpack[ErrorOptions],
    ) -> None:
        super().__init__(message, **_with_details(options, toolkit=toolkit, module=module))

    def _subject(self) -> str | None:
        toolkit = self.details.get("toolkit")
        return toolkit if isinstance(toolkit, str) else None


class ToolDefinitionError(ToolError):
    """A tool's definition is wrong; raised when ``@tool`` runs, listing every problem."""

    kind = ErrorKind.TOOL_DEFINITION_BAD_DEFINITION
    _subject_phrase = "in definition of tool"

    def __init__(
        self,
        message: str,
        *,
        problems: Iterable[Mapping[str, Any]] | None = None,
        **options: Unpack[ErrorOptions],
    ) -> None:
        listed = None if problems is None else [dict(p) for p in problems]
        super().__init__(message, **_with_details(options, problems=listed))


class ToolInputSchemaError(ToolDefinitionError):
    """Every problem of the definition is in its parameters."""

    kind = ErrorKind.TOOL_DEFINITION_BAD_INPUT_SCHEMA


class ToolOutputSchemaError(ToolDefinitionError):
    """Every problem of the definition is in its return annotation."""

    kind = ErrorKind.TOOL_DEFINITION_BAD_OUTPUT_SCHEMA


class ToolNotFoundError(ToolError):
    """No tool of the requested name; ``details`` lists the available ones and close matches."""

    kind = ErrorKind.TOOL_NOT_FOUND
    _subject_phrase = "when looking up tool"

    def __init__(
        self,
        message: str,
        *,
        available_tools: Iterable[str] | None = None,
        suggestions: Iterable[str] | None = None,
        **options: Unpack[ErrorOptions],
    ) -> None:
        super().__init__(
            message,
            **_with_details(
                options,
                available_tools=None if available_tools is None else list(available_tools),
                suggestions=None if suggestions is None else list(suggestions),
            ),
        )


class ToolRuntimeError(ToolError):
    """Root of the errors of running a tool. ``retryable`` may be overridden per instance."""

    def __init__(self, message: str, **options: Unpack[RuntimeErrorOptions]) -> None:
        retryable = options.pop("retryable", None)
        if retryable is not None:
            _check_types(message, {"retryable": retryable})
            self.retryable = retryable
        super().__init__(message, **cast(ErrorOptions, options))


class ToolInputError(ToolRuntimeError):
    """The arguments did not validate; ``details["errors"]`` lists each field and why."""

    kind = ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE

    def __init__(
        self,
        message: str,
        *,
        errors: Iterable[Mapping[str, Any]] | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        listed = None if errors is None else [dict(e) for e in errors]
        super().__init__(message, **_with_details(options, errors=listed))


class ToolOutputError(ToolRuntimeError):
    """The tool returned a value that does not match its return annotation (a tool bug)."""

    kind = ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE


class RetryableToolError(ToolRuntimeError):
    """Raised by a tool author: the model should call again, guided by
    ``additional_prompt_content`` (for example other arguments)."""

    kind = ErrorKind.TOOL_RUNTIME_RETRY


class ContextRequiredToolError(ToolRuntimeError):
    """Raised by a tool author: the model must ask the user (``additional_prompt_content``
    says what) before calling again."""

    kind = ErrorKind.TOOL_RUNTIME_CONTEXT_REQUIRED


class FatalToolError(ToolRuntimeError):
    """The tool failed in a way no retry will fix; unknown exceptions become this."""

    kind = ErrorKind.TOOL_RUNTIME_FATAL


class ToolTimeoutError(ToolRuntimeError):
    """The tool ran past its time limit (``details["timeout"]`` in seconds)."""

    kind = ErrorKind.TOOL_RUNTIME_TIMEOUT

    def __init__(
        self,
        message: str,
        *,
        timeout: float | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        super().__init__(message, **_with_details(options, timeout=timeout))


class ToolCancelledError(ToolRuntimeError):
    """The tool's own work was cancelled while its caller was not."""

    kind = ErrorKind.TOOL_RUNTIME_CANCELLED


class UpstreamError(ToolRuntimeError):
    """An upstream service answered with an error status.

    Constructed directly, it becomes the subclass that the status code maps to (so
    ``UpstreamError("...", status_code=429)`` is an :class:`UpstreamRateLimitError`, and kind and
    class always agree). Statuses outside 400-599 (or none) stay ``UpstreamError`` of kind
    ``UPSTREAM_RUNTIME_UNMAPPED``. The subclasses fix their kind whatever the status, so a 403
    that is really a rate limit can be an :class:`UpstreamRateLimitError` with ``status_code=403``.
    """

    kind = ErrorKind.UPSTREAM_RUNTIME_UNMAPPED

    #: Client statuses that are retryable by nature (RFC 9110: request timeout, too early).
    RETRYABLE_CLIENT_STATUSES: ClassVar[frozenset[int]] = frozenset({408, 425})

    def __new__(cls, message: str, *args: Any, **options: Any) -> Self:
        target = cls.class_for_status(options.get("status_code")) if cls is UpstreamError else cls
        return cast(Self, super().__new__(target, message))

    def __init__(self, message: str, **options: Unpack[RuntimeErrorOptions]) -> None:
        if options.get("retryable") is None and options.get("status_code") in (
            self.RETRYABLE_CLIENT_STATUSES
        ):
            options["retryable"] = True
        super().__init__(message, **options)

    @staticmethod
    def class_for_status(status_code: int | None) -> type[UpstreamError]:
        """The class an HTTP status maps to: the one table the HTTP hook uses too."""
        if status_code is None or not 400 <= status_code <= 599:
            return UpstreamError
        exact = _UPSTREAM_BY_STATUS.get(status_code)
        if exact is not None:
            return exact
        return UpstreamServerError if status_code >= 500 else UpstreamBadRequestError


class UpstreamBadRequestError(UpstreamError):
    """The upstream rejected the request (400 and other 4xx without a class of their own)."""

    kind = ErrorKind.UPSTREAM_RUNTIME_BAD_REQUEST


class UpstreamAuthError(UpstreamError):
    """The upstream refused the credentials (401) or the permission (403)."""

    kind = ErrorKind.UPSTREAM_RUNTIME_AUTH_ERROR


class UpstreamNotFoundError(UpstreamError):
    """The upstream has no such resource (404, 410)."""

    kind = ErrorKind.UPSTREAM_RUNTIME_NOT_FOUND


class UpstreamValidationError(UpstreamError):
    """The upstream understood the request but rejected its content (422)."""

    kind = ErrorKind.UPSTREAM_RUNTIME_VALIDATION_ERROR


class UpstreamRateLimitError(UpstreamError):
    """The upstream is rate limiting (429, or a 403/400 that really is a rate limit)."""

    kind = ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT


class UpstreamServerError(UpstreamError):
    """The upstream failed (5xx, including 529 overload)."""

    kind = ErrorKind.UPSTREAM_RUNTIME_SERVER_ERROR


_UPSTREAM_BY_STATUS: Final[Mapping[int, type[UpstreamError]]] = {
    401: UpstreamAuthError,
    403: UpstreamAuthError,
    404: UpstreamNotFoundError,
    410: UpstreamNotFoundError,
    422: UpstreamValidationError,
    429: UpstreamRateLimitError,
}

NetworkKind = Literal[
    ErrorKind.NETWORK_TRANSPORT_RUNTIME_TIMEOUT,
    ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE,
    ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
]


class NetworkTransportError(ToolRuntimeError):
    """The request never got an HTTP answer: a timeout, an unreachable host, or another
    transport failure. ``kind=`` picks one of the three ``NETWORK_TRANSPORT_RUNTIME_*`` kinds
    (default ``..._UNMAPPED``)."""

    kind = ErrorKind.NETWORK_TRANSPORT_RUNTIME_UNMAPPED

    def __init__(
        self,
        message: str,
        *,
        kind: NetworkKind | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        if kind is not None and kind is not type(self).kind:
            if not kind.startswith("NETWORK_TRANSPORT_RUNTIME_"):
                raise ValueError(f"{kind} is not a network transport kind")
            self.kind = kind
            self.category = kind.category
        super().__init__(message, **options)

    def _repr_options(self) -> Iterable[tuple[str, object]]:
        if "kind" in self.__dict__:
            yield "kind", self.kind
        yield from super()._repr_options()


class ToolRequirementError(ToolRuntimeError):
    """A secret, metadata value or OAuth scope the tool declared is missing from the
    context."""

    kind = ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT

    def __init__(
        self,
        message: str,
        *,
        missing_secrets: Iterable[str] | None = None,
        missing_metadata: Iterable[str] | None = None,
        missing_scopes: Iterable[str] | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        super().__init__(
            message,
            **_with_details(
                options,
                missing_secrets=None if missing_secrets is None else list(missing_secrets),
                missing_metadata=None if missing_metadata is None else list(missing_metadata),
                missing_scopes=None if missing_scopes is None else list(missing_scopes),
            ),
        )


class ToolRateLimitedError(ToolRuntimeError):
    """The local rate limiter refused the call; ``retry_after_ms`` says when it would admit it."""

    kind = ErrorKind.TOOL_RUNTIME_RATE_LIMITED

    def __init__(
        self,
        message: str,
        *,
        limit: int | None = None,
        period: float | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        super().__init__(message, **_with_details(options, limit=limit, period=period))


class ToolCircuitOpenError(ToolRuntimeError):
    """The tool's circuit breaker is open after repeated failures; calls fail fast until
    ``retry_after_ms`` has passed."""

    kind = ErrorKind.TOOL_RUNTIME_CIRCUIT_OPEN

    def __init__(
        self,
        message: str,
        *,
        failure_count: int | None = None,
        reset_timeout: float | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        super().__init__(
            message,
            **_with_details(options, failure_count=failure_count, reset_timeout=reset_timeout),
        )


class ToolBulkheadFullError(ToolRuntimeError):
    """Too many calls of the tool (or of all tools) are running; none freed up in time."""

    kind = ErrorKind.TOOL_RUNTIME_BULKHEAD_FULL

    def __init__(
        self,
        message: str,
        *,
        max_concurrent: int | None = None,
        max_wait: float | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        super().__init__(
            message, **_with_details(options, max_concurrent=max_concurrent, max_wait=max_wait)
        )


class ToolInputRequiredError(ToolRuntimeError):
    """The call stopped to ask the user (``context.ask()``, or an approval): the result's
    ``pending`` holds the requests and the token to resume it with (``docs/asks.md``).
    ``details["keys"]`` names what was asked."""

    kind = ErrorKind.TOOL_RUNTIME_INPUT_REQUIRED

    def __init__(
        self,
        message: str,
        *,
        requests: Mapping[str, Mapping[str, Any]] | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        asked = {} if requests is None else {str(k): dict(v) for k, v in requests.items()}
        super().__init__(message, **_with_details(options, keys=list(asked) or None))
        self.requests: dict[str, dict[str, Any]] = asked
        """Key -> the request, as JSON data (what ``result.pending.requests`` holds)."""


class ToolApprovalDeniedError(ToolRuntimeError):
    """The user declined: the approval of the call, or a question the tool asked
    (``details["key"]`` names which)."""

    kind = ErrorKind.TOOL_RUNTIME_APPROVAL_DENIED

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        super().__init__(message, **_with_details(options, key=key))


class ToolResumeInvalidError(ToolRuntimeError):
    """A resume was refused: its token is tampered, expired, used or another call's, or an
    answer does not fit its request (``details["reason"]``, and ``details["key"]`` for an
    answer). The call did not run."""

    kind = ErrorKind.TOOL_RUNTIME_RESUME_INVALID

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        key: str | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        super().__init__(message, **_with_details(options, reason=reason, key=key))


class ErrorInfo(BaseModel):
    """A serialisable, frozen record of one error: what ``ToolResult.error`` carries.

    Build it with :meth:`ToolError.to_error_info`, :meth:`from_exception` (any exception) or
    :meth:`from_error_string` (text only).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    error: str
    """Class name of the tdk error."""
    kind: ErrorKind
    category: ErrorCategory
    message: str
    developer_message: str | None = None
    retryable: bool
    retry_after_ms: int | None = None
    status_code: int | None = None
    additional_prompt_content: str | None = None
    tool_name: str | None = None
    max_retry_attempts: int = 0
    details: dict[str, Any] = {}
    cause: str | None = None
    """Type name of the exception this error was mapped from or chained to."""
    stacktrace: str | None = None
    """The redacted traceback; present only when the operator opted in."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict with the same keys as :meth:`ToolError.to_dict`, plus
        ``cause`` and ``stacktrace``."""
        return self.model_dump(mode="json")

    def to_log_line(self) -> str:
        """One line for operators: kind, tool, category, retryability, status, wait, the
        cause's type and the message (JSON-quoted, so it stays on one line)."""
        return _pipeline.log_line(self)

    @classmethod
    def from_exception(
        cls,
        exc: BaseException,
        tool_name: str | None = None,
        *,
        include_stacktrace: bool = False,
        secrets: Iterable[str] = (),
    ) -> ErrorInfo:
        """Classify any exception: tdk's own keep their fields; httpx, timeouts and the rest
        are mapped by the one table of ``docs/errors.md`` (unknown ones become
        ``TOOL_RUNTIME_FATAL`` naming only the exception type). Texts are redacted; ``secrets``
        are exact values to scrub as well, and ``include_stacktrace`` adds the redacted
        traceback (opt-in: it may reveal code paths)."""
        return _pipeline.from_exception(
            exc, tool_name, include_stacktrace=include_stacktrace, secrets=secrets
        )

    @classmethod
    def from_error_string(cls, text: str, tool_name: str | None = None) -> ErrorInfo:
        """Build an ErrorInfo from text alone.

        Text in tdk's own ``str()`` format (``[KIND] ClassName ...: message``) recovers its kind
        and class; any other text becomes kind ``UNKNOWN``. The text is redacted either way.
        """
        return _pipeline.from_text(text, tool_name)


def _with_details(options: Any, **specific: object) -> Any:
    """Merge class-specific keywords into ``options["details"]`` (given ones win)."""
    given = {key: value for key, value in specific.items() if value is not None}
    if given:
        options["details"] = {**(options.get("details") or {}), **given}
    return options


class _Pipeline(Protocol):
    """What this module has the error pipeline (:mod:`tdk._failures`) do for it."""

    def from_exception(
        self,
        exc: BaseException,
        tool_name: str | None,
        *,
        include_stacktrace: bool,
        secrets: Iterable[str],
    ) -> ErrorInfo:
        """:meth:`ErrorInfo.from_exception`."""

    def from_text(self, text: str, tool_name: str | None) -> ErrorInfo:
        """:meth:`ErrorInfo.from_error_string`."""

    def clean_details(self, details: Mapping[Any, Any]) -> dict[str, Any]:
        """A JSON-safe copy of the ``details`` given to an error."""

    def log_line(self, info: ErrorInfo) -> str:
        """:meth:`ErrorInfo.to_log_line`."""


class _NotConnected:
    """The slot before the ``tdk`` package fills it, which it does as soon as this module is
    bound to it: seen only by a module loaded outside the package (by file path), or by
    another thread in the instant between the end of this module's first import and that."""

    def __getattr__(self, name: str) -> NoReturn:
        raise RuntimeError(
            "tdk.errors is not connected to tdk's error pipeline: import it as tdk.errors, "
            "whose package connects it"
        )


#: The error pipeline (see the module docstring): set by :func:`_connect` alone.
_pipeline: _Pipeline = cast("_Pipeline", _NotConnected())


def _connect(pipeline: _Pipeline) -> None:
    """Fill the slot: by the ``tdk`` package, with a stand-in that loads the pipeline on first
    use, then by the pipeline itself (:mod:`tdk._failures.link`)."""
    global _pipeline  # noqa: PLW0603 (the one slot of this module, filled from outside)
    _pipeline = pipeline
