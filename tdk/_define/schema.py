"""The pydantic input model, the output ``TypeAdapter``, and their JSON Schemas as advertised.

Input models forbid unknown arguments and keep submitted values out of error texts. Schemas
are rendered without pydantic's ``title`` keys, the input schema in one fixed shape (``type``,
``properties``, ``required``, ``additionalProperties: false``, ``$defs``). Output adapters are
shared between tools that return the same type; their schemas never are.
"""

from __future__ import annotations

import functools
import json
import types
import warnings
from collections.abc import Mapping
from copy import deepcopy
from typing import Annotated, Any, Final, Literal, Union, cast, get_args, get_origin

from pydantic import BaseModel, ConfigDict, PydanticUserError, TypeAdapter, create_model
from pydantic.json_schema import (
    GenerateJsonSchema,
    JsonSchemaMode,
    JsonSchemaValue,
    PydanticJsonSchemaWarning,
)
from pydantic_core import CoreSchema
from typing_extensions import is_typeddict

#: Configuration of every input model: unknown arguments are rejected, submitted values never
#: appear in validation error text, and any parameter name is allowed.
INPUT_MODEL_CONFIG: Final = ConfigDict(
    extra="forbid", hide_input_in_errors=True, protected_namespaces=()
)


def model_field_name(name: str, names: set[str]) -> str:
    """``name`` if pydantic accepts it as a field name, else a free variant of it."""
    if not name.startswith("_") and not hasattr(BaseModel, name):
        return name
    candidate = name.lstrip("_") or "field"
    while candidate in names or hasattr(BaseModel, candidate):
        candidate += "_"
    names.add(candidate)
    return candidate


def create_input_model(name: str, fields: Mapping[str, Any]) -> type[BaseModel]:
    """An input model named ``name`` with ``fields`` (field name -> annotation)."""
    return create_model(name, __config__=INPUT_MODEL_CONFIG, **fields)


def accepts_none(hint: Any) -> bool:
    """Whether the type ``hint`` plainly admits None (``T | None``, ``Any``, ``object``,
    ``Literal[None, ...]``), through ``Annotated`` and type aliases."""
    if hint is None or hint is type(None) or hint is Any or hint is object:
        return True
    if type(hint).__name__ == "TypeAliasType":  # ``type X = ...`` (typing or typing_extensions)
        return accepts_none(hint.__value__)
    origin = get_origin(hint)
    if origin is Annotated:
        return accepts_none(hint.__origin__)
    if origin is Union or origin is types.UnionType:
        return any(accepts_none(member) for member in get_args(hint))
    return origin is Literal and None in get_args(hint)


def render_input_schema(model: type[BaseModel], descriptions: Mapping[str, str]) -> dict[str, Any]:
    """The model's JSON Schema in the shape tools advertise (fixed key order, ``required``
    always present, no titles, every property described)."""
    with warnings.catch_warnings():
        # A default that cannot be rendered in JSON is left out of the schema; say nothing.
        warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
        raw = model.model_json_schema(schema_generator=_SchemaGenerator)
    properties = raw.get("properties", {})
    for name, description in descriptions.items():
        # pydantic leaves a description out when it equals the referenced type's docstring.
        properties[name].setdefault("description", description)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": raw.get("required", []),
        "additionalProperties": False,
    }
    if "$defs" in raw:
        schema["$defs"] = raw["$defs"]
    return writable(schema)


