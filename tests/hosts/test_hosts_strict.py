"""OpenAI strict-mode input schemas: ``tdk.hosts._strict.strict_schema`` and
``tdk.hosts.openai.tools(..., strict=True)``.

Each case of the table is a realistic tool with a full set of valid arguments. For every case
the strict schema must keep to the subset strict mode takes (checked by :func:`assert_strict`,
a walker of those rules), hold the expected fragments, accept the same full arguments as the
original schema, and the tool, called as strict mode calls it (``null`` for every parameter
the model leaves out), must run and get its defaults. What cannot be strict raises a
``ValueError`` naming the tool and each place (a schema bent out of JSON Schema included);
the definition is never changed.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import enum
import json
import uuid
from ipaddress import IPv4Address
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

import pytest
from jsonschema import Draft202012Validator
from pydantic import (
    AnyUrl,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)
from typing_extensions import TypeAliasType, TypedDict

from tdk import Tool, ToolDefinition, Toolkit, tool
from tdk.hosts import openai
from tdk.hosts._strict import strict_schema

# --- the rules of strict mode, as a walker ------------------------------------------------

#: The keywords strict mode takes in a schema.
ALLOWED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "description",
        "pattern",
        "format",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "minItems",
        "maxItems",
    }
)
#: The string formats strict mode knows.
FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
#: What says which values a schema takes: a schema with none of them takes anything.
SHAPING = frozenset({"type", "anyOf", "$ref", "enum", "const"})


def assert_strict(schema: dict[str, Any]) -> None:
    """Assert that ``schema`` keeps to OpenAI's strict subset of JSON Schema: a closed object
    at the root, every object closed with every property required, only allowed keywords, no
    sibling beside a ``$ref`` (which resolves), ``$defs`` at the root only."""
    assert schema.get("type") == "object", "the root must be an object"
    assert "anyOf" not in schema, "the root must not be a union"
    definitions = schema.get("$defs", {})
    _assert_node(schema, "#", definitions, root=True)
    for name, node in definitions.items():
        _assert_node(node, f"#/$defs/{name}", definitions, root=False)


def _assert_node(node: Any, where: str, definitions: dict[str, Any], *, root: bool) -> None:
    assert type(node) is dict, f"{where}: a schema must be an object, not {node!r}"
    unknown = set(node) - ALLOWED
    assert not unknown, f"{where}: keywords strict mode rejects: {sorted(unknown)}"
    assert SHAPING & set(node) or "properties" in node, f"{where}: a schema of any value"
    if not root:
        assert "$defs" not in node, f"{where}: $defs below the root"
    if "$ref" in node:
        assert set(node) == {"$ref"}, f"{where}: siblings beside $ref: {sorted(node)}"
        reference = node["$ref"]
        assert reference.startswith("#/$defs/"), where
        assert reference.removeprefix("#/$defs/") in definitions, f"{where}: {reference}"
    if node.get("type") == "object" or "properties" in node:
        assert node.get("additionalProperties") is False, f"{where}: object not closed"
        assert node.get("required") == list(node["properties"]), f"{where}: not all required"
        for name, member in node["properties"].items():
            _assert_node(member, f"{where}/properties/{name}", definitions, root=False)
    else:
        assert not {"properties", "required", "additionalProperties"} & set(node), where
    if "items" in node:
        _assert_node(node["items"], f"{where}/items", definitions, root=False)
    for index, member in enumerate(node.get("anyOf", ())):
        _assert_node(member, f"{where}/anyOf/{index}", definitions, root=False)
    if "format" in node:
        assert node["format"] in FORMATS, f"{where}: unknown format {node['format']!r}"
    if "pattern" in node:
        assert not any(token in node["pattern"] for token in ("(?=", "(?!", "(?<=", "(?<!"))


# --- types the tools take -----------------------------------------------------------------


class Color(enum.StrEnum):
    """A paint colour."""

    RED = "red"
    BLUE = "blue"


class Finish(enum.StrEnum):
    """A paint finish."""

    MATTE = "matte"
    GLOSS = "gloss"


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = "Paris"
    note: str | None = None


class Item(BaseModel):
    """An order line."""

    sku: str
    quantity: int = Field(default=1, ge=1)


class Order(BaseModel):
    """An order."""

    items: list[Item]
    ship_to: Address = Field(description="Where the parcel goes.")
    express: bool = False


class Cat(BaseModel):
    """A cat."""

    kind: Literal["cat"] = "cat"
    lives: int


class Dog(BaseModel):
    """A dog."""

    kind: Literal["dog"] = "dog"
    good: bool


class Filters(TypedDict):
    """Issue filters."""

    state: str
    labels: NotRequired[list[str]]


@dataclasses.dataclass
class Point:
    """A point on the map."""

    x: float
    y: float


class Tree(BaseModel):
    """A category and its subcategories."""

    name: str
    children: list[Tree] = []


class PostCode(BaseModel):
    """A post code; the lookahead needs Python's regex engine."""

    model_config = ConfigDict(regex_engine="python-re")

    code: str = Field(pattern=r"^(?!00)\d{4}$")
    country: str = Field(default="NO", pattern=r"^[A-Z]{2}$")


