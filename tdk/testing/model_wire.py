"""The wire shapes of the fake model APIs of ``scripted_model``: the answers the official SDKs
read, and the tool results they send back.

Three APIs: OpenAI Chat Completions (``POST /v1/chat/completions``), OpenAI Responses
(``POST /v1/responses``) and Anthropic Messages (``POST /v1/messages``). A turn of the script
is either a text (the model's final answer) or tool calls (name, arguments, and optionally
the call id). As the real APIs do, a request that leaves a call of the previous turn without
its result is refused with a 400.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "API_PATHS",
    "Call",
    "Returned",
    "Turn",
    "answer_of",
    "api_refusal",
    "returned_in",
    "turn",
]

#: The path (under the API's ``/v1``) of each fake API.
API_PATHS: Final = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
}
#: The model name the answers carry.
_MODEL: Final = "scripted"


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the script makes."""

    name: str
    arguments: Mapping[str, Any]
    call_id: str


@dataclass(frozen=True, slots=True)
class Turn:
    """One answer of the script: a text, or tool calls."""

    text: str | None
    calls: tuple[Call, ...]


@dataclass(frozen=True, slots=True)
class Returned:
    """A tool result the model was sent back."""

    call_id: str
    name: str
    """The name of the tool the script called with that id ("" if the script made no such
    call)."""
    content: str
    """What the model reads (for tdk: ``ToolResult.for_model()``)."""
    is_error: bool | None
    """Anthropic's ``is_error`` flag (None for OpenAI, which has none)."""

    def json(self) -> Any:
        """The content read as JSON (tdk's failures and structured values are)."""
        return json.loads(self.content)


def turn(step: object, number: int, api: str) -> Turn:
    """Turn ``number`` of a script: ``step`` is a text, or a sequence of tool calls, each
    ``(name, arguments)`` or ``(name, arguments, call_id)``."""
    if isinstance(step, str):
        return Turn(step, ())
    if not isinstance(step, Sequence) or not step:
        raise TypeError(
            f"turn {number} of the script must be a text or a list of (name, arguments) tool "
            f"calls, got {step!r}"
        )
    prefix = "toolu" if api == "anthropic" else "call"
    calls = []
    for index, each in enumerate(step, start=1):
        if not (isinstance(each, tuple | list) and len(each) in (2, 3)):
            raise TypeError(f"a tool call is (name, arguments[, call_id]), got {each!r}")
        name, arguments, *given = each
        call_id = given[0] if given else f"{prefix}_{number}_{index}"
        calls.append(Call(str(name), dict(arguments), str(call_id)))
    return Turn(None, tuple(calls))


def answer_of(api: str, step: Turn, number: int) -> dict[str, Any]:
    """The API's answer playing ``step``."""
    if api == "chat":
        return _chat(step, number)
    if api == "responses":
        return _responses(step, number)
    return _anthropic_message(step, number)


def _chat(step: Turn, number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.text, "refusal": None}
    if step.calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in step.calls
        ]
    return {
        "id": f"chatcmpl-scripted-{number}",
        "object": "chat.completion",
        "created": 1_780_000_000 + number,
        "model": _MODEL,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if step.calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _responses(step: Turn, number: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = [
        {
            "type": "function_call",
            "id": f"fc_{number}_{index}",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": json.dumps(call.arguments),
            "status": "completed",
        }
        for index, call in enumerate(step.calls, start=1)
    ]
    if step.text is not None:
        text = {"type": "output_text", "text": step.text, "annotations": []}
        output.append(
            {
                "type": "message",
                "id": f"msg_{number}",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    return {
        "id": f"resp_scripted_{number}",
        "object": "response",
        "created_at": 1_780_000_000 + number,
        "status": "completed",
        "model": _MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def _anthropic_message(step: Turn, number: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if step.text is not None:
        content.append({"type": "text", "text": step.text})
    content += [
        {"type": "tool_use", "id": call.call_id, "name": call.name, "input": dict(call.arguments)}
        for call in step.calls
    ]
    return {
        "id": f"msg_scripted_{number}",
        "type": "message",
        "role": "assistant",
        "model": _MODEL,
        "content": content,
        "stop_reason": "tool_use" if step.calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def api_refusal(api: str, message: str) -> dict[str, Any]:
    """The API's error body for a request it refuses (a 400)."""
    if api == "anthropic":
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }


def _content_text(content: object) -> str:
    """A result's content as text: a string, or the texts of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return json.dumps(content)


def returned_in(api: str, body: Mapping[str, Any]) -> list[tuple[str, str, bool | None]]:
    """The tool results in a request: ``(call_id, content, is_error)`` each."""
    found: list[tuple[str, str, bool | None]] = []
    if api == "chat":
        for message in body.get("messages") or []:
            if isinstance(message, Mapping) and message.get("role") == "tool":
                found.append(
                    (str(message.get("tool_call_id")), _content_text(message.get("content")), None)
                )
    elif api == "responses":
        items = body.get("input")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, Mapping) and item.get("type") == "function_call_output":
                found.append((str(item.get("call_id")), _content_text(item.get("output")), None))
    else:
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, Mapping) else None
            for block in content if isinstance(content, list) else []:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    error = block.get("is_error")
                    found.append(
                        (
                            str(block.get("tool_use_id")),
                            _content_text(block.get("content")),
                            bool(error) if error is not None else False,
                        )
                    )
    return found
