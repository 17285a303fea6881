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

from tdk._call import ToolCall
from tdk._result import ToolResult

__all__ = ["answered_id", "items_of", "member", "results_of", "tool_call"]

_NO_ID = "The call has no id, so its answer could not be matched to it."
_NO_NAME = "The call names no tool."
_BAD_ARGUMENTS = "The arguments are not a JSON object."


def member(source: Any, name: str) -> Any:
    """``source[name]`` of a mapping, or the attribute ``name`` of an SDK object; None when
    there is none."""
    if isinstance(source, dict):
        return source.get(name)
    return getattr(source, name, None)


def items_of(source: Any, what: str) -> list[Any]:
    """``source`` as a list of items (None is no items); ``TypeError`` for anything else."""
    if source is None:
        return []
    if isinstance(source, list | tuple):
        return list(source)
    raise TypeError(f"calls() takes {what}, not {type(source).__name__}")


def tool_call(name: Any, arguments: Any, call_id: Any, *, text: bool) -> ToolCall:
    """A call from the pieces a host sent, each of any type: see the module docstring.
    ``text``: whether the host sends arguments as JSON text (OpenAI) rather than as an
    object (Anthropic)."""
    problem = None
    if type(call_id) is not str or not call_id:
        call_id, problem = "", _NO_ID
    if type(name) is not str or not name:
        name, problem = "", problem or _NO_NAME
    if not (arguments is None or isinstance(arguments, dict) or (text and type(arguments) is str)):
        arguments, problem = None, problem or _BAD_ARGUMENTS
    return ToolCall.model_construct(
        name=name, arguments=arguments, call_id=call_id, problem=problem
    )


def answered_id(result: ToolResult) -> str:
    """The id a result answers; ``ValueError`` for a result run without one."""
    call_id = result.call_id
    if call_id is None:
        raise ValueError(
            f"the result of tool '{result.tool}' has no call_id: run each call with the "
            "call_id of the model's call (ToolRunner.run_many does, for ToolCall objects)"
        )
    return call_id


def results_of(results: Iterable[ToolResult]) -> list[ToolResult]:
    """``results`` as a list, each checked to be a ``ToolResult``."""
    listed = list(results)
    for result in listed:
        if not isinstance(result, ToolResult):
            raise TypeError(f"results() takes ToolResult objects, not {type(result).__name__}")
    return listed