class Bag(BaseModel):
    """A model with a free-form field."""

    counts: dict[str, int]


MaybeInt = TypeAliasType("MaybeInt", "int | None")

#: Tool name -> the arguments its body last received.
SEEN: dict[str, dict[str, Any]] = {}


def _seen(name: str, arguments: dict[str, Any]) -> str:
    SEEN[name] = dict(arguments)
    return "ok"


# --- tools that can be strict -------------------------------------------------------------


@tool(read_only=True)
def search_issues(
    query: str, limit: int = 10, include_closed: bool = False, min_score: float = 0.5
) -> str:
    """Search the issue tracker.

    Args:
        query: Words to look for.
        limit: How many issues to return.
        include_closed: Whether closed issues count.
        min_score: The lowest relevance to keep.
    """
    return _seen("search_issues", locals())


@tool(read_only=True)
def list_events(cursor: str | None = None, page: int | None = 1) -> str:
    """List calendar events.

    Args:
        cursor: Where the previous page ended.
        page: Which page; null for all of them.
    """
    return _seen("list_events", locals())


@tool(idempotent=True)
def create_user(
    name: Annotated[str, Field(min_length=1, max_length=40)],
    nickname: Annotated[str, StringConstraints(pattern=r"^[a-z]+$")] = "anon",
    age: Annotated[int, Field(ge=0, le=150)] = 30,
    weight: Annotated[float, Field(gt=0, lt=500, multiple_of=0.5)] = 70.0,
    roles: set[str] = Field(default_factory=set),  # noqa: B008
    tags: Annotated[list[str], Field(min_length=1, max_length=5)] = ["new"],  # noqa: B006
) -> str:
    """Create a user account.

    Args:
        name: The full name.
        nickname: A short lower-case name.
        age: Age in years.
        weight: Weight in kilograms.
        roles: The roles granted.
        tags: Labels for the account.
    """
    return _seen("create_user", locals())


@tool(read_only=True)
def schedule(
    day: dt.date,
    at: dt.time,
    starts: dt.datetime,
    event_id: uuid.UUID,
    host: IPv4Address,
    link: AnyUrl,
    attachment: Path,
    reminder: dt.timedelta = dt.timedelta(minutes=10),
) -> str:
    """Check a meeting slot.

    Args:
        day: The day.
        at: The time of day.
        starts: When it starts, with its time zone.
        event_id: The event.
        host: The host's address.
        link: The meeting link.
        attachment: A file to attach.
        reminder: How long before to remind.
    """
    return _seen("schedule", locals())


@tool(read_only=True)
def paint(
    color: Color,
    finish: Finish = Finish.MATTE,
    mode: Literal["fast", "slow"] = "fast",
    coats: Literal[1, 2, 3] = 1,
    shade: Literal["light", "dark"] | None = "light",
) -> str:
    """Preview a paint job.

    Args:
        color: The colour.
        finish: The finish.
        mode: How fast to dry.
        coats: How many coats.
        shade: A shade, or null for the plain colour.
    """
    return _seen("paint", locals())


@tool(idempotent=True)
def ship(order: Order, gift_to: Address | None = None) -> str:
    """Ship an order.

    Args:
        order: The order.
        gift_to: Who receives it as a gift, if anyone.
    """
    return _seen("ship", locals())


@tool(read_only=True)
def adopt(
    pet: Annotated[Cat | Dog, Field(discriminator="kind")], backup: Cat | Dog | None = None
) -> str:
    """Check an adoption.

    Args:
        pet: The pet to adopt.
        backup: A second choice.
    """
    return _seen("adopt", locals())


@tool(read_only=True)
def find_nearby(filters: Filters, center: Point = Point(0.0, 0.0)) -> str:  # noqa: B008
    """Find issues near a point.

    Args:
        filters: Which issues.
        center: Where to look.
    """
    return _seen("find_nearby", locals())


@tool(read_only=True)
def count_categories(tree: Tree, depth: int = 3) -> str:
    """Count the categories of a tree.

    Args:
        tree: The tree.
        depth: How deep to count.
    """
    return _seen("count_categories", locals())


@tool(read_only=True)
def query_table(
    table: str,
    max_results: Annotated[int, "limit", "How many rows."] = 20,
    schema: str = "public",
) -> str:
    """Query a table.

    Args:
        table: The table.
        schema: The database schema.
    """
    return _seen("query_table", locals())


@tool(read_only=True)
def sum_rows(
    ids: tuple[int, ...],
    weights: frozenset[float] = frozenset(),
    grid: list[list[int]] = Field(default_factory=list),  # noqa: B008
) -> str:
    """Sum rows.

    Args:
        ids: The row ids.
        weights: Distinct weights.
        grid: A grid of numbers.
    """
    return _seen("sum_rows", locals())


@tool(read_only=True)
def tune(threshold: MaybeInt = 7) -> str:
    """Tune the alarm.

    Args:
        threshold: The alarm threshold; null turns it off.
    """
    return _seen("tune", locals())


