"""A tool as MCP's ``tools/list`` shows it, as plain data (``tdk schema --format mcp``).

MCP wants an object as a tool's structured output: a non-object output schema is wrapped as
``{"type": "object", "properties": {"result": ...}, "required": ["result"]}`` (its ``$defs``
moved up, so that references still resolve), and the value as ``{"result": value}``. The
annotations are the tool's side-effect marks under MCP's names.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from tdk._define.definition import ToolDefinition
from tdk.hosts._source import description_of

__all__ = ["mcp_tool", "output_is_wrapped"]


def output_is_wrapped(definition: ToolDefinition) -> bool:
    """Whether the tool's output is not an object, and so goes out as ``{"result": value}``."""
    return definition.output_schema.get("type") != "object"


def mcp_tool(definition: ToolDefinition) -> dict[str, Any]:
    """The tool in the shape of MCP's ``Tool``: name, description, ``inputSchema``,
    ``outputSchema`` and ``annotations``."""
    output = definition.output_schema
    if output_is_wrapped(definition):
        inner = {key: value for key, value in output.items() if key != "$defs"}
        wrapped: dict[str, Any] = {
            "type": "object",
            "properties": {"result": inner},
            "required": ["result"],
        }
        if "$defs" in output:
            wrapped["$defs"] = output["$defs"]
        output = wrapped
    marks = definition.annotations
    return deepcopy(
        {
            "name": definition.name,
            "description": description_of(definition),
            "inputSchema": definition.input_schema,
            "outputSchema": output,
            "annotations": {
                "readOnlyHint": marks.read_only,
                "destructiveHint": marks.destructive,
                "idempotentHint": marks.idempotent,
                "openWorldHint": marks.open_world,
            },
        }
    )  # nothing shared with the definition
