"""JSON Schemas of tool definitions: a corpus of signatures covering every supported type.

This module uses ``from __future__ import annotations`` on purpose: every annotation below is
a string that ``@tool`` resolves. Each corpus tool comes with arguments it accepts; the tests
check the schemas against the Draft 2020-12 meta-schema, their shape, and that the schema and
the validator agree on those arguments in both directions (input, and the returned value).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import enum
import inspect
import json
import math
import uuid
from decimal import Decimal
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, NotRequired, Optional, Union

import annotated_types
import jsonschema
import pytest
from _bounded import run_bounded
from jsonschema import Draft202012Validator
from pydantic import BaseModel, Field, StringConstraints, ValidationError
from typing_extensions import TypedDict

from tdk import Tool, ToolContext, tool


class Color(enum.StrEnum):
    """A colour."""

    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    """How urgent."""

    LOW = 1
    HIGH = 2


class Filters(TypedDict):
    """Issue filters."""

    state: str
    labels: NotRequired[list[str]]


class Page(TypedDict):
    """A page of results with its filters."""

    number: int
    filters: Filters


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = "Paris"


class Item(BaseModel):
    """An order line."""

    sku: str
    quantity: int = Field(ge=1)


class Order(BaseModel):
    """An order."""

    items: list[Item]
    ship_to: Address | None = None


class Book(BaseModel):
    """A book; its ``title`` field must survive title stripping."""

    title: str = Field(min_length=1)
    pages: int


class Tree(BaseModel):
    """A recursive structure."""

    value: int
    children: list[Tree] = []


@dataclasses.dataclass
class Point:
    """A point."""

    x: float
    y: float


@tool
def scalars(text: str, count: int, ratio: float, flag: bool) -> str:
    """Echo scalars.

    Args:
        text: Some text.
        count: A count.
        ratio: A ratio.
        flag: A flag.
    """
    return f"{text}{count}{ratio}{flag}"


@tool
def nothing(value: Annotated[None, "Always null."]) -> None:
    """Take and return nothing."""


@tool
def colors(
    color: Annotated[Color, "A colour."], priority: Annotated[Priority, "Urgency."]
) -> Color:
    """Enums in and out."""
    return color


@tool
def literals(
    order: Annotated[Literal["asc", "desc"], "Sort order."],
    mixed: Annotated[Literal[1, "two", True, None], "Anything literal."],
) -> Literal["ok"]:
    """Literal values."""
    return "ok"


@tool
def optionals(
    a: Annotated[Optional[int], "Optional int."] = None,  # noqa: UP045
    b: Annotated[int | None, "PEP 604 optional."] = None,
    c: Annotated[Union[int, str], "Int or str."] = 0,  # noqa: UP007
) -> int | None:
    """Optional and union types."""
    return a


@tool
def sequences(
    words: Annotated[list[str], "Words."],
    pair: Annotated[tuple[int, str], "A pair."],
    floats: Annotated[tuple[float, ...], "Any number of floats."],
    unique: Annotated[set[str], "Distinct strings."],
    frozen: Annotated[frozenset[int], "Distinct ints."],
) -> list[str]:
    """Sequences."""
    return sorted(unique)


@tool
def mappings(
    counts: Annotated[dict[str, int], "Counts by name."],
    nested: Annotated[dict[str, list[dict[str, float]]], "Nested containers."],
) -> dict[str, int]:
    """Mappings."""
    return counts


@tool
def typed_dicts(filters: Annotated[Filters, "Filters."], page: Annotated[Page, "A page."]) -> Page:
    """TypedDicts, with NotRequired keys."""
    return page


@tool
def address_book(address: Annotated[Address, "Where."]) -> Address:
    """A model in and out."""
    assert isinstance(address, Address)
    return address


@tool
def orders(order: Annotated[Order, "The order."]) -> list[Item]:
    """Nested models."""
    assert isinstance(order.items[0], Item)
    return order.items


@tool
def books(book: Annotated[Book, "A book."]) -> Optional[Book]:  # noqa: UP045
    """A model with a field called title."""
    return book


@tool
def trees(tree: Annotated[Tree, "A tree."]) -> Tree:
    """A recursive model."""
    return tree


@tool
def points(point: Annotated[Point, "A point."]) -> Point:
    """A dataclass in and out."""
    assert isinstance(point, Point)
    return point


@tool
def times(
    when: Annotated[dt.datetime, "A moment."],
    day: Annotated[dt.date, "A day."],
    at: Annotated[dt.time, "A time of day."],
    duration: Annotated[dt.timedelta, "A duration."],
) -> dt.datetime:
    """Dates and times."""
    return when


@tool
def identifiers(id: Annotated[uuid.UUID, "An identifier."]) -> uuid.UUID:
    """UUIDs."""
    return id


@tool
def money(amount: Annotated[Decimal, "An amount."]) -> Decimal:
    """Decimals."""
    return amount


@tool
def constrained(
    limit: Annotated[int, Field(ge=1, le=100, description="How many.")],
    code: Annotated[str, Field(min_length=2, max_length=8, pattern=r"^[A-Z]+$")],
    share: Annotated[float, annotated_types.Interval(ge=0, le=1), "A share."],
    slug: Annotated[str, StringConstraints(strip_whitespace=True, to_lower=True), "A slug."],
) -> int:
    """Annotated constraints.

    Args:
        code: An upper-case code.
    """
    return limit


@tool
def defaults(
    limit: int = 10,
    tags: list[str] = Field(default_factory=list, description="Tags."),  # noqa: B008
    state: Literal["open", "closed"] = "open",
) -> list[str]:
    """Defaults and default factories.

    Args:
        limit: How many.
        state: Which state.
    """
    return tags


@tool
def anything(payload: Annotated[Any, "Any JSON value."]) -> Any:
    """Any."""
    return payload


@tool
def with_context(q: Annotated[str, "The query."], context: ToolContext) -> str:
    """The context parameter is not in the schema."""
    return q


@tool
def optional_context(q: Annotated[str, "The query."], context: ToolContext | None = None) -> str:
    """An optional context parameter is not in the schema either."""
    return q


@tool
def ping() -> str:
    """No parameters at all."""
    return "pong"


@tool
def renamed(class_: Annotated[str, "class", "The CSS class."]) -> str:
    """A rename to a Python keyword."""
    return class_


@tool
def awkward_names(
    json: Annotated[str, "A JSON text."],
    schema: Annotated[str, "A schema name."],
    _hidden: Annotated[int, "A private-looking name."] = 0,
) -> str:
    """Parameter names pydantic cannot use as field names."""
    return f"{json}{schema}{_hidden}"


@tool
def blobs(data: Annotated[bytes, "Raw bytes."], path: Annotated[PurePosixPath, "A path."]) -> str:
    """Bytes and paths."""
    return f"{len(data)}:{path}"


@tool
async def fetch(url: Annotated[str, "The URL."]) -> dict[str, Any]:
    """An async tool."""
    return {"url": url, "status": 200}


@tool
def many_returns(n: Annotated[int, "How many."]) -> tuple[int, str, list[Point]]:
    """A tuple return."""
    return (n, str(n), [Point(x=1, y=2)])


@tool
def returns_typed_dict(state: Annotated[str, "State."]) -> Filters:
    """A TypedDict return."""
    return {"state": state}


@tool
def field_descriptions(
    q: str = Field(description="The query."),
    limit: int = Field(5, ge=1, description="How many."),
) -> str:
    """Descriptions, defaults and constraints from Field as the default."""
    return q * limit


@tool
def unhashable_return(n: Annotated[int, "A number."]) -> Annotated[int, {"unit": "ms"}]:
    """A return annotation that cannot be hashed (so it is not cached)."""
    return n


#: (tool, arguments it accepts)
CORPUS: list[tuple[Tool[..., Any], dict[str, Any]]] = [
    (scalars, {"text": "a", "count": 1, "ratio": 0.5, "flag": True}),
    (nothing, {"value": None}),
    (colors, {"color": "red", "priority": 2}),
    (literals, {"order": "asc", "mixed": None}),
    (optionals, {"a": 1, "b": None, "c": "x"}),
    (
        sequences,
        {"words": ["a"], "pair": [1, "b"], "floats": [1.5, 2.0], "unique": ["a"], "frozen": [1]},
    ),
    (mappings, {"counts": {"a": 1}, "nested": {"k": [{"x": 1.5}]}}),
    (
        typed_dicts,
        {"filters": {"state": "open"}, "page": {"number": 1, "filters": {"state": "closed"}}},
    ),
    (address_book, {"address": {"street": "1 rue"}}),
    (
        orders,
        {"order": {"items": [{"sku": "A", "quantity": 2}], "ship_to": {"street": "s"}}},
    ),
    (books, {"book": {"title": "Dune", "pages": 412}}),
    (trees, {"tree": {"value": 1, "children": [{"value": 2}]}}),
    (points, {"point": {"x": 1, "y": 2.5}}),
    (
        times,
        {"when": "2026-01-02T03:04:05Z", "day": "2026-01-02", "at": "10:30", "duration": "PT1H"},
    ),
    (identifiers, {"id": "12345678-1234-5678-1234-567812345678"}),
    (money, {"amount": "12.50"}),
    (constrained, {"limit": 5, "code": "ABC", "share": 0.25, "slug": "  Hello "}),
    (defaults, {}),
    (anything, {"payload": {"any": ["thing", 1]}}),
    (with_context, {"q": "x"}),
    (optional_context, {"q": "x"}),
    (ping, {}),
    (renamed, {"class": "btn"}),
    (awkward_names, {"json": "{}", "schema": "public", "_hidden": 1}),
    (blobs, {"data": "abc", "path": "/tmp/x"}),
    (fetch, {"url": "https://example.com"}),
    (many_returns, {"n": 3}),
    (returns_typed_dict, {"state": "open"}),
    (field_descriptions, {"q": "x"}),
    (unhashable_return, {"n": 3}),
]
IDS = [entry[0].name for entry in CORPUS]


def _schema_keywords(schema: Any) -> list[str]:
    """Every keyword used in schema positions (property names and data are skipped)."""
    found: list[str] = []
    if isinstance(schema, list):
        for item in schema:
            found += _schema_keywords(item)
    elif isinstance(schema, dict):
        for key, value in schema.items():
            found.append(key)
            if key in ("properties", "$defs"):
                for sub in value.values():
                    found += _schema_keywords(sub)
            elif key not in ("default", "enum", "const", "examples", "required"):
                found += _schema_keywords(value)
    return found


def _call(tool_: Tool[..., Any], arguments: dict[str, Any]) -> Any:
    """Validate ``arguments`` with the tool's input model and call the tool with them."""
    validated = tool_.spec.input_model.model_validate(arguments)
    result = tool_(**tool_.spec.arguments(validated, ToolContext()))
    return asyncio.run(result) if inspect.iscoroutine(result) else result