@tool(read_only=True)
def validate_post_code(post_code: PostCode, fallback: PostCode | None = None) -> str:
    """Validate a post code.

    Args:
        post_code: The post code.
        fallback: Another one to try.
    """
    return _seen("validate_post_code", locals())


@tool(read_only=True)
def deliver(home: Address = Address(street="1 Main St")) -> str:  # noqa: B008
    """Plan a delivery.

    Args:
        home: Where to deliver.
    """
    return _seen("deliver", locals())


@tool(read_only=True)
def lookup(key: int | str = 5) -> str:
    """Look a record up.

    Args:
        key: The record's number or name.
    """
    return _seen("lookup", locals())


# --- the table of cases -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """A tool, a full set of valid arguments, and what its strict schema and calls hold."""

    tool: Tool[..., Any]
    arguments: dict[str, Any]
    """Every parameter and every field of a nested object, valid for both schemas."""
    properties: dict[str, Any]
    """The expected strict schema of some properties."""
    defaults: dict[str, Any]
    """Python parameter -> what the body gets when the model sends null for it."""
    defs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The expected strict schema of some ``$defs``."""


def _nullable(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}], "description": description}


INT, STR, NULL = {"type": "integer"}, {"type": "string"}, {"type": "null"}
ADDRESS = {
    "description": "A postal address.",
    "type": "object",
    "properties": {"street": STR, "city": STR, "note": {"anyOf": [STR, NULL]}},
    "required": ["street", "city", "note"],
    "additionalProperties": False,
}
FULL_ADDRESS = {"street": "1 Main St", "city": "Oslo", "note": None}

CASES = [
    pytest.param(
        Case(
            search_issues,
            {"query": "crash", "limit": 5, "include_closed": True, "min_score": 0.8},
            {
                "query": {"type": "string", "description": "Words to look for."},
                "limit": _nullable(INT, "How many issues to return."),
                "include_closed": _nullable({"type": "boolean"}, "Whether closed issues count."),
                "min_score": _nullable({"type": "number"}, "The lowest relevance to keep."),
            },
            {"limit": 10, "include_closed": False, "min_score": 0.5},
        ),
        id="scalars-with-defaults",
    ),
    pytest.param(
        Case(
            list_events,
            {"cursor": "abc", "page": 2},
            {
                "cursor": {"anyOf": [STR, NULL], "description": "Where the previous page ended."},
                "page": {"anyOf": [INT, NULL], "description": "Which page; null for all of them."},
            },
            {"cursor": None, "page": None},
        ),
        id="optional-types-keep-null",
    ),
    pytest.param(
        Case(
            create_user,
            {
                "name": "Ada",
                "nickname": "ada",
                "age": 36,
                "weight": 60.5,
                "roles": ["admin"],
                "tags": ["math"],
            },
            {
                "name": {"type": "string", "description": "The full name."},
                "nickname": _nullable(
                    {"type": "string", "pattern": "^[a-z]+$"}, "A short lower-case name."
                ),
                "age": _nullable(
                    {"type": "integer", "minimum": 0, "maximum": 150}, "Age in years."
                ),
                "weight": _nullable(
                    {
                        "type": "number",
                        "exclusiveMinimum": 0,
                        "exclusiveMaximum": 500,
                        "multipleOf": 0.5,
                    },
                    "Weight in kilograms.",
                ),
                "roles": _nullable({"type": "array", "items": STR}, "The roles granted."),
                "tags": _nullable(
                    {"type": "array", "items": STR, "minItems": 1, "maxItems": 5},
                    "Labels for the account.",
                ),
            },
            {"nickname": "anon", "age": 30, "weight": 70.0, "roles": set(), "tags": ["new"]},
        ),
        id="constraints",
    ),
    pytest.param(
        Case(
            schedule,
            {
                "day": "2024-05-01",
                "at": "10:30:00",
                "starts": "2024-05-01T10:30:00Z",
                "event_id": "12345678-1234-5678-1234-567812345678",
                "host": "10.0.0.1",
                "link": "https://meet.example.com/abc",
                "attachment": "notes/agenda.txt",
                "reminder": "PT15M",
            },
            {
                "day": {"type": "string", "format": "date", "description": "The day."},
                "at": {"type": "string", "format": "time", "description": "The time of day."},
                "starts": {
                    "type": "string",
                    "format": "date-time",
                    "description": "When it starts, with its time zone.",
                },
                "event_id": {"type": "string", "format": "uuid", "description": "The event."},
                "host": {"type": "string", "format": "ipv4", "description": "The host's address."},
                "link": {"type": "string", "description": "The meeting link."},
                "attachment": {"type": "string", "description": "A file to attach."},
                "reminder": _nullable(
                    {"type": "string", "format": "duration"}, "How long before to remind."
                ),
            },
            {"reminder": dt.timedelta(minutes=10)},
        ),
        id="formats",
    ),
    pytest.param(
        Case(
            paint,
            {"color": "red", "finish": "gloss", "mode": "slow", "coats": 2, "shade": "dark"},
            {
                "color": {"anyOf": [{"$ref": "#/$defs/Color"}], "description": "The colour."},
                "finish": _nullable({"$ref": "#/$defs/Finish"}, "The finish."),
                "mode": _nullable({"type": "string", "enum": ["fast", "slow"]}, "How fast to dry."),
                "coats": _nullable({"type": "integer", "enum": [1, 2, 3]}, "How many coats."),
                "shade": {
                    "anyOf": [{"type": "string", "enum": ["light", "dark"]}, NULL],
                    "description": "A shade, or null for the plain colour.",
                },
            },
            {"finish": Finish.MATTE, "mode": "fast", "coats": 1, "shade": None},
            {
                "Color": {
                    "description": "A paint colour.",
                    "type": "string",
                    "enum": ["red", "blue"],
                }
            },
        ),
        id="enums-and-literals",
    ),
    pytest.param(
        Case(
            ship,
            {
                "order": {
                    "items": [{"sku": "A1", "quantity": 2}],
                    "ship_to": FULL_ADDRESS,
                    "express": True,
                },
                "gift_to": FULL_ADDRESS,
            },
            {
                "order": {"anyOf": [{"$ref": "#/$defs/Order"}], "description": "The order."},
                "gift_to": {
                    "anyOf": [{"$ref": "#/$defs/Address"}, NULL],
                    "description": "Who receives it as a gift, if anyone.",
                },
            },
            {"gift_to": None},
            {
                "Address": ADDRESS,
                "Item": {
                    "description": "An order line.",
                    "type": "object",
                    "properties": {"sku": STR, "quantity": {"type": "integer", "minimum": 1}},
                    "required": ["sku", "quantity"],
                    "additionalProperties": False,
                },
                "Order": {
                    "description": "An order.",
                    "type": "object",
                    "properties": {
                        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                        "ship_to": {
                            "anyOf": [{"$ref": "#/$defs/Address"}],
                            "description": "Where the parcel goes.",
                        },
                        "express": {"type": "boolean"},
                    },
                    "required": ["items", "ship_to", "express"],
                    "additionalProperties": False,
                },
            },
        ),
        id="nested-models",
    ),
    pytest.param(
        Case(
            adopt,
            {"pet": {"kind": "cat", "lives": 9}, "backup": {"kind": "dog", "good": True}},
            {
                "pet": {
                    "anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                    "description": "The pet to adopt.",
                },
                "backup": {
                    "anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}, NULL],
                    "description": "A second choice.",
                },
            },
            {"backup": None},
            {
                "Cat": {
                    "description": "A cat.",
                    "type": "object",
                    "properties": {"kind": {"const": "cat", "type": "string"}, "lives": INT},
                    "required": ["kind", "lives"],
                    "additionalProperties": False,
                }
            },
        ),
        id="discriminated-union",
    ),
    pytest.param(
        Case(
            find_nearby,
            {"filters": {"state": "open", "labels": ["bug"]}, "center": {"x": 1.5, "y": -2.0}},
            {
                "filters": {"anyOf": [{"$ref": "#/$defs/Filters"}], "description": "Which issues."},
                "center": _nullable({"$ref": "#/$defs/Point"}, "Where to look."),
            },
            {"center": Point(0.0, 0.0)},
            {
                "Filters": {
                    "description": "Issue filters.",
                    "type": "object",
                    "properties": {"state": STR, "labels": {"type": "array", "items": STR}},
                    "required": ["state", "labels"],
                    "additionalProperties": False,
                },
                "Point": {
                    "description": "A point on the map.",
                    "type": "object",
                    "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                    "required": ["x", "y"],
                    "additionalProperties": False,
                },
            },
        ),
        id="typeddict-and-dataclass",
    ),
    pytest.param(
        Case(
            count_categories,
            {"tree": {"name": "root", "children": [{"name": "leaf", "children": []}]}, "depth": 1},
            {"depth": _nullable(INT, "How deep to count.")},
            {"depth": 3},
            {
                "Tree": {
                    "description": "A category and its subcategories.",
                    "type": "object",
                    "properties": {
                        "name": STR,
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
                    },
                    "required": ["name", "children"],
                    "additionalProperties": False,
                }
            },
        ),
        id="recursive-model",
    ),
    pytest.param(
        Case(
            query_table,
            {"table": "users", "limit": 5, "schema": "audit"},
            {
                "limit": _nullable(INT, "How many rows."),
                "schema": _nullable(STR, "The database schema."),
            },
            {"max_results": 20, "schema": "public"},
        ),
        id="renamed-parameters",
    ),
    pytest.param(
        Case(
            sum_rows,
            {"ids": [1, 2], "weights": [0.5], "grid": [[1, 2], [3]]},
            {
                "ids": {"type": "array", "items": INT, "description": "The row ids."},
                "weights": _nullable(
                    {"type": "array", "items": {"type": "number"}}, "Distinct weights."
                ),
                "grid": _nullable(
                    {"type": "array", "items": {"type": "array", "items": INT}},
                    "A grid of numbers.",
                ),
            },
            {"weights": frozenset(), "grid": []},
        ),
        id="sequences",
    ),
    pytest.param(
        Case(
            tune,
            {"threshold": 3},
            {
                "threshold": _nullable(
                    {"$ref": "#/$defs/MaybeInt"}, "The alarm threshold; null turns it off."
                )
            },
            {"threshold": None},
            {"MaybeInt": {"anyOf": [INT, NULL]}},
        ),
        id="alias-of-an-optional-type",
    ),
    pytest.param(
        Case(
            validate_post_code,
            {
                "post_code": {"code": "0150", "country": "NO"},
                "fallback": {"code": "1234", "country": "SE"},
            },
            {
                "post_code": {
                    "anyOf": [{"$ref": "#/$defs/PostCode"}],
                    "description": "The post code.",
                },
                "fallback": {
                    "anyOf": [{"$ref": "#/$defs/PostCode"}, NULL],
                    "description": "Another one to try.",
                },
            },
            {"fallback": None},
            {
                "PostCode": {
                    "description": "A post code; the lookahead needs Python's regex engine.",
                    "type": "object",
                    "properties": {
                        "code": STR,
                        "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
                    },
                    "required": ["code", "country"],
                    "additionalProperties": False,
                }
            },
        ),
        id="lookaround-pattern",
    ),
    pytest.param(
        Case(
            deliver,
            {"home": FULL_ADDRESS},
            {"home": _nullable({"$ref": "#/$defs/Address"}, "Where to deliver.")},
            {"home": Address(street="1 Main St")},
            {"Address": ADDRESS},
        ),
        id="model-default",
    ),
    pytest.param(
        Case(
            lookup,
            {"key": "alpha"},
            {"key": {"anyOf": [INT, STR, NULL], "description": "The record's number or name."}},
            {"key": 5},
        ),
        id="union-default",
    ),
]


def _optional(definition: ToolDefinition) -> set[str]:
    """The advertised names of the parameters the model may leave out."""
    schema = definition.input_schema
    return set(schema["properties"]) - set(schema["required"])


@pytest.mark.parametrize("case", CASES)
def test_strict_schema_keeps_to_strict_mode(case: Case) -> None:
    """Every strict schema follows strict mode's rules and is valid JSON Schema."""
    schema = strict_schema(case.tool.definition)
    assert_strict(schema)
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("case", CASES)
def test_strict_schema_fragments(case: Case) -> None:
    """Each case's properties and $defs come out as expected, every parameter required."""
    original = case.tool.definition.input_schema
    schema = strict_schema(case.tool.definition)
    assert list(schema["properties"]) == list(original["properties"])
    assert schema["required"] == list(original["properties"])
    assert schema["additionalProperties"] is False
    assert set(schema.get("$defs", {})) == set(original.get("$defs", {}))
    for name, expected in case.properties.items():
        assert schema["properties"][name] == expected, name
    for name, expected in case.defs.items():
        assert schema["$defs"][name] == expected, name


