"""tdk.hosts.mcp in process: the ``tools()`` and ``result()`` shapes as tables, and
``server()`` driven by the SDK's own ``mcp.Client`` over its in-memory connection, in both of
its modes (the modern direct dispatch and the legacy JSON-RPC stream).

The client checks every structured result against the ``outputSchema`` it listed, so each
success that comes back whole is also a check of the wrapping of non-object outputs (and of
output models with aliases). What fails is that call's result, and the session goes on: a value
the output schema does not describe, a ``context=`` function or a state store that fails.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import jsonschema
import mcp
import pytest
from _mcp_support import (
    Answer,
    Held,
    attempt,
    facts,
    failure,
    in_memory,
    run,
    run_contained,
    success,
    text_of,
)
from mcp import types
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from tdk import ToolContext, Toolkit, ToolResult, ToolRunner, __version__, tool
from tdk.errors import ErrorInfo, ErrorKind, RetryableToolError, UpstreamRateLimitError
from tdk.hosts import mcp as tdk_mcp
from tdk.runner import CircuitBreaker, InMemoryStore, RateLimit

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


# -- outputs: models with aliases, and values the output schema does not describe -----------


class Listing(BaseModel):
    """A file, its fields camel-cased on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    file_name: str
    byte_count: int


class Tagged(BaseModel):
    """A field whose name is no identifier."""

    kind_of: str = Field(alias="kind-of")
    plain: int = 0


class SerialisedAs(BaseModel):
    """A field renamed on the way out only."""

    created_at: str = Field(serialization_alias="createdAt")


