"""tdk.hosts.anthropic: tools, calls and results in the Messages API's shapes.

Every shape produced is checked against the ``anthropic`` SDK's own TypedDict (with
``pydantic.TypeAdapter``), calls are read from the SDK's ``Message`` (built with
``model_validate``) and from the same data as plain dicts, and a loop runs on the real
``anthropic.Anthropic`` client over an ``httpx2.MockTransport``, checking the request bodies
the SDK sends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import anthropic
import httpx2
import pytest
from _hosts_support import (
    DETAIL_VALUE,
    DEVELOPER_NOTE,
    SECRET,
    LyingClass,
    Tracker,
    assert_valid,
    leaky_results,
)
from anthropic.types import Message, ToolParam, ToolResultBlockParam
from openai.types.chat import ChatCompletionToolMessageParam
from pydantic import TypeAdapter

from tdk import ToolCall, ToolContext, Toolkit, ToolResult, tool
from tdk.errors import ErrorKind
from tdk.hosts import anthropic as ant

SEARCH_INPUT = {"repo": {"owner": "acme", "name": "rockets"}, "query": "crash", "state": "closed"}
TICKET_INPUT = {
    "title": "Fix the crash",
    "priority": "high",
    "assignee": {"login": "ada", "team": "core"},
}


def message_data() -> dict[str, Any]:
    """A ``Message`` with text and three ``tool_use`` blocks."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 34},
        "content": [
            {"type": "text", "text": "Let me look that up."},
            {
                "type": "tool_use",
                "id": "toolu_search",
                "name": "search_issues",
                "input": SEARCH_INPUT,
            },
            {
                "type": "tool_use",
                "id": "toolu_ticket",
                "name": "create_ticket",
                "input": TICKET_INPUT,
            },
            {"type": "tool_use", "id": "toolu_time", "name": "server_time", "input": {}},
        ],
    }


CALLS = [
    ToolCall(name="search_issues", arguments=SEARCH_INPUT, call_id="toolu_search"),
    ToolCall(name="create_ticket", arguments=TICKET_INPUT, call_id="toolu_ticket"),
    ToolCall(name="server_time", arguments={}, call_id="toolu_time"),
]


# -- tools() ---------------------------------------------------------------------------------


def test_tools_validate_against_the_sdk_param() -> None:
    """Each tool is a valid ``ToolParam``: name, description and the input schema itself."""
    tracker = Tracker()
    shapes = ant.tools(tracker.toolkit)
    assert len(shapes) == 5
    for shape, definition in zip(shapes, tracker.toolkit.definitions(), strict=True):
        assert_valid(ToolParam, shape)
        assert list(shape) == ["name", "description", "input_schema"]
        assert shape["name"] == definition.name
        assert shape["input_schema"] == definition.input_schema
        assert shape["input_schema"]["type"] == "object"
    assert shapes[2]["description"] == (
        "Find issues by text.\n\nDeprecated: Use search_issues instead."
    )
    assert shapes[3]["input_schema"]["properties"] == {}  # the tool without parameters
    assert "Deprecated" not in shapes[0]["description"]


def test_the_type_check_catches_unknown_and_missing_keys() -> None:
    """The check itself: a TypedDict adapter drops an unknown key (so equality fails) and
    refuses a shape without a required key."""
    [shape] = ant.tools([next(iter(Tracker().toolkit))])
    adapter = TypeAdapter(ToolParam)
    extra = {**shape, "surprise": 1}
    assert adapter.validate_python(extra) != extra
    with pytest.raises(AssertionError):
        assert_valid(ToolParam, extra)
    with pytest.raises(ValueError, match="name"):
        adapter.validate_python({key: value for key, value in shape.items() if key != "name"})
    with pytest.raises(AssertionError):
        assert_valid(
            ChatCompletionToolMessageParam,
            {"role": "tool", "tool_call_id": "c", "content": "x", "is_error": False},
        )


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(lambda t: t.toolkit, id="toolkit"),
        pytest.param(lambda t: list(t.toolkit), id="tools"),
        pytest.param(lambda t: t.toolkit.definitions(), id="definitions"),
        pytest.param(lambda t: (item for item in t.toolkit), id="generator"),
    ],
)
def test_tools_take_a_toolkit_or_any_iterable_of_tools(source: Callable[[Tracker], Any]) -> None:
    """A toolkit, a list of tools or definitions, or a generator give the same shapes."""
    tracker = Tracker()
    assert ant.tools(source(tracker)) == ant.tools(tracker.toolkit)


