"""The errors of running a tool: :class:`ToolRuntimeError`, whose ``retryable`` an instance may
override, and its subclasses: for the arguments and the return value, what a tool author
raises, time limits and cancellation, the services the tool calls (an upstream that answered
with an error status, a request that never got an answer), missing requirements, and the
runner's refusals."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final, Literal, Self, Unpack, cast

from tdk.errors._kinds import ErrorKind
from tdk.errors._tool_error import (
    ErrorOptions,
    RuntimeErrorOptions,
    ToolError,
    check_options,
    with_details,
)

__all__ = [
    "ContextRequiredToolError",
    "FatalToolError",
    "NetworkKind",
    "NetworkTransportError",
    "RetryableToolError",
    "ToolApprovalDeniedError",
    "ToolBulkheadFullError",
    "ToolCancelledError",
    "ToolCircuitOpenError",
    "ToolInputError",
    "ToolInputRequiredError",
    "ToolOutputError",
    "ToolRateLimitedError",
    "ToolRequirementError",
    "ToolResumeInvalidError",
    "ToolRuntimeError",
    "ToolTimeoutError",
    "UpstreamAuthError",
    "UpstreamBadRequestError",
    "UpstreamError",
    "UpstreamNotFoundError",
    "UpstreamRateLimitError",
    "UpstreamServerError",
    "UpstreamValidationError",
]


class ToolRuntimeError(ToolError):
    """Root of the errors of running a tool. ``retryable`` may be overridden per instance."""

    def __init__(self, message: str, **options: Unpack[RuntimeErrorOptions]) -> None:
        retryable = options.pop("retryable", None)
        if retryable is not None:
            check_options(message, {"retryable": retryable})
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
        super().__init__(message, **with_details(options, errors=listed))


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
        super().__init__(message, **with_details(options, timeout=timeout))


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
    """A secret, metadata value, OAuth scope or user authorization the tool declared is
    missing from the context (``missing_auth``: the provider of ``@tool(requires_auth=...)``
    whose token the call has not got)."""

    kind = ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT

    def __init__(
        self,
        message: str,
        *,
        missing_secrets: Iterable[str] | None = None,
        missing_metadata: Iterable[str] | None = None,
        missing_scopes: Iterable[str] | None = None,
        missing_auth: str | None = None,
        **options: Unpack[RuntimeErrorOptions],
    ) -> None:
        super().__init__(
            message,
            **with_details(
                options,
                missing_secrets=None if missing_secrets is None else list(missing_secrets),
                missing_metadata=None if missing_metadata is None else list(missing_metadata),
                missing_scopes=None if missing_scopes is None else list(missing_scopes),
                missing_auth=missing_auth,
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
        super().__init__(message, **with_details(options, limit=limit, period=period))


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
            **with_details(options, failure_count=failure_count, reset_timeout=reset_timeout),
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
            message, **with_details(options, max_concurrent=max_concurrent, max_wait=max_wait)
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
        super().__init__(message, **with_details(options, keys=list(asked) or None))
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
        super().__init__(message, **with_details(options, key=key))


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
        super().__init__(message, **with_details(options, reason=reason, key=key))
