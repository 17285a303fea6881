"""``Toolkit``: a named set of tools, looked up by name in O(1), loaded from modules or paths.

Loading imports a module (``from_module``) or a file or package directory (``from_path``, see
:mod:`tdk._define.modules`) and collects every :class:`~tdk.Tool` in its namespace; for a
package, in every submodule too.
"""

from __future__ import annotations

import difflib
import os
import pkgutil
from collections.abc import Hashable, Iterable, Iterator
from time import perf_counter
from types import ModuleType
from typing import Any, TypeAlias

from tdk._define.definition import ToolDefinition
from tdk._define.modules import import_module, import_path
from tdk._define.tool import Tool, definition_errors_recorded
from tdk._execution.arguments import Arguments
from tdk._execution.call_scope import (
    MAX_SHOWN_NAME,
    check_call_id,
    failure_result,
    shown_name,
    traced_failure,
)
from tdk._execution.context import ToolContext
from tdk._execution.default import DEFAULT, Default
from tdk._execution.loop import refuse_running_loop, run_blocking
from tdk._execution.result import ToolResult
from tdk._failures.redact import redact_text
from tdk.errors import ToolkitLoadError, ToolNotFoundError

__all__ = ["Toolkit"]

AnyTool: TypeAlias = Tool[..., Any]

_MAX_SUGGESTIONS = 3


