"""Tools, calls and results in Anthropic's Messages format.

::

    from tdk.hosts import anthropic as ant

    message = client.messages.create(
        model=model, max_tokens=1024, messages=messages, tools=ant.tools(toolkit)
    )
    messages.append({"role": "assistant", "content": message.content})
    results = await runner.run_many(ant.calls(message))
    messages.append({"role": "user", "content": ant.results(results)})

Nothing here imports the ``anthropic`` package.
"""

from __future__ import annotations

from collections.abc import Iterable
from copy import deepcopy
from typing import Any

from tdk._define.definition import ToolDefinition
from tdk._execution.call import ToolCall
from tdk._execution.result import ToolResult
from tdk.hosts._calls import (
    answered_id,
    items_of,
    member,
    results_of,
    text_member,
    tool_call,
    unknown_call,
)
from tdk.hosts._source import Source, description_of, rendered

__all__ = ["calls", "results", "tools"]


def tools(source: Source) -> list[dict[str, Any]]:
    """The tools of ``source`` (a ``Toolkit``, or tools or definitions) for ``tools=``:
    ``{"name", "description", "input_schema"}`` each. A deprecated tool's description says
    so."""
    return rendered(source, "anthropic", _tool)


def calls(message: Any) -> list[ToolCall]:
    """The tool calls the model made (its ``tool_use`` blocks), as :class:`~tdk.ToolCall`
    objects with the blocks' ids: from a ``Message`` or its ``content`` list, as SDK objects or
    plain dicts.

    Never raises for a call the model got wrong: a block without an id or a name is answered
    as bad input, input that is not an object too, an unknown tool as ``TOOL_NOT_FOUND``.
    ``TypeError`` for something that is neither a message nor a content list.
    """
    if isinstance(message, list | tuple) or message is None:
        blocks = items_of(message)
    else:
        content = member(message, "content")
        if content is None and member(message, "role") is None:
            raise TypeError(
                f"calls() takes a Message or its content list, not {type(message).__name__}"
            )
        blocks = [] if isinstance(content, str) else items_of(content)
    found: list[ToolCall] = []
    for block in blocks:
        if text_member(block, "type") != "tool_use":
            continue
        try:
            found.append(
                tool_call(
                    member(block, "name"), member(block, "input"), member(block, "id"), text=False
                )
            )
        except Exception:  # parts that cannot even be type-checked (an object that lies)
            found.append(unknown_call(block))
    return found


def results(results: Iterable[ToolResult]) -> list[dict[str, Any]]:
    """The ``tool_result`` content blocks answering the calls, for one ``user`` message:
    ``{"type": "tool_result", "tool_use_id", "content", "is_error"}``, the text being
    ``result.for_model()``.

    ``ValueError`` for a result without a ``call_id``.
    """
    return [
        {
            "type": "tool_result",
            "tool_use_id": answered_id(result),
            "content": result.for_model(),
            "is_error": result.error is not None,
        }
        for result in results_of(results)
    ]


def _tool(definition: ToolDefinition) -> dict[str, Any]:
    return {
        "name": definition.name,
        "description": description_of(definition),
        "input_schema": deepcopy(definition.input_schema),
    }
