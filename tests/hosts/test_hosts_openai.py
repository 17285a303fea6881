"""tdk.hosts.openai: tools, calls and results in Chat Completions' and the Responses API's shapes.

Every shape produced is checked against the ``openai`` SDK's own TypedDict (with
``pydantic.TypeAdapter``), calls are read from the SDK's own objects (built with
``model_validate``) and from the same data as plain dicts, and a loop runs on the real
``openai.OpenAI`` client over an ``httpx2.MockTransport``, checking the request bodies the SDK
sends. ``ToolResult.for_model()``, what every host sends back, is checked here too, and so
are parts of a message that raise when read and call ids that are not UTF-8.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

import httpx2
import openai
import pytest
from _hosts_support import (
    DETAIL_VALUE,
    DEVELOPER_NOTE,
    SECRET,
    LyingClass,
    Priority,
    Tracker,
    assert_valid,
    leaky_results,
)
from jsonschema import Draft202012Validator
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionToolMessageParam,
)
from openai.types.responses import FunctionToolParam, Response
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import BaseModel, Field

from tdk import ToolCall, ToolDefinition, Toolkit, ToolResult, ToolRunner, tool
from tdk.errors import ErrorInfo, ErrorKind, ToolInputError
from tdk.hosts import anthropic as ant
from tdk.hosts import openai as oai

# -- Model output, as the API sends it -------------------------------------------------------

SEARCH_ARGUMENTS = json.dumps(
    {"repo": {"owner": "acme", "name": "rockets"}, "query": "crash", "state": "closed"}
)
TICKET_ARGUMENTS = json.dumps(
    {"title": "Fix the crash", "priority": "high", "assignee": {"login": "ada", "team": "core"}}
)


def chat_completion_data() -> dict[str, Any]:
    """A Chat Completion whose message has text and three tool calls."""
    calls = [
        ("call_search", "search_issues", SEARCH_ARGUMENTS),
        ("call_ticket", "create_ticket", TICKET_ARGUMENTS),
        ("call_time", "server_time", "{}"),
    ]
    message = {
        "role": "assistant",
        "content": "Let me look that up.",
        "tool_calls": [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": arguments}}
            for id_, name, arguments in calls
        ],
    }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_780_000_000,
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


def response_data() -> dict[str, Any]:
    """A Responses API ``Response`` with a reasoning item, a message and two function calls."""
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_780_000_000,
        "model": "gpt-test",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_r_search",
                "name": "search_issues",
                "arguments": SEARCH_ARGUMENTS,
                "status": "completed",
            },
            {
                "type": "function_call",
                "id": "fc_2",
                "call_id": "call_r_time",
                "name": "server_time",
                "arguments": "{}",
                "status": "completed",
            },
        ],
    }


CHAT_CALLS = [
    ToolCall(name="search_issues", arguments=SEARCH_ARGUMENTS, call_id="call_search"),
    ToolCall(name="create_ticket", arguments=TICKET_ARGUMENTS, call_id="call_ticket"),
    ToolCall(name="server_time", arguments="{}", call_id="call_time"),
]
RESPONSES_CALLS = [
    ToolCall(name="search_issues", arguments=SEARCH_ARGUMENTS, call_id="call_r_search"),
    ToolCall(name="server_time", arguments="{}", call_id="call_r_time"),
]


def _schemas(node: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON Schema and every schema inside it (properties, items, anyOf members, $defs)."""
    inner: list[dict[str, Any]] = [
        *node.get("properties", {}).values(),
        *node.get("$defs", {}).values(),
        *node.get("anyOf", ()),
    ]
    if "items" in node:
        inner.append(node["items"])
    return [node, *(found for schema in inner for found in _schemas(schema))]


# -- tools() ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
def test_chat_tools_validate_against_the_sdk_param(strict: bool) -> None:
    """Each chat tool is a valid ``ChatCompletionFunctionToolParam``, strict or not."""
    tracker = Tracker()
    shapes = oai.tools(tracker.toolkit, strict=strict)
    assert [shape["function"]["name"] for shape in shapes] == [
        "search_issues",
        "create_ticket",
        "find_issues",
        "server_time",
        "fetch_page",
    ]
    for shape in shapes:
        assert_valid(ChatCompletionFunctionToolParam, shape)
        assert shape["type"] == "function"
        assert ("strict" in shape["function"]) is strict
        if strict:
            assert shape["function"]["strict"] is True


@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
def test_responses_tools_validate_against_the_sdk_param(strict: bool) -> None:
    """Each Responses tool is a valid ``FunctionToolParam`` with ``strict`` always set."""
    tracker = Tracker()
    shapes = oai.tools(tracker.toolkit, strict=strict, api="responses")
    assert len(shapes) == len(tracker.toolkit)
    for shape, definition in zip(shapes, tracker.toolkit.definitions(), strict=True):
        assert_valid(FunctionToolParam, shape)
        assert shape["name"] == definition.name
        assert shape["strict"] is strict


def test_plain_tools_carry_the_definition_schema_and_deprecation() -> None:
    """Without strict, the parameters are the input schema itself; a deprecated tool says so."""
    tracker = Tracker()
    chat = oai.tools(tracker.toolkit)
    responses = oai.tools(tracker.toolkit, api="responses")
    for shape, flat, definition in zip(chat, responses, tracker.toolkit.definitions(), strict=True):
        assert shape["function"]["parameters"] == definition.input_schema
        assert flat["parameters"] == definition.input_schema
        assert flat["description"] == shape["function"]["description"]
    deprecated = chat[2]["function"]
    assert deprecated["name"] == "find_issues"
    assert deprecated["description"] == (
        "Find issues by text.\n\nDeprecated: Use search_issues instead."
    )
    assert chat[3]["function"]["parameters"]["properties"] == {}  # the tool without parameters
    assert "Deprecated" not in chat[0]["function"]["description"]


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_strict_schemas_close_every_object_and_require_every_property(api: str) -> None:
    """Strict schemas: every object closed and fully required, optional parameters nullable."""
    tracker = Tracker()
    for shape in oai.tools(tracker.toolkit, strict=True, api=api):  # type: ignore[arg-type]
        parameters = shape["function"]["parameters"] if api == "chat" else shape["parameters"]
        for node in _schemas(parameters):
            if node.get("type") == "object" or "properties" in node:
                assert node["additionalProperties"] is False
                assert node["required"] == list(node["properties"])
            assert "default" not in node
            assert "title" not in node
    search = oai.tools(tracker.toolkit, strict=True, api=api)[0]  # type: ignore[arg-type]
    properties = (search["function"] if api == "chat" else search)["parameters"]["properties"]
    assert {"type": "null"} in properties["limit"]["anyOf"]
    assert {"type": "null"} in properties["labels"]["anyOf"]
    assert "anyOf" not in properties["query"]  # required: not nullable


