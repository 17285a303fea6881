"""A tool's result as MCP's ``CallToolResult``, in its wire form (a dict the SDK validates).

A success: ``structuredContent`` (the value, or ``{"result": value}``) and one text content
with ``for_model()``. A failure: ``isError``, the text, and ``_meta["tdk/error"]``.

A success is sent only when the client can read it back. The SDK's JSON reader (pydantic over
jiter), the client's as much as the server's, takes at most :data:`READABLE_DEPTH` levels of
nesting: a deeper answer would be written (or, past pydantic's own writer's limit, crash the
SDK's stdio writer) and never read, its call never answered. Such a value is the call's
``TOOL_RUNTIME_BAD_OUTPUT_VALUE``, on every transport alike. (Integers longer than the reader
takes are refused earlier, by the tool's output check.)
"""

from __future__ import annotations

from typing import Any, Final

from mcp import types
from pydantic_core import from_json, to_json

from tdk._execution.call_scope import failed_instead
from tdk._execution.model_text import error_fields, sendable
from tdk._execution.result import ToolResult
from tdk._failures.info import make_error_info
from tdk.errors import ToolOutputError

__all__ = ["MAX_VALUE_DEPTH", "READABLE_DEPTH", "answer"]


def answer(tool_result: ToolResult, *, wrapped: bool) -> dict[str, Any]:
    """The ``CallToolResult`` of ``tool_result`` in its wire form (as :func:`result` says)."""
    error = tool_result.error
    if error is None:
        value, shown = sendable(tool_result.value)
        if not wrapped and type(value) is not dict:  # an output schema that says "object" wrongly
            return answer(_bad_output(tool_result, _NOT_AN_OBJECT), wrapped=False)
        if type(value) is not str and _too_deep_to_read(shown, _ABOVE_VALUE + wrapped):
            return answer(_bad_output(tool_result, _TOO_DEEP), wrapped=False)
        return {
            **_DEFAULTS,
            "content": [{"type": "text", "text": shown}],
            "structuredContent": {"result": value} if wrapped else value,
            "isError": False,
        }
    fields = error_fields(error)  # (the texts redacted once more, as the model reads them)
    text = [{"type": "text", "text": to_json(fields).decode()}]
    facts = {
        "kind": fields["kind"],
        "category": error.category.value,
        "retryable": error.retryable,
        "retry_after_ms": fields.get("retry_after_ms"),
        "status_code": error.status_code,
        "additional_prompt_content": fields.get(
            "additional_prompt_content", error.additional_prompt_content
        ),
    }
    return {**_DEFAULTS, "content": text, "isError": True, "_meta": {"tdk/error": facts}}


#: The deepest JSON the SDK's reader takes (jiter's limit), on either side: a message nested
#: deeper is dropped unread, and its request is never answered.
READABLE_DEPTH: Final = 200
#: Levels of an answer above a value that is its ``structuredContent`` (an object): the
#: JSON-RPC message and its ``result``. A wrapped value is one level further down.
_ABOVE_VALUE: Final = 2
#: How deep a value may nest (lists and objects) to be sent wrapped, as ``{"result": ...}``;
#: an object sent as it is may nest one level more.
MAX_VALUE_DEPTH: Final = READABLE_DEPTH - _ABOVE_VALUE - 1

#: Why a value is not sent: (the model's message, the developer's reason).
_NOT_AN_OBJECT: Final = (
    "The tool failed: it returned a result that does not match its declared type.",
    "the output schema says object; the value is not one",
)
_TOO_DEEP: Final = (
    "The tool failed: it returned a result nested too deeply to send.",
    f"the value nests more than {MAX_VALUE_DEPTH} levels of lists and objects "
    f"({MAX_VALUE_DEPTH + 1} for an object output): its answer would be deeper than the "
    f"{READABLE_DEPTH} levels the MCP SDK's JSON reader takes, and never be read",
)


def _too_deep_to_read(shown: str, above: int) -> bool:
    """Whether the value written as ``shown`` (JSON), ``above`` levels down in its answer,
    makes the answer deeper than a client reads. Only a text holding as many brackets as that
    takes is read again (by the SDK's own reader), so the check costs two scans of the text."""
    room = READABLE_DEPTH - above
    if len(shown) <= 2 * room or shown.count("[") + shown.count("{") <= room:
        return False
    try:
        from_json(f"{'[' * above}{shown}{']' * above}")
    except ValueError:
        return True
    return False


def _bad_output(tool_result: ToolResult, why: tuple[str, str]) -> ToolResult:
    """The failed result of a tool whose value cannot be sent as it is, for ``why``: logged,
    as every failure of a call is (one line)."""
    message, reason = why
    error = make_error_info(ToolOutputError, message, tool_result.tool, details={"reason": reason})
    return failed_instead(tool_result, error)


#: The fields of an empty ``CallToolResult`` in their wire form (``resultType`` in the SDK's
#: protocol versions that have it), read from the SDK installed.
_DEFAULTS: Final = types.CallToolResult(content=[]).model_dump(
    by_alias=True, mode="json", exclude_none=True, exclude={"content", "is_error"}
)
