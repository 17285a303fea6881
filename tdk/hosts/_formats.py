"""The definitions of a toolkit in each host's format, as plain data: what ``tdk schema
--format`` prints and what a contract snapshot (``tdk.testing``) saves.

``json`` is tdk's own record of each definition; the others are what each API's ``tools=``
takes (``tdk.hosts.openai``, ``tdk.hosts.anthropic``) and what MCP's ``tools/list`` shows.
"""

from __future__ import annotations

from typing import Any, Final

from tdk._define.toolkit import Toolkit
from tdk.hosts import anthropic, openai
from tdk.hosts._mcp_shape import mcp_tool

__all__ = ["SCHEMA_FORMATS", "host_shapes"]

#: Each format, as ``tdk schema --format`` names it.
SCHEMA_FORMATS: Final = ("json", "openai", "openai-strict", "responses", "anthropic", "mcp")


def host_shapes(toolkit: Toolkit, form: str) -> list[dict[str, Any]]:
    """The definitions of ``toolkit`` in format ``form`` (one of :data:`SCHEMA_FORMATS`).
    Raises ``ValueError`` for a tool that cannot be strict (``openai-strict``) or an unknown
    format."""
    if form in ("openai", "openai-strict"):
        return openai.tools(toolkit, strict=form == "openai-strict")
    if form == "responses":
        return openai.tools(toolkit, api="responses")
    if form == "anthropic":
        return anthropic.tools(toolkit)
    if form == "mcp":
        return [mcp_tool(definition) for definition in toolkit.definitions()]
    if form == "json":
        return [d.model_dump(mode="json") for d in toolkit.definitions()]
    raise ValueError(f"unknown format {form!r}: one of {', '.join(SCHEMA_FORMATS)}")