def test_a_tool_that_cannot_be_strict_is_named_with_its_reason() -> None:
    """``strict=True`` raises ValueError naming every tool whose schema cannot be strict."""

    @tool
    def tag(labels: Annotated[dict[str, int], "Counts by label."]) -> int:
        """Sum counts."""
        return sum(labels.values())

    @tool
    def anything(value: Annotated[Any, "Whatever."]) -> str:
        """Take anything."""
        return "ok"

    toolkit = Toolkit("loose", [tag, anything])
    assert len(oai.tools(toolkit)) == 2  # not strict: fine
    with pytest.raises(ValueError, match="tool 'tag' cannot be strict") as raised:
        oai.tools(toolkit, strict=True)
    assert "free-form object" in str(raised.value)
    assert "tool 'anything' cannot be strict" in str(raised.value)
    with pytest.raises(ValueError, match="tool 'tag'"):
        oai.tools(toolkit, strict=True, api="responses")
    with pytest.raises(ValueError, match="tool 'tag'"):  # failures are not cached
        oai.tools(toolkit, strict=True)


def _by_hand(node: Any, *, required: bool, defs: dict[str, Any] | None = None) -> ToolDefinition:
    """A definition built by hand whose one parameter ``p`` has the schema ``node``."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"p": node},
        "required": ["p"] if required else [],
        "additionalProperties": False,
    }
    if defs is not None:
        schema["$defs"] = defs
    return ToolDefinition(
        name="by_hand", description="Made by hand.", input_schema=schema, output_schema={}
    )


INT, STR, NULL = {"type": "integer"}, {"type": "string"}, {"type": "null"}


@pytest.mark.parametrize(
    ("node", "required", "expected"),
    [
        pytest.param(
            {"oneOf": [INT, STR], "description": "d"},
            True,
            {"anyOf": [INT, STR], "description": "d"},
            id="one_of_becomes_any_of",
        ),
        pytest.param(
            {"allOf": [{"$ref": "#/$defs/X"}], "description": "d"},
            True,
            {"anyOf": [{"$ref": "#/$defs/X"}], "description": "d"},
            id="all_of_one_merged",
        ),
        pytest.param({"$ref": "#/$defs/X"}, True, {"$ref": "#/$defs/X"}, id="bare_ref"),
        pytest.param({**STR, "format": "uri"}, True, STR, id="unknown_format_dropped"),
        pytest.param(
            {**STR, "format": "date-time"}, True, {**STR, "format": "date-time"}, id="known_format"
        ),
        pytest.param({**STR, "pattern": "^(?!x).*$"}, True, STR, id="lookaround_dropped"),
        pytest.param({**STR, "pattern": "^a+$"}, True, {**STR, "pattern": "^a+$"}, id="pattern"),
        pytest.param(
            {**STR, "minLength": 1, "title": "T", "default": "x"}, True, STR, id="keywords_dropped"
        ),
        pytest.param(
            {"type": "array", "items": INT, "uniqueItems": True, "minItems": 1},
            True,
            {"type": "array", "items": INT, "minItems": 1},
            id="array",
        ),
        pytest.param(
            {"type": "object", "additionalProperties": False},
            True,
            {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
            id="closed_empty_object",
        ),
        pytest.param(
            {"type": "object", "properties": {"q": {**INT, "default": 1}}},
            True,
            {
                "type": "object",
                "properties": {"q": INT},
                "required": ["q"],
                "additionalProperties": False,
            },
            id="nested_object_closed",
        ),
        pytest.param(
            {**STR, "description": "d"},
            False,
            {"anyOf": [STR, NULL], "description": "d"},
            id="optional_made_nullable",
        ),
        pytest.param(INT, False, {"anyOf": [INT, NULL]}, id="optional_without_description"),
        pytest.param(
            {"anyOf": [INT, STR]}, False, {"anyOf": [INT, STR, NULL]}, id="optional_union"
        ),
        pytest.param(
            {"type": ["string", "null"]}, False, {"type": ["string", "null"]}, id="type_list_null"
        ),
        pytest.param({"enum": ["a", None]}, False, {"enum": ["a", None]}, id="enum_with_null"),
        pytest.param({"const": None}, False, {"const": None}, id="const_null"),
        pytest.param({"anyOf": [STR, NULL]}, False, {"anyOf": [STR, NULL]}, id="already_nullable"),
    ],
)
def test_strict_rewrites_each_schema_form(node: Any, required: bool, expected: Any) -> None:
    """Each schema form as strict mode takes it (a definition built by hand)."""
    definition = _by_hand(node, required=required, defs={"X": {"type": "object", "properties": {}}})
    for api in ("chat", "responses"):
        [shape] = oai.tools([definition], strict=True, api=api)  # type: ignore[arg-type]
        parameters = shape["function"]["parameters"] if api == "chat" else shape["parameters"]
        assert parameters["properties"]["p"] == expected
        assert parameters["required"] == ["p"]
        assert parameters["$defs"]["X"]["additionalProperties"] is False
    assert definition.input_schema["properties"]["p"] == node  # the definition is untouched


@pytest.mark.parametrize(
    ("node", "defs", "reason"),
    [
        pytest.param({"allOf": [INT, STR]}, None, "combines 2 schemas with allOf", id="all_of_two"),
        pytest.param(
            {"type": "array", "prefixItems": [INT, STR]}, None, "fixed-length tuple", id="tuple"
        ),
        pytest.param({}, None, "parameter 'p' takes any value (Any)", id="any"),
        pytest.param(True, None, "takes any value (a schema of True)", id="true_schema"),
        pytest.param(
            {"type": "object", "additionalProperties": INT}, None, "free-form object", id="dict"
        ),
        pytest.param(
            {"type": "object", "patternProperties": {"^x": INT}, "additionalProperties": False},
            None,
            "free-form object",
            id="pattern_properties",
        ),
        pytest.param(
            {"type": "array", "items": {}}, None, "'p[]' takes any value", id="list_of_any"
        ),
        pytest.param(
            {"$ref": "#/$defs/Loose"},
            {"Loose": {"type": "object", "properties": {"x": {}}}},
            "'x' of model 'Loose' takes any value",
            id="in_defs",
        ),
    ],
)
def test_what_cannot_be_strict_is_named(node: Any, defs: Any, reason: str) -> None:
    """A schema strict mode cannot express raises ValueError naming the tool and the place."""
    definition = _by_hand(node, required=True, defs=defs)
    assert len(oai.tools([definition])) == 1  # not strict: fine
    with pytest.raises(ValueError, match="tool 'by_hand' cannot be strict") as raised:
        oai.tools([definition], strict=True)
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(lambda t: t.toolkit, id="toolkit"),
        pytest.param(lambda t: list(t.toolkit), id="tools"),
        pytest.param(lambda t: tuple(t.toolkit.definitions()), id="definitions"),
        pytest.param(lambda t: (item for item in t.toolkit), id="generator"),
        pytest.param(lambda t: [*list(t.toolkit)[:2], *t.toolkit.definitions()[2:]], id="mixed"),
    ],
)
def test_tools_take_a_toolkit_or_any_iterable_of_tools(source: Callable[[Tracker], Any]) -> None:
    """A toolkit, a list of tools, of definitions, a generator or a mix give the same shapes."""
    tracker = Tracker()
    expected = oai.tools(tracker.toolkit, strict=True)
    assert oai.tools(source(tracker), strict=True) == expected


def test_a_toolkit_rendering_is_cached_until_the_toolkit_grows() -> None:
    """A second call returns a new list of the same dicts; adding a tool renders again."""
    tracker = Tracker()
    for options in (
        {},
        {"strict": True},
        {"api": "responses"},
        {"strict": True, "api": "responses"},
    ):
        first = oai.tools(tracker.toolkit, **options)  # type: ignore[arg-type]
        second = oai.tools(tracker.toolkit, **options)  # type: ignore[arg-type]
        assert second == first
        assert second is not first
        assert all(a is b for a, b in zip(first, second, strict=True))
        second.append({"changed": True})  # the caller's list is its own
        assert len(oai.tools(tracker.toolkit, **options)) == len(first)  # type: ignore[arg-type]
    assert oai.tools(tracker.toolkit, strict=True) != oai.tools(tracker.toolkit)

    @tool
    def close_issue(number: Annotated[int, "The issue's number."]) -> bool:
        """Close an issue."""
        return True

    before = oai.tools(tracker.toolkit)
    tracker.toolkit.add(close_issue)
    after = oai.tools(tracker.toolkit)
    assert [shape["function"]["name"] for shape in after][-1] == "close_issue"
    assert after[:-1] == before
    assert oai.tools(tracker.toolkit, api="responses", strict=True)[-1]["name"] == "close_issue"


def test_a_list_of_tools_is_rendered_each_time() -> None:
    """A plain list is not cached: each call makes new dicts."""
    tracker = Tracker()
    tools = list(tracker.toolkit)
    first, second = oai.tools(tools), oai.tools(tools)
    assert first == second
    assert first[0] is not second[0]


# -- calls() ---------------------------------------------------------------------------------


def _chat_message_sdk() -> Any:
    return ChatCompletion.model_validate(chat_completion_data()).choices[0].message


CALL_SOURCES = [
    pytest.param(
        lambda: ChatCompletion.model_validate(chat_completion_data()), CHAT_CALLS, id="completion"
    ),
    pytest.param(_chat_message_sdk, CHAT_CALLS, id="completion_message"),
    pytest.param(lambda: _chat_message_sdk().tool_calls, CHAT_CALLS, id="message_tool_calls"),
    pytest.param(chat_completion_data, CHAT_CALLS, id="completion_dict"),
    pytest.param(
        lambda: chat_completion_data()["choices"][0]["message"], CHAT_CALLS, id="message_dict"
    ),
    pytest.param(
        lambda: tuple(chat_completion_data()["choices"][0]["message"]["tool_calls"]),
        CHAT_CALLS,
        id="tool_calls_tuple_dict",
    ),
    pytest.param(lambda: Response.model_validate(response_data()), RESPONSES_CALLS, id="response"),
    pytest.param(
        lambda: Response.model_validate(response_data()).output,
        RESPONSES_CALLS,
        id="response_output",
    ),
    pytest.param(response_data, RESPONSES_CALLS, id="response_dict"),
    pytest.param(lambda: response_data()["output"], RESPONSES_CALLS, id="response_output_dict"),
]


@pytest.mark.parametrize(("source", "expected"), CALL_SOURCES)
def test_calls_read_sdk_objects_and_plain_dicts(
    source: Callable[[], Any], expected: list[ToolCall]
) -> None:
    """The model's calls, with its ids, from every shape the SDK or a dict gives them in."""
    assert oai.calls(source()) == expected


