"""The root of the tree, :class:`ToolError`: the fields every error carries, checked where the
error is made, and how an error is shown, pickled and turned into data (``to_dict``,
``to_error_info``). Also what its subclasses share: the options they accept, and the merge of
their own keywords into ``details``."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final, TypedDict, Unpack

from tdk.errors import _pipeline
from tdk.errors._error_info import ErrorInfo
from tdk.errors._kinds import ErrorCategory, ErrorKind

__all__ = [
    "DEFAULT_MAX_RETRY_ATTEMPTS",
    "MAX_DEVELOPER_MESSAGE_CHARS",
    "MAX_SAFE_INT",
    "ErrorOptions",
    "RuntimeErrorOptions",
    "ToolError",
    "check_options",
    "with_details",
]

#: Retries after the first attempt that a retryable error allows unless it says otherwise.
DEFAULT_MAX_RETRY_ATTEMPTS: Final = 3
#: Longest developer message (and stack trace) kept; the rest is cut with a marker.
MAX_DEVELOPER_MESSAGE_CHARS: Final = 4000
#: The largest integer every JSON reader takes exactly (2**53 - 1): the bound of the integer
#: fields of an error (``retry_after_ms``, ``status_code``, ``max_retry_attempts``).
MAX_SAFE_INT: Final = 2**53 - 1


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


def check_options(message: object, options: Mapping[str, object]) -> None:
    """Raise ``TypeError`` unless ``message`` is a str and each option is of its type or None,
    and ``ValueError`` for an integer out of its bounds."""
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
        check_options(message, options)
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
        self.details: dict[str, Any] = _pipeline.current.clean_details(details) if details else {}
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


def with_details(options: Any, **specific: object) -> Any:
    """Merge class-specific keywords into ``options["details"]`` (given ones win)."""
    given = {key: value for key, value in specific.items() if value is not None}
    if given:
        options["details"] = {**(options.get("details") or {}), **given}
    return options
