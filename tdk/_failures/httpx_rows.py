"""The httpx rows of the exception mapping table (``docs/errors.md``).

Keyed by class name, so that the same rows serve ``httpx2``, whose classes share the names but
not the base classes. :mod:`tdk._failures.table` loads this module the first time it meets an
httpx exception. The dependency points one way: these rows use the HTTP hook's classifier
(:func:`tdk.http.classify`, one code path for a status met by the hook and by
``raise_for_status()``), and :mod:`tdk.http` imports nothing of the error pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from tdk._execution.exchanges import never_sent
from tdk._failures.foreign import describe, request_carried_by
from tdk._failures.mapped import Build, Mapped
from tdk._failures.redact import redact_url
from tdk.errors import (
    MAX_SAFE_INT,
    ErrorKind,
    NetworkTransportError,
    ToolError,
    UpstreamError,
)
from tdk.http._hooks import classify

__all__ = ["HTTPX_TABLE"]


def request_details(exc: BaseException, secrets: Iterable[str]) -> dict[str, Any]:
    """Method and redacted URL of the request an httpx error carries, if any. Beyond
    userinfo and query values, a secret in the path (``/bot<token>/``) is scrubbed too."""
    request = request_carried_by(exc)
    if request is None:
        return {}
    return {"method": str(request.method), "url": redact_url(str(request.url), list(secrets))}


_K = ErrorKind


def _network(kind: ErrorKind, message: str) -> Build:
    """A row for a transport error. One raised before the request left (connecting,
    resolving the name, waiting for a connection of the pool, an unsupported scheme: see
    :data:`tdk._execution.exchanges.NOT_SENT`) says ``request_sent: False`` in its ``details``, so
    that a write may be retried after it."""

    def build(exc: BaseException, secrets: Iterable[str]) -> Mapped:
        details = request_details(exc, secrets)
        if never_sent(exc):
            details["request_sent"] = False
        return Mapped(
            NetworkTransportError,
            message,
            {"kind": kind, "developer_message": describe(exc, secrets), "details": details},
        )

    return build


def _http_status(exc: BaseException, secrets: Iterable[str]) -> ToolError:
    """``raise_for_status()`` inside a tool: exactly the classification of the HTTP hook
    (``tdk.http.classify``, one code path, for httpx and httpx2 responses alike). Falls back to
    the status alone when the exception carries no readable response, or one below 400 (httpx
    raises for 1xx and 3xx too).
    """
    try:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        readable = hasattr(response, "headers")
    except Exception:  # a property that fails: nothing to read
        response = status = None
        readable = False
    if type(status) is not int:
        status = None  # (an int subclass, a bool: not a status to trust)
    if status is not None and readable:
        try:
            error = classify(response, secrets=list(secrets))  # type: ignore[arg-type]
        except Exception:  # pragma: no cover (classify() falls back to the status itself)
            error = None
        if error is not None:
            return error
    return UpstreamError(
        "The upstream service returned an error.",
        status_code=status if status is not None and abs(status) <= MAX_SAFE_INT else None,
        developer_message=describe(exc, secrets),
        details=request_details(exc, secrets),
    )


#: httpx exception class name -> builder; looked up along the MRO, most specific first.
HTTPX_TABLE: Final[Mapping[str, Build]] = {
    "HTTPStatusError": _http_status,
    "ConnectTimeout": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_TIMEOUT,
        "The upstream service could not be reached in time.",
    ),
    "PoolTimeout": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_TIMEOUT,
        "The upstream service could not be reached in time.",
    ),
    "TimeoutException": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_TIMEOUT, "The upstream service did not answer in time."
    ),
    "ConnectError": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE,
        "The upstream service could not be reached.",
    ),
    "UnsupportedProtocol": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
        "The request to the upstream service failed.",
    ),
    "ProxyError": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE, "The upstream service could not be reached."
    ),
    "ProtocolError": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_UNREACHABLE,
        "The upstream service broke the HTTP protocol.",
    ),
    "TransportError": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
        "The connection to the upstream service failed.",
    ),
    "RequestError": _network(
        _K.NETWORK_TRANSPORT_RUNTIME_UNMAPPED,
        "The request to the upstream service failed.",
    ),
}