@pytest.mark.parametrize(("source", "expected"), CALL_SOURCES)
def test_calls_run_and_their_results_answer_each_id(
    source: Callable[[], Any], expected: list[ToolCall]
) -> None:
    """The calls run, and results() answers each with its id and ``for_model()`` text."""
    tracker = Tracker()
    results = tracker.run(oai.calls(source()))
    assert all(result.is_success for result in results)
    assert sorted(tracker.ran) == sorted(call.name for call in expected)  # (run concurrently)
    chat = oai.results(results)
    responses = oai.results(results, api="responses")
    assert [item["tool_call_id"] for item in chat] == [call.call_id for call in expected]
    assert [item["call_id"] for item in responses] == [call.call_id for call in expected]
    for result, message, item in zip(results, chat, responses, strict=True):
        assert message == {
            "role": "tool",
            "tool_call_id": result.call_id,
            "content": result.for_model(),
        }
        assert item == {
            "type": "function_call_output",
            "call_id": result.call_id,
            "output": result.for_model(),
        }
    assert json.loads(chat[0]["content"]) == [
        {"number": 1, "title": "crash #1"},
        {"number": 2, "title": "crash #2"},
    ]
    assert chat[-1]["content"] == "2026-12-01T12:00:00Z"  # a str value as it is