class Folder(BaseModel):
    """Aliased models inside an aliased model."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    folder_name: str
    first_file: Listing
    tagged_items: list[Tagged]


@tool(read_only=True)
def listing_of(name: Annotated[str, "The file."]) -> Listing:
    """One file."""
    return Listing(file_name=name, byte_count=len(name))


@tool(read_only=True)
def tagged() -> Tagged:
    """A tagged item."""
    return Tagged.model_validate({"kind-of": "pdf", "plain": 1})


@tool(read_only=True)
def stamped() -> SerialisedAs:
    """A stamp."""
    return SerialisedAs(created_at="2024-01-01")


@tool(read_only=True)
def folder() -> Folder:
    """A folder."""
    return Folder(
        folder_name="docs",
        first_file=Listing(file_name="a.txt", byte_count=5),
        tagged_items=[Tagged.model_validate({"kind-of": "txt"})],
    )


@tool(read_only=True)
def listings() -> list[Listing]:
    """Every file (a list: wrapped as ``{"result": ...}``)."""
    return [Listing(file_name="a.txt", byte_count=5)]


@tool(read_only=True)
def listing_from_dict() -> Listing:
    """A file, returned as a dict by field name."""
    return {"file_name": "b.txt", "byte_count": 2}  # type: ignore[return-value]


ALIASED = [listing_of, tagged, stamped, folder, listings, listing_from_dict]
#: Each tool, its arguments, the value a host gets (by alias, as the schema names its fields)
#: and whether it goes out wrapped as ``{"result": ...}``.
ALIAS_CASES = [
    pytest.param(
        "listing_of",
        {"name": "a.txt"},
        {"fileName": "a.txt", "byteCount": 5},
        False,
        id="alias-generator",
    ),
    pytest.param("tagged", {}, {"kind-of": "pdf", "plain": 1}, False, id="field-alias"),
    pytest.param("stamped", {}, {"createdAt": "2024-01-01"}, False, id="serialization-alias"),
    pytest.param(
        "folder",
        {},
        {
            "folderName": "docs",
            "firstFile": {"fileName": "a.txt", "byteCount": 5},
            "taggedItems": [{"kind-of": "txt", "plain": 0}],
        },
        False,
        id="nested",
    ),
    pytest.param("listings", {}, [{"fileName": "a.txt", "byteCount": 5}], True, id="wrapped-list"),
    pytest.param(
        "listing_from_dict",
        {},
        {"fileName": "b.txt", "byteCount": 2},
        False,
        id="returned-as-dict",
    ),
]
ALIAS_FIELDS = ("name", "arguments", "value", "wrapped")


def top_level_properties(schema: dict[str, Any]) -> set[str]:
    """The property names of an object schema (through a top-level ``$ref``)."""
    if "$ref" in schema:
        schema = schema["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return set(schema["properties"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(ALIAS_FIELDS, ALIAS_CASES)
def test_aliased_output_over_the_client(
    mode: str, name: str, arguments: dict[str, Any], value: Any, wrapped: bool
) -> None:
    """An output model with aliases goes out by alias: the names its listed
    ``outputSchema`` gives, which the client validates it against (and accepts)."""
    kit = Toolkit("aliased", ALIASED)

    async def body(client: mcp.Client) -> tuple[types.Tool, Answer]:
        [listed] = [item for item in (await client.list_tools()).tools if item.name == name]
        return listed, await attempt(client, name, arguments)

    listed, answered = run(in_memory(tdk_mcp.server(kit), mode, body))
    got = success(answered).structured_content
    assert got == ({"result": value} if wrapped else value)
    assert listed.output_schema is not None
    assert set(got) == top_level_properties(listed.output_schema)
    jsonschema.validate(got, listed.output_schema)
    assert json.loads(text_of(answered)) == value


@pytest.mark.parametrize(ALIAS_FIELDS, ALIAS_CASES)
def test_aliased_output_of_run_sync(
    name: str, arguments: dict[str, Any], value: Any, wrapped: bool
) -> None:
    """``tool.run_sync()`` serialises the value by alias too, as its output schema says."""
    item = Toolkit("aliased", ALIASED).get(name)
    outcome = item.run_sync(arguments)
    assert outcome.is_success, outcome.error
    assert outcome.value == value
    jsonschema.validate(outcome.value, item.definition.output_schema)


OBJECT = WithJsonSchema({"type": "object"})


@tool(read_only=True)
def numbers() -> Annotated[list[int], OBJECT]:
    """Numbers, declared as an object."""
    return [1, 2]


@tool(read_only=True)
def word() -> Annotated[str, OBJECT]:
    """A word, declared as an object."""
    return "hello"


@tool(read_only=True)
def count() -> Annotated[int, OBJECT]:
    """A count, declared as an object."""
    return 3


@tool(read_only=True)
def nothing() -> Annotated[int | None, OBJECT]:
    """Nothing, declared as an object."""
    return None


LIARS = [numbers, word, count, nothing]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("liar", [pytest.param(each, id=each.name) for each in LIARS])
def test_a_value_that_is_not_the_object_declared(mode: str, liar: Any) -> None:
    """A tool whose output schema says "object" and whose value is none is that call's
    ``TOOL_RUNTIME_BAD_OUTPUT_VALUE`` result, not a protocol error; the session goes on."""
    kit = Toolkit("liars", [*LIARS, double])

    async def body(client: mcp.Client) -> tuple[Answer, Answer]:
        return await attempt(client, liar.name, {}), await attempt(client, "double", {"n": 4})

    answered, after = run(in_memory(tdk_mcp.server(kit), mode, body))
    failure(answered, "TOOL_RUNTIME_BAD_OUTPUT_VALUE")
    assert success(after).structured_content == {"result": 8}
    shaped = tdk_mcp.result(liar.run_sync(), definition=liar.definition)
    assert shaped.is_error is True
    assert facts(shaped)["kind"] == "TOOL_RUNTIME_BAD_OUTPUT_VALUE"


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


def context_raises() -> ToolContext:
    """A context function that fails, its message holding the secret."""
    raise RuntimeError(f"the vault refused key {SECRET}")


def context_of_a_dict() -> Any:
    """A context function returning a dict (with the secret), not a ``ToolContext``."""
    return {"user_id": "ada", "secrets": {"WX_KEY": SECRET}}


def context_exits() -> ToolContext:
    """A context function that calls ``sys.exit`` with the secret."""
    sys.exit(f"no context for {SECRET}")


def context_interrupted() -> ToolContext:
    """A context function interrupted."""
    raise KeyboardInterrupt(SECRET)


async def context_async_raises() -> ToolContext:
    """An ``async def`` context function that fails."""
    await asyncio.sleep(0)
    raise LookupError(f"no session for {SECRET}")


def context_none() -> ToolContext | None:
    """A context function with no context to give."""
    return None


async def context_async() -> ToolContext:
    """An ``async def`` context function (awaited)."""
    await asyncio.sleep(0)
    return ToolContext(user_id="async-user")


def context_plain() -> ToolContext:
    """A context function as documented."""
    return ToolContext(user_id="plain-user")


#: Each ``context=`` function, and what ``whoami`` answers with it (None: a fatal failure).
CONTEXTS = [
    pytest.param(context_raises, None, id="raises"),
    pytest.param(context_of_a_dict, None, id="returns-a-dict"),
    pytest.param(context_exits, None, id="calls-sys-exit"),
    pytest.param(context_interrupted, None, id="keyboard-interrupt"),
    pytest.param(context_async_raises, None, id="async-raises"),
    pytest.param(context_none, "None", id="returns-none"),
    pytest.param(context_async, "async-user", id="async-def"),
    pytest.param(context_plain, "plain-user", id="returns-a-context"),
]


def first_call_only(function: Callable[[], Any]) -> Callable[[], Any]:
    """A context function that is ``function`` for the first call, then a good one."""
    made: list[int] = []

    def context() -> Any:
        made.append(1)
        return function() if len(made) == 1 else ToolContext(user_id="next-user")

    return context


def assert_nowhere(secret: str, answers: list[Answer], caplog: pytest.LogCaptureFixture) -> None:
    """``secret`` is in no answer (content and ``_meta``) and no log record."""
    for answer in answers:
        assert isinstance(answer, types.CallToolResult), answer
        assert secret not in answer.model_dump_json(by_alias=True)
    assert secret not in caplog.text
    for record in caplog.records:
        assert secret not in record.getMessage()
        assert secret not in (record.exc_text or "")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("function", "expected"), CONTEXTS)
def test_a_context_function_table(
    mode: str,
    function: Callable[[], Any],
    expected: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``server(context=function)``: one that fails, returns a non-context or exits gives
    that call's ``TOOL_RUNTIME_FATAL`` result, whose content, ``_meta`` and log show none of
    its secret; None is no context; an ``async def`` one is awaited. The next call works."""
    caplog.set_level(logging.DEBUG)
    server = tdk_mcp.server(Toolkit("contexts", [whoami]), context=first_call_only(function))

    async def body(client: mcp.Client) -> list[Answer]:
        return [await attempt(client, "whoami", {}), await attempt(client, "whoami", {})]

    answered, after = run_contained(in_memory(server, mode, body))
    if expected is None:
        failure(answered, "TOOL_RUNTIME_FATAL")
    else:
        assert success(answered).structured_content == {"result": expected}
    assert success(after).structured_content == {"result": "next-user"}
    assert_nowhere(SECRET, [answered, after], caplog)


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