@pytest.mark.parametrize("case", CASES)
def test_full_arguments_pass_both_schemas(case: Case) -> None:
    """A full set of valid arguments passes the original schema, the strict one and the tool."""
    Draft202012Validator(case.tool.definition.input_schema).validate(case.arguments)
    Draft202012Validator(strict_schema(case.tool.definition)).validate(case.arguments)
    result = case.tool.run_sync(case.arguments)
    assert result.is_success, result.error


@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "json-text"])
@pytest.mark.parametrize("case", CASES)
def test_a_strict_call_gets_the_defaults(case: Case, as_text: bool) -> None:
    """Called as strict mode calls it (null for each optional parameter), the tool gets defaults."""
    definition = case.tool.definition
    optional = _optional(definition)
    arguments = {
        name: None if name in optional else case.arguments[name]
        for name in definition.input_schema["properties"]
    }
    Draft202012Validator(strict_schema(definition)).validate(arguments)
    SEEN.pop(case.tool.name, None)
    sent: Any = json.dumps(arguments) if as_text else arguments
    result = case.tool.run_sync(sent)
    assert result.is_success, result.error
    received = SEEN[case.tool.name]
    assert {name: received[name] for name in case.defaults} == case.defaults


@pytest.mark.parametrize("case", CASES)
def test_strict_schema_never_changes_the_definition(case: Case) -> None:
    """strict_schema leaves the definition as it was and gives the same schema each time."""
    before = copy.deepcopy(case.tool.definition.input_schema)
    first = strict_schema(case.tool.definition)
    assert case.tool.definition.input_schema == before
    assert first is not case.tool.definition.input_schema
    assert strict_schema(case.tool.definition) == first


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_tools_carry_the_strict_schema(api: Literal["chat", "responses"]) -> None:
    """openai.tools(strict=True) puts the strict schema where each API reads it, marked strict."""
    [shape] = openai.tools([ship], strict=True, api=api)
    function = shape["function"] if api == "chat" else shape
    assert function["parameters"] == strict_schema(ship.definition)
    assert function["strict"] is True
    assert function["name"] == "ship"
    [loose] = openai.tools([ship], api=api)
    loose_function = loose["function"] if api == "chat" else loose
    assert loose_function["parameters"] == ship.definition.input_schema