@pytest.mark.parametrize(
    "source",
    [
        pytest.param({"role": "assistant", "content": "Hello."}, id="message_without_calls"),
        pytest.param({"role": "assistant", "content": None, "tool_calls": None}, id="calls_none"),
        pytest.param({"role": "assistant", "tool_calls": []}, id="calls_empty"),
        pytest.param({"choices": []}, id="no_choices"),
        pytest.param({"choices": [{"index": 0, "message": None}]}, id="choice_without_message"),
        pytest.param({"output": []}, id="response_without_output"),
        pytest.param([], id="empty_list"),
        pytest.param(None, id="none"),
        pytest.param(
            [
                {"id": "c1", "type": "custom", "custom": {"name": "x", "input": "y"}},
                {"type": "function_call_output", "call_id": "c2", "output": "z"},
                {"type": "message", "role": "assistant", "content": []},
            ],
            id="other_items",
        ),
    ],
)
def test_calls_of_a_message_without_function_calls_are_none(source: Any) -> None:
    """Text, an empty batch, or items of other types hold no calls."""
    assert oai.calls(source) == []


def test_calls_read_a_chat_call_without_its_type() -> None:
    """A chat tool call without ``type`` is read by its ``function``."""
    item = {"id": "c1", "function": {"name": "server_time", "arguments": "{}"}}
    assert oai.calls([item]) == [ToolCall(name="server_time", arguments="{}", call_id="c1")]


def test_a_completion_message_without_tool_calls_is_none() -> None:
    """A ChatCompletion SDK object that answers in text holds no calls."""
    data = chat_completion_data()
    data["choices"][0]["message"] = {"role": "assistant", "content": "Done."}
    data["choices"][0]["finish_reason"] = "stop"
    completion = ChatCompletion.model_validate(data)
    assert oai.calls(completion) == []
    assert oai.calls(completion.choices[0].message) == []


# -- Calls the model got wrong ---------------------------------------------------------------

GOOD_CHAT_CALL = {
    "id": "call_good",
    "type": "function",
    "function": {"name": "find_issues", "arguments": '{"query": "ok"}'},
}
GOOD_RESPONSES_CALL = {
    "type": "function_call",
    "call_id": "call_good",
    "name": "find_issues",
    "arguments": '{"query": "ok"}',
}
BAD_INPUT = ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE

#: (chat call, Responses item): the same mistake in each API, the id the answer carries, and
#: the kind of the answer.
MALFORMED = [
    pytest.param(
        {"type": "function", "function": {"name": "find_issues", "arguments": "{}"}},
        {"type": "function_call", "name": "find_issues", "arguments": "{}"},
        "",
        BAD_INPUT,
        id="missing_id",
    ),
    pytest.param(
        {"id": "", "type": "function", "function": {"name": "find_issues", "arguments": "{}"}},
        {"type": "function_call", "call_id": "", "name": "find_issues", "arguments": "{}"},
        "",
        BAD_INPUT,
        id="empty_id",
    ),
    pytest.param(
        {"id": 7, "type": "function", "function": {"name": "find_issues", "arguments": "{}"}},
        {"type": "function_call", "call_id": 7, "name": "find_issues", "arguments": "{}"},
        "",
        BAD_INPUT,
        id="int_id",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function", "function": {"arguments": '{"query": "x"}'}},
        {"type": "function_call", "call_id": "c_bad", "arguments": '{"query": "x"}'},
        "c_bad",
        BAD_INPUT,
        id="missing_name",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function", "function": {"name": 3, "arguments": "{}"}},
        {"type": "function_call", "call_id": "c_bad", "name": 3, "arguments": "{}"},
        "c_bad",
        BAD_INPUT,
        id="int_name",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function"},
        {"type": "function_call", "call_id": "c_bad"},
        "c_bad",
        BAD_INPUT,
        id="nothing_but_an_id",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function", "function": {"name": "find_issues", "arguments": "{"}},
        {"type": "function_call", "call_id": "c_bad", "name": "find_issues", "arguments": "{"},
        "c_bad",
        BAD_INPUT,
        id="arguments_not_json",
    ),
    pytest.param(
        {
            "id": "c_bad",
            "type": "function",
            "function": {"name": "find_issues", "arguments": "[1]"},
        },
        {"type": "function_call", "call_id": "c_bad", "name": "find_issues", "arguments": "[1]"},
        "c_bad",
        BAD_INPUT,
        id="arguments_json_array",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function", "function": {"name": "find_issues", "arguments": "7"}},
        {"type": "function_call", "call_id": "c_bad", "name": "find_issues", "arguments": "7"},
        "c_bad",
        BAD_INPUT,
        id="arguments_json_number",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function", "function": {"name": "find_issues", "arguments": [1]}},
        {"type": "function_call", "call_id": "c_bad", "name": "find_issues", "arguments": [1]},
        "c_bad",
        BAD_INPUT,
        id="arguments_list_object",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function", "function": {"name": "find_issues", "arguments": 5}},
        {"type": "function_call", "call_id": "c_bad", "name": "find_issues", "arguments": 5},
        "c_bad",
        BAD_INPUT,
        id="arguments_int_object",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function", "function": {"name": "find_issues", "arguments": "{}"}},
        {"type": "function_call", "call_id": "c_bad", "name": "find_issues", "arguments": "{}"},
        "c_bad",
        BAD_INPUT,
        id="required_argument_missing",
    ),
    pytest.param(
        {"id": "c_bad", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        {"type": "function_call", "call_id": "c_bad", "name": "nope", "arguments": "{}"},
        "c_bad",
        ErrorKind.TOOL_NOT_FOUND,
        id="unknown_tool",
    ),
]


def _check_answers(
    tracker: Tracker, results: list[ToolResult], call_id: str, kind: ErrorKind
) -> None:
    """The malformed call (first) answered with ``kind`` and ``call_id``, without running; the
    good one (second) ran once."""
    assert [result.call_id for result in results] == [call_id, "call_good"]
    assert results[0].kind is kind
    assert results[0].attempts == 0
    assert results[1].is_success
    assert tracker.ran == ["find_issues"]


@pytest.mark.parametrize(("chat_call", "responses_item", "call_id", "kind"), MALFORMED)
def test_a_malformed_chat_call_is_answered_without_running(
    chat_call: dict[str, Any], responses_item: dict[str, Any], call_id: str, kind: ErrorKind
) -> None:
    """calls() never raises; each chat call gets exactly one answer, the bad one as ``kind``."""
    tracker = Tracker()
    message = {"role": "assistant", "content": None, "tool_calls": [chat_call, GOOD_CHAT_CALL]}
    calls = oai.calls(message)
    assert len(calls) == 2
    results = tracker.run(calls)
    _check_answers(tracker, results, call_id, kind)
    answers = oai.results(results)
    assert [answer["tool_call_id"] for answer in answers] == [call_id, "call_good"]
    assert json.loads(answers[0]["content"])["kind"] == kind.value
    for answer in answers:
        assert_valid(ChatCompletionToolMessageParam, answer)


@pytest.mark.parametrize(("chat_call", "responses_item", "call_id", "kind"), MALFORMED)
def test_a_malformed_responses_call_is_answered_without_running(
    chat_call: dict[str, Any], responses_item: dict[str, Any], call_id: str, kind: ErrorKind
) -> None:
    """The same mistakes in Responses ``function_call`` items: one answer each, none run."""
    tracker = Tracker()
    calls = oai.calls({"output": [responses_item, GOOD_RESPONSES_CALL]})
    results = tracker.run(calls)
    _check_answers(tracker, results, call_id, kind)
    answers = oai.results(results, api="responses")
    assert [answer["call_id"] for answer in answers] == [call_id, "call_good"]
    assert json.loads(answers[0]["output"])["kind"] == kind.value
    for answer in answers:
        assert_valid(FunctionCallOutput, answer)


def test_a_problem_call_says_why_and_keeps_its_id() -> None:
    """A call without an id is answered as bad input saying so; its id is the empty text."""
    [call] = oai.calls([{"type": "function", "function": {"name": "server_time"}}])
    assert call.call_id == ""
    assert call.problem is not None
    assert "no id" in call.problem
    tracker = Tracker()
    [result] = tracker.run([call])
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert "no id" in json.loads(result.for_model())["message"]
    assert tracker.ran == []


class Raising:
    """An SDK-like object whose every attribute read raises."""

    def __getattr__(self, name: str) -> Any:
        raise ZeroDivisionError(name)


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


# -- null means the default --------------------------------------------------------------------


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "plain"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_null_for_a_defaulted_parameter_gets_its_default(api: str, strict: bool) -> None:
    """Strict mode sends every parameter, null for those left out: the defaults apply."""
    tracker = Tracker()
    tools = oai.tools(tracker.toolkit, strict=strict, api=api)  # type: ignore[arg-type]
    assert len(tools) == 5
    arguments = json.dumps(
        {
            "repo": {"owner": "acme", "name": "rockets"},
            "query": "crash",
            "state": None,
            "labels": None,
            "limit": None,
        }
    )
    if api == "chat":
        data = chat_completion_data()
        data["choices"][0]["message"]["tool_calls"] = [
            {
                "id": "call_n",
                "type": "function",
                "function": {"name": "search_issues", "arguments": arguments},
            }
        ]
        source: Any = ChatCompletion.model_validate(data)
    else:
        data = response_data()
        data["output"] = [
            {
                "type": "function_call",
                "call_id": "call_n",
                "name": "search_issues",
                "arguments": arguments,
            }
        ]
        source = Response.model_validate(data)
    [result] = tracker.run(oai.calls(source))
    assert result.is_success, result.for_model()
    assert result.call_id == "call_n"
    [seen] = tracker.seen
    assert seen["state"] == "open"
    assert seen["labels"] is None  # its type takes None: None it is
    assert seen["limit"] == 10
    assert len(result.value) == 2


class Depth(BaseModel):
    """How deep to look."""

    levels: int = Field(1, description="How many levels.")


class Shade(enum.Enum):
    """A colour."""

    LIGHT = "light"
    DARK = "dark"


@pytest.mark.parametrize(
    ("annotation", "default", "expected"),
    [
        pytest.param(Annotated[int, "A number."], 3, 3, id="int"),
        pytest.param(Annotated[bool, "A flag."], True, True, id="bool"),
        pytest.param(Annotated[list[str], "Tags."], ["x"], ["x"], id="list"),
        pytest.param(
            Annotated[list[int], Field(default_factory=lambda: [7], description="Made.")],
            None,
            [7],
            id="default_factory",
        ),
        pytest.param(Annotated[Shade, "A shade."], Shade.DARK, Shade.DARK, id="enum"),
        pytest.param(Annotated[Priority, "Urgency."], Priority.LOW, Priority.LOW, id="str_enum"),
        pytest.param(Annotated[Literal["a", "b"], "A letter."], "b", "b", id="literal"),
        pytest.param(Annotated[Depth, "Depth."], Depth(levels=2), Depth(levels=2), id="model"),
        pytest.param(Annotated[int | None, "Maybe."], 5, None, id="takes_none_keeps_it"),
    ],
)
def test_null_means_the_default_for_every_kind_of_default(
    annotation: Any, default: Any, expected: Any
) -> None:
    """Whatever the default, null gets it; a type that takes None gets None."""
    seen: list[Any] = []

    def body(value: Any = default) -> str:
        """Note the value."""
        seen.append(value)
        return "ok"

    body.__annotations__ = {"value": annotation, "return": str}
    if default is None:  # the default comes from the factory
        body.__defaults__ = ()
    toolkit = Toolkit("defaults", [tool(name="note")(body)])
    [shape] = oai.tools(toolkit, strict=True)
    arguments = {"value": None}
    Draft202012Validator(shape["function"]["parameters"]).validate(arguments)  # strict sends it
    tracker = Tracker()
    tracker.toolkit = toolkit
    results = tracker.run(
        [
            ToolCall(name="note", arguments=json.dumps(arguments), call_id="c1"),
            ToolCall(name="note", arguments=arguments, call_id="c2"),
        ]
    )
    assert [result.for_model() for result in results] == ["ok", "ok"]
    assert seen == [expected, expected]


def test_null_for_a_required_parameter_is_still_bad_input() -> None:
    """A null for a parameter without a default is not "not given": it is bad input."""
    tracker = Tracker()
    arguments = json.dumps({"repo": {"owner": "a", "name": "b"}, "query": None})
    [result] = tracker.run([ToolCall(name="search_issues", arguments=arguments, call_id="c")])
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert tracker.ran == []


# -- results() -------------------------------------------------------------------------------


def test_results_of_every_outcome_validate_against_the_sdk_params() -> None:
    """Successes, a str value, a retryable failure, bad input and an unknown tool: every answer
    is a valid tool message and ``function_call_output``."""
    tracker = Tracker()
    calls = [
        *CHAT_CALLS,
        ToolCall(name="fetch_page", arguments={"url": "/big"}, call_id="call_page"),
        ToolCall(name="find_issues", arguments={"query": "x"}, call_id="call_old"),
        ToolCall(name="create_ticket", arguments={"title": 1}, call_id="call_bad"),
        ToolCall(name="missing", arguments={}, call_id="call_missing"),
    ]
    results = tracker.run(calls)
    chat = oai.results(results)
    responses = oai.results(results, api="responses")
    assert len(chat) == len(responses) == len(calls)
    for message, item, call in zip(chat, responses, calls, strict=True):
        assert_valid(ChatCompletionToolMessageParam, message)
        assert_valid(FunctionCallOutput, item)
        assert message["tool_call_id"] == item["call_id"] == call.call_id
        assert message["content"] == item["output"]
    page = json.loads(chat[3]["content"])
    assert page == {
        "kind": "TOOL_RUNTIME_RETRY",
        "message": "The wiki is busy.",
        "retry_after_ms": 1500,
        "additional_prompt_content": "Ask for a smaller page, or wait.",
    }
    assert json.loads(chat[5]["content"])["kind"] == "TOOL_RUNTIME_BAD_INPUT_VALUE"
    assert json.loads(chat[6]["content"])["kind"] == "TOOL_NOT_FOUND"
    for text in (message["content"] for message in chat):
        assert DEVELOPER_NOTE not in text
        assert DETAIL_VALUE not in text


def test_results_accept_any_iterable_and_an_empty_batch() -> None:
    """A generator of results, or none at all."""
    result = ToolResult(tool="t", call_id="c", value=1)
    assert oai.results(iter([result])) == [{"role": "tool", "tool_call_id": "c", "content": "1"}]
    assert oai.results((), api="responses") == []


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_result_without_call_id_is_refused(api: str) -> None:
    """A result run without a call id cannot answer a call: ValueError naming the tool."""
    results = [ToolResult(tool="t", call_id="c", value=1), ToolResult(tool="lost", value=2)]
    with pytest.raises(ValueError, match="'lost' has no call_id"):
        oai.results(results, api=api)  # type: ignore[arg-type]


@tool(read_only=True)
def echo(text: Annotated[str, "What to say."], times: Annotated[int, "How many times."] = 1) -> str:
    """Say it again."""
    return text * times


def test_a_lone_surrogate_in_a_call_id_is_answered_encodably() -> None:
    """No API sends one, but an answer must always encode as UTF-8."""
    call = ToolCall(name="echo", arguments={"text": "x"}, call_id="call_\ud800")
    [result] = asyncio.run(ToolRunner(Toolkit("t", [echo])).run_many([call]))
    for answer in (*oai.results([result]), *ant.results([result])):
        str(answer).encode()


# -- What is refused ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(42, id="int"),
        pytest.param("search_issues", id="str"),
        pytest.param("", id="empty_str"),
        pytest.param(None, id="none"),
        pytest.param([42], id="list_of_int"),
        pytest.param([{"name": "x"}], id="list_of_dict"),
        pytest.param({"search": None}, id="dict"),
    ],
)
def test_tools_refuse_what_is_not_tools(source: Any) -> None:
    """tools() raises TypeError for anything but a toolkit or an iterable of tools."""
    with pytest.raises(TypeError, match=r"tools\(\) takes"):
        oai.tools(source)
    with pytest.raises(TypeError, match=r"tools\(\) takes"):
        oai.tools(source, strict=True, api="responses")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(42, id="int"),
        pytest.param("call the tool", id="str"),
        pytest.param("", id="empty_str"),
        pytest.param(object(), id="object"),
        pytest.param({"content": "hi"}, id="dict_without_role"),
    ],
)
def test_calls_refuse_what_is_not_a_message(source: Any) -> None:
    """calls() raises TypeError for what is no completion, message, response or list."""
    with pytest.raises(TypeError, match=r"calls\(\) takes"):
        oai.calls(source)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param({"choices": "x"}, [], id="choices_not_a_list"),
        pytest.param({"choices": [{"message": 5}]}, [], id="message_not_an_object"),
        pytest.param(
            {"output": {"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"}},
            [("t", "c1", None)],
            id="output_a_single_item",
        ),
        pytest.param({"output": 5}, [], id="output_an_int"),
        pytest.param(
            {"role": "assistant", "tool_calls": "x"},
            [("", "", "The call has no id, so its answer could not be matched to it.")],
            id="tool_calls_a_str",
        ),
        pytest.param(
            {
                "role": "assistant",
                "tool_calls": [{"id": "c2", "type": "custom", "custom": {"name": "t"}}],
            },
            [("", "c2", "The call is not a function call; only function tools run here.")],
            id="a_custom_tool_call",
        ),
        pytest.param(
            [{"type": "message", "id": "msg_1"}, {"type": "reasoning", "id": "rs_1"}],
            [],
            id="output_items_that_are_no_calls",
        ),
    ],
)
def test_malformed_parts_of_a_message_are_read_not_raised(
    source: Any, expected: list[tuple[str, str, str | None]]
) -> None:
    """The SDKs build responses without validating them: a part of the wrong type is read
    as one item or none, and every entry of ``tool_calls`` gets a call to answer."""
    assert [(c.name, c.call_id, c.problem) for c in oai.calls(source)] == expected