def test_a_toolkit_rendering_is_cached_until_the_toolkit_grows() -> None:
    """A second call returns a new list of the same dicts; adding a tool renders again."""
    tracker = Tracker()
    first = ant.tools(tracker.toolkit)
    second = ant.tools(tracker.toolkit)
    assert second == first
    assert second is not first
    assert all(a is b for a, b in zip(first, second, strict=True))
    second.clear()
    assert ant.tools(tracker.toolkit) == first

    @tool
    def close_issue(number: Annotated[int, "The issue's number."]) -> bool:
        """Close an issue."""
        return True

    tracker.toolkit.add(close_issue)
    after = ant.tools(tracker.toolkit)
    assert [shape["name"] for shape in after][-1] == "close_issue"
    assert after[:-1] == first
    assert_valid(ToolParam, after[-1])


def test_toolkits_are_cached_apart() -> None:
    """Two toolkits of one name and size do not share a rendering."""

    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    @tool
    def echo(text: Annotated[str, "What to say."]) -> str:
        """Say it back."""
        return text

    one, two = Toolkit("same", [ping]), Toolkit("same", [echo])
    assert ant.tools(one)[0]["name"] == "ping"
    assert ant.tools(two)[0]["name"] == "echo"
    assert ant.tools(one)[0]["name"] == "ping"
    assert ant.tools(Toolkit("empty")) == []


# -- calls() ---------------------------------------------------------------------------------

CALL_SOURCES = [
    pytest.param(lambda: Message.model_validate(message_data()), id="message"),
    pytest.param(lambda: Message.model_validate(message_data()).content, id="message_content"),
    pytest.param(message_data, id="message_dict"),
    pytest.param(lambda: message_data()["content"], id="content_dict"),
    pytest.param(lambda: tuple(message_data()["content"]), id="content_tuple"),
    pytest.param(
        lambda: {"role": "assistant", "content": message_data()["content"]}, id="param_dict"
    ),
]


@pytest.mark.parametrize("source", CALL_SOURCES)
def test_calls_read_sdk_objects_and_plain_dicts(source: Callable[[], Any]) -> None:
    """The ``tool_use`` blocks, with their ids, from a Message or its content, SDK or dict."""
    assert ant.calls(source()) == CALLS


@pytest.mark.parametrize("source", CALL_SOURCES)
def test_calls_run_and_their_results_answer_each_id(source: Callable[[], Any]) -> None:
    """The calls run; results() answers each with its id, ``for_model()`` and ``is_error``."""
    tracker = Tracker()
    results = tracker.run(ant.calls(source()))
    assert sorted(tracker.ran) == ["create_ticket", "search_issues", "server_time"]
    blocks = ant.results(results)
    for block, result, call in zip(blocks, results, CALLS, strict=True):
        assert_valid(ToolResultBlockParam, block)
        assert block == {
            "type": "tool_result",
            "tool_use_id": call.call_id,
            "content": result.for_model(),
            "is_error": False,
        }
    assert json.loads(blocks[0]["content"])[0] == {"number": 1, "title": "crash #1"}
    assert json.loads(blocks[1]["content"])["assignee"] == "ada"
    assert blocks[2]["content"] == "2026-12-01T12:00:00Z"  # a str value as it is


