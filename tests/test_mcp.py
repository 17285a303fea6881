"""tdk.hosts.mcp in process: the ``tools()`` and ``result()`` shapes as tables, and
``server()`` driven by the SDK's own ``mcp.Client`` over its in-memory connection, in both of
its modes (the modern direct dispatch and the legacy JSON-RPC stream).

The client checks every structured result against the ``outputSchema`` it listed, so each
success that comes back whole is also a check of the wrapping of non-object outputs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import jsonschema
import mcp
import pytest
from _mcp_support import Held, run, text_of
from mcp import types
from pydantic import BaseModel

from tdk import ToolContext, Toolkit, ToolResult, ToolRunner, __version__, tool
from tdk.errors import ErrorInfo, ErrorKind, RetryableToolError, UpstreamRateLimitError
from tdk.hosts import mcp as tdk_mcp

T = TypeVar("T")

#: Bound of every in-memory scenario, in seconds: a hang fails the test instead of the run.
SECRET = "planted-secret-9f3a"
MODES = ["auto", "legacy"]


class Weather(BaseModel):
    """A forecast."""

    city: str
    celsius: float


class Node(BaseModel):
    """A tree of names: its schema is a ``$ref`` into ``$defs``."""

    name: str
    children: list[Node] = []


@tool(read_only=True)
def forecast(
    city: Annotated[str, "The city."], days: Annotated[int, "How many days."] = 1
) -> Weather:
    """Forecast the weather of a city."""
    return Weather(city=city, celsius=20.5 + days)


@tool(read_only=True)
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
    """Add two numbers."""
    return a + b


@tool(idempotent=True)
def tree(depth: Annotated[int, "How deep."] = 1) -> Node:
    """A tree of the given depth."""
    node = Node(name="leaf")
    for level in range(depth):
        node = Node(name=f"level {level}", children=[node])
    return node


@tool(idempotent=True)
def lookup(found: Annotated[bool, "Whether there is a match."]) -> dict[str, int] | None:
    """Look a count up."""
    return {"count": 3} if found else None


@tool(destructive=True, open_world=False)
def wipe(table: Annotated[str, "The table."]) -> None:
    """Wipe a table."""


@tool
def tags() -> dict[str, str]:
    """The tags, as an object without fixed properties."""
    return {"env": "test"}


@tool(deprecated="Use forecast instead.")
def weather(city: Annotated[str, "The city."]) -> str:
    """Say the weather."""
    return f"sunny in {city}"


@tool(read_only=True, requires_secrets=["WX_KEY"])
def keyed(context: ToolContext, salt: Annotated[str, "Mixed in."] = "") -> int:
    """The length of the key: never the key itself."""
    return len(context.get_secret("WX_KEY") + salt)


@tool(read_only=True)
def busy(query: Annotated[str, "What to look for."]) -> list[str]:
    """Fail with a hint to come back later."""
    raise RetryableToolError(
        "The index is busy.", retry_after_ms=1500, additional_prompt_content="Try a shorter query."
    )


@tool(read_only=True)
def quota() -> str:
    """Fail as an upstream over its quota."""
    raise UpstreamRateLimitError("Over quota.", status_code=429, retry_after_ms=30000)


@tool(read_only=True)
def whoami(context: ToolContext) -> str:
    """Who the call is for."""
    return f"{context.user_id}"


TOOLS = [forecast, add, tree, lookup, wipe, tags, weather, keyed, busy, quota, whoami]


def toolkit() -> Toolkit:
    """A new toolkit of ``TOOLS`` (kept shapes are per toolkit)."""
    return Toolkit("weatherdesk", TOOLS, version="1.2.3", description="Weather desk tools.")


def listed(source: Any) -> dict[str, types.Tool]:
    """``tdk_mcp.tools(source)`` by name."""
    return {item.name: item for item in tdk_mcp.tools(source)}


# -- tools() ---------------------------------------------------------------------------------


def test_tools_are_the_sdk_tool_objects_in_order() -> None:
    """Each tool is an SDK ``Tool`` with the definition's name and input schema, in order."""
    kit = toolkit()
    shapes = tdk_mcp.tools(kit)
    assert all(isinstance(shape, types.Tool) for shape in shapes)
    assert [shape.name for shape in shapes] == [item.name for item in TOOLS]
    for shape, definition in zip(shapes, kit.definitions(), strict=True):
        assert shape.input_schema == definition.input_schema
        assert shape.input_schema["type"] == "object"


