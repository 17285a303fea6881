"""Checked by mypy, never run: the error API as users type it."""

from __future__ import annotations

from tdk.errors import (
    ErrorCategory,
    ErrorInfo,
    ErrorKind,
    RetryableToolError,
    ToolTimeoutError,
    UpstreamError,
)

kind: ErrorKind = ToolTimeoutError.kind
category: ErrorCategory = ToolTimeoutError.category
retryable: bool = ToolTimeoutError.retryable

error = RetryableToolError("again", additional_prompt_content="use q=python", tool_name="t")
wait: int | None = error.retry_after_ms
budget: int = error.max_retry_attempts
upstream: UpstreamError = UpstreamError("slow down", status_code=429, retry_after_ms=1000)
info: ErrorInfo = ErrorInfo.from_exception(KeyError("x"), tool_name="t")
as_dict: dict[str, object] = info.to_dict()