@pytest.mark.parametrize(
    "source",
    [
        pytest.param({"role": "assistant", "content": "Just text."}, id="content_str"),
        pytest.param({"role": "assistant", "content": None}, id="content_none"),
        pytest.param({"role": "assistant", "content": []}, id="content_empty"),
        pytest.param([], id="empty_list"),
        pytest.param(None, id="none"),
        pytest.param(
            [
                {"type": "text", "text": "hi"},
                {"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
            ],
            id="other_blocks",
        ),
    ],
)
def test_a_message_without_tool_use_holds_no_calls(source: Any) -> None:
    """Text, an empty message, or blocks of other types hold no calls."""
    assert ant.calls(source) == []


def test_a_text_only_sdk_message_holds_no_calls() -> None:
    """A Message SDK object that ends its turn in text holds no calls."""
    data = message_data()
    data["content"] = data["content"][:1]
    data["stop_reason"] = "end_turn"
    assert ant.calls(Message.model_validate(data)) == []


# -- Calls the model got wrong ---------------------------------------------------------------

GOOD_BLOCK = {
    "type": "tool_use",
    "id": "toolu_good",
    "name": "find_issues",
    "input": {"query": "ok"},
}
BAD_INPUT = ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE


@pytest.mark.parametrize(
    ("block", "call_id", "kind"),
    [
        pytest.param(
            {"type": "tool_use", "name": "find_issues", "input": {"query": "x"}},
            "",
            BAD_INPUT,
            id="missing_id",
        ),
        pytest.param(
            {"type": "tool_use", "id": "", "name": "find_issues", "input": {"query": "x"}},
            "",
            BAD_INPUT,
            id="empty_id",
        ),
        pytest.param(
            {"type": "tool_use", "id": 12, "name": "find_issues", "input": {"query": "x"}},
            "",
            BAD_INPUT,
            id="int_id",
        ),
        pytest.param(
            {"type": "tool_use", "id": "toolu_bad", "input": {"query": "x"}},
            "toolu_bad",
            BAD_INPUT,
            id="missing_name",
        ),
        pytest.param(
            {"type": "tool_use", "id": "toolu_bad", "name": "", "input": {"query": "x"}},
            "toolu_bad",
            BAD_INPUT,
            id="empty_name",
        ),
        pytest.param(
            {"type": "tool_use", "id": "toolu_bad", "name": "find_issues", "input": ["x"]},
            "toolu_bad",
            BAD_INPUT,
            id="input_a_list",
        ),
        pytest.param(
            {"type": "tool_use", "id": "toolu_bad", "name": "find_issues", "input": 3},
            "toolu_bad",
            BAD_INPUT,
            id="input_an_int",
        ),
        pytest.param(
            {"type": "tool_use", "id": "toolu_bad", "name": "find_issues", "input": "{query"},
            "toolu_bad",
            BAD_INPUT,
            id="input_text_not_json",
        ),
        pytest.param(
            {"type": "tool_use", "id": "toolu_bad", "name": "find_issues", "input": {}},
            "toolu_bad",
            BAD_INPUT,
            id="required_input_missing",
        ),
        pytest.param(
            {"type": "tool_use", "id": "toolu_bad", "name": "find_issues", "input": {"query": 1}},
            "toolu_bad",
            BAD_INPUT,
            id="input_of_the_wrong_type",
        ),
        pytest.param(
            {"type": "tool_use", "id": "toolu_bad", "name": "nope", "input": {}},
            "toolu_bad",
            ErrorKind.TOOL_NOT_FOUND,
            id="unknown_tool",
        ),
    ],
)
def test_a_malformed_tool_use_is_answered_without_running(
    block: dict[str, Any], call_id: str, kind: ErrorKind
) -> None:
    """calls() never raises; every block gets exactly one answer, the bad one as ``kind``."""
    tracker = Tracker()
    calls = ant.calls({"role": "assistant", "content": [block, GOOD_BLOCK]})
    assert len(calls) == 2
    results = tracker.run(calls)
    assert [result.call_id for result in results] == [call_id, "toolu_good"]
    assert results[0].kind is kind
    assert results[0].attempts == 0
    assert results[1].is_success
    assert tracker.ran == ["find_issues"]  # the good call's body, once
    blocks = ant.results(results)
    assert [item["tool_use_id"] for item in blocks] == [call_id, "toolu_good"]
    assert [item["is_error"] for item in blocks] == [True, False]
    assert json.loads(blocks[0]["content"])["kind"] == kind.value
    for item in blocks:
        assert_valid(ToolResultBlockParam, item)


def test_null_input_for_a_defaulted_parameter_gets_its_default() -> None:
    """A ``null`` for a parameter with a default means "not given"."""
    tracker = Tracker()
    data = message_data()
    data["content"] = [
        {
            "type": "tool_use",
            "id": "toolu_n",
            "name": "search_issues",
            "input": {**SEARCH_INPUT, "state": None, "labels": None, "limit": None},
        }
    ]
    [result] = tracker.run(ant.calls(Message.model_validate(data)))
    assert result.is_success, result.for_model()
    assert tracker.seen[0]["state"] == "open"
    assert tracker.seen[0]["labels"] is None
    assert tracker.seen[0]["limit"] == 10


def test_anthropic_calls_survive_a_block_that_lies() -> None:
    """A tool_use block whose input cannot even be type-checked is answered as bad input."""
    block = {"type": "tool_use", "id": "t1", "name": "echo", "input": LyingClass()}
    [call] = ant.calls({"role": "assistant", "content": [block]})
    assert (call.call_id, call.problem) == (
        "t1",
        "The call is not a function call; only function tools run here.",
    )


# -- results() -------------------------------------------------------------------------------


def test_results_of_failures_are_errors_with_what_the_model_needs() -> None:
    """A retryable failure: ``is_error``, kind, message, wait and prompt; nothing else."""
    tracker = Tracker()
    results = tracker.run(
        [
            ToolCall(name="fetch_page", arguments={"url": "/big"}, call_id="toolu_page"),
            ToolCall(name="server_time", call_id="toolu_time"),
        ]
    )
    page, clock = ant.results(results)
    for block in (page, clock):
        assert_valid(ToolResultBlockParam, block)
    assert page["is_error"] is True
    assert clock["is_error"] is False
    assert json.loads(page["content"]) == {
        "kind": "TOOL_RUNTIME_RETRY",
        "message": "The wiki is busy.",
        "retry_after_ms": 1500,
        "additional_prompt_content": "Ask for a smaller page, or wait.",
    }
    assert DEVELOPER_NOTE not in page["content"]
    assert DETAIL_VALUE not in page["content"]


def test_results_accept_any_iterable_and_an_empty_batch() -> None:
    """A generator of results, or none at all."""
    result = ToolResult(tool="t", call_id="toolu_1", value={"ok": True})
    assert ant.results(iter([result])) == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": '{"ok":true}',
            "is_error": False,
        }
    ]
    assert ant.results([]) == []


