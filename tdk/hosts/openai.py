"""Tools, calls and results in OpenAI's formats: Chat Completions and the Responses API.

::

    from tdk.hosts import openai as oai

    completion = client.chat.completions.create(
        model=model, messages=messages, tools=oai.tools(toolkit)
    )
    message = completion.choices[0].message
    messages.append(message)
    results = await runner.run_many(oai.calls(message))
    messages.extend(oai.results(results))

``api="responses"`` gives the Responses API's shapes (``tools=``, then ``function_call_output``
items for ``input=``). ``strict=True`` makes each tool's schema one that strict mode accepts
(see ``docs/hosts.md``). Nothing here imports the ``openai`` package.
"""

from __future__ import annotations

from collections.abc import Iterable
from copy import deepcopy
from functools import partial
from typing import Any, Literal

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
from tdk.hosts._strict import strict_schema

__all__ = ["calls", "results", "tools"]

Api = Literal["chat", "responses"]


def tools(source: Source, *, strict: bool = False, api: Api = "chat") -> list[dict[str, Any]]:
    """The tools of ``source`` (a ``Toolkit``, or tools or definitions) for ``tools=``.

    Chat: ``{"type": "function", "function": {"name", "description", "parameters"}}``, with
    ``"strict": true`` in ``function`` when ``strict``. Responses: ``{"type": "function",
    "name", "description", "parameters", "strict"}``. A deprecated tool's description says so.

    Raises ``ValueError`` when ``strict`` and a tool's schema cannot be strict (naming each
    such tool and why), and for an unknown ``api``.
    """
    _check_api(api)
    if type(strict) is not bool:
        raise TypeError(f"strict must be True or False, not {strict!r}")
    shape = _chat_tool if api == "chat" else _responses_tool
    return rendered(source, (api, strict), partial(shape, strict=strict))


def calls(message_or_response: Any) -> list[ToolCall]:
    """The tool calls the model made, as :class:`~tdk.ToolCall` objects with the model's call
    ids: from a ``ChatCompletion`` (its first choice) or its message, a Responses ``Response``
    or its ``output`` list, as SDK objects or plain dicts.

    Never raises for a call the model got wrong: a call without an id or a name is answered
    as bad input, arguments that are not JSON stay text and are answered as bad input, an
    unknown tool as ``TOOL_NOT_FOUND``; an entry of a message's ``tool_calls`` that is not a
    function call (a custom tool's) is answered as bad input too. Items of a Responses output
    that are not ``function_call`` items (messages, reasoning) are not calls. ``TypeError``
    for something that is none of the above.
    """
    items, every = _items(message_or_response)
    found: list[ToolCall] = []
    for item in items:
        try:
            call = _call_of(item)
        except Exception:  # parts that cannot even be type-checked (an object that lies)
            call = None
        if call is not None:
            found.append(call)
        elif every:  # an entry of ``tool_calls``: a call all the same, and it needs an answer
            found.append(unknown_call(item))
    return found


def results(results: Iterable[ToolResult], *, api: Api = "chat") -> list[dict[str, Any]]:
    """The answers to append to the conversation, one per result, each with its call's id:
    chat ``{"role": "tool", "tool_call_id", "content"}``, Responses ``{"type":
    "function_call_output", "call_id", "output"}``. The text is ``result.for_model()``.

    ``ValueError`` for a result without a ``call_id``.
    """
    _check_api(api)
    if api == "chat":
        return [
            {"role": "tool", "tool_call_id": answered_id(result), "content": result.for_model()}
            for result in results_of(results)
        ]
    return [
        {
            "type": "function_call_output",
            "call_id": answered_id(result),
            "output": result.for_model(),
        }
        for result in results_of(results)
    ]


def _call_of(item: Any) -> ToolCall | None:
    """The function call ``item`` is (a chat tool call or a Responses ``function_call``), or
    None."""
    kind = text_member(item, "type")
    if kind == "function_call":  # Responses
        return tool_call(
            member(item, "name"), member(item, "arguments"), member(item, "call_id"), text=True
        )
    function = member(item, "function")
    if kind == "function" or (kind is None and function is not None):  # chat
        return tool_call(
            member(function, "name"), member(function, "arguments"), member(item, "id"), text=True
        )
    return None


def _items(source: Any) -> tuple[list[Any], bool]:
    """The items that may be tool calls, and whether every one of them is a call (a chat
    message's ``tool_calls``) rather than only its function calls (a Responses output)."""
    if isinstance(source, list | tuple) or source is None:
        return items_of(source), False
    choices = member(source, "choices")
    if choices is not None:  # a ChatCompletion: its first choice's message
        listed = items_of(choices)
        source = member(listed[0], "message") if listed else None
        return (items_of(member(source, "tool_calls")), True) if source is not None else ([], True)
    output = member(source, "output")
    if output is not None:  # a Response
        return items_of(output), False
    if member(source, "role") is not None or member(source, "tool_calls") is not None:
        return items_of(member(source, "tool_calls")), True
    raise TypeError(
        "calls() takes a ChatCompletion or its message, a Response or its output list, not "
        f"{type(source).__name__}"
    )


def _check_api(api: object) -> None:
    if api not in ("chat", "responses"):
        raise ValueError(f"api must be 'chat' or 'responses', not {api!r}")


def _function(definition: ToolDefinition, *, strict: bool) -> dict[str, Any]:
    """The name, description and parameters of a tool, as both APIs describe a function."""
    return {
        "name": definition.name,
        "description": description_of(definition),
        "parameters": strict_schema(definition) if strict else deepcopy(definition.input_schema),
    }


def _chat_tool(definition: ToolDefinition, *, strict: bool) -> dict[str, Any]:
    function = _function(definition, strict=strict)
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _responses_tool(definition: ToolDefinition, *, strict: bool) -> dict[str, Any]:
    return {"type": "function", **_function(definition, strict=strict), "strict": strict}
