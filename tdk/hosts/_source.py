"""What a host adapter renders from: the definitions of a toolkit or of a list of tools.

A toolkit's rendered tools are kept per toolkit and per format, and made again only when the
toolkit has grown (tools are only ever added to a toolkit): a second ``tools()`` call costs a
list copy. Rendering copies the schemas, so that nothing done to a rendered tool reaches the
definition; the dicts in the list are the kept ones, so that a change to one is seen by the
toolkit's next ``tools()`` list of that format (replace one rather than change it).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeAlias

from tdk._define.definition import ToolDefinition
from tdk._define.tool import Tool
from tdk._define.toolkit import Toolkit

__all__ = ["Source", "description_of", "rendered"]

#: What ``tools()`` takes: a toolkit, or any iterable of tools or definitions.
Source: TypeAlias = Toolkit | Iterable[Tool[..., Any] | ToolDefinition]

Render: TypeAlias = Callable[[ToolDefinition], Any]


def rendered(source: Source, form: Hashable, render: Render) -> list[Any]:
    """Each tool of ``source`` rendered by ``render``, in order (a toolkit's kept on the
    toolkit under ``form``, by identity, until tools are added). ``render`` raises
    ``ValueError`` for a tool it cannot render; every such tool is named in one
    ``ValueError``."""
    if isinstance(source, Toolkit):
        kept = source._host_shapes
        size, shapes = kept.get(form, (-1, []))
        if size != len(source):
            # Counted from the snapshot rendered: a tool added meanwhile (another thread)
            # is rendered by the next call.
            definitions = source.definitions()
            shapes = _render_all(definitions, render)
            kept[form] = (len(definitions), shapes)
        return list(shapes)
    return _render_all(_definitions(source), render)


def _render_all(definitions: list[ToolDefinition], render: Render) -> list[Any]:
    shapes, problems = [], []
    for definition in definitions:
        try:
            shapes.append(render(definition))
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise ValueError("\n".join(problems))
    return shapes


def _definitions(source: object) -> list[ToolDefinition]:
    refused = TypeError(
        f"tools() takes a Toolkit or an iterable of tools, not {type(source).__name__}"
    )
    if isinstance(source, str | bytes | Mapping):  # iterable, but of no tools
        raise refused
    try:
        items = list(source)  # type: ignore[call-overload]
    except TypeError:
        raise refused from None
    definitions: list[ToolDefinition] = []
    names: set[str] = set()
    for item in items:
        if isinstance(item, Tool):
            definition = item.definition
        elif isinstance(item, ToolDefinition):
            definition = item
        else:
            raise TypeError(f"tools() takes tools or tool definitions, not {type(item).__name__}")
        if definition.name in names:
            raise ValueError(f"two tools are named '{definition.name}'; a host takes one")
        names.add(definition.name)
        definitions.append(definition)
    return definitions


def description_of(definition: ToolDefinition) -> str:
    """The description a host shows: the tool's, and its deprecation when it has one."""
    if definition.deprecation_message is None:
        return definition.description
    return f"{definition.description}\n\nDeprecated: {definition.deprecation_message}"