def test_corpus_is_large_enough() -> None:
    """The corpus holds at least 30 distinct signatures."""
    assert len({entry[0].name for entry in CORPUS}) >= 30


@pytest.mark.parametrize(("tool_", "arguments"), CORPUS, ids=IDS)
def test_schemas_are_valid_draft_2020_12(tool_: Tool[..., Any], arguments: dict[str, Any]) -> None:
    """Both schemas validate against the JSON Schema Draft 2020-12 meta-schema."""
    Draft202012Validator.check_schema(tool_.definition.input_schema)
    Draft202012Validator.check_schema(tool_.definition.output_schema)


@pytest.mark.parametrize(("tool_", "arguments"), CORPUS, ids=IDS)
def test_input_schema_shape(tool_: Tool[..., Any], arguments: dict[str, Any]) -> None:
    """An object schema: properties each with a description, required, no extra properties,
    and no title anywhere."""
    schema = tool_.definition.input_schema
    assert list(schema)[:4] == ["type", "properties", "required", "additionalProperties"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) <= set(schema["properties"])
    for name, prop in schema["properties"].items():
        assert prop.get("description"), name
    assert "title" not in _schema_keywords(schema)
    assert "title" not in _schema_keywords(tool_.definition.output_schema)


@pytest.mark.parametrize(("tool_", "arguments"), CORPUS, ids=IDS)
def test_schema_and_validator_agree(tool_: Tool[..., Any], arguments: dict[str, Any]) -> None:
    """The sample arguments satisfy the input schema and the input model; the value the tool
    returns, serialised, satisfies the output schema."""
    jsonschema.validate(arguments, tool_.definition.input_schema, cls=Draft202012Validator)
    value = _call(tool_, arguments)
    dumped = tool_.spec.output_adapter.dump_python(value, mode="json")
    jsonschema.validate(dumped, tool_.definition.output_schema, cls=Draft202012Validator)


