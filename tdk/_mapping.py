"""Any exception -> one tdk error: the single mapping table of ``docs/errors.md``.

tdk's own errors pass through unchanged. Foreign exceptions are looked up along their MRO, so
the most specific class wins: the builtin rows here, the httpx rows in
:mod:`tdk.http._exceptions` (keyed by class name, which makes the same rows serve ``httpx2``,
whose classes share the names but not the base classes; loaded the first time an httpx
exception is met).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple, TypedDict

from tdk._redact import SECRET_HEADER_NAMES, redact_text, redact_url
from tdk.errors import (
    MAX_DEVELOPER_MESSAGE_CHARS,
    ErrorKind,
    FatalToolError,
    ToolCancelledError,
    ToolError,
    ToolTimeoutError,
)

#: Root module names whose exceptions are mapped by the httpx rows.
HTTPX_MODULES: Final = frozenset({"httpx", "httpx2"})

_K = ErrorKind
#: How many chained exceptions are searched for requests.
_MAX_CHAIN: Final = 16
#: Longest exception type name a description keeps (dynamic classes may have any name).
_MAX_TYPE_NAME: Final = 200


class MappedOptions(TypedDict, total=False):
    """The options a row of the table gives its error class (texts already redacted)."""

    kind: ErrorKind
    developer_message: str
    details: dict[str, Any]


class Mapped(NamedTuple):
    """A foreign exception's tdk error before it is made: its class, its model-facing message
    and its options. :meth:`build` makes the exception (for a direct call, which raises it);
    :meth:`ErrorInfo.from_exception` reads the fields without making it (a failed call then
    builds no exception of its own, and no text is redacted twice). Rows whose class adjusts
    its fields when made (an ``UpstreamError`` picks its subclass and retryability) return the
    error itself instead.
    """

    cls: type[ToolError]
    message: str
    options: MappedOptions

    def build(self) -> ToolError:
        """The tdk error these fields describe."""
        # (Only NetworkTransportError rows give ``kind``, which that class accepts.)
        return self.cls(self.message, **self.options)  # type: ignore[misc]


#: A row of the table: the exception and the secrets to scrub -> its error, or what makes it.
Build = Callable[[BaseException, Iterable[str]], Mapped | ToolError]


def _timed_out(exc: BaseException, secrets: Iterable[str]) -> Mapped:
    return Mapped(
        ToolTimeoutError, "The tool timed out.", {"developer_message": describe(exc, secrets)}
    )


def _cancelled(exc: BaseException, secrets: Iterable[str]) -> Mapped:
    return Mapped(
        ToolCancelledError,
        "The tool's work was cancelled.",
        {"developer_message": describe(exc, secrets)},
    )


def _group(exc: BaseException, secrets: Iterable[str]) -> Mapped:
    try:
        names = {type(e).__name__[:_MAX_NAME] for e in exc.exceptions}  # type: ignore[attr-defined]
    except Exception:  # a group whose members cannot be read
        names = set()
    members = sorted(names)[:_MAX_GROUP_NAMES]
    listed = ", ".join(members)
    if len(names) > _MAX_GROUP_NAMES:
        listed += f" and {len(names) - _MAX_GROUP_NAMES} other types"
    return Mapped(
        FatalToolError,
        f"The tool failed with several errors at once ({listed}).",
        {"developer_message": describe(exc, secrets), "details": {"exceptions": members}},
    )


#: Exception types a group's message names at most, and the longest name kept.
_MAX_GROUP_NAMES: Final = 10
_MAX_NAME: Final = 100


def _fatal(exc: BaseException, secrets: Iterable[str]) -> Mapped:
    return Mapped(
        FatalToolError,
        f"An unhandled {type(exc).__name__} was raised by the tool.",
        {"developer_message": describe(exc, secrets)},
    )


#: Builtin exception class -> builder; looked up along the MRO, as the httpx rows are.
BUILTIN_TABLE: Final[Mapping[type[BaseException], Build]] = {
    TimeoutError: _timed_out,
    asyncio.CancelledError: _cancelled,
    BaseExceptionGroup: _group,
}


def to_tool_error(exc: BaseException, *, secrets: Iterable[str] = ()) -> ToolError:
    """The tdk error for ``exc``: itself when it is one, else the mapped error chained to it."""
    if isinstance(exc, ToolError):
        return exc
    mapped = map_foreign(exc, secrets)
    error = mapped.build() if isinstance(mapped, Mapped) else mapped
    error.__cause__ = exc
    return error


def map_foreign(exc: BaseException, secrets: Iterable[str]) -> Mapped | ToolError:
    """The row of the table for ``exc`` (not a tdk error), applied: texts are redacted with
    ``secrets`` and the requests ``exc`` carries."""
    return _builder_for(exc)(exc, secrets)


#: Exception type -> its row, remembered after the first MRO walk (bounded: cleared when full).
_ROW_OF_TYPE: dict[type[BaseException], Build] = {}
_MAX_REMEMBERED_TYPES: Final = 512


def _builder_for(exc: BaseException) -> Build:
    exc_type = type(exc)
    build = _ROW_OF_TYPE.get(exc_type)
    if build is None:
        build = _walk_mro(exc_type)
        if len(_ROW_OF_TYPE) >= _MAX_REMEMBERED_TYPES:
            _ROW_OF_TYPE.clear()
        _ROW_OF_TYPE[exc_type] = build
    return build


def _walk_mro(exc_type: type[BaseException]) -> Build:
    for cls in exc_type.__mro__:
        if _root_module(cls) in HTTPX_MODULES:
            # The httpx rows live with the hook, loaded the first time an httpx exception is
            # met (a walk is remembered per type: once per type at most).
            from tdk.http._exceptions import HTTPX_TABLE

            build = HTTPX_TABLE.get(cls.__name__)
        else:
            build = BUILTIN_TABLE.get(cls)
        if build is not None:
            return build
    return _fatal


def _root_module(cls: type) -> str:
    """The top-level package a class was defined in (``""`` when it does not say)."""
    module = getattr(cls, "__module__", None)
    return module.partition(".")[0] if type(module) is str else ""


def describe(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """``TypeName: text`` of a foreign exception, redacted and bounded, never raising."""
    try:
        text = str(exc)
        if type(text) is not str:  # a subclass, whose methods may lie: the plain text
            text = str.__str__(text)
    except Exception:  # a hostile __str__, or one returning a non-string
        text = "<str() of the exception raised>"
    name = type(exc).__name__[:_MAX_TYPE_NAME]  # code, not data: kept as it is
    if not text:
        return name
    if name.lower() in SECRET_HEADER_NAMES:  # "Authorization: ..." reads as a header line
        return scrub_requests(f"{name}: {text}", exc, secrets, limit=MAX_DEVELOPER_MESSAGE_CHARS)
    limit = MAX_DEVELOPER_MESSAGE_CHARS - len(name) - 2
    return f"{name}: {scrub_requests(text, exc, secrets, limit=limit)}"


def scrub_requests(
    text: str, exc: BaseException, secrets: Iterable[str] = (), *, limit: int | None = None
) -> str:
    """``text`` redacted, with every URL of a request carried by ``exc`` or the exceptions
    chained to it replaced by its redacted form (httpx puts whole URLs, credentials included,
    into its messages), and those requests' credentials scrubbed by exact value."""
    requests = _requests_in_chain(exc)
    if requests:
        from tdk.http._classify import request_secrets  # only when httpx requests are involved

        secrets = list(secrets)
        for request in requests:
            url = str(request.url)
            text = text.replace(url, redact_url(url))
            secrets += request_secrets(request)
    return redact_text(text, secrets, limit=limit)


