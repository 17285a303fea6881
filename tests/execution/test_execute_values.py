"""Running tools, arguments and return values: what succeeds, and bad input and output."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from _execute_support import (
    add,
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
from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from tdk import Tool, ToolContext, tool
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
