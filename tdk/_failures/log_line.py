"""An error as one line for operators (:meth:`ErrorInfo.to_log_line
<tdk.errors.ErrorInfo.to_log_line>`), which nothing it carries can split or forge.

Every field is a plain token or JSON-quoted, and the message is JSON-quoted with the hidden
characters (:mod:`tdk._failures.hidden`) and lone surrogates escaped as well: a tool name or a
message sent by a model could carry a newline and forge a second record, or reorder what a
viewer shows.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Final

from tdk._failures.hidden import HIDDEN_CHARACTERS

if TYPE_CHECKING:
    from tdk.errors import ErrorInfo

__all__ = ["format_log_line", "log_token"]

_LOG_TOKEN: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: The hidden characters, and lone surrogates (which a UTF-8 log file cannot hold).
_LOG_HIDDEN: Final = re.compile(f"[{HIDDEN_CHARACTERS}\ud800-\udfff]")


def format_log_line(info: ErrorInfo) -> str:
    """:meth:`ErrorInfo.to_log_line <tdk.errors.ErrorInfo.to_log_line>`: kind, tool,
    category, retryability, status, wait, the cause's type and the message."""
    fields = (
        ("kind", info.kind.value),
        ("tool", log_token(info.tool_name)),
        ("category", info.category.value),
        ("retryable", "true" if info.retryable else "false"),
        ("status", "-" if info.status_code is None else info.status_code),
        ("retry_after_ms", "-" if info.retry_after_ms is None else info.retry_after_ms),
        ("cause", log_token(info.cause)),
    )
    text = " ".join(f"{key}={value}" for key, value in fields)
    message = json.dumps(info.message, ensure_ascii=False)  # (escapes C0 controls)
    return f"{text} message={_LOG_HIDDEN.sub(_escaped, message)}"


def _escaped(found: re.Match[str]) -> str:
    """A hidden character as JSON escapes it: ``\\u202e``, or a surrogate pair past U+FFFF
    (the message stays a JSON string)."""
    return json.dumps(found[0])[1:-1]


def log_token(value: str | None) -> str:
    """A log field: as is when it is a plain name, JSON-quoted otherwise (a tool name sent by
    the model could carry a newline and forge a second record)."""
    if value is None:
        return "-"
    return value if _LOG_TOKEN.fullmatch(value) else json.dumps(value, ensure_ascii=True)
