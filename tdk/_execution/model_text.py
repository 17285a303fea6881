"""What a model reads of a result (``ToolResult.for_model()``): the value, or what to do next.

A success is the value as compact JSON text (a ``str`` value as it is). A failure is a JSON
object with the error's ``kind`` and model-safe ``message`` and, when set, ``retry_after_ms``
and ``additional_prompt_content``: what a model needs to choose its next step. Nothing meant
for the developer (``developer_message``, ``details``, ``cause``, ``stacktrace``) is ever in
it, and the texts get one more pass of redaction, for an ``ErrorInfo`` built by hand. Every
text is valid UTF-8 (lone surrogates become U+FFFD), as an API request must be.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic_core import to_json

from tdk._failures.details import json_safe
from tdk._failures.redact import encodable, redact_text
from tdk.errors import MAX_SAFE_INT, ErrorInfo

__all__ = ["error_text", "utf8_copy", "value_text"]


def value_text(value: Any) -> str:
    """The value as the model reads it: a ``str`` as it is, anything else as compact JSON."""
    return sendable(value)[1]


def sendable(value: Any) -> tuple[Any, str]:
    """``value`` with every text valid UTF-8 (each lone surrogate U+FFFD), and its text as the
    model reads it (see :func:`value_text`). Never raises."""
    if type(value) is str:
        value = encodable(value)
        return value, value
    try:  # (pydantic-core's writer: compact, UTF-8, four times json.dumps's speed)
        return value, to_json(value, inf_nan_mode="strings").decode()
    except Exception:
        return _repaired(value)


def _repaired(value: Any) -> tuple[Any, str]:
    """:func:`sendable` of a value pydantic-core could not write."""
    try:  # a lone surrogate (a name read with surrogateescape): U+FFFD, nothing cut
        value = utf8_copy(value)
        return value, to_json(value, inf_nan_mode="strings").decode()
    except Exception:  # in a result built by hand: a foreign object, a cycle
        value = utf8_copy(json_safe(value))
        return value, _COMPACT.encode(value)


def utf8_copy(value: Any) -> Any:
    """A copy of JSON data (a tool's validated value) in which every text (key or value)
    encodes as UTF-8: each lone surrogate, as a name read with ``surrogateescape`` holds,
    becomes U+FFFD. Only called for a value that failed to encode, so it never runs on the
    way of a call that succeeds."""
    kind = type(value)
    if kind is str:
        return encodable(value)
    if kind is dict:
        return {utf8_copy(key): utf8_copy(item) for key, item in value.items()}
    if kind is list:
        return [utf8_copy(item) for item in value]
    return value


#: Compact JSON, non-ASCII as it is (fewer tokens), no NaN: one encoder, made once.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def error_text(error: ErrorInfo) -> str:
    """The failure as the model reads it: ``{"kind", "message"}`` and, when set,
    ``retry_after_ms`` and ``additional_prompt_content``."""
    return to_json(error_fields(error)).decode()


def error_fields(error: ErrorInfo) -> dict[str, Any]:
    """What :func:`error_text` writes, as a dict."""
    shown: dict[str, Any] = {"kind": error.kind.value, "message": redact_text(error.message)}
    if error.retry_after_ms is not None:  # (bounded: an ErrorInfo built by hand may hold any)
        shown["retry_after_ms"] = min(error.retry_after_ms, MAX_SAFE_INT)
    if error.additional_prompt_content:
        shown["additional_prompt_content"] = redact_text(error.additional_prompt_content)
    return shown