# --- what cannot be strict ----------------------------------------------------------------


@tool(read_only=True)
def tally(counts: dict[str, int]) -> str:
    """Tally votes.

    Args:
        counts: Votes by name.
    """
    return "ok"


@tool(read_only=True)
def tally_some(counts: dict[str, int] | None = None) -> str:
    """Tally votes, if any.

    Args:
        counts: Votes by name.
    """
    return "ok"


@tool(read_only=True)
def remember(value: Any) -> str:
    """Remember a value.

    Args:
        value: Anything.
    """
    return "ok"


@tool(read_only=True)
def remember_object(value: object) -> str:
    """Remember an object.

    Args:
        value: Anything.
    """
    return "ok"


@tool(read_only=True)
def locate(point: tuple[float, float]) -> str:
    """Locate a point.

    Args:
        point: Latitude and longitude.
    """
    return "ok"


@tool(read_only=True)
def locate_many(points: list[tuple[int, str]]) -> str:
    """Locate points.

    Args:
        points: Pairs of id and name.
    """
    return "ok"


@tool(read_only=True)
def load_rows(rows: list[Any]) -> str:
    """Load rows.

    Args:
        rows: The rows.
    """
    return "ok"


@tool(read_only=True)
def fill_bag(bag: Bag) -> str:
    """Fill a bag.

    Args:
        bag: The bag.
    """
    return "ok"