#: The output schema goes out unchanged (an object schema).
AS_IS: dict[str, Any] = {}
WRAPPED_SCALAR = {
    "type": "object",
    "properties": {"result": {"type": "integer"}},
    "required": ["result"],
}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("add", WRAPPED_SCALAR, id="scalar-wrapped"),
        pytest.param("forecast", AS_IS, id="model-as-is"),
        pytest.param("tags", AS_IS, id="mapping-as-is"),
        pytest.param(
            "wipe",
            {"type": "object", "properties": {"result": {"type": "null"}}, "required": ["result"]},
            id="none-wrapped",
        ),
        pytest.param(
            "lookup",
            {
                "type": "object",
                "properties": {
                    "result": {
                        "anyOf": [
                            {"type": "object", "additionalProperties": {"type": "integer"}},
                            {"type": "null"},
                        ]
                    }
                },
                "required": ["result"],
            },
            id="optional-object-wrapped",
        ),
    ],
)
def test_output_schema_table(name: str, expected: dict[str, Any]) -> None:
    """An object output is the schema itself; any other is wrapped as ``{"result": ...}``."""
    definition = toolkit().get(name).definition
    wanted = definition.output_schema if expected is AS_IS else expected
    assert listed(toolkit())[name].output_schema == wanted
    assert (definition.output_schema.get("type") == "object") is (expected is AS_IS)


def test_a_wrapped_ref_output_keeps_its_defs_at_the_top() -> None:
    """A ``$ref`` output is wrapped with its ``$defs`` moved up, so the reference resolves."""
    schema = listed(toolkit())["tree"].output_schema
    assert schema is not None
    assert schema["properties"] == {"result": {"$ref": "#/$defs/Node"}}
    assert schema["required"] == ["result"]
    assert "Node" in schema["$defs"]
    assert "$defs" not in schema["properties"]["result"]
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    ("name", "hints"),
    [
        pytest.param("forecast", (True, False, True, True), id="read-only"),
        pytest.param("wipe", (False, True, False, False), id="destructive-closed-world"),
        pytest.param("tree", (False, True, True, True), id="idempotent"),
        pytest.param("tags", (False, True, False, True), id="defaults"),
    ],
)
def test_annotations_table(name: str, hints: tuple[bool, bool, bool, bool]) -> None:
    """The side-effect marks under MCP's names: read-only, destructive, idempotent, open world."""
    annotations = listed(toolkit())[name].annotations
    assert annotations is not None
    assert (
        annotations.read_only_hint,
        annotations.destructive_hint,
        annotations.idempotent_hint,
        annotations.open_world_hint,
    ) == hints


def test_a_deprecated_tool_says_so() -> None:
    """The description of a deprecated tool ends with its deprecation message."""
    shapes = listed(toolkit())
    assert shapes["weather"].description == "Say the weather.\n\nDeprecated: Use forecast instead."
    assert "Deprecated" not in (shapes["forecast"].description or "")


def test_the_context_parameter_is_in_no_schema() -> None:
    """A tool's ``ToolContext`` parameter appears in neither its input nor its output schema."""
    shape = listed(toolkit())["keyed"]
    assert list(shape.input_schema["properties"]) == ["salt"]
    assert shape.input_schema.get("required", []) == []
    assert "context" not in json.dumps(shape.input_schema)
    assert "context" not in json.dumps(listed([whoami])["whoami"].input_schema)


def test_tools_of_definitions_equal_tools_of_the_toolkit() -> None:
    """A list of tools or of their definitions renders as the toolkit does."""
    kit = toolkit()
    from_kit = [shape.model_dump() for shape in tdk_mcp.tools(kit)]
    assert [shape.model_dump() for shape in tdk_mcp.tools(TOOLS)] == from_kit
    assert [shape.model_dump() for shape in tdk_mcp.tools(kit.definitions())] == from_kit


