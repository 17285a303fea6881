"""Tool calls read from a host's message, whatever shape it arrives in.

The model's message comes as the SDK's objects (read by attribute) or as plain dicts (read
by key); nothing here imports an SDK. A call the model got wrong never raises: a call without
an id or a name is a :class:`~tdk.ToolCall` with a ``problem`` (answered as bad input without
running the tool), arguments that are not JSON stay text (answered as bad input when run), and
an unknown name is answered as ``TOOL_NOT_FOUND`` when run. Every call gets an answer, as both
APIs require.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tdk._execution.call import ToolCall
from tdk._execution.result import ToolResult
from tdk._failures.redact import encodable

__all__ = [
    "answered_id",
    "items_of",
    "member",
    "results_of",
    "text_member",
    "tool_call",
    "unknown_call",
]

_NO_ID = "The call has no id, so its answer could not be matched to it."
_NO_NAME = "The call names no tool."
_BAD_ARGUMENTS = "The arguments are not a JSON object."
_NOT_A_FUNCTION = "The call is not a function call; only function tools run here."


def member(source: Any, name: str) -> Any:
    """``source[name]`` of a mapping, or the attribute ``name`` of an SDK object; None when
    there is none, or when reading it fails (the SDKs build responses without validating
    them: any part may be of any type)."""
    try:
        return source.get(name) if isinstance(source, dict) else getattr(source, name, None)
    except Exception:
        return None


def text_member(source: Any, name: str) -> str | None:
    """``member(source, name)`` when it is text (a plain ``str``), else None."""
    value = member(source, name)
    try:
        return str.__str__(value) if isinstance(value, str) else None
    except Exception:  # an object whose ``__class__`` raises
        return None


def items_of(source: Any) -> list[Any]:
    """The items of a list inside a message (``tool_calls``, ``output``, ``content``): a list
    or tuple as a list, None as none, and any other single value as one item."""
    if source is None:
        return []
    return list(source) if isinstance(source, list | tuple) else [source]


def tool_call(name: Any, arguments: Any, call_id: Any, *, text: bool) -> ToolCall:
    """A call from the pieces a host sent, each of any type: see the module docstring.
    ``text``: whether the host sends arguments as JSON text (OpenAI) rather than as an
    object (Anthropic)."""
    problem = None
    call_id = str.__str__(call_id) if isinstance(call_id, str) else ""
    if not call_id:
        problem = _NO_ID
    name = str.__str__(name) if isinstance(name, str) else ""
    if not name:
        problem = problem or _NO_NAME
    if isinstance(arguments, str):
        arguments = str.__str__(arguments)
    if not (arguments is None or isinstance(arguments, dict) or (text and type(arguments) is str)):
        arguments, problem = None, problem or _BAD_ARGUMENTS
    return ToolCall.model_construct(
        name=name, arguments=arguments, call_id=call_id, problem=problem
    )


def unknown_call(item: Any) -> ToolCall:
    """The answerable form of an entry that should have been a function call and is not
    (another kind of call, or one that cannot be read)."""
    call_id = text_member(item, "id") or ""
    return ToolCall.model_construct(
        name="", arguments=None, call_id=call_id, problem=_NOT_A_FUNCTION if call_id else _NO_ID
    )


def answered_id(result: ToolResult) -> str:
    """The id a result answers; ``ValueError`` for a result run without one."""
    call_id = result.call_id
    if call_id is None:
        raise ValueError(
            f"the result of tool '{result.tool}' has no call_id: run each call with the "
            "call_id of the model's call (ToolRunner.run_many does, for ToolCall objects)"
        )
    return encodable(call_id)  # (a lone surrogate, which no API sends, could not be encoded)


def results_of(results: Iterable[ToolResult]) -> list[ToolResult]:
    """``results`` as a list, each checked to be a ``ToolResult``."""
    listed = list(results)
    for result in listed:
        if not isinstance(result, ToolResult):
            raise TypeError(f"results() takes ToolResult objects, not {type(result).__name__}")
    return listed