@tool(read_only=True)
def score(scores: dict[Annotated[str, StringConstraints(pattern=r"^[a-z]+$")], int]) -> str:
    """Score players.

    Args:
        scores: Score by lower-case name.
    """
    return "ok"


@tool(read_only=True)
def bounded(
    level: Annotated[int, WithJsonSchema({"allOf": [{"type": "integer"}, {"minimum": 0}]})],
) -> str:
    """Set a level.

    Args:
        level: The level.
    """
    return "ok"


@tool(read_only=True)
def hinted(
    sizes: list[int] = Field(default_factory=list, json_schema_extra={"items": True}),  # noqa: B008
) -> str:
    """Record sizes.

    Args:
        sizes: The sizes.
    """
    return "ok"


@tool(read_only=True)
def everything_wrong(counts: dict[str, int], value: Any, point: tuple[int, int], bag: Bag) -> str:
    """Do too much.

    Args:
        counts: Counts.
        value: A value.
        point: A point.
        bag: A bag.
    """
    return "ok"


FAILURES = [
    pytest.param(tally, ["parameter 'counts' is a free-form object (a dict)"], id="dict-parameter"),
    pytest.param(
        tally_some, ["parameter 'counts' is a free-form object (a dict)"], id="optional-dict"
    ),
    pytest.param(remember, ["parameter 'value' takes any value (Any)"], id="any"),
    pytest.param(remember_object, ["parameter 'value' takes any value (Any)"], id="object"),
    pytest.param(locate, ["parameter 'point' is a fixed-length tuple"], id="tuple"),
    pytest.param(locate_many, ["'points[]' is a fixed-length tuple"], id="tuple-in-list"),
    pytest.param(load_rows, ["'rows[]' takes any value (Any)"], id="list-of-any"),
    pytest.param(fill_bag, ["'counts' of model 'Bag' is a free-form object"], id="dict-in-a-model"),
    pytest.param(score, ["parameter 'scores' is a free-form object"], id="pattern-keys"),
    pytest.param(bounded, ["parameter 'level' combines 2 schemas with allOf"], id="allof-of-two"),
    pytest.param(hinted, ["'sizes[]' takes any value (a schema of True)"], id="boolean-schema"),
    pytest.param(
        everything_wrong,
        [
            "parameter 'counts' is a free-form object",
            "parameter 'value' takes any value",
            "parameter 'point' is a fixed-length tuple",
            "'counts' of model 'Bag' is a free-form object",
        ],
        id="every-problem-named",
    ),
]


