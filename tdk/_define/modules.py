"""Importing the module a toolkit is loaded from: by dotted name, or from a file or package
directory without changing ``sys.path``.

Import failures become :class:`~tdk.errors.ToolkitLoadError` naming the module, with the cause
chained; a :class:`~tdk.errors.ToolDefinitionError` raised by ``@tool`` during the import
propagates unchanged, since it already says everything that is wrong. ``Toolkit.from_module``
and ``Toolkit.from_path`` collect the tools of what is imported here; the ``tdk`` command's
targets (``tools.py:runner``) read the module's other attributes.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from tdk._failures.foreign import describe
from tdk.errors import ToolDefinitionError, ToolkitLoadError

__all__ = ["import_module", "import_path", "import_root"]


def import_module(module_name: str, toolkit: str) -> ModuleType:
    """The module called ``module_name``, imported (``toolkit``: the name load errors give)."""
    return _import(module_name, toolkit)


def import_path(path: str | os.PathLike[str], toolkit: str | None = None) -> ModuleType:
    """The module of a ``.py`` file or package directory, imported under the name its location
    gives it (``weather`` for
    ``tools/weather.py``; ``acme.search`` for ``acme/search.py`` inside the package ``acme``),
    without changing ``sys.path``. Importing the
    same path again gives the module imported the first time. ``toolkit``: the name load
    errors give (default: the module's last part)."""
    module_name, top_file = _locate(path, toolkit)
    return _import_module(module_name, top_file, toolkit or module_name.rpartition(".")[2])


def import_root(path: str | os.PathLike[str]) -> Path:
    """The folder holding the top-level module of a ``.py`` file or package directory: the
    file's own folder, or for a module inside a package the folder holding the outermost
    package. (``from_path`` imports from it without adding it to ``sys.path``; the ``tdk``
    command adds it, as Python does for a script.) Raises ``ToolkitLoadError`` as
    ``from_path`` does for a path that is not a module."""
    _, top_file = _locate(path, None)
    return top_file.parent.parent if top_file.name == "__init__.py" else top_file.parent


def _import(module_name: str, toolkit: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except (ToolDefinitionError, ToolkitLoadError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # any exception: GeneratorExit, CancelledError, custom ones
        raise _import_failed(module_name, toolkit, exc) from exc


def _import_failed(module_name: str, toolkit: str, exc: BaseException) -> ToolkitLoadError:
    return ToolkitLoadError(
        f"could not import module '{module_name}': {describe(exc)}",
        toolkit=toolkit,
        module=module_name,
    )


def _locate(path: str | os.PathLike[str], toolkit: str | None) -> tuple[str, Path]:
    """The dotted module name of a file or package directory, and the file of its top-level
    module (the outermost enclosing package, or the file itself)."""
    try:
        return _locate_resolved(Path(path).resolve(), toolkit)
    except (OSError, RuntimeError, ValueError) as exc:
        # A name too long, a symlink loop (RuntimeError before Python 3.13), a NUL byte (whose
        # message differs between Python versions: said in tdk's own words)...
        reason = (
            "it holds a NUL byte"
            if "\0" in os.fspath(path)
            else getattr(exc, "strerror", None) or exc
        )
        raise ToolkitLoadError(
            f"cannot use {os.fspath(path)} as a path: {reason}",
            toolkit=toolkit or Path(path).stem,
        ) from exc


def _locate_resolved(location: Path, toolkit: str | None) -> tuple[str, Path]:
    if not location.exists():
        raise ToolkitLoadError(
            f"no such file or directory: {location}", toolkit=toolkit or location.stem
        )
    if location.is_dir() or location.name == "__init__.py":
        package = location if location.is_dir() else location.parent
        if not (package / "__init__.py").is_file():
            raise ToolkitLoadError(
                f"{location} is a directory without __init__.py, not a Python package",
                toolkit=toolkit or package.name,
            )
        parts, top_file, parent = [package.name], package / "__init__.py", package.parent
    elif location.suffix == ".py" and location.is_file():
        parts, top_file, parent = [location.stem], location, location.parent
    else:
        raise ToolkitLoadError(
            f"{location} is neither a .py file nor a package directory",
            toolkit=toolkit or location.stem,
        )
    if "." in parts[0]:
        raise ToolkitLoadError(
            f"cannot import {location} as a module: the name '{parts[0]}' contains a '.'; "
            f"rename it, e.g. to '{parts[0].replace('.', '_')}'",
            toolkit=toolkit or parts[0],
        )
    while (parent / "__init__.py").is_file() and parent.name.isidentifier():
        parts.insert(0, parent.name)
        top_file, parent = parent / "__init__.py", parent.parent
    return ".".join(parts), top_file


def _import_module(module_name: str, top_file: Path, toolkit: str) -> ModuleType:
    """Import the top-level module from ``top_file`` (unless it already is), then
    ``module_name`` within it."""
    top = module_name.partition(".")[0]
    existing = sys.modules.get(top)
    if existing is None:
        _check_name_is_free(top, top_file, toolkit)
        _exec_top(top, top_file, toolkit)
    elif _file_of(existing) != top_file:
        raise _taken(top, top_file, _file_of(existing), toolkit)
    return _import(module_name, toolkit)


def _exec_top(top: str, top_file: Path, toolkit: str) -> None:
    package = [str(top_file.parent)] if top_file.name == "__init__.py" else None
    spec = importlib.util.spec_from_file_location(top, top_file, submodule_search_locations=package)
    # A .py file always has a spec and a loader.
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[top] = module
    try:
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[top]  # as the import system does for a module that failed
            raise
    except (ToolDefinitionError, ToolkitLoadError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        raise _import_failed(top, toolkit, exc) from exc


def _check_name_is_free(top: str, top_file: Path, toolkit: str) -> None:
    """Refuse to register a file under a name that an importable module already has (a tool
    file called ``calendar.py`` must not replace the standard library's for everyone)."""
    spec = importlib.util.find_spec(top)  # a top-level name: nothing is imported
    origin = spec.origin if spec is not None else None
    if origin is not None:
        other = Path(origin).resolve() if os.path.isabs(origin) else None
        if other != top_file:
            raise _taken(top, top_file, other, toolkit)


def _file_of(module: ModuleType) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if isinstance(file, str) else None


def _taken(top: str, top_file: Path, other: Path | None, toolkit: str) -> ToolkitLoadError:
    where = str(other) if other is not None else "a built-in module"
    return ToolkitLoadError(
        f"cannot import {top_file} as module '{top}': that name is already used by {where}; "
        "rename the file or directory",
        toolkit=toolkit,
        module=top,
    )
