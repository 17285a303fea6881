"""The errors of making tools available, before any call runs: a toolkit that does not load,
a definition that is wrong, a name that no tool has."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Unpack

from tdk.errors._kinds import ErrorKind
from tdk.errors._tool_error import ErrorOptions, ToolError, with_details

__all__ = [
    "ToolDefinitionError",
    "ToolInputSchemaError",
    "ToolNotFoundError",
    "ToolOutputSchemaError",
    "ToolkitLoadError",
]


class ToolkitLoadError(ToolError):
    """A toolkit (a module or path of tools) could not be loaded; the cause is chained."""

    kind = ErrorKind.TOOLKIT_LOAD_FAILED
    _subject_phrase = "when loading toolkit"

    def __init__(
        self,
        message: str,
        *,
        toolkit: str | None = None,
        module: str | None = None,
        **options: Unpack[ErrorOptions],
    ) -> None:
        super().__init__(message, **with_details(options, toolkit=toolkit, module=module))

    def _subject(self) -> str | None:
        toolkit = self.details.get("toolkit")
        return toolkit if isinstance(toolkit, str) else None


class ToolDefinitionError(ToolError):
    """A tool's definition is wrong; raised when ``@tool`` runs, listing every problem."""

    kind = ErrorKind.TOOL_DEFINITION_BAD_DEFINITION
    _subject_phrase = "in definition of tool"

    def __init__(
        self,
        message: str,
        *,
        problems: Iterable[Mapping[str, Any]] | None = None,
        **options: Unpack[ErrorOptions],
    ) -> None:
        listed = None if problems is None else [dict(p) for p in problems]
        super().__init__(message, **with_details(options, problems=listed))


class ToolInputSchemaError(ToolDefinitionError):
    """Every problem of the definition is in its parameters."""

    kind = ErrorKind.TOOL_DEFINITION_BAD_INPUT_SCHEMA


class ToolOutputSchemaError(ToolDefinitionError):
    """Every problem of the definition is in its return annotation."""

    kind = ErrorKind.TOOL_DEFINITION_BAD_OUTPUT_SCHEMA


class ToolNotFoundError(ToolError):
    """No tool of the requested name; ``details`` lists the available ones and close matches."""

    kind = ErrorKind.TOOL_NOT_FOUND
    _subject_phrase = "when looking up tool"

    def __init__(
        self,
        message: str,
        *,
        available_tools: Iterable[str] | None = None,
        suggestions: Iterable[str] | None = None,
        **options: Unpack[ErrorOptions],
    ) -> None:
        super().__init__(
            message,
            **with_details(
                options,
                available_tools=None if available_tools is None else list(available_tools),
                suggestions=None if suggestions is None else list(suggestions),
            ),
        )
