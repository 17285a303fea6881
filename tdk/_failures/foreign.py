"""What a foreign exception says, as text safe to keep: its type and its ``str()``, redacted.

Never raising: the exception comes from a tool body and may be hostile (a ``__str__`` that
raises or returns something else than text). httpx puts whole URLs, credentials included,
into its messages, so the requests an exception (or one chained to it) carries are read, and
their URLs and credentials scrubbed. Those of ``httpx2`` too: its classes share httpx's names
but not its base classes, so they are recognised by the package they come from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from tdk._failures.redact import SECRET_HEADER_NAMES, redact_text, redact_url
from tdk.errors import MAX_DEVELOPER_MESSAGE_CHARS

__all__ = ["HTTPX_MODULES", "describe", "request_carried_by", "root_module", "scrub_requests"]

#: Root module names whose exceptions are mapped by the httpx rows.
HTTPX_MODULES: Final = frozenset({"httpx", "httpx2"})

#: How many chained exceptions are searched for requests.
_MAX_CHAIN: Final = 16
#: Longest exception type name a description keeps (dynamic classes may have any name).
_MAX_TYPE_NAME: Final = 200


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
    chained to it replaced by its redacted form, and those requests' credentials scrubbed by
    exact value."""
    requests = _requests_in_chain(exc)
    if requests:
        # The credentials of a request are read by the HTTP hook's own code. Loaded here, and
        # only here, when an httpx request is met (httpx is loaded then): tdk.http needs
        # nothing of this package, and defining or running tools must not load httpx.
        from tdk.http._classify import request_secrets

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
        and root_module(type(exc)) not in HTTPX_MODULES
    ):
        return []  # the common case: a lone exception of a tool's own
    requests = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        if root_module(type(current)) in HTTPX_MODULES:
            request = request_carried_by(current)
            if request is not None:
                requests.append(request)
        # (``is not None``, not ``or``: an exception's truth may be anything, even an error)
        current = current.__cause__ if current.__cause__ is not None else current.__context__
    return requests


def request_carried_by(exc: BaseException) -> Any:
    """The httpx(2) request ``exc`` carries, or None (only a real ``Request`` is read: an
    exception subclass may return anything there)."""
    try:
        request = exc.request  # type: ignore[attr-defined]
    except Exception:  # unset (httpx raises RuntimeError), or a property that fails
        return None
    kind = type(request)
    return request if kind.__name__ == "Request" and root_module(kind) in HTTPX_MODULES else None


def root_module(cls: type) -> str:
    """The top-level package a class was defined in (``""`` when it does not say)."""
    module = getattr(cls, "__module__", None)
    return module.partition(".")[0] if type(module) is str else ""