@pytest.mark.parametrize(("tool_", "places"), FAILURES)
def test_what_cannot_be_strict_is_named(tool_: Tool[..., Any], places: list[str]) -> None:
    """A schema strict mode cannot take raises ValueError naming the tool and each place."""
    before = copy.deepcopy(tool_.definition.input_schema)
    with pytest.raises(ValueError, match=f"^tool '{tool_.name}' cannot be strict: ") as caught:
        strict_schema(tool_.definition)
    for place in places:
        assert place in str(caught.value)
    assert tool_.definition.input_schema == before


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("as_toolkit", [False, True], ids=["tools", "toolkit"])
def test_every_failing_tool_is_named_in_one_error(
    api: Literal["chat", "responses"], as_toolkit: bool
) -> None:
    """openai.tools(strict=True) raises one ValueError naming each tool that cannot be strict."""
    tools = [search_issues, tally, remember]
    source: Any = Toolkit("mixed", tools) if as_toolkit else tools
    with pytest.raises(ValueError, match="cannot be strict") as caught:
        openai.tools(source, strict=True, api=api)
    message = str(caught.value)
    assert "tool 'tally' cannot be strict: parameter 'counts'" in message
    assert "tool 'remember' cannot be strict: parameter 'value'" in message
    assert "search_issues" not in message
    assert len(openai.tools(source, api=api)) == 3


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
        openai.tools([bent, listed, free], strict=True)
    assert str(caught.value).splitlines() == [
        "tool 'bent' cannot be strict: its input schema is not one tdk can read (TypeError)",
        "tool 'listed' cannot be strict: its input schema is not one tdk can read (AttributeError)",
        "tool 'free' cannot be strict: parameter 'labels' is a free-form object (a dict); "
        "strict mode needs every property named",
    ]


# --- rules, on schemas written by hand ----------------------------------------------------


def _raw(input_schema: dict[str, Any]) -> ToolDefinition:
    """A definition with the input schema given (as a custom type's JSON Schema could be)."""
    return search_issues.definition.model_copy(update={"name": "raw", "input_schema": input_schema})