def test_a_result_without_call_id_is_refused() -> None:
    """A result run without a call id cannot answer a ``tool_use``: ValueError."""
    with pytest.raises(ValueError, match="'lost' has no call_id"):
        ant.results([ToolResult(tool="lost", value=1)])
    with pytest.raises(TypeError, match="ToolResult objects, not str"):
        ant.results(["toolu_1"])  # type: ignore[list-item]


def test_a_secret_the_model_sends_back_is_in_no_answer() -> None:
    """A context secret in a call's name, argument names or values is in no ``tool_result``."""
    tracker = Tracker()
    blocks = [
        {"type": "tool_use", "id": "t1", "name": "search_issues", "input": {"query": 1, SECRET: 2}},
        {"type": "tool_use", "id": "t2", "name": SECRET, "input": {}},
        {"type": "tool_use", "id": "t3", "name": "create_ticket", "input": {"priority": SECRET}},
        {"type": "tool_use", "id": "t4", "name": "server_time", "input": {"x": SECRET}},
    ]
    context = ToolContext(secrets={"API_KEY": SECRET})
    results = tracker.run(ant.calls({"role": "assistant", "content": blocks}), context)
    answers = ant.results(results)
    assert [answer["is_error"] for answer in answers] == [True, True, True, True]
    assert SECRET not in json.dumps(answers)
    assert tracker.ran == []