def test_every_output_schema_is_valid_json_schema() -> None:
    """Each ``outputSchema`` is an object schema that a JSON Schema validator accepts."""
    for shape in tdk_mcp.tools(toolkit()):
        assert shape.output_schema is not None
        assert shape.output_schema.get("type") == "object"
        jsonschema.Draft202012Validator.check_schema(shape.output_schema)


# -- result() --------------------------------------------------------------------------------


def ran(name: str, arguments: dict[str, Any] | None = None, **options: Any) -> ToolResult:
    """The result of one call of the toolkit's tool ``name``."""
    return run(toolkit().run(name, arguments, **options))


@pytest.mark.parametrize(
    ("name", "arguments", "structured"),
    [
        pytest.param("add", {"a": 1}, {"result": 3}, id="scalar"),
        pytest.param("forecast", {"city": "Oslo"}, {"city": "Oslo", "celsius": 21.5}, id="model"),
        pytest.param("tags", {}, {"env": "test"}, id="mapping"),
        pytest.param("wipe", {"table": "t"}, {"result": None}, id="none"),
        pytest.param("lookup", {"found": True}, {"result": {"count": 3}}, id="optional-dict"),
        pytest.param("lookup", {"found": False}, {"result": None}, id="optional-none"),
        pytest.param(
            "tree",
            {"depth": 1},
            {"result": {"name": "level 0", "children": [{"name": "leaf", "children": []}]}},
            id="ref-model",
        ),
        pytest.param("weather", {"city": "Rome"}, {"result": "sunny in Rome"}, id="deprecated"),
    ],
)
def test_success_table(name: str, arguments: dict[str, Any], structured: Any) -> None:
    """A success: the (wrapped when the output is no object) value, valid against the listed
    output schema, and one text content with ``for_model()``."""
    outcome = ran(name, arguments)
    definition = toolkit().get(name).definition
    shaped = tdk_mcp.result(outcome, definition=definition)
    assert shaped.is_error is False
    assert shaped.structured_content == structured
    assert shaped.content == [types.TextContent(type="text", text=outcome.for_model())]
    assert shaped.meta is None
    jsonschema.validate(shaped.structured_content, listed(toolkit())[name].output_schema or {})


@pytest.mark.parametrize(
    ("name", "arguments", "structured"),
    [
        pytest.param("add", {"a": 1}, {"result": 3}, id="scalar-wrapped"),
        pytest.param("tags", {}, {"env": "test"}, id="dict-as-is"),
        pytest.param("wipe", {"table": "t"}, {"result": None}, id="none-wrapped"),
        pytest.param("lookup", {"found": True}, {"count": 3}, id="dict-of-optional-as-is"),
    ],
)
def test_success_without_a_definition_wraps_all_but_a_dict(
    name: str, arguments: dict[str, Any], structured: Any
) -> None:
    """Without ``definition``, a dict value goes out as it is and any other is wrapped."""
    assert tdk_mcp.result(ran(name, arguments)).structured_content == structured


FAILURES = [
    pytest.param(
        "busy",
        {"query": "x"},
        {
            "kind": "TOOL_RUNTIME_RETRY",
            "category": "execution",
            "retryable": True,
            "retry_after_ms": 1500,
            "status_code": None,
            "additional_prompt_content": "Try a shorter query.",
        },
        id="retry",
    ),
    pytest.param(
        "quota",
        {},
        {
            "kind": "UPSTREAM_RUNTIME_RATE_LIMIT",
            "category": "rate_limit",
            "retryable": True,
            "retry_after_ms": 30000,
            "status_code": 429,
            "additional_prompt_content": None,
        },
        id="rate-limited",
    ),
    pytest.param(
        "add",
        {"a": "three"},
        {
            "kind": "TOOL_RUNTIME_BAD_INPUT_VALUE",
            "category": "validation",
            "retryable": False,
            "retry_after_ms": None,
            "status_code": None,
            "additional_prompt_content": None,
        },
        id="bad-input",
    ),
    pytest.param(
        "keyed",
        {},
        {
            "kind": "TOOL_RUNTIME_MISSING_REQUIREMENT",
            "category": "configuration",
            "retryable": False,
            "retry_after_ms": None,
            "status_code": None,
            "additional_prompt_content": None,
        },
        id="missing-secret",
    ),
    pytest.param(
        "nosuch",
        {},
        {
            "kind": "TOOL_NOT_FOUND",
            "category": "not_found",
            "retryable": False,
            "retry_after_ms": None,
            "status_code": None,
            "additional_prompt_content": None,
        },
        id="not-found",
    ),
]


