"""A toolkit's contract with the models and hosts that call it: the snapshot document, and
what each format says about each tool.

The snapshot document is stable, sorted JSON (keys sorted, two-space indent, a final
newline), so that it diffs well in review::

    {
      "formats": {"json": {"<tool>": <definition>, ...}, "mcp": {...}},
      "tdk_snapshot": 1,
      "toolkit": "<name>"
    }

Each format's entry of a tool is what ``tdk schema --format <format>`` prints for it. For the
comparison, each entry is read as a :class:`Contract`: the description, the input schema, the
output schema (the formats that have one: ``json``, ``mcp``) and the marks a host acts on
(side effects, required secrets, deprecation, strict mode).

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tdk._define.toolkit import Toolkit
from tdk.hosts._formats import SCHEMA_FORMATS, host_shapes

__all__ = ["FORMAT_VERSION", "Contract", "contract_of", "snapshot_document", "snapshot_text"]

#: The version of the snapshot file format.
FORMAT_VERSION: Final = 1

#: MCP's annotation names -> tdk's mark names.
_MCP_MARKS: Final = {
    "readOnlyHint": "read_only",
    "idempotentHint": "idempotent",
    "destructiveHint": "destructive",
    "openWorldHint": "open_world",
}


@dataclass(frozen=True, slots=True)
class Contract:
    """What one format says about one tool."""

    description: str
    input: Mapping[str, Any]
    output: Mapping[str, Any] | None
    marks: Mapping[str, Any] = field(default_factory=dict)
    nullable_is_optional: bool = False
    """Strict mode: every parameter is listed as required, and an optional one accepts
    null (which means "not given")."""


def snapshot_document(toolkit: Toolkit, formats: Iterable[str]) -> dict[str, Any]:
    """The snapshot of ``toolkit`` in ``formats`` (raises ``ValueError`` for an unknown
    format, or a tool that cannot be strict)."""
    chosen = sorted(set(formats))
    if not chosen:
        raise ValueError("a snapshot needs at least one format")
    unknown = [form for form in chosen if form not in SCHEMA_FORMATS]
    if unknown:
        raise ValueError(f"unknown format(s) {unknown}: each one of {', '.join(SCHEMA_FORMATS)}")
    return {
        "formats": {
            form: {_name_of(shape): shape for shape in host_shapes(toolkit, form)}
            for form in chosen
        },
        "tdk_snapshot": FORMAT_VERSION,
        "toolkit": toolkit.name,
    }


def snapshot_text(document: Mapping[str, Any]) -> str:
    """The document as the snapshot file holds it: sorted keys, two-space indent, a final
    newline, non-ASCII text as it is."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _name_of(shape: Mapping[str, Any]) -> str:
    function = shape.get("function")
    return str((function if isinstance(function, Mapping) else shape)["name"])


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def contract_of(form: str, shape: Mapping[str, Any]) -> Contract:
    """What the entry ``shape`` of format ``form`` says about its tool."""
    if form in ("openai", "openai-strict", "responses"):
        inner = _mapping(shape.get("function")) if "function" in shape else shape
        strict = bool(inner.get("strict"))
        return Contract(
            str(inner.get("description", "")),
            _mapping(inner.get("parameters")),
            None,
            {"strict": strict},
            nullable_is_optional=strict,
        )
    if form == "anthropic":
        return Contract(
            str(shape.get("description", "")), _mapping(shape.get("input_schema")), None
        )
    if form == "mcp":
        hints = _mapping(shape.get("annotations"))
        return Contract(
            str(shape.get("description", "")),
            _mapping(shape.get("inputSchema")),
            _mapping(shape.get("outputSchema")) if "outputSchema" in shape else None,
            {mark: hints[hint] for hint, mark in _MCP_MARKS.items() if hint in hints},
        )
    needs = _mapping(shape.get("requirements"))
    return Contract(
        str(shape.get("description", "")),
        _mapping(shape.get("input_schema")),
        _mapping(shape.get("output_schema")),
        {
            **dict(_mapping(shape.get("annotations"))),
            "secrets": list(needs.get("secrets") or []),
            "metadata": list(needs.get("metadata") or []),
            "deprecated": shape.get("deprecation_message"),
        },
    )
