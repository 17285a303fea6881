"""The shortcuts of the failure path give what the general code gives."""

from __future__ import annotations

import enum
from typing import Annotated, Any

from tdk import tool
from tdk._failures.details import json_safe, json_safe_mapping, redact_json
from tdk._failures.redact import REDACTED
from tdk.errors import ErrorKind

TOKEN = "sk-" + "a" * 24


class _Text(str):
    """A str subclass: not an exact str, so it takes the general branches."""


class _Colour(enum.Enum):
    """An enum whose value is a container."""

    RED = ("#f00", "red")


def test_json_safe_of_scalars_and_nested_plain_containers() -> None:
    assert json_safe(5) == 5
    assert json_safe("a") == "a"
    assert json_safe([[1, "a", None], {"k": [True, 1.5]}]) == [
        [1, "a", None],
        {"k": [True, 1.5]},
    ]
    assert json_safe({1: (2, 3)}) == {"1": [2, 3]}


def test_json_safe_enum_with_a_container_value() -> None:
    assert json_safe(_Colour.RED) == ["#f00", "red"]
    assert json_safe_mapping({"c": _Colour.RED, _Text("t"): 1}) == {"c": ["#f00", "red"], "t": 1}


def test_redact_json_redacts_every_string_however_reached() -> None:
    value: Any = {
        "a": TOKEN,
        "b": [TOKEN, _Text(TOKEN), {"c": TOKEN}, 1, None],
        "d": _Text(TOKEN),
        "api_key": "plain",
    }
    assert redact_json(value, ()) == {
        "a": REDACTED,
        "b": [REDACTED, REDACTED, {"c": REDACTED}, 1, None],
        "d": REDACTED,
        "api_key": REDACTED,
    }
    assert redact_json(TOKEN, ()) == REDACTED
    assert redact_json("s3cr3t-value", ["s3cr3t-value"]) == REDACTED
    assert redact_json((TOKEN,), ()) == (TOKEN,)  # not JSON-safe data: left as it is


def test_parameter_names_are_the_advertised_arguments() -> None:
    @tool
    def nothing() -> int:
        """Nothing."""
        return 1

    @tool
    def renamed(json: Annotated[str, "Text."], limit: Annotated[int, "How many."] = 1) -> int:
        """Renamed."""
        return limit

    assert nothing.spec.parameter_names == ()
    assert renamed.spec.parameter_names == ("json", "limit")
    result = renamed.run_sync({"limit": "x"})
    assert result.kind is ErrorKind.TOOL_RUNTIME_BAD_INPUT_VALUE
    assert result.error is not None
    assert "Parameters: json, limit." in result.error.message
    assert "Parameters: none." in nothing.run_sync({"x": 1}).error.message  # type: ignore[union-attr]
