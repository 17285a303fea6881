""":class:`ErrorInfo`, the frozen record of one error that results carry. Building one from
an exception or a text, and writing it as a log line, is the error pipeline's work
(:mod:`tdk._failures`), reached through :mod:`tdk.errors._pipeline`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict

from tdk.errors import _pipeline
from tdk.errors._kinds import ErrorCategory, ErrorKind

__all__ = ["ErrorInfo"]


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
        return _pipeline.current.log_line(self)

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
        return _pipeline.current.from_exception(
            exc, tool_name, include_stacktrace=include_stacktrace, secrets=secrets
        )

    @classmethod
    def from_error_string(cls, text: str, tool_name: str | None = None) -> ErrorInfo:
        """Build an ErrorInfo from text alone.

        Text in tdk's own ``str()`` format (``[KIND] ClassName ...: message``) recovers its kind
        and class; any other text becomes kind ``UNKNOWN``. The text is redacted either way.
        """
        return _pipeline.current.from_text(text, tool_name)