def test_bad_options_are_refused() -> None:
    """An unknown ``api`` is a ValueError, a ``strict`` that is not a bool a TypeError."""
    tracker = Tracker()
    with pytest.raises(ValueError, match="api must be 'chat' or 'responses', not 'nope'"):
        oai.tools(tracker.toolkit, api="nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="api must be"):
        oai.results([], api="nope")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="strict must be True or False"):
        oai.tools(tracker.toolkit, strict=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolResult objects, not dict"):
        oai.results([{"call_id": "c"}])  # type: ignore[list-item]


def test_two_tools_with_one_name_are_refused() -> None:
    """A plain list naming one tool twice (as a tool and as a definition) is a ValueError."""
    tracker = Tracker()
    first = next(iter(tracker.toolkit))
    for source in ([first, first], [first, first.definition]):
        with pytest.raises(ValueError, match="two tools are named 'search_issues'"):
            oai.tools(source)
        with pytest.raises(ValueError, match="two tools are named"):
            oai.tools(source, api="responses")


# -- for_model() -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param("plain text", "plain text", id="str"),
        pytest.param('{"a": 1}', '{"a": 1}', id="str_that_looks_like_json"),
        pytest.param("", "", id="empty_str"),
        pytest.param(None, "null", id="none"),
        pytest.param(3, "3", id="int"),
        pytest.param(True, "true", id="bool"),
        pytest.param({"a": [1, 2.5], "é": "ü"}, '{"a":[1,2.5],"é":"ü"}', id="compact_unicode"),
        pytest.param(float("nan"), '"NaN"', id="nan_made_safe"),
        pytest.param({"x": float("inf")}, '{"x":"Infinity"}', id="inf_made_safe"),
        pytest.param({3}, "[3]", id="set_made_safe"),
        pytest.param("a\ud800b", "a\ufffdb", id="lone_surrogate_str"),
        pytest.param(["\udfff"], '["\ufffd"]', id="lone_surrogate_in_json"),
    ],
)
def test_for_model_of_a_success_is_the_value_as_compact_json(value: Any, text: str) -> None:
    """A str value as it is, anything else as compact JSON; always encodable as UTF-8."""
    shown = ToolResult(tool="t", call_id="c", value=value).for_model()
    assert shown == text
    shown.encode("utf-8")