def test_a_planted_secret_reaches_no_tool_result() -> None:
    """A secret planted in every field of an error and its cause is in no ``tool_result``."""
    results = leaky_results()
    blocks = ant.results(results)
    assert [block["is_error"] for block in blocks] == [True, True, True]
    for block, result in zip(blocks, results, strict=True):
        assert_valid(ToolResultBlockParam, block)
        assert result.error is not None
        assert result.error.stacktrace is not None  # it was asked for, and made
        text = json.dumps(block)
        assert SECRET not in text
        assert DEVELOPER_NOTE not in text
        assert DETAIL_VALUE not in text
        assert "planted_key" not in text
        assert "Traceback" not in text


# -- What is refused ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(42, id="int"),
        pytest.param("search_issues", id="str"),
        pytest.param("", id="empty_str"),
        pytest.param(None, id="none"),
        pytest.param([object()], id="list_of_object"),
    ],
)
def test_tools_refuse_what_is_not_tools(source: Any) -> None:
    """tools() raises TypeError for anything but a toolkit or an iterable of tools."""
    with pytest.raises(TypeError, match=r"tools\(\) takes"):
        ant.tools(source)


def test_two_tools_with_one_name_are_refused() -> None:
    """A plain list naming one tool twice is a ValueError."""
    first = next(iter(Tracker().toolkit))
    with pytest.raises(ValueError, match="two tools are named 'search_issues'"):
        ant.tools([first.definition, first])


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(42, id="int"),
        pytest.param("call the tool", id="str"),
        pytest.param("", id="empty_str"),
        pytest.param(object(), id="object"),
        pytest.param({}, id="empty_dict"),
        pytest.param({"type": "tool_use", "id": "t", "name": "x"}, id="a_lone_block"),
    ],
)
def test_calls_refuse_what_is_not_a_message(source: Any) -> None:
    """calls() raises TypeError for what is neither a message nor its content."""
    with pytest.raises(TypeError, match=r"calls\(\) takes"):
        ant.calls(source)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param({"role": "assistant", "content": {"type": "text"}}, [], id="content_a_dict"),
        pytest.param({"content": 5}, [], id="content_an_int"),
        pytest.param(
            {"role": "assistant", "content": {"type": "tool_use", "id": "t1", "name": "x"}},
            [("x", "t1")],
            id="content_a_single_block",
        ),
    ],
)
def test_malformed_content_is_read_not_raised(source: Any, expected: list[tuple[str, str]]) -> None:
    """The SDK builds messages without validating them: content of the wrong type is read as
    one block or none."""
    assert [(c.name, c.call_id) for c in ant.calls(source)] == expected


# -- The real SDK client -----------------------------------------------------------------------


def test_a_loop_on_the_real_client() -> None:
    """tools= and the ``tool_result`` blocks go through the SDK to the wire unchanged."""
    tracker = Tracker()
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages"
        body = json.loads(request.content)
        bodies.append(body)
        if len(body["messages"]) == 1:
            return httpx2.Response(200, json=message_data())
        data = message_data()
        data["content"] = [{"type": "text", "text": "Filed it."}]
        data["stop_reason"] = "end_turn"
        return httpx2.Response(200, json=data)

    tools = ant.tools(tracker.toolkit)
    client = anthropic.Anthropic(
        api_key="sk-ant-test",
        base_url="http://fake",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handle)),
    )
    with client:
        messages: list[Any] = [{"role": "user", "content": "Find the crash and file it."}]
        message = client.messages.create(
            model="claude-test",
            max_tokens=1024,
            messages=messages,
            tools=tools,  # type: ignore[arg-type]
        )
        assert isinstance(message, Message)
        calls = ant.calls(message)
        assert calls == CALLS
        blocks = ant.results(tracker.run(calls))
        messages += [
            {"role": "assistant", "content": message.content},
            {"role": "user", "content": blocks},
        ]
        final = client.messages.create(
            model="claude-test",
            max_tokens=1024,
            messages=messages,
            tools=tools,  # type: ignore[arg-type]
        )
    assert ant.calls(final) == []
    first, second = bodies
    assert first["tools"] == tools
    assert second["tools"] == tools
    assistant, answers = second["messages"][1:]
    assert answers == {"role": "user", "content": blocks}
    sent_ids = [block["id"] for block in assistant["content"] if block["type"] == "tool_use"]
    assert sent_ids == [block["tool_use_id"] for block in blocks]