def writable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` less the data values JSON cannot carry (a default of NaN, or of an integer
    too long to write out), as pydantic leaves out a default it cannot render: a host writes
    the schema with ``json.dumps``."""
    try:
        json.dumps(schema, allow_nan=False)
    except ValueError:
        return cast(dict[str, Any], _without_unwritable(schema))
    return schema


def _without_unwritable(node: Any) -> Any:
    if isinstance(node, list):
        return [_without_unwritable(item) for item in node]
    if not isinstance(node, dict):
        return node
    kept: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DATA_KEYWORDS:
            try:
                json.dumps(value, allow_nan=False)
            except ValueError:
                continue
            kept[key] = value
        else:
            kept[key] = _without_unwritable(value)
    return kept


#: Configuration of output adapters: nothing a tool returns is silently dropped (a TypedDict
#: with keys it does not declare is a mismatch) and floats must be finite (JSON has no NaN).
OUTPUT_CONFIG: Final = ConfigDict(extra="forbid", allow_inf_nan=False, ser_json_inf_nan="constants")


def _build_output_adapter(annotation: Any) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    adapter: TypeAdapter[Any]
    try:
        adapter = TypeAdapter(annotation, config=OUTPUT_CONFIG)
    except PydanticUserError:  # a model, dataclass or TypedDict: its own configuration rules
        adapter = TypeAdapter(_closed(annotation))
    schema = adapter.json_schema(mode="serialization", schema_generator=_SchemaGenerator)
    return adapter, writable(schema)


def _closed(annotation: Any) -> Any:
    """A TypedDict without a pydantic configuration of its own, as a subclass that forbids
    undeclared keys (nested TypedDicts inherit that); any other type as it is. The user's
    class is never changed."""
    if not is_typeddict(annotation) or "__pydantic_config__" in vars(annotation):
        return annotation
    namespace = {"__module__": annotation.__module__, "__pydantic_config__": OUTPUT_CONFIG}
    return type(annotation)(annotation.__name__, (annotation,), namespace)


def output_extra(schema: Any) -> Literal["forbid"] | None:
    """``"forbid"`` when validating a return value of this JSON Schema should refuse keys its
    models and dataclasses do not declare (pydantic ignores them by default, and a dict
    returned for a model would lose them silently); None when a model of it keeps extra keys
    on purpose (``extra="allow"``: its schema allows additional properties), or when this
    pydantic cannot be asked (``extra=`` of ``validate_python`` is recent)."""
    if not _has_models(schema) or _allows_extra(schema) or not _validator_takes_extra():
        return None  # (nothing to forbid: the plain call, without the option, is cheaper)
    return "forbid"


@functools.cache
def _validator_takes_extra() -> bool:
    try:
        TypeAdapter(int).validator.validate_python(1, extra="forbid")
    except TypeError:  # pragma: no cover (pydantic before the validators took extra=)
        return False
    return True


def _has_models(schema: Any) -> bool:
    """Whether the schema has an object with declared properties (a model, a dataclass, a
    TypedDict)."""
    if isinstance(schema, list):
        return any(_has_models(item) for item in schema)
    if not isinstance(schema, dict):
        return False
    if "properties" in schema:
        return True
    return any(_has_models(value) for key, value in schema.items() if key not in _DATA_KEYWORDS)


def _allows_extra(schema: Any) -> bool:
    """Whether an object schema with declared properties (a model) allows other keys."""
    if isinstance(schema, list):
        return any(_allows_extra(item) for item in schema)
    if not isinstance(schema, dict):
        return False
    if "properties" in schema and schema.get("additionalProperties") is True:
        return True
    return any(_allows_extra(value) for key, value in schema.items() if key not in _DATA_KEYWORDS)


def may_hold_numbers(schema: Any) -> bool:
    """Whether a value of this JSON Schema may hold a number: a ``number`` or ``integer``
    anywhere, or a part that says nothing of its type (``Any``)."""
    if schema is True:  # the schema of anything (``additionalProperties: true``)
        return True
    if isinstance(schema, list):
        return any(may_hold_numbers(item) for item in schema)
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind in ("number", "integer") or (isinstance(kind, list) and _NUMERIC & set(kind)):
        return True
    if kind is None and not _TYPE_GIVERS & schema.keys():
        return True  # untyped: anything goes
    return any(
        may_hold_numbers(value) for key, value in schema.items() if key not in _DATA_KEYWORDS
    )


def core_may_hold_numbers(core_schema: Any) -> bool:
    """Whether a value of this pydantic core schema may serialize to a number, whatever its
    JSON Schema says (``WithJsonSchema`` and ``SkipJsonSchema`` change only that): a number
    type, ``Any``, an instance of an arbitrary class, a literal or enum with a value that is
    not text, or code of the type's own (a validator or serializer function, a computed
    field), which may return what its declared type does not allow."""
    stack = [core_schema]
    seen = {id(core_schema)}  # (a type may share one schema between its parts)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if _holds_numbers(item):
                return True
            children: Any = item.values()
        else:  # a list or a tuple: nothing else is stacked
            children = item
        for child in children:
            if isinstance(child, dict | list | tuple) and id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    return False


def _holds_numbers(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if not isinstance(kind, str):
        return False
    if kind in _CORE_NUMBERS or kind.startswith("function-") or node.get("computed_fields"):
        return True
    serialization = node.get("serialization")
    if isinstance(serialization, dict) and str(serialization.get("type")).startswith("function-"):
        return True
    if kind == "literal":
        return any(not isinstance(value, str | bool | None) for value in node.get("expected", ()))
    if kind == "enum":
        return any(not isinstance(member.value, str) for member in node.get("members", ()))
    return False


#: Core schema types whose values may serialize to a number (or to anything at all).
_CORE_NUMBERS: Final = frozenset(
    {"int", "float", "decimal", "complex", "any", "json", "is-instance", "is-subclass",
     "callable", "generator", "invalid"}
)  # fmt: skip
_NUMERIC: Final = frozenset({"number", "integer"})
#: Keywords that give a schema its type when ``type`` is absent.
_TYPE_GIVERS: Final = frozenset({"$ref", "anyOf", "oneOf", "allOf", "enum", "const"})


_cached_output_adapter = functools.lru_cache(maxsize=512)(_build_output_adapter)


def output_adapter(annotation: Any) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    """The adapter and JSON Schema of a return type, shared between tools returning the same
    (hashable) type; the schema is copied so that definitions never share a dict."""
    try:
        hash(annotation)
    except TypeError:  # e.g. Annotated[int, {"unit": "ms"}]
        adapter, schema = _build_output_adapter(annotation)
    else:
        adapter, schema = _cached_output_adapter(annotation)
    return adapter, deepcopy(schema)


# Keywords whose values are data, not schemas: never strip 'title' inside them.
_DATA_KEYWORDS: Final = frozenset({"default", "enum", "const", "examples", "required"})
# Keywords whose values map names to schemas.
_SCHEMA_MAPS: Final = frozenset(
    {"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"}
)


class _SchemaGenerator(GenerateJsonSchema):
    """pydantic's generator without ``title`` keys (pydantic sets one on every model, field
    and enum; for a model reading the schema they are noise)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        return cast(JsonSchemaValue, _without_titles(super().generate(schema, mode)))


def _without_titles(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _DATA_KEYWORDS:
            result[key] = value
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {name: _without_titles(item) for name, item in value.items()}
        else:
            result[key] = _without_titles(value)
    return result
