"""Hostile input to the host adapters: parts that raise when read, objects that lie about
their type, schemas bent out of JSON Schema, and arguments that fail on a second read."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import pytest
from pydantic import Field, WithJsonSchema

from tdk import ToolCall, Toolkit, ToolRunner, tool
from tdk.hosts import anthropic as ant
from tdk.hosts import openai as oai


@tool(read_only=True)
def echo(text: Annotated[str, "What to say."], times: Annotated[int, "How many times."] = 1) -> str:
    """Say it again."""
    return text * times


class Raising:
    """An SDK-like object whose every attribute read raises."""

    def __getattr__(self, name: str) -> Any:
        raise ZeroDivisionError(name)


class LyingClass:
    """An object whose ``__class__`` raises: ``isinstance`` itself fails on it."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("no class")


class RaisingGet(dict[str, Any]):
    """A dict whose ``get`` raises."""

    def get(self, key: str, default: Any = None) -> Any:
        raise KeyError(key)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param({"role": "assistant", "tool_calls": [Raising()]}, [("", "")], id="raising"),
        pytest.param(
            {"role": "assistant", "tool_calls": [RaisingGet(id="c1")]}, [("", "")], id="get"
        ),
        pytest.param(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": LyingClass()}}
                ],
            },
            [("", "c1")],
            id="lying-name",
        ),
        pytest.param(
            {"role": "assistant", "tool_calls": [{"id": LyingClass(), "type": "custom"}]},
            [("", "")],
            id="lying-custom-id",
        ),
        pytest.param(
            [{"type": "function_call", "call_id": LyingClass(), "name": "echo"}],
            [],
            id="lying-responses-id",
        ),
    ],
)
def test_openai_calls_survive_parts_that_raise(
    message: Any, expected: list[tuple[str, str]]
) -> None:
    """A part that raises when read is no call (in a Responses output) or a call answered
    as bad input (in ``tool_calls``, where every entry needs an answer)."""
    calls = oai.calls(message)
    assert [(call.name, call.call_id) for call in calls] == expected
    assert all(call.problem for call in calls)


def test_anthropic_calls_survive_a_block_that_lies() -> None:
    """A tool_use block whose input cannot even be type-checked is answered as bad input."""
    block = {"type": "tool_use", "id": "t1", "name": "echo", "input": LyingClass()}
    [call] = ant.calls({"role": "assistant", "content": [block]})
    assert (call.call_id, call.problem) == (
        "t1",
        "The call is not a function call; only function tools run here.",
    )


@tool(read_only=True)
def bent(n: Annotated[int, Field(json_schema_extra={"anyOf": 5}), "A number."] = 1) -> str:
    """A schema whose anyOf is not a list."""
    return "x"


@tool(read_only=True)
def listed(n: Annotated[int, WithJsonSchema({"type": "object", "properties": ["x"]}), "N."]) -> str:
    """A schema whose properties are a list."""
    return "x"


@tool(read_only=True)
def free(labels: Annotated[dict[str, str], "Labels."]) -> str:
    """A free-form parameter."""
    return "x"


def test_strict_names_each_tool_whose_schema_it_cannot_read() -> None:
    """Schemas bent out of JSON Schema are named like any tool that cannot be strict, and the
    other tools' problems are still reported."""
    with pytest.raises(ValueError, match="cannot be strict") as caught:
        oai.tools([bent, listed, free], strict=True)
    assert str(caught.value).splitlines() == [
        "tool 'bent' cannot be strict: its input schema is not one tdk can read (TypeError)",
        "tool 'listed' cannot be strict: its input schema is not one tdk can read (AttributeError)",
        "tool 'free' cannot be strict: parameter 'labels' is a free-form object (a dict); "
        "strict mode needs every property named",
    ]


class SecondReadFails(Mapping[str, Any]):
    """Arguments that read once, then raise: validated again for a null, they fail."""

    def __init__(self) -> None:
        self.reads = 0

    def __getitem__(self, key: str) -> Any:
        return {"text": "hi", "times": None}[key]

    def __iter__(self) -> Iterator[str]:
        self.reads += 1
        if self.reads > 1:
            raise OSError("gone")
        return iter(["text", "times"])

    def __len__(self) -> int:
        return 2


class SecondStripFails(str):
    """JSON text whose ``strip()`` works once, then raises."""

    strips = 0

    def strip(self, chars: str | None = None) -> str:
        type(self).strips += 1
        if type(self).strips > 1:
            raise OSError("gone")
        return str.strip(self, chars)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        pytest.param(SecondReadFails(), "is not valid (mapping_type)", id="mapping"),
        pytest.param(
            SecondStripFails('{"text": "hi", "times": null}'),
            "The arguments could not be read (OSError)",
            id="text",
        ),
    ],
)
def test_arguments_that_fail_when_read_again_are_bad_input(arguments: Any, problem: str) -> None:
    """A null sent for a defaulted parameter validates again; arguments that fail on that
    second read are answered as bad input, never raised."""
    result = echo.run_sync(arguments)
    assert result.kind == "TOOL_RUNTIME_BAD_INPUT_VALUE"
    assert problem in result.error.message  # type: ignore[union-attr]


def test_a_lone_surrogate_in_a_call_id_is_answered_encodably() -> None:
    """No API sends one, but an answer must always encode as UTF-8."""
    call = ToolCall(name="echo", arguments={"text": "x"}, call_id="call_\ud800")
    [result] = asyncio.run(ToolRunner(Toolkit("t", [echo])).run_many([call]))
    for answer in (*oai.results([result]), *ant.results([result])):
        str(answer).encode()
