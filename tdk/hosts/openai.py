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
from typing import Any, Literal

from tdk._call import ToolCall
from tdk._definition import ToolDefinition
from tdk._result import ToolResult
from tdk.hosts._calls import answered_id, items_of, member, results_of, tool_call
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
    if api == "chat":
        return rendered(
            source, ("openai-chat", strict), _chat_tool_strict if strict else _chat_tool
        )
    return rendered(
        source, ("openai-responses", strict), _responses_tool_strict if strict else _responses_tool
    )


def calls(message_or_response: Any) -> list[ToolCall]:
    """The tool calls the model made, as :class:`~tdk.ToolCall` objects with the model's call
    ids: from a ``ChatCompletion`` (its first choice) or its message, a Responses ``Response``
    or its ``output`` list, as SDK objects or plain dicts.

    Never raises for a call the model got wrong: a call without an id or a name is answered
    as bad input, arguments that are not JSON stay text and are answered as bad input, an
    unknown tool as ``TOOL_NOT_FOUND``. ``TypeError`` for something that is none of the above.
    """
    found: list[ToolCall] = []
    for item in _items(message_or_response):
        kind = member(item, "type")
        if kind == "function_call":  # Responses
            found.append(
                tool_call(
                    member(item, "name"),
                    member(item, "arguments"),
                    member(item, "call_id"),
                    text=True,
                )
            )
        elif kind == "function" or (kind is None and member(item, "function") is not None):
            function = member(item, "function")
            found.append(
                tool_call(
                    member(function, "name"),
                    member(function, "arguments"),
                    member(item, "id"),
                    text=True,
                )
            )
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


def _items(source: Any) -> list[Any]:
    """The items that may be tool calls: a chat message's ``tool_calls``, a Responses
    ``output``, or the list given."""
    if isinstance(source, list | tuple) or source is None:
        return items_of(source, "")
    choices = member(source, "choices")
    if choices is not None:  # a ChatCompletion: its first choice's message
        listed = items_of(choices, "a ChatCompletion's choices")
        source = member(listed[0], "message") if listed else None
        if source is None:
            return []
    output = member(source, "output")
    if output is not None:  # a Response
        return items_of(output, "a Response's output")
    if member(source, "role") is not None or member(source, "tool_calls") is not None:
        return items_of(member(source, "tool_calls"), "a message's tool_calls")
    raise TypeError(
        "calls() takes a ChatCompletion or its message, a Response or its output list, not "
        f"{type(source).__name__}"
    )


def _check_api(api: object) -> None:
    if api not in ("chat", "responses"):
        raise ValueError(f"api must be 'chat' or 'responses', not {api!r}")


def _chat_tool(definition: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": definition.name,
            "description": description_of(definition),
            "parameters": definition.input_schema,
        },
    }


def _chat_tool_strict(definition: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": definition.name,
            "description": description_of(definition),
            "parameters": strict_schema(definition),
            "strict": True,
        },
    }


def _responses_tool(definition: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "name": definition.name,
        "description": description_of(definition),
        "parameters": definition.input_schema,
        "strict": False,
    }


def _responses_tool_strict(definition: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "name": definition.name,
        "description": description_of(definition),
        "parameters": strict_schema(definition),
        "strict": True,
    }