def test_for_model_of_a_value_too_deep_for_json_is_still_text() -> None:
    """A hand-built result nested past the recursion limit is made JSON-safe, not raised."""
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    shown = ToolResult(tool="t", value=value).for_model()
    assert shown.startswith("[[[")
    json.loads(shown)


def test_for_model_of_a_failure_shows_what_the_model_needs_and_nothing_else() -> None:
    """kind, message, retry_after_ms, additional_prompt_content; never the developer's fields."""
    error = ErrorInfo(
        error="UpstreamRateLimitError",
        kind=ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT,
        category=ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT.category,
        message="Over quota.",
        developer_message=DEVELOPER_NOTE,
        retryable=True,
        retry_after_ms=30_000,
        status_code=429,
        additional_prompt_content="Wait 30 s.",
        tool_name="search",
        details={"secret_detail": DETAIL_VALUE},
        cause="HTTPStatusError",
        stacktrace="Traceback (most recent call last):\n  File 'x.py'",
    )
    shown = ToolResult(tool="search", call_id="c", error=error).for_model()
    assert json.loads(shown) == {
        "kind": "UPSTREAM_RUNTIME_RATE_LIMIT",
        "message": "Over quota.",
        "retry_after_ms": 30_000,
        "additional_prompt_content": "Wait 30 s.",
    }
    assert list(json.loads(shown)) == [
        "kind",
        "message",
        "retry_after_ms",
        "additional_prompt_content",
    ]
    assert shown == json.dumps(json.loads(shown), separators=(",", ":"))  # compact
    for hidden in (DEVELOPER_NOTE, DETAIL_VALUE, "Traceback", "HTTPStatusError", "429"):
        assert hidden not in shown


def test_for_model_of_a_failure_leaves_out_unset_fields() -> None:
    """Without a wait or a prompt, a failure is just its kind and message."""
    error = ToolInputError("Bad title.").to_error_info()
    shown = ToolResult(tool="t", call_id="c", error=error).for_model()
    assert json.loads(shown) == {"kind": "TOOL_RUNTIME_BAD_INPUT_VALUE", "message": "Bad title."}
    empty = error.model_copy(update={"additional_prompt_content": ""})
    assert "additional_prompt_content" not in ToolResult(tool="t", error=empty).for_model()


