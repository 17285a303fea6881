"""Hypothesis strategies for a tool's arguments, drawn from its input JSON Schema, hostile
values mixed in (extra ``testing``: hypothesis).

Every value the schema allows can be drawn, and beside it what a model, a host or an attacker
may send instead: huge integers (past 64 bits, past Python's 4300-digit ``str`` limit), NaN
and infinities, 64 KiB strings, lone surrogates, control and direction characters, a marker
text (:data:`~tdk.testing.canaries.ECHO_MARKER`, so that an echo of the arguments in an error
can be seen), lists nested thousands deep, values of the wrong type, required keys left out,
unknown keys, and the whole arguments as JSON text (valid or broken) or as something that is
not an object.

Strategies follow ``type`` (one or a list), ``anyOf``/``oneOf``, ``enum``/``const``,
``properties``/``required``, ``items`` and ``$ref`` into ``$defs`` (recursion is cut at a
small depth).

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from hypothesis import strategies as st

from tdk.testing.canaries import ECHO_MARKER

__all__ = ["arguments", "hostile_values", "value_of"]
#: How deep ``$ref`` and nesting are followed before the strategy draws plain JSON.
_MAX_DEPTH: Final = 4


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


#: Values that break careless code, whatever the schema says.
HOSTILE: Final[list[Any]] = [
    2**63,
    -(2**63) - 1,
    10**100,
    10**5000,  # past Python's int/str conversion limit (4300 digits)
    float("nan"),
    float("inf"),
    -float("inf"),
    "x" * 65_536,
    "\ud800",  # a lone surrogate: not encodable as UTF-8
    "a\udfffb",
    "\x00\x1b[31m\u202e",
    ECHO_MARKER,
    _nested(5_000),
    {"": {"": {"": None}}},
    [None] * 1_000,
]


def hostile_values() -> st.SearchStrategy[Any]:
    """One hostile value (:data:`HOSTILE`)."""
    return st.sampled_from(HOSTILE)


def json_values() -> st.SearchStrategy[Any]:
    """Plain JSON values, small."""
    leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=8,
    )


def _resolve(schema: object, root: Mapping[str, Any]) -> Mapping[str, Any]:
    for _ in range(16):
        if not isinstance(schema, Mapping):
            return {}
        ref = schema.get("$ref")
        if not (isinstance(ref, str) and ref.startswith("#/")):
            return schema
        target: object = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        schema = target
    return {}


def _strings(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Strings within the schema's ``pattern`` and length bounds."""
    low = schema.get("minLength", 0)
    high = schema.get("maxLength")
    high = max(low, min(high, low + 30)) if isinstance(high, int) else low + 30
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error:  # a pattern Python's re cannot read (ECMA syntax): plain text
            return st.text(min_size=low, max_size=high)
        return st.from_regex(pattern, fullmatch=True).filter(lambda t: low <= len(t) <= high)
    return st.text(min_size=low, max_size=high)


def _numbers(kind: str, schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Numbers within the schema's bounds."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if kind == "integer":
        low = low if low is not None else -(10**6)
        high = high if high is not None else 10**6
        return st.integers(min_value=int(low), max_value=int(high))
    return st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)


def _valid(schema: object, root: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
    """Values ``schema`` allows (mostly: a few keywords, such as ``format``, are not
    followed)."""
    resolved = _resolve(schema, root)
    options = resolved.get("anyOf") or resolved.get("oneOf")
    if depth > _MAX_DEPTH:
        return st.none() if _accepts_null(resolved) else json_values()
    if isinstance(options, list) and options:
        return st.one_of([_valid(option, root, depth + 1) for option in options])
    if "const" in resolved:
        return st.just(resolved["const"])
    if isinstance(resolved.get("enum"), list) and resolved["enum"]:
        return st.sampled_from(resolved["enum"])
    kinds = resolved.get("type", "any")
    return st.one_of(
        [_typed(str(kind), resolved, root, depth, valid=True) for kind in _listed(kinds)]
    )


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    options = schema.get("anyOf") or schema.get("oneOf") or []
    return "null" in _listed(schema.get("type")) or any(
        isinstance(o, Mapping) and o.get("type") == "null" for o in options
    )


def _listed(kinds: object) -> list[object]:
    return kinds if isinstance(kinds, list) else [kinds]


def _typed(
    kind: str, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int, *, valid: bool
) -> st.SearchStrategy[Any]:
    """Values of one JSON type: within the schema when ``valid``, else with hostile ones."""
    if kind == "string":
        strings = _strings(schema)
        return (
            strings if valid else strings | st.sampled_from([ECHO_MARKER, "\ud800", "x" * 65_536])
        )
    if kind in ("integer", "number"):
        numbers = _numbers(kind, schema)
        return numbers if valid else numbers | st.sampled_from(HOSTILE[:6])
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = (_valid if valid else value_of)(schema.get("items", {}), root, depth + 1)
        low = schema.get("minItems", 0)
        lists = st.lists(items, min_size=low, max_size=max(low, min(schema.get("maxItems", 4), 4)))
        return lists if valid else lists | st.just(_nested(5_000))
    if kind == "object":
        return _object(schema, root, depth, valid=valid)
    return json_values()


def value_of(schema: object, root: Mapping[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for ``schema``: valid ones first, hostile ones and plain JSON mixed in."""
    resolved = _resolve(schema, root)
    if depth > _MAX_DEPTH:
        return json_values()
    kinds = _listed(resolved.get("type", "any"))
    typed = [_typed(str(kind), resolved, root, depth, valid=False) for kind in kinds]
    return st.one_of(_valid(resolved, root, depth), *typed, hostile_values(), json_values())


def _object(
    schema: Mapping[str, Any], root: Mapping[str, Any], depth: int, *, valid: bool = False
) -> st.SearchStrategy[Any]:
    """Objects with the schema's properties; unless ``valid``, also with required ones left
    out, hostile values, and keys the schema does not know."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = set(schema.get("required") or ())
    draw = _valid if valid else value_of
    fields = {name: draw(sub, root, depth + 1) for name, sub in properties.items()}
    whole = st.fixed_dictionaries(
        {name: each for name, each in fields.items() if name in required},
        optional={name: each for name, each in fields.items() if name not in required},
    )
    if valid:
        return whole
    unknown = st.dictionaries(st.text(max_size=8), json_values(), max_size=2)  # (keys are named)
    return st.one_of(
        whole,
        st.tuples(whole, unknown).map(lambda pair: {**pair[1], **pair[0]}),
        st.fixed_dictionaries({}, optional=fields),  # required keys may be left out
    )


def _as_text(value: Any) -> str:
    try:
        return json.dumps(value)
    except (ValueError, RecursionError):
        return "{"


def arguments(input_schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """What a call of a tool with ``input_schema`` may be sent: an object (mostly), as data
    or as JSON text, or broken JSON, or a value that is not an object."""
    objects = _object(input_schema, input_schema, 0)
    return st.one_of(
        _object(input_schema, input_schema, 0, valid=True),
        objects,
        objects.map(_as_text),
        st.sampled_from(["", "{", "[1, 2]", "null", '{"a": 1', "\ud800", "x" * 65_536]),
        hostile_values(),
    )