@pytest.mark.parametrize(("name", "arguments", "facts"), FAILURES)
def test_failure_table(name: str, arguments: dict[str, Any], facts: dict[str, Any]) -> None:
    """A failure: ``isError``, one text content with ``for_model()``, no structured content,
    and the error's facts under ``_meta["tdk/error"]``, with or without a definition."""
    outcome = ran(name, arguments)
    assert outcome.error is not None
    for definition in (None, toolkit().get("add").definition):
        shaped = tdk_mcp.result(outcome, definition=definition)
        assert shaped.is_error is True
        assert shaped.structured_content is None
        assert shaped.content == [types.TextContent(type="text", text=outcome.for_model())]
        assert shaped.meta == {"tdk/error": facts}
        wire = shaped.model_dump(mode="json", by_alias=True, exclude_none=True)
        assert "structuredContent" not in wire
        assert wire["_meta"] == {"tdk/error": facts}
        assert wire["isError"] is True


# -- server() arguments ----------------------------------------------------------------------


def test_a_definition_in_the_source_is_refused() -> None:
    """``server()`` takes tools that can run: a ``ToolDefinition`` is a ``TypeError``."""
    with pytest.raises(TypeError, match="not ToolDefinition"):
        tdk_mcp.server([add, forecast.definition])
    with pytest.raises(TypeError, match="not str"):
        tdk_mcp.server("add")  # type: ignore[arg-type]


def test_a_runner_of_another_toolkit_is_refused() -> None:
    """The runner must run the toolkit given: another one's is a ``ValueError``."""
    kit = toolkit()
    with pytest.raises(ValueError, match="the runner runs toolkit 'other'"):
        tdk_mcp.server(kit, runner=ToolRunner(Toolkit("other", [add])))
    with pytest.raises(ValueError, match="the runner runs toolkit 'weatherdesk'"):
        tdk_mcp.server(kit, runner=ToolRunner(toolkit()))


def test_a_runner_of_other_tools_than_the_list_given_is_refused() -> None:
    """A list of tools with a runner whose toolkit holds other tools is a ``ValueError``:
    its toolkit is not the source, and the server would offer tools that were not given."""
    runner = ToolRunner(Toolkit("other", [wipe]))
    with pytest.raises(ValueError, match="runner"):
        tdk_mcp.server([add], runner=runner)


def test_a_list_with_the_runner_of_its_tools_is_served_by_that_runner() -> None:
    """A list of tools with a runner over the same tools is served by the runner's toolkit."""
    runner = ToolRunner(Toolkit("maths", [add]))
    server = tdk_mcp.server([add], runner=runner)
    assert server.name == "maths"

    async def scenario() -> types.CallToolResult:
        async with mcp.Client(server) as client:
            return await client.call_tool("add", {"a": 40})

    assert run(scenario()).structured_content == {"result": 42}
    assert runner.stats().calls == 1


@pytest.mark.parametrize(
    ("source", "name", "expected"),
    [
        pytest.param(toolkit, None, ("weatherdesk", "1.2.3", "Weather desk tools."), id="toolkit"),
        pytest.param(toolkit, "desk", ("desk", "1.2.3", "Weather desk tools."), id="renamed"),
        pytest.param(lambda: [add], None, ("tdk", __version__, None), id="list"),
        pytest.param(lambda: [add], "maths", ("maths", __version__, None), id="list-named"),
        pytest.param(lambda: Toolkit("bare", [add]), None, ("bare", __version__, None), id="bare"),
    ],
)
def test_server_identity_table(
    source: Callable[[], Any], name: str | None, expected: tuple[str, str, str | None]
) -> None:
    """The server's name defaults to the toolkit's (``tdk`` for a list), its version to the
    toolkit's (else tdk's), as the client sees them after connecting."""
    server = tdk_mcp.server(source(), name=name)

    async def scenario() -> types.Implementation | None:
        async with mcp.Client(server) as client:
            return client.server_info

    info = run(scenario())
    assert info is not None
    assert (info.name, info.version, info.description) == expected
    assert (server.name, server.version) == expected[:2]


