"""A ``null`` for a parameter with a default means "not given": the default applies.

OpenAI's strict mode sends every parameter, ``null`` for those the model leaves out (see
``tdk.hosts._strict``). For a parameter whose type takes no None, tdk reads such a ``null`` as
"not given" in every call: a dict or JSON text, through ``Tool.run``/``run_sync``,
``Toolkit.run`` and ``ToolRunner.run``/``run_many``. A type that takes None keeps its None; a
default of None for a type without None is still a definition error; a mutable default is a
fresh object in each call; arguments that fail when read again for a null are bad input.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import gc
import json
import types
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, BeforeValidator, Field
from typing_extensions import TypeAliasType

from tdk import Tool, ToolCall, Toolkit, ToolResult, ToolRunner, tool
from tdk.errors import ErrorKind, ToolDefinitionError


class Color(enum.StrEnum):
    """A paint colour."""

    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = "Paris"


class Cat(BaseModel):
    """A cat."""

    kind: Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    """A dog."""

    kind: Literal["dog"] = "dog"
    good: bool = True


@dataclasses.dataclass
class Point:
    """A point on the map."""

    x: float
    y: float


class Order(BaseModel):
    """An order."""

    sku: str
    express: bool = False


Count = TypeAliasType("Count", int)
MaybeInt = TypeAliasType("MaybeInt", "int | None")

#: Tool name -> the arguments its body last received.
SEEN: dict[str, dict[str, Any]] = {}


def _seen(name: str, arguments: dict[str, Any]) -> str:
    SEEN[name] = dict(arguments)
    return "ok"


# --- a null means the default -------------------------------------------------------------


@tool(read_only=True)
def search(
    query: str,
    limit: int = 10,
    exact: bool = False,
    ratio: float = 0.5,
    sort: str = "relevance",
) -> str:
    """Search the documents.

    Args:
        query: Words to look for.
        limit: How many to return.
        exact: Whether to match the words exactly.
        ratio: The lowest score to keep.
        sort: The order of the results.
    """
    return _seen("search", locals())


@tool(read_only=True)
def styled(
    color: Color = Color.BLUE,
    mode: Literal["fast", "slow"] = "slow",
    coats: Annotated[int, Field(ge=1, le=3)] = 2,
    total: Count = 3,
) -> str:
    """Preview a style.

    Args:
        color: The colour.
        mode: How fast to dry.
        coats: How many coats.
        total: How many items.
    """
    return _seen("styled", locals())


@tool(read_only=True)
def fielded(
    size: int = Field(default=7, ge=0),
    name: Annotated[str, Field(default="anon")] = "anon",
    tags: list[str] = Field(default_factory=lambda: ["new"]),  # noqa: B008
) -> str:
    """Use Field defaults.

    Args:
        size: The size.
        name: The name.
        tags: The tags.
    """
    return _seen("fielded", locals())


@tool(read_only=True)
def located(
    home: Address = Address(street="1 Main St"),  # noqa: B008
    center: Point = Point(1.0, 2.0),  # noqa: B008
) -> str:
    """Locate a home.

    Args:
        home: The home address.
        center: The map's centre.
    """
    return _seen("located", locals())


@tool(read_only=True)
def renamed(
    max_results: Annotated[int, "limit", "How many rows."] = 20,
    schema: str = "public",
    json: str = "{}",
) -> str:
    """Query with awkward names.

    Args:
        schema: The database schema.
        json: A filter as JSON text.
    """
    return _seen("renamed", locals())


@tool(read_only=True)
def derived(width: int, height: int = Field(default_factory=lambda data: data["width"] * 2)) -> str:
    """Size a box.

    Args:
        width: The width.
        height: The height; twice the width when left out.
    """
    return _seen("derived", locals())


@tool(read_only=True)
def unions(
    key: int | str = 5,
    pet: Cat | Dog = Cat(),  # noqa: B008
    tagged: Annotated[Cat | Dog, Field(discriminator="kind")] = Dog(),  # noqa: B008
    shape: list[int] | dict[str, int] = Field(default_factory=list),  # noqa: B008
) -> str:
    """Take unions.

    Args:
        key: An id or a name.
        pet: A pet.
        tagged: A pet, tagged by kind.
        shape: Numbers, in a list or by name.
    """
    return _seen("unions", locals())


NULL_MEANS_DEFAULT = [
    pytest.param(
        search,
        {"query": "tdk", "limit": None, "exact": None, "ratio": None, "sort": None},
        {"query": "tdk", "limit": 10, "exact": False, "ratio": 0.5, "sort": "relevance"},
        id="scalars",
    ),
    pytest.param(
        search,
        {"query": "tdk", "limit": 3, "exact": None, "ratio": 0.9, "sort": None},
        {"query": "tdk", "limit": 3, "exact": False, "ratio": 0.9, "sort": "relevance"},
        id="some-null-some-given",
    ),
    pytest.param(
        styled,
        {"color": None, "mode": None, "coats": None, "total": None},
        {"color": Color.BLUE, "mode": "slow", "coats": 2, "total": 3},
        id="enum-literal-constrained-alias",
    ),
    pytest.param(
        fielded,
        {"size": None, "name": None, "tags": None},
        {"size": 7, "name": "anon", "tags": ["new"]},
        id="field-default-and-factory",
    ),
    pytest.param(
        located,
        {"home": None, "center": None},
        {"home": Address(street="1 Main St"), "center": Point(1.0, 2.0)},
        id="model-and-dataclass",
    ),
    pytest.param(
        renamed,
        {"limit": None, "schema": None, "json": None},
        {"max_results": 20, "schema": "public", "json": "{}"},
        id="renamed-and-awkward-names",
    ),
    pytest.param(
        derived, {"width": 4, "height": None}, {"width": 4, "height": 8}, id="factory-of-data"
    ),
    pytest.param(
        unions,
        {"tagged": None},
        {"key": 5, "pet": Cat(), "tagged": Dog(), "shape": []},
        id="discriminated-union",
    ),
]

#: Unions without None: pydantic reports a null against each member of the union (at
#: ``("key", "int")``, ``("key", "str")``), not at the parameter itself.
UNION_NULLS = [
    pytest.param({"key": None}, {"key": 5}, id="union-of-scalars"),
    pytest.param({"pet": None}, {"pet": Cat()}, id="union-of-models"),
    pytest.param({"shape": None}, {"shape": []}, id="union-of-containers"),
    pytest.param(
        {"key": None, "pet": None, "tagged": None, "shape": None},
        {"key": 5, "pet": Cat(), "tagged": Dog(), "shape": []},
        id="all-at-once",
    ),
]


def _run_tool(tool_: Tool[..., Any], arguments: Any) -> ToolResult:
    return asyncio.run(tool_.run(arguments))


def _run_sync(tool_: Tool[..., Any], arguments: Any) -> ToolResult:
    return tool_.run_sync(arguments)


def _run_toolkit(tool_: Tool[..., Any], arguments: Any) -> ToolResult:
    return asyncio.run(Toolkit("kit", [tool_]).run(tool_.name.upper(), arguments))


def _run_runner(tool_: Tool[..., Any], arguments: Any) -> ToolResult:
    return asyncio.run(ToolRunner(Toolkit("kit", [tool_])).run(tool_.name, arguments))


def _run_many(tool_: Tool[..., Any], arguments: Any) -> ToolResult:
    call = ToolCall(name=tool_.name, arguments=arguments, call_id="call_1")
    [result] = asyncio.run(ToolRunner(Toolkit("kit", [tool_])).run_many([call]))
    return result


Run = Callable[[Tool[..., Any], Any], ToolResult]

PATHS = [
    pytest.param(_run_tool, id="tool.run"),
    pytest.param(_run_sync, id="tool.run_sync"),
    pytest.param(_run_toolkit, id="toolkit.run"),
    pytest.param(_run_runner, id="runner.run"),
    pytest.param(_run_many, id="runner.run_many"),
]

FORMS = [
    pytest.param(lambda arguments: arguments, id="dict"),
    pytest.param(json.dumps, id="json-text"),
    pytest.param(lambda arguments: json.dumps(arguments).encode(), id="json-bytes"),
    pytest.param(types.MappingProxyType, id="mapping"),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("tool_", "arguments", "received"), NULL_MEANS_DEFAULT)
def test_a_null_means_the_default(
    tool_: Tool[..., Any],
    arguments: dict[str, Any],
    received: dict[str, Any],
    form: Callable[[dict[str, Any]], Any],
) -> None:
    """A null for a parameter with a default whose type takes no None gives the default."""
    SEEN.pop(tool_.name, None)
    result = tool_.run_sync(form(arguments))
    assert result.is_success, result.error
    assert {name: SEEN[tool_.name][name] for name in received} == received


@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "json-text"])
@pytest.mark.parametrize(("arguments", "received"), UNION_NULLS)
def test_a_null_for_a_union_parameter_means_the_default(
    arguments: dict[str, Any], received: dict[str, Any], as_text: bool
) -> None:
    """A null for a parameter typed as a union without None (``int | str = 5``) is its default."""
    # Strict mode advertises such a parameter as nullable, and sends null when it is left out.
    SEEN.pop("unions", None)
    result = unions.run_sync(json.dumps(arguments) if as_text else arguments)
    assert result.is_success, result.error
    assert {name: SEEN["unions"][name] for name in received} == received


@pytest.mark.parametrize("run", PATHS)
@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "json-text"])
def test_every_path_reads_null_as_not_given(run: Run, as_text: bool) -> None:
    """Tool.run, run_sync, Toolkit.run and ToolRunner.run/run_many all apply the default."""
    arguments = {"query": "tdk", "limit": None, "exact": None, "ratio": None, "sort": None}
    SEEN.pop("search", None)
    result = run(search, json.dumps(arguments) if as_text else arguments)
    assert result.is_success, result.error
    assert result.value == "ok"
    assert SEEN["search"] == {
        "query": "tdk",
        "limit": 10,
        "exact": False,
        "ratio": 0.5,
        "sort": "relevance",
    }


def _many_defaults(count: int) -> Tool[..., Any]:
    """A tool with ``count`` parameters ``p0``... each ``int`` with a default of its index."""
    parameters = ", ".join(f"p{index}: int = {index}" for index in range(count))
    documented = "".join(f"        p{index}: Number {index}.\n" for index in range(count))
    source = (
        f"def many({parameters}) -> int:\n"
        f'    """Add numbers up.\n\n    Args:\n{documented}    """\n'
        f"    return sum(locals().values())\n"
    )
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    return tool(read_only=True)(namespace["many"])


@pytest.mark.parametrize("count", [64, 65, 100], ids=["64", "65", "100"])
def test_a_null_for_each_of_many_parameters_means_their_defaults(count: int) -> None:
    """A tool with many defaulted parameters, every one of them sent as null, gets every default."""
    result = _many_defaults(count).run_sync({f"p{index}": None for index in range(count)})
    assert result.is_success, result.error
    assert result.value == sum(range(count))


# --- a type that takes None keeps its None ------------------------------------------------


@tool(read_only=True)
def nullable(
    page: int | None = 1,
    label: Optional[str] = "x",  # noqa: UP045
    choice: Literal["a", "b", None] = "a",
    threshold: MaybeInt = 7,
    anything: Any = 5,
    bounded: Annotated[int | None, Field(ge=0)] = 3,
    custom: Annotated[int, BeforeValidator(lambda value: -1 if value is None else value)] = 4,
    floor: Annotated[int, Field(ge=0)] | None = 2,
    thing: object = "x",
) -> str:
    """Take types that admit None.

    Args:
        page: A page, or null for all of them.
        label: A label, or null for none.
        choice: A choice, or null.
        threshold: A threshold, or null for none.
        anything: Any value.
        bounded: A non-negative number, or null.
        custom: A number; its type reads null as -1.
        floor: A non-negative number, or null.
        thing: Any object.
    """
    return _seen("nullable", locals())


KEEPS_NONE = [
    pytest.param("page", None, id="int-or-none"),
    pytest.param("label", None, id="optional"),
    pytest.param("choice", None, id="literal-with-none"),
    pytest.param("threshold", None, id="alias-of-optional"),
    pytest.param("anything", None, id="any"),
    pytest.param("bounded", None, id="annotated-optional"),
    pytest.param("custom", -1, id="type-of-its-own"),
    pytest.param("floor", None, id="annotated-member-or-none"),
    pytest.param("thing", None, id="object"),
]


@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "json-text"])
@pytest.mark.parametrize(("parameter", "expected"), KEEPS_NONE)
def test_a_type_that_takes_none_keeps_it(parameter: str, expected: Any, as_text: bool) -> None:
    """A null for a parameter whose type takes None stays None (or what the type makes of it)."""
    arguments = {parameter: None}
    SEEN.pop("nullable", None)
    result = nullable.run_sync(json.dumps(arguments) if as_text else arguments)
    assert result.is_success, result.error
    assert SEEN["nullable"][parameter] == expected


def test_left_out_parameters_still_get_their_defaults() -> None:
    """Leaving a parameter out gives its default, whatever its type."""
    result = nullable.run_sync({})
    assert result.is_success, result.error
    assert SEEN["nullable"] == {
        "page": 1,
        "label": "x",
        "choice": "a",
        "threshold": 7,
        "anything": 5,
        "bounded": 3,
        "custom": 4,
        "floor": 2,
        "thing": "x",
    }


# --- what a null does not excuse ----------------------------------------------------------


STILL_INVALID = [
    pytest.param({"query": None}, ["query"], [], id="required-parameter"),
    pytest.param({}, ["query"], [], id="missing-required"),
    pytest.param({"query": 5, "limit": None}, ["query"], ["limit"], id="null-beside-a-bad-value"),
    pytest.param({"query": "q", "limit": "ten"}, ["limit"], [], id="wrong-value-not-null"),
    pytest.param(
        {"query": "q", "limit": None, "unknown": None}, ["unknown"], ["limit"], id="unknown-key"
    ),
    pytest.param({"query": "q", "limit": [None]}, ["limit"], [], id="null-in-a-list"),
]


@pytest.mark.parametrize("as_text", [False, True], ids=["dict", "json-text"])
@pytest.mark.parametrize(("arguments", "named", "not_named"), STILL_INVALID)
def test_a_null_does_not_excuse_other_problems(
    arguments: dict[str, Any], named: list[str], not_named: list[str], as_text: bool
) -> None:
    """Other problems stay errors, named without the parameters whose null meant the default."""
    result = search.run_sync(json.dumps(arguments) if as_text else arguments)
    assert not result.is_success
    assert result.error is not None
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    fields = [problem["field"] for problem in result.error.details["errors"]]
    for name in named:
        assert any(name in field for field in fields), fields
    for name in not_named:
        assert name not in fields


@tool(idempotent=True)
def place(order: Order, priority: int = 1) -> str:
    """Place an order.

    Args:
        order: The order.
        priority: How urgent.
    """
    return _seen("place", locals())


def test_a_null_inside_a_model_is_not_its_default() -> None:
    """A null for a defaulted field of a nested model is an error: the rule is for parameters."""
    result = place.run_sync({"order": {"sku": "A1", "express": None}, "priority": None})
    assert not result.is_success
    assert result.error is not None
    assert [problem["field"] for problem in result.error.details["errors"]] == ["order.express"]


# --- a default of None for a type without None --------------------------------------------


def _none_plain(x: int = None) -> str:  # type: ignore[assignment]  # noqa: RUF013
    """Take a number.

    Args:
        x: A number.
    """
    return "ok"


def _none_field(x: int = Field(default=None)) -> str:
    """Take a number.

    Args:
        x: A number.
    """
    return "ok"


def _none_annotated(x: Annotated[int, Field(default=None)]) -> str:
    """Take a number.

    Args:
        x: A number.
    """
    return "ok"


def _none_list(x: list[int] = None) -> str:  # type: ignore[assignment]  # noqa: RUF013
    """Take numbers.

    Args:
        x: Numbers.
    """
    return "ok"


def _none_enum(x: Color = None) -> str:  # type: ignore[assignment]
    """Take a colour.

    Args:
        x: A colour.
    """
    return "ok"


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(_none_plain, id="plain"),
        pytest.param(_none_field, id="field"),
        pytest.param(_none_annotated, id="annotated-field"),
        pytest.param(_none_list, id="list"),
        pytest.param(_none_enum, id="enum"),
    ],
)
def test_a_default_of_none_needs_a_type_with_none(fn: Callable[..., str]) -> None:
    """``x: int = None`` is still a definition error, naming the parameter and the fix."""
    with pytest.raises(ToolDefinitionError) as caught:
        tool(read_only=True)(fn)
    problems = caught.value.details["problems"]
    assert [problem["kind"] for problem in problems] == ["invalid_default"]
    assert "the default of parameter 'x' (None)" in problems[0]["problem"]
    assert "T | None" in problems[0]["hint"]


# --- mutable defaults are fresh in each call ----------------------------------------------


PLAIN_LIST: list[int] = []
PLAIN_DICT: dict[str, int] = {}
HOME = Address(street="1 Main St")


@tool(idempotent=True)
def collect(
    factory: list[int] = Field(default_factory=list),  # noqa: B008
    plain: list[int] = PLAIN_LIST,
    field: list[int] = Field(default=PLAIN_LIST),  # noqa: B008
    counts: dict[str, int] = PLAIN_DICT,
    home: Address = HOME,
) -> str:
    """Add to each default, as careless code does.

    Args:
        factory: Numbers (a default factory).
        plain: Numbers (a plain default).
        field: Numbers (a Field default).
        counts: Counts by name.
        home: An address.
    """
    factory.append(1)
    plain.append(1)
    field.append(1)
    counts["calls"] = counts.get("calls", 0) + 1
    home.city = home.city + "!"
    return _seen("collect", locals())


FRESH = [
    pytest.param("factory", [1], id="default-factory"),
    pytest.param("plain", [1], id="plain-list"),
    pytest.param("field", [1], id="field-default"),
    pytest.param("counts", {"calls": 1}, id="plain-dict"),
    pytest.param("home", Address(street="1 Main St", city="Paris!"), id="model"),
]


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(lambda name: {name: None}, id="null"),
        pytest.param(lambda name: json.dumps({name: None}), id="null-as-text"),
        pytest.param(lambda name: {}, id="left-out"),
    ],
)
@pytest.mark.parametrize(("parameter", "after_one_call"), FRESH)
def test_a_mutable_default_is_fresh_in_each_call(
    parameter: str, after_one_call: Any, arguments: Callable[[str], Any]
) -> None:
    """Changing a mutable default in a call changes neither the next call's nor the signature's."""
    for _ in range(3):
        result = collect.run_sync(arguments(parameter))
        assert result.is_success, result.error
        assert SEEN["collect"][parameter] == after_one_call
    assert PLAIN_LIST == []
    assert PLAIN_DICT == {}
    assert Address(street="1 Main St") == HOME


def test_a_parameter_named_null_keeps_its_own_default() -> None:
    """The rule that reads a ``null`` as "not given" is not mistaken for a parameter's
    default: a parameter called ``null`` still gets its own."""

    @tool
    def shifted(null: Annotated[int, "An offset."] = 1, x: Annotated[int, "A value."] = 2) -> int:
        """Add."""
        return null + x

    result = shifted.run_sync({"x": None})
    assert result.error is None
    assert result.value == 3


def test_the_variant_model_goes_with_its_tool() -> None:
    """The variant of an input model made for a null is freed with the tool (nothing keeps
    the models of tools defined on the fly alive)."""

    def defined() -> weakref.ref[type]:
        @tool
        def once(x: Annotated[int, "A value."] = 2) -> int:
            """Echo."""
            return x

        assert once.run_sync({"x": None}).value == 2
        return weakref.ref(once.spec.input_model)

    model = defined()
    gc.collect()
    assert model() is None


# --- arguments that fail when read again -------------------------------------------------


@tool(read_only=True)
def echo(text: Annotated[str, "What to say."], times: Annotated[int, "How many times."] = 1) -> str:
    """Say it again."""
    return text * times


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
