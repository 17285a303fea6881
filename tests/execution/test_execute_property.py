"""Property: whatever the model sends and whatever the tool raises, run() returns a valid,
JSON-serialisable ToolResult."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from enum import Enum
from typing import Annotated, Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

import tdk.testing
from tdk import Tool, Toolkit, ToolResult, tool
from tdk.errors import ErrorInfo, RetryableToolError


class Colour(Enum):
    """A colour."""

    RED = "red"
    BLUE = "blue"


class Filter(BaseModel):
    """A filter."""

    field: str
    values: list[int] = []


@tool
def scalars(
    text: Annotated[str, "Text."],
    count: Annotated[int, Field(ge=0, description="A count.")] = 1,
    ratio: Annotated[float | None, "A ratio."] = None,
    flag: Annotated[bool, "A flag."] = False,
) -> dict[str, Any]:
    """Echo scalars."""
    return {"text": text, "count": count, "ratio": ratio, "flag": flag}


@tool
async def structured(
    colour: Annotated[Colour, "A colour."],
    mode: Annotated[Literal["fast", "slow"], "A mode."],
    filters: Annotated[list[Filter], "Filters."],
    when: Annotated[dt.date | None, "A date."] = None,
) -> list[Filter]:
    """Echo filters."""
    return filters


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
arguments = (
    st.dictionaries(
        st.sampled_from(["text", "count", "ratio", "flag", "colour", "mode", "filters", "when"])
        | st.text(max_size=8),
        json_values,
        max_size=6,
    )
    | json_values
    | st.text(max_size=40)
)


def test_the_kits_fuzz_finds_no_unknown_kind_echo_or_leak() -> None:
    """``tdk.testing.fuzz`` over both tools: hostile values drawn from their schemas, every
    outcome a known kind, no argument echoed in an error, nothing leaked."""
    report = tdk.testing.fuzz(Toolkit("property", [scalars, structured]), max_examples=150)
    assert report.examples == 150
    assert report.kinds["success"] > 0


def _check(result: ToolResult) -> None:
    data = json.loads(json.dumps(result.to_dict()))
    assert ToolResult.model_validate(data).to_dict() == data
    assert result.is_success == (result.error is None)
    if result.error is not None:
        ErrorInfo.model_validate(result.error.to_dict())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=st.sampled_from([scalars, structured]), args=arguments)
def test_any_arguments_give_a_valid_result(target: Tool[..., Any], args: Any) -> None:
    """Random JSON (as objects, values or text) never escapes as an exception."""
    _check(asyncio.run(target.run(args)))


class _HostileStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def _cyclic(message: str) -> Exception:
    first, second = ValueError(message), KeyError(message)
    first.__cause__, second.__cause__ = second, first
    return first


exceptions = st.one_of(
    st.builds(ValueError, st.text()),
    st.builds(KeyError, st.text()),
    st.builds(lambda n: RuntimeError("x" * n), st.integers(0, 2_000_000)),
    st.builds(_HostileStr),
    st.builds(_cyclic, st.text()),
    st.builds(lambda m: RetryableToolError(m, additional_prompt_content=m), st.text()),
    st.builds(TimeoutError, st.text()),
    st.builds(lambda m: ExceptionGroup("g", [ValueError(m), TypeError(m)]), st.text()),
)


@settings(max_examples=100, deadline=None)
@given(exc=exceptions, is_async=st.booleans())
def test_any_exception_gives_a_valid_result(exc: Exception, is_async: bool) -> None:
    """Hostile, huge and cyclic exceptions from the body still give a valid result."""
    if is_async:

        @tool
        async def raising() -> int:
            """Raise the drawn exception."""
            raise exc

    else:

        @tool
        def raising() -> int:
            """Raise the drawn exception."""
            raise exc

    result = asyncio.run(raising.run({}))
    assert result.error is not None
    _check(result)


marked_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.integers(0, 10**9).map(lambda n: f"Zq{n}qZ"),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["field", "values", "other"]), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    target=st.sampled_from([scalars, structured]),
    args=st.dictionaries(
        st.sampled_from(["text", "count", "ratio", "flag", "colour", "mode", "filters", "when"]),
        marked_values,
        max_size=6,
    ),
    as_json=st.booleans(),
)
def test_bad_arguments_never_echo_a_value(
    target: Tool[..., Any], args: dict[str, Any], as_json: bool
) -> None:
    """Whatever values the model sends (as data or as JSON text), none comes back in the
    error: every string value is a marker, and no marker appears in any field of it."""
    result = asyncio.run(target.run(json.dumps(args) if as_json else args))
    _check(result)
    if result.error is not None:
        assert re.search(r"Zq\d+qZ", json.dumps(result.error.to_dict())) is None