class Toolkit:
    """A named collection of tools with case-insensitive lookup.

    ::

        toolkit = Toolkit("github", [search_issues, get_issue], version="1.2.0")
        toolkit.get("Search_Issues")  # -> search_issues
        toolkit.definitions()         # -> [ToolDefinition(..., toolkit="github"), ...]

    Two different tools whose names differ only in case cannot share a toolkit.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        name: str,
        tools: Iterable[AnyTool] = (),
        *,
        version: str | None = None,
        description: str | None = None,
        include_stacktrace: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"a toolkit name must be a non-blank string, not {name!r}")
        self.name = name
        """The toolkit's name; filled into each definition's ``toolkit``."""
        self.version = version
        """The toolkit's version, if it has one."""
        self.description = description
        """What the toolkit is for, if said."""
        self.include_stacktrace = include_stacktrace
        """Whether results of :meth:`run` carry the redacted stack trace of a failure."""
        self._tools: dict[str, AnyTool] = {}
        self._host_shapes: dict[Hashable, tuple[int, list[Any]]] = {}
        """The tools rendered by ``tdk.hosts``, per format: (how many were rendered, shapes)."""
        for item in tools:
            self.add(item)

    def add(self, tool: AnyTool) -> None:
        """Add a tool. Adding the same tool again does nothing; adding a different tool whose
        name equals an existing one ignoring case raises :class:`~tdk.errors.ToolkitLoadError`.
        """
        if not isinstance(tool, Tool):
            raise TypeError(
                f"Toolkit.add() takes a tool made with @tool, not {type(tool).__name__}"
            )
        key = tool.name.lower()
        existing = self._tools.setdefault(key, tool)
        if existing is tool:
            return
        raise ToolkitLoadError(
            f"tools '{existing.name}' ({_origin(existing)}) and '{tool.name}' ({_origin(tool)}) "
            "have the same name, ignoring case; rename one with @tool(name=...)",
            toolkit=self.name,
            module=tool.fn.__module__,
        )

    def get(self, name: str) -> AnyTool:
        """The tool called ``name``, compared ignoring case.

        Raises :class:`~tdk.errors.ToolNotFoundError` with ``details["available_tools"]`` and
        the closest names in ``details["suggestions"]``.
        """
        found = self._tools.get(name.lower())
        if found is not None:
            return found
        raise self._not_found(name, redact_text(name, limit=MAX_SHOWN_NAME))

    def _not_found(self, name: str, shown: str) -> ToolNotFoundError:
        """The error for an unknown ``name``, which its texts repeat as ``shown`` (redacted
        and cut: see :func:`~tdk._execution.execute.shown_name`)."""
        available = [item.name for item in self._tools.values()]
        by_key = {item.name.lower(): item.name for item in self._tools.values()}
        longest = max(map(len, by_key), default=0)
        wanted = name.lower()
        # A name more than 7/3 as long as every tool's cannot reach difflib's cutoff (0.6 of
        # the two lengths' mean in common), and comparing it costs time in its length: a
        # model (or a client) may send megabytes.
        suggestions = (
            [by_key[key] for key in difflib.get_close_matches(wanted, by_key, n=_MAX_SUGGESTIONS)]
            if 3 * len(wanted) <= 7 * longest
            else []
        )
        message = f"No tool named '{shown}' in toolkit '{self.name}'."
        if suggestions:
            quoted = [f"'{suggestion}'" for suggestion in suggestions]
            choices = " or ".join(filter(None, [", ".join(quoted[:-1]), quoted[-1]]))
            message += f" Did you mean {choices}?"
        return ToolNotFoundError(
            message, available_tools=available, suggestions=suggestions, tool_name=shown
        )

    async def run(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        context: ToolContext | None = None,
        call_id: str | None = None,
        timeout: float | Default | None = DEFAULT,
        include_stacktrace: bool | None = None,
    ) -> ToolResult:
        """Run the tool called ``name`` (ignoring case) and return its result.

        An unknown name is a ``TOOL_NOT_FOUND`` result (with suggestions), never an exception.
        ``include_stacktrace`` defaults to the toolkit's setting; the other options are those
        of :meth:`Tool.run <tdk.Tool.run>`.
        """
        traced = self.include_stacktrace if include_stacktrace is None else include_stacktrace
        tool = self._tools.get(name.lower()) if type(name) is str else None
        if tool is None:
            if type(name) is not str:
                raise TypeError(f"the tool name must be a str, not {type(name).__name__}")
            check_call_id(call_id)
            shown = shown_name(name, context)
            result = failure_result(
                shown,
                self._not_found(name, shown),
                call_id=call_id,
                context=context,
                attempts=0,
                started=perf_counter(),
                include_stacktrace=traced,
            )
            return await traced_failure(result, context)
        return await tool.run(
            arguments,
            context=context,
            call_id=call_id,
            timeout=timeout,
            include_stacktrace=traced,
        )

    def run_sync(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        context: ToolContext | None = None,
        call_id: str | None = None,
        timeout: float | Default | None = DEFAULT,
        include_stacktrace: bool | None = None,
    ) -> ToolResult:
        """:meth:`run` for synchronous code: runs the call on tdk's own event loop, as
        :meth:`Tool.run_sync <tdk.Tool.run_sync>` does, and waits for its result. Raises
        ``RuntimeError`` when called from a running event loop (await :meth:`run` there).

        .. versionadded:: 0.1.0
        """
        refuse_running_loop("run_sync", "run")
        return run_blocking(
            self.run(
                name,
                arguments,
                context=context,
                call_id=call_id,
                timeout=timeout,
                include_stacktrace=include_stacktrace,
            )
        )

    def definitions(self) -> list[ToolDefinition]:
        """The definitions of all tools, in the order they were added, with ``toolkit`` set."""
        return [item.definition.model_copy(update={"toolkit": self.name}) for item in self]

    def __iter__(self) -> Iterator[AnyTool]:
        # A snapshot (one C-level copy): a tool added meanwhile, from another thread, cannot
        # break an iteration in progress.
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._tools

    def __repr__(self) -> str:
        return f"<Toolkit {self.name!r} with {len(self)} tools>"

    @classmethod
    def from_module(
        cls,
        module: ModuleType | str,
        *,
        name: str | None = None,
        version: str | None = None,
        description: str | None = None,
    ) -> Toolkit:
        """The tools of a module (a module object or a dotted name to import).

        For a package, its submodules are imported and searched too (``__main__`` excepted).
        ``name`` defaults to the last part of the module's name.
        """
        module_name = module if isinstance(module, str) else module.__name__
        toolkit = name or module_name.rpartition(".")[2]
        loaded = import_module(module_name, toolkit) if isinstance(module, str) else module
        return cls._collect(loaded, toolkit, version, description)

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        version: str | None = None,
        description: str | None = None,
    ) -> Toolkit:
        """The tools of a ``.py`` file or a package directory.

        The module is imported under the name its location gives it (``weather`` for
        ``tools/weather.py``; ``acme.search`` for ``acme/search.py`` inside the package
        ``acme``), without changing ``sys.path``. Loading the same path again reuses the
        module imported the first time, so its tools are the same objects.
        """
        module = import_path(path, name)
        toolkit = name or module.__name__.rpartition(".")[2]
        return cls._collect(module, toolkit, version, description)

    @classmethod
    def _collect(
        cls, module: ModuleType, name: str, version: str | None, description: str | None
    ) -> Toolkit:
        toolkit = cls(name, version=version, description=description)
        for each in _walk(module, name):
            for value in list(vars(each).values()):
                if isinstance(value, Tool):
                    toolkit.add(value)
        if not toolkit and not definition_errors_recorded():  # else the broken tools say why
            raise ToolkitLoadError(
                f"module '{module.__name__}' defines no tools; decorate its functions with @tool",
                toolkit=name,
                module=module.__name__,
            )
        return toolkit


def _origin(tool: AnyTool) -> str:
    return f"{tool.fn.__module__}.{tool.fn.__qualname__}"


def _walk(module: ModuleType, toolkit: str) -> Iterator[ModuleType]:
    """The module and, for a package, every submodule (imported, sorted by name)."""
    yield module
    for info in pkgutil.iter_modules(getattr(module, "__path__", ()), module.__name__ + "."):
        if info.name.rpartition(".")[2] == "__main__":
            continue
        yield from _walk(import_module(info.name, toolkit), toolkit)
