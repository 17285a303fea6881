"""Targets of the ``tdk`` command: what a module declares for ``serve``, ``check``, ``schema``
and ``run``.

A target is ``MODULE`` or ``MODULE:NAME``. ``MODULE`` is a ``.py`` file or a package
directory (a target ending in ``.py`` or holding a ``/`` is always a path), or a dotted module
name. ``NAME`` is an attribute of the module holding a :class:`~tdk.ToolRunner`, a
:class:`~tdk.Toolkit`, or a function of no argument that returns one (a factory: each
process that loads the target makes its own, which is what worker processes want)::

    tdk serve tools.py:runner       # the module's ToolRunner, with its policies and store
    tdk serve acme.tools:toolkit    # a Toolkit
    tdk serve acme.tools:make       # make() returns a ToolRunner or a Toolkit

Without a name, the module's own namespace decides: exactly one ``ToolRunner`` there is
served; else exactly one ``Toolkit``; else every ``@tool`` of the module (and, for a package,
of its submodules), as a toolkit named after the module. Two runners (or, without a runner,
two toolkits) are ambiguous: the target must name one. A name that is missing, holds
something else, or a factory that raises or returns something else is a usage error of the
command (status 2), saying what the module holds.

For a path, the folder holding the top-level module is first on ``sys.path`` while the
command runs, as for a script (:func:`script_path`).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from tdk._define.modules import import_module, import_path, import_root
from tdk._define.tool import Tool
from tdk._define.toolkit import Toolkit
from tdk._failures.foreign import describe
from tdk._failures.redact import redact_text
from tdk.errors import ToolkitLoadError
from tdk.runner import ToolRunner

__all__ = ["Target", "TargetError", "load_target", "module_part", "script_path"]

#: What a name may hold, as messages say it.
_SERVABLE: Final = "a ToolRunner, a Toolkit or a function of no argument returning one"


@dataclass(frozen=True, slots=True)
class Target:
    """What a target names: its tools, and the runner the module gave (None: the command
    makes its own), with words for messages (``ToolRunner 'runner'``)."""

    toolkit: Toolkit
    runner: ToolRunner | None
    origin: str | None
    """What the module gave, as ``tdk check`` says it; None for the module's ``@tool``s."""


class TargetError(Exception):
    """A target that names nothing to serve: a usage error of the command (status 2). Its
    text says what the module holds instead."""


def module_part(target: str) -> str:
    """The module of ``target`` (``tools.py`` of ``tools.py:runner``)."""
    return _split(target)[0]


def _split(target: str) -> tuple[str, str | None]:
    """``(module, name)`` of ``MODULE:NAME``; ``(target, None)`` when the text after the last
    ``:`` is no identifier (a path may hold a ``:``)."""
    module, colon, name = target.rpartition(":")
    if colon and module and name.isidentifier():
        return module, name
    return target, None


def is_path(module: str) -> bool:
    """Whether ``module`` names a file or directory rather than a dotted module name."""
    if module.endswith(".py") or "/" in module or os.sep in module:
        return True
    try:
        return Path(module).exists()
    except (OSError, ValueError):  # a name too long for a file, a NUL byte: not a path
        return False


def load_target(target: str) -> Target:
    """Import the module of ``target`` and find what it names (see the module docstring).

    Raises what loading raises (``ToolkitLoadError``, ``ToolDefinitionError``) and
    :class:`TargetError` for a target that names nothing to serve."""
    module_text, name = _split(target)
    if is_path(module_text):
        module = import_path(module_text)
    else:
        module = import_module(module_text, module_text.rpartition(".")[2])
    if name is not None:
        return _named(module, target, name)
    return _discovered(module, module_text)


def _named(module: ModuleType, target: str, name: str) -> Target:
    """What the attribute ``name`` of ``module`` holds, called when it is a factory."""
    if not hasattr(module, name):
        raise TargetError(
            f"{target}: module '{module.__name__}' has no attribute '{name}'"
            f"{_holding(module, module_part(target))}"
        )
    value = getattr(module, name)
    served = _served(value, f"{_kind(value)} '{name}'")
    if served is not None:
        return served
    if isinstance(value, Tool):
        raise TargetError(
            f"{target} is a tool: name {_SERVABLE}, or serve every tool of the module with "
            f"{module_part(target)} alone"
        )
    if not callable(value) or isinstance(value, type):
        raise TargetError(f"{target} is {_article(value)}, not {_SERVABLE}")
    return _made_by_factory(value, target, name)


def _made_by_factory(factory: Any, target: str, name: str) -> Target:
    """What the factory ``factory`` (the attribute ``name``) returns, called now."""
    if inspect.iscoroutinefunction(factory):
        raise TargetError(
            f"{target} is an async function: a factory is a plain function of no argument "
            "that returns a ToolRunner or a Toolkit"
        )
    required = _required_parameters(factory)
    if required:
        raise TargetError(
            f"{target} takes arguments ({', '.join(required)}): a factory is called with "
            "none; give them defaults, or name a ToolRunner or a Toolkit"
        )
    try:
        made = factory()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as failed:  # its text is the module's own: redacted, bounded
        raise TargetError(f"{target}: calling {name}() raised {describe(failed)}") from None
    if inspect.isawaitable(made):
        with contextlib.suppress(Exception):
            made.close()  # type: ignore[attr-defined]  # (a coroutine: never awaited)
    served = _served(made, f"{_kind(made)} made by {name}()")
    if served is None:
        raise TargetError(
            f"{target}: {name}() returned {_article(made)}, not a ToolRunner or a Toolkit"
        )
    return served