def _one(
    schema: dict[str, Any], *, required: bool = True, defs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An input schema with one parameter ``p`` of this schema."""
    built: dict[str, Any] = {
        "type": "object",
        "properties": {"p": schema},
        "required": ["p"] if required else [],
        "additionalProperties": False,
    }
    if defs is not None:
        built["$defs"] = defs
    return built


X_DEFS = {"X": {"type": "object", "properties": {"a": INT}, "required": ["a"]}}
X_STRICT = {
    "type": "object",
    "properties": {"a": INT},
    "required": ["a"],
    "additionalProperties": False,
}

RULES = [
    pytest.param(
        {"oneOf": [INT, STR], "description": "D."},
        True,
        {"anyOf": [INT, STR], "description": "D."},
        id="oneof-becomes-anyof",
    ),
    pytest.param(
        {
            "allOf": [{"type": "integer", "minimum": 1, "description": "Inner."}],
            "description": "D.",
        },
        True,
        {"type": "integer", "minimum": 1, "description": "D."},
        id="allof-of-one-merged",
    ),
    pytest.param(
        {"allOf": [{"$ref": "#/$defs/X"}], "description": "D."},
        True,
        {"anyOf": [{"$ref": "#/$defs/X"}], "description": "D."},
        id="allof-of-one-ref",
    ),
    pytest.param({"$ref": "#/$defs/X"}, True, {"$ref": "#/$defs/X"}, id="bare-ref-stays"),
    pytest.param(
        {"$ref": "#/$defs/X", "title": "T", "default": {"a": 1}, "examples": [{"a": 2}]},
        True,
        {"$ref": "#/$defs/X"},
        id="ref-with-dropped-siblings-stays-bare",
    ),
    pytest.param(
        {"$ref": "#/$defs/X", "description": "D."},
        False,
        {"anyOf": [{"$ref": "#/$defs/X"}, NULL], "description": "D."},
        id="optional-ref",
    ),
    pytest.param(
        {"type": "integer", "default": 3},
        False,
        {"anyOf": [INT, NULL]},
        id="optional-without-description",
    ),
    pytest.param(
        {"anyOf": [INT, STR], "default": 3},
        False,
        {"anyOf": [INT, STR, NULL]},
        id="optional-union-flattened",
    ),
    pytest.param(
        {"anyOf": [INT, STR], "default": 3, "description": "D."},
        False,
        {"anyOf": [INT, STR, NULL], "description": "D."},
        id="optional-union-described",
    ),
    pytest.param(
        {"type": ["integer", "null"], "default": 1},
        False,
        {"type": ["integer", "null"]},
        id="type-list-with-null",
    ),
    pytest.param({"type": "null"}, False, {"type": "null"}, id="type-null"),
    pytest.param({"const": None}, False, {"const": None}, id="const-null"),
    pytest.param({"enum": ["a", None]}, False, {"enum": ["a", None]}, id="enum-with-null"),
    pytest.param(
        {"anyOf": [{"anyOf": [INT, NULL]}, STR]},
        False,
        {"anyOf": [{"anyOf": [INT, NULL]}, STR]},
        id="null-deep-in-a-union",
    ),
    pytest.param(
        {"type": "string", "format": "email"},
        True,
        {"type": "string", "format": "email"},
        id="known-format-kept",
    ),
    pytest.param(
        {"type": "string", "format": "uri"}, True, {"type": "string"}, id="unknown-format-dropped"
    ),
    pytest.param({"type": "integer", "format": "int64"}, True, INT, id="number-format-dropped"),
    pytest.param(
        {"type": "string", "pattern": "^[a-z]+$"},
        True,
        {"type": "string", "pattern": "^[a-z]+$"},
        id="plain-pattern-kept",
    ),
    pytest.param({"type": "string", "pattern": "^(?=a)"}, True, STR, id="lookahead-dropped"),
    pytest.param({"type": "string", "pattern": "^(?!a)"}, True, STR, id="negative-lookahead"),
    pytest.param({"type": "string", "pattern": "(?<=a)b"}, True, STR, id="lookbehind-dropped"),
    pytest.param(
        {"type": "string", "pattern": "(?<!a)b"}, True, STR, id="negative-lookbehind-dropped"
    ),
    pytest.param(
        {
            "type": "string",
            "title": "T",
            "default": "x",
            "examples": ["y"],
            "minLength": 1,
            "maxLength": 9,
            "deprecated": True,
            "readOnly": True,
            "$comment": "c",
            "contentEncoding": "base64",
        },
        True,
        STR,
        id="string-keywords-dropped",
    ),
    pytest.param(
        {"type": "array", "items": INT, "uniqueItems": True, "minItems": 1, "contains": INT},
        True,
        {"type": "array", "items": INT, "minItems": 1},
        id="array-keywords-dropped",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"a": INT},
            "minProperties": 1,
            "propertyNames": {"pattern": "^a"},
        },
        True,
        {
            "type": "object",
            "properties": {"a": INT},
            "required": ["a"],
            "additionalProperties": False,
        },
        id="object-keywords-dropped",
    ),
    pytest.param(
        {"type": "object", "properties": {"a": INT}, "additionalProperties": True},
        True,
        {
            "type": "object",
            "properties": {"a": INT},
            "required": ["a"],
            "additionalProperties": False,
        },
        id="open-model-closed",
    ),
    pytest.param(
        {"type": "object", "additionalProperties": False},
        True,
        {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
        id="closed-object-without-properties",
    ),
    pytest.param(
        {"type": ["object", "null"], "properties": {"a": INT}},
        False,
        {
            "type": ["object", "null"],
            "properties": {"a": INT},
            "required": ["a"],
            "additionalProperties": False,
        },
        id="nullable-object",
    ),
]


@pytest.mark.parametrize(("schema", "required", "expected"), RULES)
def test_rules_on_a_parameter(schema: dict[str, Any], required: bool, expected: Any) -> None:
    """Each rule of the rewrite, on one parameter (required or with a default)."""
    source = _one(schema, required=required, defs=X_DEFS)
    before = copy.deepcopy(source)
    strict = strict_schema(_raw(source))
    assert strict["properties"]["p"] == expected
    assert strict["required"] == ["p"]
    assert strict["$defs"] == {"X": X_STRICT}
    assert source == before


@pytest.mark.parametrize(
    ("schema", "required", "expected"),
    RULES,
)
def test_rules_give_strict_schemas(schema: dict[str, Any], required: bool, expected: Any) -> None:
    """What each rule gives keeps to strict mode."""
    assert_strict(strict_schema(_raw(_one(schema, required=required, defs=X_DEFS))))


def test_a_schema_without_defs_gets_none() -> None:
    """No $defs in, no $defs out."""
    assert "$defs" not in strict_schema(_raw(_one(INT)))


RAW_FAILURES = [
    pytest.param(
        _one({"properties": {"a": INT}}),
        "parameter 'p' takes any value (Any)",
        id="properties-without-type",
    ),
    pytest.param({"type": "object"}, "the parameters is a free-form object", id="root-free-form"),
    pytest.param(
        _one({"type": "object", "patternProperties": {"^a": INT}, "additionalProperties": False}),
        "parameter 'p' is a free-form object",
        id="closed-with-pattern-properties",
    ),
    pytest.param(
        _one({"type": "object", "additionalProperties": INT}),
        "parameter 'p' is a free-form object",
        id="typed-additional-properties",
    ),
    pytest.param(
        _one({"$ref": "#/$defs/Y"}, defs={"Y": {"allOf": [INT, {"minimum": 0}]}}),
        "model 'Y' combines 2 schemas with allOf",
        id="allof-in-defs",
    ),
    pytest.param(
        _one({"type": "array", "items": [INT, STR]}),
        "'p[]' takes any value (a schema of [",
        id="draft-4-tuple-items",
    ),
    pytest.param(
        _one({"description": "Untyped."}), "parameter 'p' takes any value (Any)", id="untyped"
    ),
    pytest.param(
        _one({"anyOf": [INT, {}]}), "parameter 'p' takes any value (Any)", id="any-in-a-union"
    ),
    pytest.param(
        _one(INT, required=False) | {"properties": {"p": {"prefixItems": [INT]}}},
        "parameter 'p' is a fixed-length tuple",
        id="optional-tuple",
    ),
]


@pytest.mark.parametrize(("schema", "problem"), RAW_FAILURES)
def test_what_cannot_be_strict_by_hand(schema: dict[str, Any], problem: str) -> None:
    """Schemas written by hand that strict mode cannot take are named too."""
    before = copy.deepcopy(schema)
    with pytest.raises(ValueError, match=r"^tool 'raw' cannot be strict: ") as caught:
        strict_schema(_raw(schema))
    assert problem in str(caught.value)
    assert schema == before
