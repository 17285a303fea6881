"""ToolResult: what every run of a tool returns, success or failure."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tdk._execution.asks import Pending
from tdk._execution.model_text import error_text, value_text
from tdk.errors import ErrorCategory, ErrorInfo, ErrorKind


class ToolResult(BaseModel):
    """The outcome of one tool call: a JSON-safe ``value`` or an ``error``, never both.

    ``attempts`` is the number of times the tool body was invoked (0 when the call was refused
    before the body ran: bad arguments, a missing secret, an unknown tool). ``duration_ms`` is
    the wall time of the whole call.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    """The tool's name (as called, for an unknown tool)."""
    call_id: str | None = None
    """The caller's identifier for this call, echoed back."""
    value: Any = None
    """The tool's return value, validated and serialised in JSON mode."""
    error: ErrorInfo | None = None
    """What went wrong, or None on success."""
    attempts: int = 1
    """How many times the tool body ran."""
    duration_ms: float = 0.0
    """Wall time of the call in milliseconds."""
    pending: Pending | None = None
    """For a call that stopped to ask the user (kind ``TOOL_RUNTIME_INPUT_REQUIRED``): the
    requests to show and the token to resume it with (``docs/asks.md``); else None."""

    @property
    def is_success(self) -> bool:
        """True when the call returned a value."""
        return self.error is None

    @property
    def kind(self) -> ErrorKind | None:
        """The error's kind, or None on success."""
        return None if self.error is None else self.error.kind

    @property
    def category(self) -> ErrorCategory | None:
        """The error's category, or None on success."""
        return None if self.error is None else self.error.category

    @property
    def retryable(self) -> bool:
        """Whether the failed call may succeed later; False on success."""
        return self.error is not None and self.error.retryable

    @property
    def retry_after_ms(self) -> int | None:
        """How long to wait before retrying, when the error says so."""
        return None if self.error is None else self.error.retry_after_ms

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict: ``tool``, ``call_id``, ``value``, ``error`` (its
        ``to_dict()`` or None), ``attempts``, ``duration_ms``, ``pending`` (``requests`` and
        ``token``, or None)."""
        return self.model_dump(mode="json")

    def for_model(self) -> str:
        """What the model reads of this result, as a host sends it back.

        On success, the value as compact JSON text (a ``str`` value as it is). On failure, a
        JSON object with ``kind``, ``message`` (the model-safe one) and, when set,
        ``retry_after_ms`` and ``additional_prompt_content``::

            {"kind":"UPSTREAM_RATE_LIMIT","message":"...","retry_after_ms":30000}

        Never the ``developer_message``, ``details``, ``cause`` or ``stacktrace``.
        """
        error = self.error
        return value_text(self.value) if error is None else error_text(error)
