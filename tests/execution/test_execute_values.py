"""Running tools, arguments and return values: what succeeds, and bad input and output (values
JSON cannot carry, arguments that cannot be read, floods of unknown keys), and the options of
``run()`` itself."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Union

import pytest
from _bounded import run_bounded
from _execute_support import (
    add,
    echo_number,
    find,
    items,
    liar,
    maybe,
    nothing,
    page,
    point,
    run,
    search,
    when,
)
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainSerializer,
    WithJsonSchema,
    WrapSerializer,
    computed_field,
    model_serializer,
)
from pydantic.json_schema import SkipJsonSchema
from pydantic_core import PydanticCustomError, core_schema
from typing_extensions import TypedDict

from tdk import Tool, ToolContext, Toolkit, ToolRunner, tool
from tdk.errors import (
    ErrorCategory,
    ErrorKind,
)


@pytest.mark.parametrize(
    ("t", "arguments", "value"),
    [
        pytest.param(search, {"query": "py", "limit": 2}, ["py-0", "py-1"], id="async-mapping"),
        pytest.param(search, '{"query": "py", "limit": 1}', ["py-0"], id="json-string"),
        pytest.param(search, b'{"query": "py", "limit": 1}', ["py-0"], id="json-bytes"),
        pytest.param(add, {"a": 2, "b": 3}, 5, id="sync"),
        pytest.param(add, {"a": "2", "b": 3}, 5, id="lax-coercion"),
        pytest.param(find, {"query": "x"}, "X", id="renamed-parameter"),
        pytest.param(when, None, "2026-11-29T12:00:00Z", id="json-mode-datetime"),
        pytest.param(when, "", "2026-11-29T12:00:00Z", id="blank-string-is-empty-object"),
        pytest.param(nothing, {}, None, id="returns-none"),
        pytest.param(maybe, {"present": False}, None, id="optional-none"),
        pytest.param(maybe, {"present": True}, 1, id="optional-value"),
        pytest.param(page, {"with_cursor": False}, {"items": ["a"]}, id="typeddict-notrequired"),
        pytest.param(
            page, {"with_cursor": True}, {"items": ["a"], "cursor": "c2"}, id="typeddict-full"
        ),
        pytest.param(
            items, {"count": 2}, [{"id": 0, "name": "n0"}, {"id": 1, "name": "n1"}], id="models"
        ),
        pytest.param(point, {"item": {"id": 3, "name": "p"}}, {"x": 3.0, "y": 0.5}, id="dataclass"),
    ],
)
def test_success(t: Tool[..., Any], arguments: Any, value: Any) -> None:
    """A good call returns the JSON-mode value, one attempt, and no error."""
    result = run(t, arguments, call_id="c-1")
    assert result.error is None, result.error
    assert result.is_success
    assert result.value == value
    assert result.tool == t.name
    assert result.call_id == "c-1"
    assert result.attempts == 1
    assert result.duration_ms >= 0
    assert (result.kind, result.category, result.retryable, result.retry_after_ms) == (
        None,
        None,
        False,
        None,
    )
    assert json.loads(json.dumps(result.to_dict())) == result.to_dict()


@pytest.mark.parametrize(
    ("t", "arguments", "fragments"),
    [
        pytest.param(search, '{"query": ', ["not valid JSON"], id="malformed-json"),
        pytest.param(search, "[1, 2]", ["must be a JSON object"], id="json-array"),
        pytest.param(search, [1, 2], ["must be a JSON object"], id="list-object"),
        pytest.param(search, {}, ["'query' is required"], id="missing"),
        pytest.param(
            search,
            {"query": "x", "colour": "red"},
            ["'colour' is not a parameter", "Parameters: query, limit"],
            id="unknown",
        ),
        pytest.param(
            search,
            {"query": "x", "limit": "many"},
            ["'limit' should be a valid integer"],
            id="wrong-type",
        ),
        pytest.param(
            search,
            {"query": "x", "limit": 500},
            ["'limit' should be less than or equal to 50"],
            id="constraint",
        ),
        pytest.param(
            add,
            {"b": [1], "c": 1},
            ["'a' is required", "'b' should be a valid integer", "'c' is not a parameter"],
            id="every-field-at-once",
        ),
        pytest.param(find, {"term": "x"}, ["'query' is required", "'term' is not"], id="old-name"),
        pytest.param(
            point,
            {"item": {"id": "x"}},
            ["'item.id' should", "'item.name' is required"],
            id="nested",
        ),
    ],
)
def test_bad_input(t: Tool[..., Any], arguments: Any, fragments: list[str]) -> None:
    """Bad arguments -> TOOL_RUNTIME_BAD_INPUT_VALUE listing every field, body never run."""
    result = run(t, arguments)
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.category is ErrorCategory.VALIDATION
    assert result.retryable is False
    assert result.attempts == 0
    assert result.error is not None
    for fragment in fragments:
        assert fragment in result.error.message
    assert result.error.details["errors"]


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"query": "x", "limit": "SECRET-VALUE-123"}, id="wrong-type"),
        pytest.param({"query": "x", "SECRET-VALUE-123x": 1, "limit": 1}, id="unknown-value"),
        pytest.param('{"query": "SECRET-VALUE-123", "limit": 999}', id="constraint-json"),
        pytest.param('{"query": "SECRET-VALUE-123", ', id="malformed-json"),
    ],
)
def test_bad_input_never_echoes_values(arguments: Any) -> None:
    """Submitted values appear in no message, developer message or details."""
    result = run(search, arguments)
    assert result.error is not None
    error = result.error.to_dict()
    for key in ("message", "developer_message", "details"):
        assert "SECRET-VALUE-123" not in json.dumps(error[key]).replace("SECRET-VALUE-123x", "")


@tool
def tag(labels: Annotated[dict[str, int], "Label -> weight."]) -> int:
    """Sum label weights."""
    return sum(labels.values())


CONTEXT_SECRET = "ctx-secret-4411"


TOKEN = "sk-ant-REALLOOKINGTOKEN0123456789"


@pytest.mark.parametrize(
    ("target", "arguments"),
    [
        pytest.param(search, {"query": "x", CONTEXT_SECRET: 1}, id="unknown-key-is-a-secret"),
        pytest.param(search, {"query": "x", TOKEN: 1}, id="unknown-key-is-a-token"),
        pytest.param(
            search, {"query": "x", f"api_key={CONTEXT_SECRET}": 1}, id="unknown-key-assigns"
        ),
        pytest.param(tag, {"labels": {CONTEXT_SECRET: "heavy"}}, id="mapping-key-is-a-secret"),
        pytest.param(tag, {"labels": {TOKEN: "heavy"}}, id="mapping-key-is-a-token"),
    ],
)
def test_bad_input_redacts_keys_the_model_sent(target: Tool[..., Any], arguments: Any) -> None:
    """A field path is echoed so that the model can fix it, but a path made of what the model
    sent (an unknown key, a mapping key) is redacted first: context secrets and token shapes
    never come back, while the tool's own parameter names do."""
    result = run(target, arguments, context=ToolContext(secrets={"api": CONTEXT_SECRET}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    dumped = json.dumps(result.to_dict())
    assert CONTEXT_SECRET not in dumped
    assert TOKEN not in dumped
    assert "[REDACTED]" in dumped
    assert "Parameters: " in result.error.message  # type: ignore[union-attr]


def _account_id(value: str) -> str:
    if not value.startswith("acct_"):
        # A custom error under the name of a templated pydantic type, quoting the value.
        raise PydanticCustomError(
            "string_pattern_mismatch", "'{v}' is not an account", {"v": value}
        )
    return value


@tool
def lookup(
    account: Annotated[str, AfterValidator(_account_id), "The account id."],
    items: Annotated[list[int] | None, "Item ids."] = None,
) -> str:
    """Look up an account."""
    return account


def _failing_items() -> Any:
    yield 1
    raise RuntimeError(f"failed reading api_key=zzz-{CONTEXT_SECRET}")


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(lambda: {"account": f"{CONTEXT_SECRET} {TOKEN}"}, id="custom-error-quotes"),
        pytest.param(lambda: {"account": "zzz horse battery"}, id="custom-error-plain-value"),
        pytest.param(lambda: {"account": "acct_1", "items": _failing_items()}, id="iteration"),
    ],
)
def test_bad_input_problems_are_redacted_too(arguments: Any) -> None:
    """A problem text that is not pydantic's own (a custom error borrowing a templated type's
    name, an iterator that fails with its own message) brings back no value at all: neither a
    context secret, a token, nor plain text the model sent."""
    result = run(lookup, arguments(), context=ToolContext(secrets={"api": CONTEXT_SECRET}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    dumped = json.dumps(result.to_dict())
    assert CONTEXT_SECRET not in dumped
    assert TOKEN not in dumped
    assert "zzz" not in dumped
    assert "is not valid (" in dumped


def test_bad_output_is_a_tool_bug() -> None:
    """A return value that does not match the annotation -> BAD_OUTPUT_VALUE, not retryable."""
    result = run(liar)
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE
    assert result.retryable is False
    assert result.attempts == 1
    assert result.error is not None
    assert "does not match its declared type" in result.error.message
    assert "not a number" not in result.error.message
    assert "valid integer" in (result.error.developer_message or "")


def test_custom_validator_messages_are_not_forwarded() -> None:
    """A custom validator's message may quote the value: the model is told only the field."""

    def no_spaces(value: str) -> str:
        if " " in value:
            raise ValueError(f"{value!r} contains spaces")
        return value

    @tool
    def slug(text: Annotated[str, AfterValidator(no_spaces), "A slug."]) -> str:
        """Echo a slug."""
        return text

    result = run(slug, {"text": "SECRET VALUE"})
    assert result.error is not None
    assert "'text' is not valid (value_error)" in result.error.message
    assert "SECRET" not in json.dumps(result.error.to_dict())


# -- values JSON cannot carry ---------------------------------------------------------------


class Reading(BaseModel):
    """A reading."""

    value: float


class Row(TypedDict):
    """A row."""

    id: int


@dataclasses.dataclass
class Spot:
    """A dataclass."""

    x: int


class Open(BaseModel):
    """A model that keeps keys it does not declare, on purpose."""

    model_config = ConfigDict(extra="allow")

    a: int


class Table(TypedDict):
    """A table."""

    rows: list[Row]


def _cycle() -> list[Any]:
    items: list[Any] = []
    items.append(items)
    return items


def _deep() -> list[Any]:
    items: list[Any] = []
    for _ in range(100_000):
        items = [items]
    return items


BAD_OUTPUTS = [
    pytest.param(int, lambda: 10**5000, id="int-beyond-the-str-limit"),
    pytest.param(float, lambda: math.nan, id="nan"),
    pytest.param(list[float], lambda: [1.0, math.inf], id="infinity-in-a-list"),
    pytest.param(Reading, lambda: Reading(value=math.nan), id="nan-in-a-model"),
    pytest.param(dict[str, Any], lambda: {"x": -math.inf}, id="infinity-under-any"),
    pytest.param(list[Any], lambda: [10**5000], id="huge-int-under-any"),
    pytest.param(list[Any], _cycle, id="cycle"),
    pytest.param(list[Any], _deep, id="too-deep"),
    pytest.param(bytes, lambda: b"\xff\xfe", id="bytes-not-utf8"),
    pytest.param(Row, lambda: {"id": 1, "extra": "dropped?"}, id="typeddict-extra-key"),
    pytest.param(Table, lambda: {"rows": [{"id": 1, "x": 2}]}, id="nested-typeddict-extra-key"),
    pytest.param(Reading, lambda: {"value": 1.0, "unit": "C"}, id="model-from-a-dict-extra-key"),
    pytest.param(list[Spot], lambda: [{"x": 1, "y": 2}], id="dataclass-from-a-dict-extra-key"),
]


@pytest.mark.parametrize(("annotation", "make"), BAD_OUTPUTS)
def test_values_json_cannot_carry_are_bad_output(annotation: Any, make: Callable[[], Any]) -> None:
    """A value that is not JSON (or loses keys on the way) is TOOL_RUNTIME_BAD_OUTPUT_VALUE,
    and the result prints and serialises."""

    def body() -> Any:
        """Return something JSON cannot carry."""
        return make()

    body.__annotations__["return"] = annotation
    result = run_bounded(tool(name="bad_output")(body).run({}))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE, result
    assert result.value is None
    json.dumps(result.to_dict(), allow_nan=False)
    repr(result)
    str(result)


GOOD_OUTPUTS = [
    pytest.param(str, "NaN Infinity -Infinity", id="words-that-look-like-numbers"),
    pytest.param(str, "7" * 5000, id="long-digit-string"),
    pytest.param(float, 1e308, id="largest-floats"),
    pytest.param(int, 10**4000, id="long-int-within-the-limit"),
    pytest.param(dict[str, Any], {"NaN": [1, 2.5, "Infinity"]}, id="numbers-and-words"),
    pytest.param(Open, {"a": 1, "b": 2}, id="model-that-allows-extra-keys"),
]


@pytest.mark.parametrize(("annotation", "value"), GOOD_OUTPUTS)
def test_values_near_the_line_are_kept(annotation: Any, value: Any) -> None:
    """Text that merely looks like NaN or a long number, and big finite numbers, succeed."""

    def body() -> Any:
        """Return a value near the line."""
        return value

    body.__annotations__["return"] = annotation
    result = run_bounded(tool(name="good_output")(body).run({}))
    assert result.is_success, result.error
    assert result.value == value


_ONE_STR_SCHEMA: Final = core_schema.str_schema()


class _Code(str):
    """A string type whose schema is one object, shared wherever the type appears."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        return _ONE_STR_SCHEMA


def test_a_type_sharing_one_schema_between_its_parts_runs() -> None:
    """An output type whose parts share one core schema object is defined and runs."""

    @tool
    def pair() -> tuple[_Code, _Code]:
        """Return two codes."""
        return (_Code("a"), _Code("b"))

    assert pair.run_sync({}).value == ["a", "b"]


def _claims_str(value: object) -> Any:
    return Annotated[str, PlainSerializer(lambda _: value, return_type=str)]


class _Reading(BaseModel):
    label: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ratio(self) -> str:  # it says str; it is not (a model's own config writes NaN as null)
        return 10**5000  # type: ignore[return-value]


class _Wrapped(BaseModel):
    label: str

    @model_serializer
    def dump(self) -> dict[str, str]:
        return {"label": 10**5000}  # type: ignore[dict-item]


class _Labelled(BaseModel):
    label: _claims_str(10**5000)  # type: ignore[valid-type]
    note: str


_MODEL_ARGS: Final = {"label": "a", "note": "b"}


@pytest.mark.parametrize(
    ("returns", "value"),
    [
        pytest.param(_claims_str(math.inf), "a", id="plain-serializer-infinity"),
        pytest.param(_claims_str(10**5000), "a", id="plain-serializer-huge-int"),
        pytest.param(
            Annotated[str, WrapSerializer(lambda v, h: math.nan, return_type=str)],
            "a",
            id="wrap-serializer-nan",
        ),
        pytest.param(_Reading, _MODEL_ARGS, id="computed-field"),
        pytest.param(_Wrapped, _MODEL_ARGS, id="model-serializer"),
        pytest.param(_Labelled, _MODEL_ARGS, id="nested-in-a-model"),
        pytest.param(
            Annotated[str, AfterValidator(lambda _: math.inf)], "a", id="validator-returns-a-float"
        ),
        pytest.param(
            Annotated[Any, WithJsonSchema({"type": "string"})],
            math.nan,
            id="json-schema-says-string",
        ),
        pytest.param(Union[str, SkipJsonSchema[Any]], [math.nan], id="left-out-of-json-schema"),  # noqa: UP007
        pytest.param(
            Annotated[int, WithJsonSchema({"type": "string"})], 10**5000, id="int-said-string"
        ),
    ],
)
def test_what_json_cannot_carry_is_bad_output_whatever_the_schema_says(
    returns: Any, value: Any
) -> None:
    """A value JSON cannot carry, where the output's JSON Schema has no number: code of the
    type's own returned it (a serializer, a validator, a computed field, where the type says
    string), or the JSON Schema says other than the type. A bad output, never a result that
    breaks ``json.dumps`` or ``repr``."""

    def body() -> Any:
        """Return a value."""
        return value

    body.__annotations__["return"] = returns
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic says the serializer returned a float
        result = tool(body).run_sync({})
    assert result.error.kind is ErrorKind.TOOL_RUNTIME_BAD_OUTPUT_VALUE
    json.dumps(result.to_dict(), allow_nan=False)


# -- arguments too many, too long, or that cannot be read -----------------------------------


def test_a_64kb_key_is_cut_in_the_message() -> None:
    """An unknown 64 KB key is named, cut to a hundred characters: the model is told which
    key without its context being flooded."""
    result = run_bounded(echo_number.run('{"n": 1, "' + "k" * 65_536 + '": 1}'))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.error is not None
    assert len(result.error.message) < 400
    assert "'" + "k" * 100 + "... [65436 more characters]' is not a parameter" in (
        result.error.message
    )


def test_thousands_of_unknown_keys_list_twenty() -> None:
    """Twenty problems are described, and the message says how many more there were."""
    arguments = {"n": 1, **{f"k{i}": i for i in range(5_000)}}
    result = run_bounded(echo_number.run(arguments))
    assert result.error is not None
    assert len(result.error.details["errors"]) == 20
    assert "and 4980 more problems" in result.error.message
    assert len(result.error.message) < 2_000


class _Unreadable(dict[str, Any]):
    """Arguments whose items cannot be read."""

    def items(self) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")

    def __iter__(self) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")

    def keys(self) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")


def test_arguments_that_cannot_be_read_are_bad_input() -> None:
    """Arguments whose reading raises are the caller's bad input, not the tool's failure; the
    exception's text is not repeated."""
    result = run_bounded(echo_number.run(_Unreadable(n=1)))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.attempts == 0
    assert "sk-live" not in json.dumps(result.to_dict())


class _ArgumentsMapping(Mapping[str, Any]):
    """A mapping (not a dict) whose items cannot be read."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")

    def __iter__(self) -> Any:
        raise RuntimeError("sk-live-0123456789abcdefghij")

    def __len__(self) -> int:
        return 1


def test_a_mapping_that_cannot_be_read_is_bad_input() -> None:
    """The same for a ``Mapping`` that is not a dict."""
    result = run_bounded(echo_number.run(_ArgumentsMapping()))
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.error is not None
    assert result.error.message.startswith(
        "Invalid arguments: The arguments could not be read (RuntimeError)"
    )
    assert "sk-live" not in json.dumps(result.to_dict())


# -- the options of run() -------------------------------------------------------------------


def test_a_whole_number_of_seconds_is_a_timeout() -> None:
    """``timeout=5`` (an int) is as good as ``5.0``."""
    assert run_bounded(echo_number.run({"n": 2}, timeout=5)).value == 2


WRONG_CALL_IDS = [
    pytest.param({"call_id": 7}, TypeError, id="call-id-int"),
    pytest.param({"call_id": b"id"}, TypeError, id="call-id-bytes"),
]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        *WRONG_CALL_IDS,
        pytest.param({"timeout": "5"}, TypeError, id="timeout-text"),
        pytest.param({"timeout": True}, TypeError, id="timeout-bool"),
        pytest.param({"timeout": 0}, ValueError, id="timeout-zero"),
        pytest.param({"timeout": -1.0}, ValueError, id="timeout-negative"),
        pytest.param({"timeout": math.nan}, ValueError, id="timeout-nan"),
        pytest.param({"timeout": math.inf}, ValueError, id="timeout-infinite"),
        pytest.param({"timeout": 10**400}, ValueError, id="timeout-beyond-any-float"),
        pytest.param({"timeout": 10**5000}, ValueError, id="timeout-beyond-repr"),
    ],
)
@pytest.mark.parametrize("entry", ["tool.run", "toolkit.run"])
def test_wrong_run_options_raise_before_the_body_runs(
    options: dict[str, Any], error: type[Exception], entry: str
) -> None:
    """A call_id or timeout of the wrong kind is the caller's bug: raised up front."""
    ran: list[bool] = []

    @tool
    async def counted() -> int:
        """Count calls."""
        ran.append(True)
        return 1

    toolkit = Toolkit("options", [counted])
    if entry == "tool.run":
        call = counted.run({}, **options)
    else:
        call = toolkit.run("counted", {}, **options)
    with pytest.raises(error):
        run_bounded(call)
    assert ran == []


@pytest.mark.parametrize(("options", "error"), WRONG_CALL_IDS)
@pytest.mark.parametrize("name", ["counted", "unknown"])
def test_the_runner_checks_the_call_id_up_front(
    options: dict[str, Any], error: type[Exception], name: str
) -> None:
    """The runner raises for a wrong call_id before its policies or the body see the call."""
    ran: list[bool] = []

    @tool
    async def counted() -> int:
        """Count calls."""
        ran.append(True)
        return 1

    runner = ToolRunner(Toolkit("options", [counted]))
    with pytest.raises(error):
        run_bounded(runner.run(name, {}, **options))
    assert ran == []
    assert runner.stats().calls == 0


class _NoRepr:
    """A value whose repr fails."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_timeout_whose_repr_fails_is_named_by_its_type() -> None:
    """The TypeError for a wrong timeout names the value by its type when its repr fails."""
    with pytest.raises(TypeError, match="not a _NoRepr"):
        run_bounded(echo_number.run({"n": 1}, timeout=_NoRepr()))  # type: ignore[arg-type]