class BrokenStore:
    """A state store that raises ``error`` while ``broken``, then keeps state in memory."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.broken = True
        self.updates = 0
        self._inner = InMemoryStore()

    async def update(self, key: str, change: Callable[..., tuple[Any, Any]], *args: Any) -> Any:
        """Fail, or apply ``change`` in memory."""
        self.updates += 1
        if self.broken:
            raise self.error
        return await self._inner.update(key, change, *args)


@tool(read_only=True)
def double(n: Annotated[int, "A number."]) -> int:
    """Double a number."""
    return 2 * n


#: What a store raises (with the secret in its message).
STORE_ERRORS = [
    pytest.param(ConnectionError, id="connection-error"),
    pytest.param(OSError, id="os-error"),
    pytest.param(RuntimeError, id="runtime-error"),
    pytest.param(TimeoutError, id="timeout-error"),
]
#: The policies that keep state in the store.
STORE_POLICIES = [
    pytest.param({"rate_limit": RateLimit(calls=5, period=1.0)}, id="rate-limit"),
    pytest.param({"circuit_breaker": CircuitBreaker()}, id="circuit-breaker"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policies", STORE_POLICIES)
@pytest.mark.parametrize("error", STORE_ERRORS)
def test_a_failing_state_store(
    mode: str,
    policies: dict[str, Any],
    error: type[Exception],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A ``StateStore`` whose ``update`` raises makes the call a ``TOOL_RUNTIME_FATAL``
    result (its message's secret nowhere); the server keeps serving: it lists its tools, and
    calls succeed once the store answers again."""
    caplog.set_level(logging.DEBUG)
    kit = Toolkit("stored", [double])
    store = BrokenStore(error(f"the store at 10.0.0.5 refused key {SECRET}"))
    runner = ToolRunner(kit, store=store, **policies)

    async def body(client: mcp.Client) -> tuple[list[Answer], list[str]]:
        broken = await attempt(client, "double", {"n": 2})
        store.broken = False
        names = [item.name for item in (await client.list_tools()).tools]
        return [broken, await attempt(client, "double", {"n": 3})], names

    server = tdk_mcp.server(kit, runner=runner)
    (broken, after), names = run_contained(in_memory(server, mode, body))
    assert store.updates >= 2  # the store was asked, for both calls
    failure(broken, "TOOL_RUNTIME_FATAL")
    assert names == ["double"]
    assert success(after).structured_content == {"result": 6}
    assert_nowhere(SECRET, [broken, after], caplog)


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
