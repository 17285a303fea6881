"""The answer to a line of stdio that is no message the SDK can read.

The SDK's reader (pydantic over jiter) refuses a line that is not JSON, that is nested more
than 200 levels deep or holds an integer of more than 4,300 digits (Python's limit on
converting one), and a JSON-RPC message of the wrong shape (``params`` a string or an array,
``jsonrpc`` other than ``"2.0"``). The SDK then drops the line, and a client waits for ever
for the answer. Every request that carries an id gets one answer: the JSON-RPC error saying
what is wrong, with the request's id when it can be read.

The line is read again with Python's own JSON reader (C, linear), which takes any nesting up
to the interpreter's recursion limit and is told to keep long integers as text; a line that
this reader refuses too (not JSON, or nested about a thousand levels deep) is a parse error
with a null id. A notification (no id) and a response are never answered, as JSON-RPC says.
No text of the line is repeated in the answer.
"""

from __future__ import annotations

import json
from typing import Any, Final

from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
)
from pydantic_core import from_json

__all__ = ["MAX_INT_DIGITS", "refusal", "too_long"]

#: The longest integer literal read (Python's limit on converting text to int, and the SDK's).
MAX_INT_DIGITS: Final = 4300


class _TooLong:
    """Stands for an integer literal longer than :data:`MAX_INT_DIGITS` digits."""


_TOO_LONG: Final = _TooLong()


def refusal(line: str) -> JSONRPCError | None:
    """The error answering ``line``, which the SDK's reader refused; None for a notification
    or a response (JSON-RPC answers neither)."""
    try:
        message = json.loads(line, parse_int=_integer)
    except (ValueError, RecursionError):
        return _error(None, PARSE_ERROR, "Parse error: the message is not JSON tdk can read")
    if type(message) is not dict:
        return _error(None, INVALID_REQUEST, "Invalid Request: send one JSON-RPC object")
    if "id" not in message:  # a notification: nothing to answer (and nobody waits)
        return None
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a response of the client's, to a request tdk never sends
    request_id = message["id"]
    if type(request_id) is not str and type(request_id) is not int:
        return _error(None, INVALID_REQUEST, "Invalid Request: the id is not a string or integer")
    if type(request_id) is str and not _writable(request_id):  # (a lone surrogate escaped)
        return _error(None, INVALID_REQUEST, "Invalid Request: the id is not valid Unicode")
    return _error(request_id, *_problem(message))


def too_long(head: bytes, limit: int) -> JSONRPCError:
    """The error answering a line longer than ``limit`` bytes, of which ``head`` is the
    start: with the request's id when it is whole in ``head``."""
    request_id = None
    try:
        start = from_json(head, allow_partial=True)
    except ValueError:
        start = None
    if type(start) is dict and "id" in start:
        names = list(start)
        found = start["id"]
        # Only a member read after the id proves that the id was not cut short.
        if names.index("id") < len(names) - 1 and type(found) in (str, int):
            request_id = found if type(found) is int or _writable(found) else None
    return _error(request_id, INVALID_REQUEST, f"Invalid Request: longer than {limit} bytes")


def _problem(message: dict[str, Any]) -> tuple[int, str]:
    """The code and text of what is wrong with ``message``, a request with a readable id."""
    if message.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"'
    if type(message.get("method")) is not str:
        return INVALID_REQUEST, 'Invalid Request: "method" must be a string'
    params = message.get("params")
    if type(params) is list:
        return INVALID_PARAMS, 'Invalid params: "params" must be an object, not an array'
    if params is not None and type(params) is not dict:
        return INVALID_REQUEST, 'Invalid Request: "params" must be an object'
    # A well-formed request the SDK's reader could not take: it reads at most 200 levels of
    # nesting and integers of at most 4,300 digits.
    return (
        INVALID_PARAMS,
        "Invalid params: a value is nested more than 200 levels deep or holds an integer of "
        f"more than {MAX_INT_DIGITS} digits",
    )


def _integer(text: str) -> int | _TooLong:
    """An integer literal's value, when it is short enough to convert in linear time."""
    digits = len(text) - (text[0] == "-")
    return int(text) if digits <= MAX_INT_DIGITS else _TOO_LONG


def _writable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
