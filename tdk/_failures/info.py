"""Any exception, or text, -> the :class:`~tdk.errors.ErrorInfo` that a result carries.

tdk's own errors are read field by field (never trusting them: a tool may raise one whose
``__init__`` skipped ``ToolError.__init__``, or whose fields were reassigned), foreign ones
through the mapping table of :mod:`tdk._failures.table`; then every text is redacted, and the
stack trace added when asked for. Text alone is read in tdk's own ``str()`` format, when it is
in it. :meth:`ErrorInfo.from_exception <tdk.errors.ErrorInfo.from_exception>` and
:meth:`ErrorInfo.from_error_string <tdk.errors.ErrorInfo.from_error_string>` are these
functions, reached through :mod:`tdk._failures.link`.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterable, Mapping
from typing import Any, Final

from tdk._failures.details import clean_details, redact_json
from tdk._failures.foreign import scrub_requests
from tdk._failures.records import maker
from tdk._failures.redact import redact_text
from tdk._failures.table import map_foreign
from tdk.errors import (
    DEFAULT_MAX_RETRY_ATTEMPTS,
    MAX_DEVELOPER_MESSAGE_CHARS,
    MAX_SAFE_INT,
    ErrorInfo,
    ErrorKind,
    FatalToolError,
    ToolError,
)

__all__ = ["error_info_from_exception", "error_info_from_text", "make_error_info"]

#: Makes an ErrorInfo from a complete record, in field order, of values already checked.
_make_info: Final = maker(ErrorInfo)


def error_info_from_exception(
    exc: BaseException,
    tool_name: str | None = None,
    *,
    include_stacktrace: bool = False,
    secrets: Iterable[str] = (),
) -> ErrorInfo:
    """:meth:`ErrorInfo.from_exception <tdk.errors.ErrorInfo.from_exception>`."""
    secrets = tuple(secrets)
    if isinstance(exc, ToolError):
        # Raised by code as it is: its texts are its author's, so they are redacted here.
        record = _read_tool_error(exc)
        if isinstance(record, list):  # the fields it lacks, or that have the wrong type
            return _unreadable(exc, record, tool_name, secrets)
        for name in ("message", "developer_message", "additional_prompt_content"):
            if record[name]:
                record[name] = redact_text(record[name], secrets)
        own = record["tool_name"]
        if own is not None and own != tool_name:  # set by the error's author: any text
            record["tool_name"] = redact_text(own, secrets)
        record["details"] = redact_json(record["details"], secrets)
        record["cause"] = None if exc.__cause__ is None else type(exc.__cause__).__name__
    else:
        # Mapped by the table from text it already redacted with these same secrets (not
        # scanned twice), and read without making the error when the row allows it.
        mapped = map_foreign(exc, secrets)
        if isinstance(mapped, ToolError):
            record = mapped._record()  # (its fields, in ErrorInfo's order up to ``details``)
            record["cause"] = type(exc).__name__
            record["stacktrace"] = None
        else:
            record = _mapped_record(
                mapped.cls, mapped.message, tool_name, type(exc).__name__, **mapped.options
            )
    if record["tool_name"] is None:
        record["tool_name"] = tool_name
    if include_stacktrace:
        record["stacktrace"] = _stacktrace(exc, secrets)
    return _make_info(record)


def _unreadable(
    exc: BaseException, fields: list[str], tool_name: str | None, secrets: Iterable[str]
) -> ErrorInfo:
    """A ``TOOL_RUNTIME_FATAL`` error for a tdk error whose ``fields`` cannot be read
    (a subclass whose ``__init__`` skipped ``ToolError.__init__``, fields reassigned to
    values of the wrong type): a bug of the code that raised it."""
    name = type(exc).__name__[:200]
    malformed = FatalToolError(
        f"The tool raised a {name} that tdk could not read.",
        developer_message=(
            f"Fields missing or of the wrong type: {', '.join(fields)}. An error's "
            "__init__ must call ToolError.__init__, and its fields keep their types."
        ),
    )
    return error_info_from_exception(malformed, tool_name, secrets=secrets)


def error_info_from_text(text: str, tool_name: str | None = None) -> ErrorInfo:
    """:meth:`ErrorInfo.from_error_string <tdk.errors.ErrorInfo.from_error_string>`."""
    kind, error, parsed_tool, message = parse_error_string(redact_text(text))
    return ErrorInfo(
        error=error,
        kind=kind,
        category=kind.category,
        message=message,
        developer_message=message,
        retryable=kind.default_retryable,
        tool_name=tool_name if tool_name is not None else parsed_tool,
        max_retry_attempts=DEFAULT_MAX_RETRY_ATTEMPTS if kind.default_retryable else 0,
    )


def make_error_info(
    cls: type[ToolError], message: str, tool_name: str, *, details: Mapping[str, Any]
) -> ErrorInfo:
    """The :class:`ErrorInfo` of ``cls(message, details=details)`` raised by ``tool_name``,
    without making the error: for failures tdk describes itself, in text it has made safe
    (so it is not scanned again). ``cls`` keeps its kind's default retryability."""
    return _make_info(_mapped_record(cls, message, tool_name, None, details=details))