# -- calls over the in-memory client ---------------------------------------------------------


async def session(
    server: Any, mode: str, body: Callable[[mcp.Client], Awaitable[T]], **options: Any
) -> T:
    """``body(client)`` in one session of the SDK's client with ``server``."""
    async with mcp.Client(server, mode=mode, **options) as client:  # type: ignore[arg-type]
        return await body(client)


@pytest.mark.parametrize("mode", MODES)
def test_the_listing_is_tools(mode: str) -> None:
    """``tools/list`` answers what ``tools()`` renders."""
    kit = toolkit()

    async def body(client: mcp.Client) -> types.ListToolsResult:
        return await client.list_tools()

    answered = run(session(tdk_mcp.server(kit), mode, body))
    assert [item.model_dump() for item in answered.tools] == [
        item.model_dump() for item in tdk_mcp.tools(kit)
    ]


CALLS = [
    pytest.param("add", {"a": 1, "b": 4}, {"result": 5}, id="scalar"),
    pytest.param("forecast", {"city": "Oslo"}, {"city": "Oslo", "celsius": 21.5}, id="model"),
    pytest.param("tree", {"depth": 2}, None, id="ref-model"),
    pytest.param("lookup", {"found": False}, {"result": None}, id="optional-none"),
    pytest.param("wipe", {"table": "t"}, {"result": None}, id="none"),
    pytest.param("weather", {"city": "Rome"}, {"result": "sunny in Rome"}, id="deprecated"),
    pytest.param("tags", None, {"env": "test"}, id="no-arguments"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "arguments", "structured"), CALLS)
def test_a_success_over_the_client(
    mode: str, name: str, arguments: dict[str, Any] | None, structured: Any
) -> None:
    """A success reaches the client whole (which checks it against the output schema): the
    structured value and one text content."""
    kit = toolkit()

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool(name, arguments)

    # (``wipe`` is declared destructive: served, it would ask the user's approval first,
    # which tests/test_asks_mcp.py covers; this runner says it need not.)
    served = tdk_mcp.server(kit, runner=ToolRunner(kit, confirm_destructive=False))
    answered = run(session(served, mode, body))
    outcome = run(kit.run(name, arguments))
    assert answered.is_error is False
    assert answered.structured_content == (
        structured if structured is not None else {"result": outcome.value}
    )
    assert [(part.type, getattr(part, "text", None)) for part in answered.content] == [
        ("text", outcome.for_model())
    ]
    assert "tdk/error" not in (answered.meta or {})


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("name", "arguments", "facts"), FAILURES)
def test_a_failure_over_the_client(
    mode: str, name: str, arguments: dict[str, Any], facts: dict[str, Any]
) -> None:
    """A failure (bad arguments and unknown tools included) is a tool result, not a protocol
    error: ``isError``, one text, no structured content, the facts in ``_meta``."""

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool(name, arguments)

    answered = run(session(tdk_mcp.server(toolkit()), mode, body))
    assert answered.is_error is True
    assert answered.structured_content is None
    assert len(answered.content) == 1
    text = answered.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text)["kind"] == facts["kind"]
    assert answered.meta is not None
    assert answered.meta["tdk/error"] == facts


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_tool_gets_suggestions(mode: str) -> None:
    """A near miss of a tool's name is ``TOOL_NOT_FOUND`` naming the tool meant."""

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool("forecats", {"city": "Oslo"})

    answered = run(session(tdk_mcp.server(toolkit()), mode, body))
    assert answered.is_error is True
    assert answered.meta is not None
    assert answered.meta["tdk/error"]["kind"] == ErrorKind.TOOL_NOT_FOUND
    text = answered.content[0]
    assert isinstance(text, types.TextContent)
    assert "Did you mean 'forecast'?" in text.text


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"a": SECRET}, id="wrong-type"),
        pytest.param({"a": [SECRET, {"x": SECRET}]}, id="nested"),
        pytest.param({"a": 1, SECRET: 1}, id="unknown-key"),
    ],
)
def test_invalid_arguments_are_not_echoed(mode: str, arguments: dict[str, Any]) -> None:
    """Arguments that fail validation are a ``TOOL_RUNTIME_BAD_INPUT_VALUE`` result that does
    not repeat the submitted value (here one the context knows as a secret)."""
    server = tdk_mcp.server(toolkit(), context=ToolContext(secrets={"WX_KEY": SECRET}))

    async def body(client: mcp.Client) -> types.CallToolResult:
        return await client.call_tool("add", arguments)

    answered = run(session(server, mode, body))
    assert answered.is_error is True
    assert answered.meta is not None
    assert answered.meta["tdk/error"]["kind"] == "TOOL_RUNTIME_BAD_INPUT_VALUE"
    assert answered.structured_content is None
    assert SECRET not in answered.model_dump_json()