def _served(value: object, origin: str) -> Target | None:
    if isinstance(value, ToolRunner):
        return Target(value.toolkit, value, origin)
    if isinstance(value, Toolkit):
        return Target(value, None, origin)
    return None


def _discovered(module: ModuleType, module_text: str) -> Target:
    """What the module serves without a name: its one runner, else its one toolkit, else its
    tools (see the module docstring)."""
    runners = _held(module, ToolRunner)
    if len(runners) == 1:
        [(name, runner)] = runners.items()
        return Target(runner.toolkit, runner, f"ToolRunner '{name}'")
    if len(runners) > 1:
        raise TargetError(_ambiguous(module_text, "ToolRunner", list(runners)))
    toolkits = _held(module, Toolkit)
    if len(toolkits) == 1:
        [(name, toolkit)] = toolkits.items()
        return Target(toolkit, None, f"Toolkit '{name}'")
    if len(toolkits) > 1:
        raise TargetError(_ambiguous(module_text, "Toolkit", list(toolkits)))
    return Target(Toolkit.from_module(module), None, None)


def _held(module: ModuleType, kind: type[Any]) -> dict[str, Any]:
    """The module's own attributes holding a ``kind``, each object once (under its first
    name), in the module's order."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    for name, value in list(vars(module).items()):
        if isinstance(value, kind) and id(value) not in seen:
            seen.add(id(value))
            found[name] = value
    return found


def _ambiguous(module_text: str, kind: str, names: list[str]) -> str:
    listed = _listed(names)
    return (
        f"{module_text} holds {len(names)} {kind}s, {listed}: name the one to serve, "
        f"e.g. {module_text}:{names[0]}"
    )


def _holding(module: ModuleType, module_text: str) -> str:
    """What the module holds that a target may name, as the end of a message."""
    held = [
        f"{_kind(value)} '{name}'"
        for kind in (ToolRunner, Toolkit)
        for name, value in _held(module, kind).items()
    ]
    if not held:
        return f"; it holds no ToolRunner or Toolkit (serve its tools with {module_text} alone)"
    return f"; it holds {_listed(held, quote=False)}"


def _listed(names: list[str], *, quote: bool = True) -> str:
    shown = [redact_text(f"'{name}'" if quote else name, limit=100) for name in names[:5]]
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    if len(shown) == 1:
        return shown[0] + more
    return f"{', '.join(shown[:-1])} and {shown[-1]}{more}"


def _kind(value: object) -> str:
    return "ToolRunner" if isinstance(value, ToolRunner) else type(value).__name__


def _article(value: object) -> str:
    """``a dict``, ``an int``, ``None``: what a value is, as a message says it."""
    if value is None:
        return "None"
    name = redact_text(type(value).__name__, limit=100)
    if isinstance(value, type):
        return f"the class {redact_text(value.__name__, limit=100)}"
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _required_parameters(factory: Any) -> list[str]:
    """The parameters ``factory`` cannot be called without (none when it has no signature
    Python can read: it is then simply called)."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        each.name
        for each in parameters
        if each.default is inspect.Parameter.empty
        and each.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


@contextlib.contextmanager
def script_path(target: str) -> Iterator[None]:
    """For a path target, the folder holding its top-level module first on ``sys.path`` while
    the command runs, as Python puts a script's folder there: the module can import the
    modules beside it. (A path that is no module is left to loading to report.) For a
    dotted module found nowhere else, the working directory last (see
    :func:`_working_directory_of`)."""
    module = module_part(target)
    path = is_path(module)
    folder = _import_root_or_none(module) if path else _working_directory_of(module)
    if folder is None:
        yield
        return
    sys.path.insert(0 if path else len(sys.path), folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):  # the module may have removed it itself
            sys.path.remove(folder)


def _import_root_or_none(module: str) -> str | None:
    try:
        return str(import_root(module))
    except ToolkitLoadError:  # (left to loading to report)
        return None


def _working_directory_of(module: str) -> str | None:
    """The working directory, when it holds the top-level package of the dotted ``module``
    and nothing on ``sys.path`` does (``tdk check acme.search`` from the project's folder, as
    ``python -m`` would find it): added last, so that a file there can never stand in for an
    installed or standard module, and not at all in Python's safe-path mode (``-P``,
    ``PYTHONSAFEPATH``)."""
    top = module.partition(".")[0]
    if sys.flags.safe_path or not top.isidentifier():
        return None
    try:
        if importlib.util.find_spec(top) is not None:
            return None
        folder = os.getcwd()
        found = importlib.machinery.PathFinder.find_spec(top, [folder])
    except (ImportError, OSError, ValueError):  # (a working directory that was removed)
        return None
    return folder if found is not None else None