def _mapped_record(
    cls: type[ToolError],
    message: str,
    tool_name: str | None,
    cause: str | None,
    *,
    kind: ErrorKind | None = None,
    developer_message: str | None = None,
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ErrorInfo fields of ``cls(message, kind=..., developer_message=..., details=...)``,
    without making the error. Only for classes that keep their kind's default retryability,
    and for ``details`` that tdk built JSON-safe (a test compares the two for every row of the
    mapping table)."""
    if kind is None:  # the class's own kind: its category and retryability are class attributes
        category, retryable = cls.category, cls.retryable
    else:
        category, retryable = kind.category, kind.default_retryable
    return {  # every field of ErrorInfo, in its order
        "error": cls.__name__,
        "kind": cls.kind if kind is None else kind,
        "category": category,
        "message": message,
        "developer_message": developer_message,
        "retryable": retryable,
        "retry_after_ms": None,
        "status_code": None,
        "additional_prompt_content": None,
        "tool_name": tool_name,
        "max_retry_attempts": DEFAULT_MAX_RETRY_ATTEMPTS if retryable else 0,
        "details": dict(details) if details else {},
        "cause": cause,
        "stacktrace": None,
    }


_MISSING: Final = object()
#: The fields of ErrorInfo, in order: the keys of every record made for one.
_INFO_FIELDS: Final = tuple(ErrorInfo.model_fields)
#: ``(field, type, may be None)`` of what :func:`_read_tool_error` reads.
_FIELDS: Final = (
    ("message", str, False),
    ("developer_message", str, True),
    ("retry_after_ms", int, True),
    ("status_code", int, True),
    ("additional_prompt_content", str, True),
    ("tool_name", str, True),
    ("max_retry_attempts", int, False),
    ("retryable", bool, False),
    ("kind", ErrorKind, False),
)


def _read_tool_error(exc: ToolError) -> dict[str, Any] | list[str]:
    """The ErrorInfo fields of ``exc`` (``details`` made JSON-safe, texts as plain ``str``),
    or the names of the fields that are missing or of the wrong type. Never raises: a tool
    may raise an error whose ``__init__`` skipped ``ToolError.__init__``, or whose fields were
    reassigned to anything."""
    record: dict[str, Any] = dict.fromkeys(_INFO_FIELDS)  # every field, in ErrorInfo's order
    record["error"] = type(exc).__name__
    wrong = []
    for name, expected, optional in _FIELDS:
        try:
            value = getattr(exc, name)
        except Exception:  # not set at all, or a property that fails
            value = _MISSING
        kind = type(value)  # (not isinstance(): an object may lie about its __class__)
        if value is None and optional:
            record[name] = None
        elif expected is str and issubclass(kind, str):
            record[name] = str.__str__(value)  # a subclass as the plain value: no method called
        elif expected is int and issubclass(kind, int) and kind is not bool:
            number = record[name] = int.__index__(value)
            if not (-MAX_SAFE_INT if name == "status_code" else 0) <= number <= MAX_SAFE_INT:
                wrong.append(name)  # out of range (the constructor checks it; reassigned since)
        elif kind is expected or (expected is ErrorKind and issubclass(kind, ErrorKind)):
            record[name] = value
        else:
            wrong.append(name)
    try:
        details: object = exc.details
    except Exception:
        details = _MISSING
    if issubclass(type(details), Mapping):
        record["details"] = clean_details(details)  # type: ignore[arg-type]
    else:
        wrong.append("details")
    if wrong:
        return wrong
    record["category"] = record["kind"].category  # (cause and stacktrace: the caller's)
    return record


def _stacktrace(exc: BaseException, secrets: Iterable[str]) -> str:
    # traceback copes with hostile __str__ and cyclic chains on its own.
    text = "".join(traceback.format_exception(exc))
    return scrub_requests(text, exc, secrets, limit=4 * MAX_DEVELOPER_MESSAGE_CHARS)


_ERROR_STRING = re.compile(
    r"^\[(?P<kind>[A-Z_]+)\] (?P<error>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?: (?:during execution of|in definition of|when looking up) tool '(?P<tool>[^']*)'"
    r"| when loading toolkit '[^']*')?: (?P<message>.*)\Z",
    re.DOTALL,
)


def parse_error_string(text: str) -> tuple[ErrorKind, str, str | None, str]:
    """Split tdk's ``str()`` format into (kind, class name, tool name, message).

    Text in any other format is kind ``UNKNOWN`` of class ``ToolError`` with the text as message.
    """
    match = _ERROR_STRING.match(text.strip())
    if match is None or match["kind"] not in ErrorKind.__members__:
        return ErrorKind.UNKNOWN, ToolError.__name__, None, text.strip()
    return ErrorKind(match["kind"]), match["error"], match["tool"], match["message"]
