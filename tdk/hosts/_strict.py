"""Input schemas that OpenAI's strict mode accepts, or why a tool's cannot be one.

Strict mode constrains the model's output to the schema, and takes a subset of JSON Schema
for it: every object closed (``additionalProperties: false``, in ``$defs`` too) with every
property in ``required``, ``anyOf`` as the only union, no siblings beside ``$ref``, and a
short list of keywords. :func:`strict_schema` rewrites an input schema to that subset:

- every property becomes required; a parameter with a default becomes nullable (a ``null``
  from the model means "not given", and the default applies: see
  ``tdk._define.schema.null_means_default``); a defaulted field of a nested model stays
  required as it is (the model sends a value);
- ``oneOf`` becomes ``anyOf``; ``allOf`` of one schema is merged; a ``$ref`` with siblings is
  wrapped in an ``anyOf`` of one;
- keywords strict mode rejects (``default``, ``title``, ``minLength``, ``uniqueItems``, a
  ``format`` it does not know, a ``pattern`` with lookaround...) are dropped: the tool still
  checks them when it is called.

What cannot be made strict raises ``ValueError`` naming the tool and the place: a free-form
object (``dict[str, X]``), a value of any type (``Any``), a fixed-length tuple, an ``allOf``
of several schemas.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any, Final

from tdk._define.definition import ToolDefinition

__all__ = ["strict_schema"]

#: Keywords kept as they are (the structure is rewritten separately).
_KEPT: Final = frozenset(
    {
        "type",
        "enum",
        "const",
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
#: The string formats strict mode knows; any other ``format`` is dropped.
_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_LOOKAROUND: Final = ("(?=", "(?!", "(?<=", "(?<!")
#: What makes a schema say which values it takes; a schema with none of them takes any.
_SHAPING: Final = ("type", "anyOf", "oneOf", "allOf", "$ref", "enum", "const")


def strict_schema(definition: ToolDefinition) -> dict[str, Any]:
    """The tool's input schema as strict mode takes it (a new dict), or ``ValueError`` naming
    the tool and each place that cannot be strict."""
    try:
        return _strict_schema(definition)
    except (TypeError, AttributeError, KeyError, RecursionError) as unreadable:
        # A schema bent by json_schema_extra or WithJsonSchema into a shape of no JSON Schema
        raise ValueError(
            f"tool '{definition.name}' cannot be strict: its input schema is not one tdk can "
            f"read ({type(unreadable).__name__})"
        ) from None


def _strict_schema(definition: ToolDefinition) -> dict[str, Any]:
    source = definition.input_schema
    problems: list[str] = []
    optional = set(source.get("properties", {})) - set(source.get("required", ()))
    schema = _node(source, "", problems)
    schema["properties"] = {
        name: _nullable(node) if name in optional else node
        for name, node in schema.get("properties", {}).items()
    }
    if "$defs" in source:
        schema["$defs"] = {
            name: _node(node, f"$defs.{name}", problems) for name, node in source["$defs"].items()
        }
    if problems:
        raise ValueError(f"tool '{definition.name}' cannot be strict: {'; '.join(problems)}")
    return deepcopy(schema)  # nothing shared with the definition


def _node(node: Any, where: str, problems: list[str]) -> dict[str, Any]:
    """``node`` rewritten (a new dict), adding a problem for what strict mode cannot take."""
    place = _place(where)
    if type(node) is not dict:
        problems.append(f"{place} takes any value (a schema of {node!r})")
        return {}
    node = dict(node)
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    merged = node.pop("allOf", None)
    if merged is not None:
        if len(merged) != 1:
            problems.append(f"{place} combines {len(merged)} schemas with allOf")
            return {}
        node = {**merged[0], **node}
    if "prefixItems" in node:
        problems.append(f"{place} is a fixed-length tuple, which strict mode cannot express")
        return {}
    if not any(key in node for key in _SHAPING):
        problems.append(f"{place} takes any value (Any); give it a type")
        return {}
    strict = {key: value for key, value in node.items() if key in _KEPT}
    if "format" in strict and strict["format"] not in _FORMATS:
        del strict["format"]
    pattern = strict.get("pattern")
    if type(pattern) is str and any(token in pattern for token in _LOOKAROUND):
        del strict["pattern"]
    if "$ref" in node:
        reference = {"$ref": node["$ref"]}
        if not strict:
            return reference
        strict["anyOf"] = [reference]  # strict mode takes no siblings beside a $ref
    if "anyOf" in node:
        strict["anyOf"] = [_node(member, where, problems) for member in node["anyOf"]] + strict.get(
            "anyOf", []
        )
    if "items" in node:
        strict["items"] = _node(node["items"], f"{where}[]", problems)
    if node.get("type") == "object" or "properties" in node:
        _closed_object(node, strict, where, place, problems)
    return strict


def _place(where: str) -> str:
    """``where`` (``days``, ``filters.tags[]``, ``$defs.Address.zip``) as a problem names it."""
    if where.startswith("$defs."):
        model, _, inner = where.removeprefix("$defs.").partition(".")
        return f"'{inner}' of model '{model}'" if inner else f"model '{model}'"
    if not where:
        return "the parameters"
    return f"'{where}'" if any(mark in where for mark in ".[") else f"parameter '{where}'"


def _closed_object(
    node: dict[str, Any], strict: dict[str, Any], where: str, place: str, problems: list[str]
) -> None:
    """``strict`` as a closed object with every property required."""
    properties = node.get("properties")
    if properties is None and (
        node.get("additionalProperties", True) is not False or "patternProperties" in node
    ):
        problems.append(
            f"{place} is a free-form object (a dict); strict mode needs every property named"
        )
        return
    prefix = f"{where}." if where else ""
    strict["properties"] = {
        name: _node(schema, f"{prefix}{name}", problems)
        for name, schema in (properties or {}).items()
    }
    strict["required"] = list(strict["properties"])
    strict["additionalProperties"] = False


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` admitting ``null`` too (the same node when it already does)."""
    if _admits_null(node):
        return node
    node = deepcopy(node)
    description = node.pop("description", None)
    members = node["anyOf"] if set(node) == {"anyOf"} else [node]
    nullable: dict[str, Any] = {"anyOf": [*members, {"type": "null"}]}
    if description is not None:
        nullable["description"] = description
    return nullable


def _admits_null(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "null" or (type(kind) is list and "null" in kind):
        return True
    if "const" in node and node["const"] is None:
        return True
    if None in node.get("enum", ()):
        return True
    return any(_admits_null(member) for member in node.get("anyOf", ()) if type(member) is dict)