@pytest.mark.parametrize(("tool_", "arguments"), CORPUS, ids=IDS)
def test_unknown_arguments_are_rejected_by_schema_and_model(
    tool_: Tool[..., Any], arguments: dict[str, Any]
) -> None:
    """An argument that is not a parameter fails both the schema and the model."""
    extra = {**arguments, "not_a_parameter": 1}
    assert not Draft202012Validator(tool_.definition.input_schema).is_valid(extra)
    with pytest.raises(ValidationError):
        tool_.spec.input_model.model_validate(extra)


#: Parameter type -> what its property in the input schema must contain.
PARAMETER_SHAPES: list[Any] = [
    pytest.param(scalars, "count", {"type": "integer"}, id="int"),
    pytest.param(scalars, "ratio", {"type": "number"}, id="float"),
    pytest.param(scalars, "flag", {"type": "boolean"}, id="bool"),
    pytest.param(nothing, "value", {"type": "null"}, id="none"),
    pytest.param(optionals, "b", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, id="pep604"),
    pytest.param(sequences, "unique", {"type": "array", "uniqueItems": True}, id="set"),
    pytest.param(sequences, "floats", {"type": "array", "items": {"type": "number"}}, id="tuple"),
    pytest.param(
        sequences,
        "pair",
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        id="fixed-tuple",
    ),
    pytest.param(
        mappings,
        "counts",
        {"type": "object", "additionalProperties": {"type": "integer"}},
        id="dict",
    ),
    pytest.param(times, "when", {"type": "string", "format": "date-time"}, id="datetime"),
    pytest.param(times, "day", {"type": "string", "format": "date"}, id="date"),
    pytest.param(identifiers, "id", {"type": "string", "format": "uuid"}, id="uuid"),
    pytest.param(constrained, "limit", {"minimum": 1, "maximum": 100}, id="field-constraints"),
    pytest.param(constrained, "code", {"minLength": 2, "maxLength": 8}, id="string-constraints"),
    pytest.param(constrained, "share", {"minimum": 0, "maximum": 1}, id="annotated-types"),
    pytest.param(literals, "order", {"enum": ["asc", "desc"]}, id="literal"),
    pytest.param(defaults, "limit", {"type": "integer", "default": 10}, id="default"),
    pytest.param(field_descriptions, "limit", {"default": 5, "minimum": 1}, id="field-as-default"),
    pytest.param(colors, "color", {"$ref": "#/$defs/Color"}, id="enum-ref"),
    pytest.param(address_book, "address", {"$ref": "#/$defs/Address"}, id="model-ref"),
]


