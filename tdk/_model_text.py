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

from tdk._json_safe import json_safe
from tdk._redact import encodable, redact_text
from tdk.errors import MAX_SAFE_INT, ErrorInfo

__all__ = ["error_text", "value_text"]


def value_text(value: Any) -> str:
    """The value as the model reads it: a ``str`` as it is, anything else as compact JSON
    (written once; a value that JSON cannot take, only possible in a result built by hand,
    is first made JSON-safe)."""
    if type(value) is str:
        return encodable(value)
    try:  # (pydantic-core's writer: compact, UTF-8, four times json.dumps's speed)
        return to_json(value, inf_nan_mode="strings").decode()
    except Exception:  # a lone surrogate; or, in a result built by hand, a foreign object
        return encodable(_COMPACT.encode(json_safe(value)))


#: Compact JSON, non-ASCII as it is (fewer tokens), no NaN: one encoder, made once.
_COMPACT: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def error_text(error: ErrorInfo) -> str:
    """The failure as the model reads it: ``{"kind", "message"}`` and, when set,
    ``retry_after_ms`` and ``additional_prompt_content``."""
    shown: dict[str, Any] = {"kind": error.kind.value, "message": redact_text(error.message)}
    if error.retry_after_ms is not None:  # (bounded: an ErrorInfo built by hand may hold any)
        shown["retry_after_ms"] = min(error.retry_after_ms, MAX_SAFE_INT)
    if error.additional_prompt_content:
        shown["additional_prompt_content"] = redact_text(error.additional_prompt_content)
    return to_json(shown).decode()