@pytest.mark.parametrize("mode", MODES)
def test_a_fixed_context_serves_every_call(mode: str) -> None:
    """A ``ToolContext`` given is the context of every call: the secret is found."""
    server = tdk_mcp.server(toolkit(), context=ToolContext(secrets={"WX_KEY": SECRET}))

    async def body(client: mcp.Client) -> list[Any]:
        return [
            (await client.call_tool("keyed", {"salt": salt})).structured_content
            for salt in ("", "ab")
        ]

    assert run(session(server, mode, body)) == [
        {"result": len(SECRET)},
        {"result": len(SECRET) + 2},
    ]


@pytest.mark.parametrize("mode", MODES)
def test_a_context_function_is_called_once_per_call(mode: str) -> None:
    """A zero-argument callable as ``context`` makes a new context for each call."""
    counter = itertools.count(1)
    made: list[ToolContext] = []

    def context() -> ToolContext:
        made.append(ToolContext(user_id=f"user-{next(counter)}"))
        return made[-1]

    server = tdk_mcp.server(toolkit(), context=context)
    assert made == []  # not called before a call

    async def body(client: mcp.Client) -> list[Any]:
        await client.list_tools()
        return [(await client.call_tool("whoami", {})).structured_content for _ in range(3)]

    assert run(session(server, mode, body)) == [
        {"result": "user-1"},
        {"result": "user-2"},
        {"result": "user-3"},
    ]
    assert len(made) == 3


@pytest.mark.parametrize("mode", MODES)
def test_calls_go_through_the_runner_given(mode: str) -> None:
    """The runner given runs the calls: its statistics count them."""
    kit = toolkit()
    runner = ToolRunner(kit)

    async def body(client: mcp.Client) -> None:
        await client.call_tool("add", {"a": 1})
        await client.call_tool("busy", {"query": "q"})

    run(session(tdk_mcp.server(kit, runner=runner), mode, body))
    assert runner.stats().calls == 2


@pytest.mark.parametrize("mode", MODES)
def test_calls_by_another_case_of_the_name_are_shaped_by_the_tool(mode: str) -> None:
    """A name that differs only in case runs the tool, and its value is wrapped as that
    tool's output is."""
    kit = toolkit()

    async def body(client: mcp.Client) -> list[Any]:
        return [
            (await client.call_tool(name, {"a": 1})).structured_content for name in ("ADD", "Add")
        ]

    assert run(session(tdk_mcp.server(kit), mode, body)) == [{"result": 3}, {"result": 3}]


@pytest.mark.parametrize("mode", MODES)
def test_a_full_bulkhead_is_a_result(mode: str) -> None:
    """With a bulkhead of one, a second call while the first runs is refused as a result
    (``TOOL_RUNTIME_BULKHEAD_FULL``) and the first completes."""

    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult]:
        gate = Held("gate")
        server = tdk_mcp.server(gate.toolkit, runner=gate.runner)
        async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
            first = asyncio.create_task(client.call_tool("hold", {"label": "first"}))
            await gate.entered.wait()
            second = await client.call_tool("hold", {"label": "second"})
            gate.release.set()
            return await first, second

    first, second = run(scenario())
    assert first.structured_content == {"result": "first"}
    assert second.is_error is True
    assert second.meta is not None
    assert second.meta["tdk/error"]["kind"] == "TOOL_RUNTIME_BULKHEAD_FULL"
    assert second.meta["tdk/error"]["category"] == "bulkhead_full"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["cancelled", "timed-out"])