@pytest.mark.parametrize(("tool_", "parameter", "expected"), PARAMETER_SHAPES)
def test_parameter_shapes(tool_: Tool[..., Any], parameter: str, expected: dict[str, Any]) -> None:
    """Each supported type renders as the JSON Schema a reader expects."""
    prop = tool_.definition.input_schema["properties"][parameter]
    assert {key: prop[key] for key in expected if key in prop} == expected


def test_definitions_are_inlined_under_defs() -> None:
    """Models, enums and TypedDicts go under ``$defs``, without titles, with their docstring
    as description, and recursive references resolve."""
    defs = orders.definition.input_schema["$defs"]
    assert set(defs) == {"Address", "Item", "Order"}
    assert defs["Item"]["description"] == "An order line."
    assert "title" not in defs["Item"]
    assert trees.definition.input_schema["$defs"]["Tree"]["properties"]["children"] == {
        "default": [],
        "items": {"$ref": "#/$defs/Tree"},
        "type": "array",
    }


def test_a_property_named_title_is_kept() -> None:
    """Only ``title`` keywords are stripped, not a model field called ``title``."""
    book = books.definition.input_schema["$defs"]["Book"]
    assert book["properties"]["title"] == {"minLength": 1, "type": "string"}
    assert book["required"] == ["title", "pages"]


def test_output_schemas() -> None:
    """Output schemas describe the serialised return value."""
    assert nothing.definition.output_schema == {"type": "null"}
    assert ping.definition.output_schema == {"type": "string"}
    assert optionals.definition.output_schema == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert orders.definition.output_schema["items"] == {"$ref": "#/$defs/Item"}
    assert anything.definition.output_schema == {}


def test_schemas_are_not_shared_between_definitions() -> None:
    """Two tools with the same return type get equal, but separate, output schemas."""
    assert scalars.definition.output_schema == ping.definition.output_schema
    assert scalars.definition.output_schema is not ping.definition.output_schema