def test_for_model_redacts_an_error_built_by_hand() -> None:
    """Credentials in a hand-built ErrorInfo's texts are redacted once more; text stays UTF-8."""
    error = ErrorInfo(
        error="FatalToolError",
        kind=ErrorKind.TOOL_RUNTIME_FATAL,
        category=ErrorKind.TOOL_RUNTIME_FATAL.category,
        message="login failed with sk-live-0123456789abcdefghij \ud800",
        retryable=False,
        additional_prompt_content="Authorization: Bearer abcdefghijklmnop1234",
    )
    shown = ToolResult(tool="t", call_id="c", error=error).for_model()
    assert "sk-live-0123456789abcdefghij" not in shown
    assert "abcdefghijklmnop1234" not in shown
    assert "\ud800" not in shown
    shown.encode("utf-8")
    assert json.loads(shown)["kind"] == "TOOL_RUNTIME_FATAL"


# -- Secrets ---------------------------------------------------------------------------------


def test_a_planted_secret_reaches_no_host_message() -> None:
    """A secret planted in every field of an error and its cause is in no host's answer."""
    results = leaky_results()
    assert [result.kind for result in results] == [
        ErrorKind.TOOL_RUNTIME_RETRY,
        ErrorKind.UPSTREAM_RUNTIME_RATE_LIMIT,
        ErrorKind.TOOL_RUNTIME_FATAL,
    ]
    for result in results:  # the body ran, and the developer's fields were filled
        assert result.error is not None
        assert result.error.stacktrace is not None
        assert result.error.cause is not None
    assert DEVELOPER_NOTE in (results[0].error.developer_message or "")  # type: ignore[union-attr]
    outputs = [
        json.dumps(oai.results(results)),
        json.dumps(oai.results(results, api="responses")),
        json.dumps(ant.results(results)),
        *(result.for_model() for result in results),
    ]
    for text in outputs:
        assert SECRET not in text
    for result in results:
        shown = result.for_model()
        error = result.error
        assert error is not None
        assert DEVELOPER_NOTE not in shown
        assert DETAIL_VALUE not in shown
        assert "Traceback" not in shown
        assert "RuntimeError" not in shown  # the cause
        if error.developer_message:
            assert error.developer_message not in shown
        assert error.stacktrace is not None
        assert error.stacktrace not in shown
        for planted in ("planted_key", "planted_nested", "planted_inner"):
            assert (
                planted in json.dumps(error.details) or error.kind is ErrorKind.TOOL_RUNTIME_FATAL
            )
            assert planted not in shown
    assert json.loads(results[0].for_model())["retry_after_ms"] == 2500
    assert "additional_prompt_content" in json.loads(results[1].for_model())


# -- The real SDK client -----------------------------------------------------------------------


class FakeOpenAI:
    """The API behind an ``httpx2.MockTransport``: records each request body, answers the
    first request of a conversation with tool calls and the next with text."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        if request.url.path.endswith("/chat/completions"):
            if body["messages"][-1]["role"] == "user":
                return httpx2.Response(200, json=chat_completion_data())
            data = chat_completion_data()
            data["choices"][0]["message"] = {"role": "assistant", "content": "All done."}
            data["choices"][0]["finish_reason"] = "stop"
            return httpx2.Response(200, json=data)
        assert request.url.path.endswith("/responses")
        data = response_data()
        if isinstance(body["input"], list) and len(body["input"]) > 1:
            data["output"] = data["output"][1:2]  # the text message alone
        return httpx2.Response(200, json=data)

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(
            api_key="sk-test",
            base_url="http://fake/v1",
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
        )


@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
def test_a_chat_loop_on_the_real_client(strict: bool) -> None:
    """tools= and the tool messages go through the SDK to the wire unchanged."""
    tracker = Tracker()
    fake = FakeOpenAI()
    tools = oai.tools(tracker.toolkit, strict=strict)
    snapshot = copy.deepcopy(tools)
    with fake.client() as client:
        messages: list[Any] = [{"role": "user", "content": "Find the crash and file it."}]
        completion = client.chat.completions.create(
            model="gpt-test",
            messages=messages,
            tools=tools,  # type: ignore[arg-type]
        )
        assert isinstance(completion, ChatCompletion)
        message = completion.choices[0].message
        calls = oai.calls(message)
        assert calls == CHAT_CALLS
        results = tracker.run(calls)
        answers = oai.results(results)
        messages += [message, *answers]
        final = client.chat.completions.create(
            model="gpt-test",
            messages=messages,
            tools=tools,  # type: ignore[arg-type]
        )
    assert oai.calls(final) == []
    assert final.choices[0].message.content == "All done."
    assert oai.tools(tracker.toolkit, strict=strict) == snapshot  # the SDK changed no cached dict
    first, second = fake.bodies
    assert first["tools"] == tools
    assert second["tools"] == tools
    sent = second["messages"]
    assert sent[2:] == answers
    assert [call["id"] for call in sent[1]["tool_calls"]] == [
        answer["tool_call_id"] for answer in answers
    ]
    assert json.loads(sent[3]["content"])["assignee"] == "ada"


@pytest.mark.parametrize("strict", [False, True], ids=["plain", "strict"])
def test_a_responses_loop_on_the_real_client(strict: bool) -> None:
    """Responses: tools= and the ``function_call_output`` items reach the wire unchanged."""
    tracker = Tracker()
    fake = FakeOpenAI()
    tools = oai.tools(tracker.toolkit, strict=strict, api="responses")
    with fake.client() as client:
        response = client.responses.create(
            model="gpt-test",
            input="Find the crash.",
            tools=tools,  # type: ignore[arg-type]
        )
        assert isinstance(response, Response)
        calls = oai.calls(response)
        assert calls == RESPONSES_CALLS
        answers = oai.results(tracker.run(calls), api="responses")
        follow_up: list[Any] = [
            {"role": "user", "content": "Find the crash."},
            *response.output,
            *answers,
        ]
        final = client.responses.create(
            model="gpt-test",
            input=follow_up,
            tools=tools,  # type: ignore[arg-type]
        )
    assert oai.calls(final) == []
    first, second = fake.bodies
    assert first["tools"] == tools
    assert second["input"][-2:] == answers
    sent_calls = [item for item in second["input"] if item.get("type") == "function_call"]
    assert [item["call_id"] for item in sent_calls] == [answer["call_id"] for answer in answers]