def test_a_call_given_up_by_its_client_frees_its_slot(mode: str, how: str) -> None:
    """A call whose client goes away (its task cancelled) or stops waiting (read timeout) is
    cancelled in the server: the tool stops and the next call gets the bulkhead's slot."""

    async def scenario() -> tuple[Held, types.CallToolResult]:
        gate = Held("gate")
        server = tdk_mcp.server(gate.toolkit, runner=gate.runner)
        if how == "cancelled":

            async def doomed() -> None:
                async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
                    await client.call_tool("hold", {"label": "doomed"})

            task = asyncio.create_task(doomed())
            await gate.entered.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
                with pytest.raises(mcp.MCPError, match=r"(?i)timed out"):
                    await client.call_tool("hold", {"label": "doomed"}, read_timeout_seconds=0.2)
        gate.entered.clear()
        async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
            follow = asyncio.create_task(client.call_tool("hold", {"label": "next"}))
            await gate.entered.wait()
            gate.release.set()
            return gate, await follow

    gate, follow = run(scenario())
    assert follow.is_error is False
    assert follow.structured_content == {"result": "next"}
    assert gate.ended == ["cancelled", "done"]


# -- context_from_environment() --------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "environ", "expected"),
    [
        pytest.param(
            toolkit,
            {"WX_KEY": "k", "OTHER": "o"},
            {"WX_KEY": "k"},
            id="only-the-secrets-required",
        ),
        pytest.param(toolkit, {}, {}, id="absent-left-out"),
        pytest.param(lambda: [add, forecast], {"WX_KEY": "k"}, {}, id="none-required"),
        pytest.param(lambda: [keyed], {"WX_KEY": "k"}, {"WX_KEY": "k"}, id="list"),
    ],
)
def test_context_from_an_environment_table(
    source: Callable[[], Any], environ: dict[str, str], expected: dict[str, str]
) -> None:
    """The context holds each secret a tool requires that the environment sets."""
    context = tdk_mcp.context_from_environment(source(), environ)
    assert dict(context.secrets) == expected


def test_context_from_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``environ``, the secrets come from ``os.environ``."""
    monkeypatch.setenv("WX_KEY", SECRET)
    assert dict(tdk_mcp.context_from_environment(toolkit()).secrets) == {"WX_KEY": SECRET}
    monkeypatch.delenv("WX_KEY")
    assert dict(tdk_mcp.context_from_environment(toolkit()).secrets) == {}


def test_an_unknown_transport_is_refused() -> None:
    """``serve()`` serves ``stdio`` or ``http``; anything else is a ``ValueError``."""
    with pytest.raises(ValueError, match="transport must be 'stdio' or 'http', not 'sse'"):
        run(tdk_mcp.serve(toolkit(), "sse"))  # type: ignore[arg-type]


def test_a_value_with_a_lone_surrogate_goes_out_whole() -> None:
    """Thousands of names, one read with ``surrogateescape``: the text the model reads and
    the structured value hold every name, that one with U+FFFD (nothing is cut), and
    ``for_model()`` says the same."""
    names = [f"file-{n}.txt" for n in range(20_001)]
    names[7] = "caf\udce9.txt"
    result = ToolResult(tool="files", value=names, attempts=1, duration_ms=1.0)
    answered = tdk_mcp.result(result)
    expected = [*names[:7], "caf\ufffd.txt", *names[8:]]
    assert answered.structured_content == {"result": expected}
    assert json.loads(text_of(answered)) == expected
    assert json.loads(result.for_model()) == expected


def test_the_error_facts_show_what_the_text_shows() -> None:
    """An error built by hand with a credential in its prompt content: ``_meta["tdk/error"]``
    and the text the model reads both have it redacted."""
    error = ErrorInfo(
        error="RetryableToolError",
        kind=ErrorKind.TOOL_RUNTIME_RETRY,
        category=ErrorKind.TOOL_RUNTIME_RETRY.category,
        message="Try again.",
        retryable=True,
        additional_prompt_content="retry with api_key=sk-abcdefghijklmnopqrstuvwx",
    )
    answered = tdk_mcp.result(ToolResult(tool="t", error=error, attempts=1, duration_ms=1.0))
    assert "sk-abcdefghijklmnopqrstuvwx" not in text_of(answered)
    assert answered.meta is not None
    assert "sk-abcdefghijklmnopqrstuvwx" not in json.dumps(answered.meta)