def test_context_parameter_is_not_in_the_schema() -> None:
    """The ToolContext parameter is left out of the schema and passed the context."""
    assert list(with_context.definition.input_schema["properties"]) == ["q"]
    assert list(optional_context.definition.input_schema["properties"]) == ["q"]
    assert with_context.spec.context_parameter == "context"


def test_no_parameters() -> None:
    """A tool without parameters still has a complete object schema."""
    assert ping.definition.input_schema == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_rename_round_trips() -> None:
    """The schema advertises the new name, the model accepts it (and only it), and the
    function receives the value under its Python name."""
    assert renamed.definition.input_schema["properties"] == {
        "class": {"type": "string", "description": "The CSS class."}
    }
    assert renamed.definition.input_schema["required"] == ["class"]
    assert _call(renamed, {"class": "btn"}) == "btn"
    with pytest.raises(ValidationError):
        renamed.spec.input_model.model_validate({"class_": "btn"})


def test_field_alias_is_a_rename() -> None:
    """``Field(alias=...)`` renames a parameter like ``Annotated[T, "new", "desc"]`` does."""

    @tool
    def search(q: Annotated[str, Field(alias="query", description="The query.")]) -> str:
        """Search."""
        return q

    assert list(search.definition.input_schema["properties"]) == ["query"]
    assert _call(search, {"query": "bugs"}) == "bugs"


def test_awkward_parameter_names_reach_the_function() -> None:
    """Parameters called ``json``, ``schema`` or ``_hidden`` are advertised and passed under
    their own names."""
    assert list(awkward_names.definition.input_schema["properties"]) == [
        "json",
        "schema",
        "_hidden",
    ]
    assert _call(awkward_names, {"json": "{}", "schema": "s", "_hidden": 2}) == "{}s2"


def test_models_reach_the_function_as_instances() -> None:
    """Model, dataclass and nested-model arguments arrive as instances, not dicts."""
    address = _call(address_book, {"address": {"street": "1 rue"}})
    assert address == Address(street="1 rue", city="Paris")
    assert _call(points, {"point": {"x": 1, "y": 2}}) == Point(x=1.0, y=2.0)
    assert _call(orders, {"order": {"items": [{"sku": "A", "quantity": 2}]}}) == [
        Item(sku="A", quantity=2)
    ]


def test_defaults_apply_when_arguments_are_left_out() -> None:
    """Left-out arguments take the default; a default factory makes a fresh value each time."""
    assert _call(defaults, {}) == []
    first, second = _call(defaults, {}), _call(defaults, {})
    assert first is not second
    assert "tags" not in defaults.definition.input_schema["required"]


def test_a_default_without_json_form_is_left_out_of_the_schema() -> None:
    """A default that cannot be rendered in JSON is omitted from the schema, silently (a
    warning would fail this test), and still applies."""
    marker = object()

    @tool
    def probe(value: Annotated[Any, "Anything."] = marker) -> bool:
        """Tell whether a value was given."""
        return value is not marker

    assert probe.definition.input_schema["properties"]["value"] == {"description": "Anything."}
    assert probe.definition.input_schema["required"] == []
    assert _call(probe, {}) is False


def test_local_classes_resolve_with_postponed_annotations() -> None:
    """A tool defined in a function can use classes local to that function, even though
    this module postpones the evaluation of annotations."""

    class Query(BaseModel):
        text: str

    @tool
    def search(query: Annotated[Query, "The query."]) -> Query:
        """Search."""
        return query

    assert search.definition.input_schema["$defs"]["Query"]["properties"] == {
        "text": {"type": "string"}
    }
    assert _call(search, {"query": {"text": "x"}}) == Query(text="x")


def test_defaults_json_cannot_carry_stay_out_of_the_schema() -> None:
    """A default of NaN, or of an integer too long to write out, is left out of the schema (as
    pydantic leaves out a default it cannot render): a host can write the schema as JSON."""

    @tool
    def odd_defaults(
        n: Annotated[int | None, "A number."] = 10**5000,
        x: Annotated[float, "A ratio."] = math.nan,
        k: Annotated[int, "A plain default."] = 3,
    ) -> int:
        """Accept odd defaults."""
        return k

    properties = odd_defaults.definition.input_schema["properties"]
    assert "default" not in properties["n"]
    assert "default" not in properties["x"]
    assert properties["k"]["default"] == 3
    json.dumps(odd_defaults.definition.model_dump(mode="json"), allow_nan=False)
    assert run_bounded(odd_defaults.run({})).value == 3