def _requests_in_chain(exc: BaseException) -> list[Any]:
    """The httpx(2) requests of ``exc`` and of its causes and contexts (each once)."""
    if (
        exc.__cause__ is None
        and exc.__context__ is None
        and _root_module(type(exc)) not in HTTPX_MODULES
    ):
        return []  # the common case: a lone exception of a tool's own
    requests = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        if _root_module(type(current)) in HTTPX_MODULES:
            request = _request_carried_by(current)
            if request is not None:
                requests.append(request)
        # (``is not None``, not ``or``: an exception's truth may be anything, even an error)
        current = current.__cause__ if current.__cause__ is not None else current.__context__
    return requests


def _request_carried_by(exc: BaseException) -> Any:
    """The httpx(2) request ``exc`` carries, or None (only a real ``Request`` is read: an
    exception subclass may return anything there)."""
    try:
        request = exc.request  # type: ignore[attr-defined]
    except Exception:  # unset (httpx raises RuntimeError), or a property that fails
        return None
    kind = type(request)
    return request if kind.__name__ == "Request" and _root_module(kind) in HTTPX_MODULES else None


def request_details(exc: BaseException, secrets: Iterable[str]) -> dict[str, Any]:
    """Method and redacted URL of the request an httpx error carries, if any. Beyond
    userinfo and query values, a secret in the path (``/bot<token>/``) is scrubbed too."""
    request = _request_carried_by(exc)
    if request is None:
        return {}
    from tdk.http._classify import redacted_url  # the hook's own, loaded with httpx errors only

    return {"method": str(request.method), "url": redacted_url(request.url, list(secrets))}


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
