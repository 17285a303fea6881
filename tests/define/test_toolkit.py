"""``Toolkit``: lookup, definitions, and loading tools from modules, files and packages.

Loading tests write real modules and packages to a temporary directory and import them.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import pytest

from tdk import Tool, ToolDefinition, Toolkit, tool
from tdk.errors import (
    ErrorKind,
    ToolDefinitionError,
    ToolInputSchemaError,
    ToolkitLoadError,
    ToolNotFoundError,
)


@tool
def search_issues(q: Annotated[str, "The query."]) -> list[str]:
    """Search the issues."""
    return [q]


@tool
def get_issue(number: Annotated[int, "The number."]) -> str:
    """Get one issue."""
    return str(number)


@tool(name="Search_Pulls")
def search_pulls(q: Annotated[str, "The query."]) -> list[str]:
    """Search the pull requests."""
    return [q]


@tool(name="SEARCH_ISSUES")
def shouting(q: Annotated[str, "The query."]) -> list[str]:
    """Another tool whose name differs from search_issues only in case."""
    return [q]


GOOD_TOOL = '''
from typing import Annotated

from tdk import tool


@tool
def {name}(q: Annotated[str, "The query."]) -> str:
    """Answer {name}."""
    return q
'''


@pytest.fixture(autouse=True)
def _forget_loaded_modules() -> Iterator[None]:
    """Remove the modules a test wrote and imported (and only those)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("tools_", "pkg_")):
            del sys.modules[name]


def _unique(prefix: str = "tools") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def _package(root: Path, files: dict[str, str]) -> tuple[str, Path]:
    """A package with a unique name under ``root``; ``files`` maps relative paths to text."""
    name = _unique("pkg")
    for relative, text in files.items():
        _write(root / name / relative, text.replace("PKG", name))
    return name, root / name


# -- the collection --------------------------------------------------------------------


def test_toolkit_collects_tools_in_order() -> None:
    """Len, iteration (in the order added) and the toolkit's own fields."""
    toolkit = Toolkit("github", [search_issues, get_issue], version="1.0", description="GitHub")
    assert len(toolkit) == 2
    assert list(toolkit) == [search_issues, get_issue]
    assert (toolkit.name, toolkit.version, toolkit.description) == ("github", "1.0", "GitHub")
    assert repr(toolkit) == "<Toolkit 'github' with 2 tools>"


def test_add() -> None:
    """Tools can be added later; adding the same tool again changes nothing."""
    toolkit = Toolkit("github")
    toolkit.add(search_issues)
    toolkit.add(search_issues)
    assert list(toolkit) == [search_issues]


def test_add_refuses_what_is_not_a_tool() -> None:
    """Only tools made with @tool can be added."""
    with pytest.raises(TypeError, match="takes a tool made with @tool, not function"):
        Toolkit("github").add(search_issues.fn)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "   "], ids=["empty", "blank"])
def test_toolkit_needs_a_name(name: str) -> None:
    """A toolkit name must say something."""
    with pytest.raises(ValueError, match="non-blank"):
        Toolkit(name)


def test_names_that_differ_only_in_case_conflict() -> None:
    """Two different tools whose names are equal ignoring case cannot share a toolkit; the
    error names both."""
    with pytest.raises(ToolkitLoadError) as caught:
        Toolkit("github", [search_issues, shouting])
    assert str(caught.value) == (
        "[TOOLKIT_LOAD_FAILED] ToolkitLoadError when loading toolkit 'github': tools "
        f"'search_issues' ({__name__}.search_issues) and 'SEARCH_ISSUES' ({__name__}.shouting) "
        "have the same name, ignoring case; rename one with @tool(name=...)"
    )


@pytest.mark.parametrize("name", ["search_pulls", "SEARCH_PULLS", "Search_Pulls"])
def test_get_ignores_case(name: str) -> None:
    """Lookup compares names ignoring case."""
    toolkit = Toolkit("github", [search_issues, search_pulls])
    assert toolkit.get(name) is search_pulls
    assert name in toolkit


def test_get_unknown_tool_suggests_close_names() -> None:
    """An unknown name raises ToolNotFoundError with the available tools and close matches."""
    toolkit = Toolkit("github", [search_issues, get_issue, search_pulls])
    with pytest.raises(ToolNotFoundError) as caught:
        toolkit.get("serch_issue")
    error = caught.value
    assert error.kind is ErrorKind.TOOL_NOT_FOUND
    assert error.details["available_tools"] == ["search_issues", "get_issue", "Search_Pulls"]
    assert error.details["suggestions"] == ["search_issues", "get_issue", "Search_Pulls"]
    assert error.tool_name == "serch_issue"
    assert str(error) == (
        "[TOOL_NOT_FOUND] ToolNotFoundError when looking up tool 'serch_issue': No tool named "
        "'serch_issue' in toolkit 'github'. "
        "Did you mean 'search_issues', 'get_issue' or 'Search_Pulls'?"
    )
    assert "serch_issue" not in toolkit


def test_get_unknown_tool_with_one_close_name() -> None:
    """One close match is suggested on its own."""
    with pytest.raises(ToolNotFoundError) as caught:
        Toolkit("github", [search_issues, get_issue]).get("get_isue")
    assert caught.value.details["suggestions"] == ["get_issue"]
    assert caught.value.message.endswith("Did you mean 'get_issue'?")


def test_get_unknown_tool_without_close_names() -> None:
    """Without a close match the message just says the tool is unknown."""
    with pytest.raises(ToolNotFoundError) as caught:
        Toolkit("github", [get_issue]).get("weather")
    assert caught.value.details["suggestions"] == []
    assert caught.value.message == "No tool named 'weather' in toolkit 'github'."


def test_definitions_name_the_toolkit() -> None:
    """``definitions()`` lists every definition with ``toolkit`` filled in, leaving the
    tools' own definitions untouched."""
    definitions = Toolkit("github", [search_issues, get_issue]).definitions()
    assert [(d.name, d.toolkit) for d in definitions] == [
        ("search_issues", "github"),
        ("get_issue", "github"),
    ]
    assert definitions[0].input_schema == search_issues.definition.input_schema
    assert search_issues.definition.toolkit is None
    assert search_issues.definition.model_fields_set == set(ToolDefinition.model_fields)


# -- loading ---------------------------------------------------------------------------


def test_from_module_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module object's tools are collected; the toolkit is named after the module."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _unique()
    _write(tmp_path / f"{name}.py", GOOD_TOOL.format(name="weather"))
    importlib.invalidate_caches()
    module = importlib.import_module(name)
    toolkit = Toolkit.from_module(module)
    assert toolkit.name == name
    assert list(toolkit) == [module.weather]


def test_from_module_conflicting_names_in_one_module() -> None:
    """This very module holds search_issues and SEARCH_ISSUES: loading it says so."""
    with pytest.raises(ToolkitLoadError, match="have the same name, ignoring case"):
        Toolkit.from_module(__name__)


def test_from_dotted_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dotted name is imported; tools imported from elsewhere count, aliases count once."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _unique()
    _write(
        tmp_path / f"{name}.py",
        GOOD_TOOL.format(name="weather")
        + "\nfrom test_toolkit import get_issue\n\nforecast = weather\n",
    )
    importlib.invalidate_caches()
    toolkit = Toolkit.from_module(name, name="wx", version="2")
    assert [t.name for t in toolkit] == ["weather", "get_issue"]
    assert (toolkit.name, toolkit.version) == ("wx", "2")


def test_from_path_file(tmp_path: Path) -> None:
    """A .py file is imported under its own name, without touching sys.path."""
    name = _unique()
    path = _write(tmp_path / f"{name}.py", GOOD_TOOL.format(name="weather"))
    path_before = list(sys.path)
    toolkit = Toolkit.from_path(path)
    assert toolkit.name == name
    assert [t.name for t in toolkit] == ["weather"]
    assert toolkit.get("weather").fn.__module__ == name
    assert sys.path == path_before
    assert toolkit.get("weather")("rain") == "rain"


def test_from_path_package(tmp_path: Path) -> None:
    """A package directory is imported with its submodules (not ``__main__``); relative and
    absolute imports inside it work; re-exported tools count once."""
    name, directory = _package(
        tmp_path,
        {
            "__init__.py": "from .search import search\n",
            "__main__.py": "raise SystemExit('never imported')\n",
            "search.py": GOOD_TOOL.format(name="search"),
            "util.py": "PREFIX = 'issue-'\n",
            "issues/__init__.py": "",
            "issues/get.py": """
                from typing import Annotated

                from PKG.util import PREFIX
                from tdk import tool


                @tool
                def get_issue(number: Annotated[int, "The number."]) -> str:
                    \"\"\"Get an issue.\"\"\"
                    return f"{PREFIX}{number}"
            """,
        },
    )
    toolkit = Toolkit.from_path(directory)
    assert toolkit.name == name
    assert sorted(t.name for t in toolkit) == ["get_issue", "search"]
    assert toolkit.get("get_issue").fn.__module__ == f"{name}.issues.get"
    assert toolkit.get("get_issue")(7) == "issue-7"


def test_from_path_file_inside_a_package(tmp_path: Path) -> None:
    """A file inside a package is imported as ``package.module``, so its imports work."""
    name, directory = _package(
        tmp_path,
        {
            "__init__.py": "",
            "common.py": "UNIT = 'C'\n",
            "weather.py": """
                from typing import Annotated

                from .common import UNIT
                from tdk import tool


                @tool
                def temperature(city: Annotated[str, "The city."]) -> str:
                    \"\"\"Tell the temperature.\"\"\"
                    return f"20{UNIT}"
            """,
        },
    )
    toolkit = Toolkit.from_path(directory / "weather.py")
    assert toolkit.name == "weather"
    assert toolkit.get("temperature").fn.__module__ == f"{name}.weather"
    assert toolkit.get("temperature")("Paris") == "20C"


def test_loading_the_same_path_twice_imports_once(tmp_path: Path) -> None:
    """The second load reuses the module: the same tool objects, no second import."""
    name = _unique()
    log = tmp_path / "imports.log"
    path = _write(
        tmp_path / f"{name}.py",
        GOOD_TOOL.format(name="weather")
        + f"\nwith open({str(log)!r}, 'a') as _log:\n    _log.write('imported\\n')\n",
    )
    first = Toolkit.from_path(path)
    second = Toolkit.from_path(str(path))
    assert first.get("weather") is second.get("weather")
    assert len(second) == 1
    assert log.read_text() == "imported\n"


def _load_failure(path: Path) -> ToolkitLoadError:
    with pytest.raises(ToolkitLoadError) as caught:
        Toolkit.from_path(path)
    return caught.value


@pytest.mark.parametrize(
    ("body", "cause", "reason"),
    [
        pytest.param("def broken(:\n    pass\n", SyntaxError, "SyntaxError: ", id="syntax-error"),
        pytest.param(
            "import a_module_that_does_not_exist_42\n",
            ModuleNotFoundError,
            "ModuleNotFoundError: No module named 'a_module_that_does_not_exist_42'",
            id="import-error",
        ),
        pytest.param(
            "raise RuntimeError('database unreachable')\n",
            RuntimeError,
            "RuntimeError: database unreachable",
            id="exception-at-import",
        ),
    ],
)
def test_import_failures_become_load_errors(
    tmp_path: Path, body: str, cause: type[Exception], reason: str
) -> None:
    """Any failure while importing becomes ToolkitLoadError naming the module, with the
    original exception chained; the failed module is not left in ``sys.modules``."""
    name = _unique()
    error = _load_failure(_write(tmp_path / f"{name}.py", body))
    assert type(error.__cause__) is cause
    assert error.details == {"toolkit": name, "module": name}
    assert str(error).startswith(
        f"[TOOLKIT_LOAD_FAILED] ToolkitLoadError when loading toolkit '{name}': "
        f"could not import module '{name}': {reason}"
    )
    assert name not in sys.modules


def test_a_fixed_module_loads_after_a_failure(tmp_path: Path) -> None:
    """After a failed load, fixing the file and loading again works."""
    name = _unique()
    path = _write(tmp_path / f"{name}.py", "raise RuntimeError('not yet')\n")
    _load_failure(path)
    _write(path, GOOD_TOOL.format(name="weather"))
    importlib.invalidate_caches()
    assert [t.name for t in Toolkit.from_path(path)] == ["weather"]


def test_failing_submodule_is_named(tmp_path: Path) -> None:
    """In a package, the error names the submodule that failed to import."""
    name, directory = _package(
        tmp_path,
        {"__init__.py": "", "ok.py": GOOD_TOOL.format(name="ok"), "bad.py": "1 / 0\n"},
    )
    error = _load_failure(directory)
    assert error.details["module"] == f"{name}.bad"
    assert error.message == (
        f"could not import module '{name}.bad': ZeroDivisionError: division by zero"
    )
    assert isinstance(error.__cause__, ZeroDivisionError)


def test_from_module_unknown_name() -> None:
    """An unknown dotted name is a load error naming it."""
    with pytest.raises(ToolkitLoadError) as caught:
        Toolkit.from_module("no_such_package_42.tools")
    assert caught.value.details == {"toolkit": "tools", "module": "no_such_package_42.tools"}
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)


BAD_TOOL = '''
from tdk import tool


@tool
def search(q) -> str:
    """Search."""
    return q
'''


def test_definition_errors_propagate_unchanged_from_a_file(tmp_path: Path) -> None:
    """A bad tool's own error comes through as it is, not wrapped in a load error."""
    name = _unique()
    with pytest.raises(ToolInputSchemaError) as caught:
        Toolkit.from_path(_write(tmp_path / f"{name}.py", BAD_TOOL))
    assert caught.value.tool_name == "search"
    assert caught.value.__cause__ is None
    assert name not in sys.modules


def test_definition_errors_propagate_unchanged_from_a_package(tmp_path: Path) -> None:
    """The same holds for a submodule found while walking a package."""
    _, directory = _package(tmp_path, {"__init__.py": "", "bad.py": BAD_TOOL})
    with pytest.raises(ToolDefinitionError) as caught:
        Toolkit.from_path(directory)
    assert type(caught.value) is ToolInputSchemaError


def test_definition_errors_propagate_unchanged_from_a_dotted_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """And for ``from_module`` with a dotted name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _unique()
    _write(tmp_path / f"{name}.py", BAD_TOOL)
    importlib.invalidate_caches()
    with pytest.raises(ToolInputSchemaError):
        Toolkit.from_module(name)


def test_duplicate_names_across_submodules(tmp_path: Path) -> None:
    """Two modules of one package defining tools with the same name (ignoring case) is a
    load error naming both functions."""
    name, directory = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": GOOD_TOOL.format(name="search"),
            "b.py": GOOD_TOOL.format(name="Search"),
        },
    )
    error = _load_failure(directory)
    assert error.message == (
        f"tools 'search' ({name}.a.search) and 'Search' ({name}.b.Search) have the same name, "
        "ignoring case; rename one with @tool(name=...)"
    )


def test_a_module_without_tools_is_a_load_error(tmp_path: Path) -> None:
    """Loading a module that defines no tool is most likely a mistake, so it is an error."""
    name = _unique()
    error = _load_failure(_write(tmp_path / f"{name}.py", "X = 1\n"))
    assert error.message == (f"module '{name}' defines no tools; decorate its functions with @tool")


@pytest.mark.parametrize(
    ("relative", "create", "message"),
    [
        pytest.param("missing.py", None, "no such file or directory: PATH", id="missing-file"),
        pytest.param("missing", None, "no such file or directory: PATH", id="missing-directory"),
        pytest.param(
            "missing/tools.py", None, "no such file or directory: PATH", id="missing-parent"
        ),
        pytest.param(
            "notes.txt",
            "file",
            "PATH is neither a .py file nor a package directory",
            id="not-python",
        ),
        pytest.param(
            "folder",
            "directory",
            "PATH is a directory without __init__.py, not a Python package",
            id="plain-directory",
        ),
    ],
)
def test_paths_that_are_not_modules(
    tmp_path: Path, relative: str, create: str | None, message: str
) -> None:
    """Paths that cannot be a module are load errors that say why."""
    path = tmp_path / relative
    if create == "file":
        path.write_text("hello")
    elif create == "directory":
        path.mkdir()
    error = _load_failure(path)
    assert error.message == message.replace("PATH", str(path))


def _symlink_loop(path: Path) -> None:
    path.symlink_to(path.with_name("other.py"))
    path.with_name("other.py").symlink_to(path)


LOOP = (
    "no such file or directory: PATH"  # resolve() stopped raising on loops in Python 3.13
    if sys.version_info >= (3, 13)
    else "cannot use PATH as a path: Symlink loop from 'PATH'"
)


@pytest.mark.parametrize(
    ("relative", "make", "message"),
    [
        pytest.param(
            "x" * 300 + ".py", None, "cannot use PATH as a path: File name too long", id="too-long"
        ),
        pytest.param("loop.py", _symlink_loop, LOOP, id="symlink-loop"),
        pytest.param(
            "nul\0.py", None, "cannot use PATH as a path: it holds a NUL byte", id="nul-byte"
        ),
        pytest.param(
            "weather.v2.py",
            lambda path: path.write_text(""),
            "cannot import PATH as a module: the name 'weather.v2' contains a '.'; rename it, "
            "e.g. to 'weather_v2'",
            id="dotted-file-name",
        ),
        pytest.param(
            "acme.tools",
            lambda path: (path.mkdir(), (path / "__init__.py").write_text("")),
            "cannot import PATH as a module: the name 'acme.tools' contains a '.'; rename it, "
            "e.g. to 'acme_tools'",
            id="dotted-package-name",
        ),
    ],
)
def test_paths_that_cannot_be_used(
    tmp_path: Path, relative: str, make: Callable[[Path], object] | None, message: str
) -> None:
    """Paths the file system refuses, and names that cannot be module names, are load errors
    that say why (not a traceback from deep inside pathlib or importlib)."""
    path = tmp_path / relative
    if make is not None:
        make(path)
    error = _load_failure(path)
    assert error.message == message.replace("PATH", str(path))


def test_a_file_named_like_an_imported_module_is_refused(tmp_path: Path) -> None:
    """A tool file called like a standard-library module would replace it for the whole
    process; it is refused instead."""
    path = _write(tmp_path / "json.py", GOOD_TOOL.format(name="weather"))
    error = _load_failure(path)
    assert error.message == (
        f"cannot import {path} as module 'json': that name is already used by "
        f"{Path(sys.modules['json'].__file__).resolve()}; rename the file or directory"
    )


def test_a_file_named_like_an_importable_module_is_refused(tmp_path: Path) -> None:
    """The same holds for a module that could be imported but was not imported yet."""
    if "tabnanny" in sys.modules:  # pragma: no cover - nothing here imports it
        pytest.skip("tabnanny is already imported")
    path = _write(tmp_path / "tabnanny.py", GOOD_TOOL.format(name="weather"))
    error = _load_failure(path)
    assert error.message.startswith(
        f"cannot import {path} as module 'tabnanny': that name is already used by "
    )
    assert error.message.endswith("tabnanny.py; rename the file or directory")
    assert "tabnanny" not in sys.modules


def test_a_second_file_with_the_same_name_is_refused(tmp_path: Path) -> None:
    """Two different files cannot both be loaded under one module name."""
    name = _unique()
    first = _write(tmp_path / "one" / f"{name}.py", GOOD_TOOL.format(name="a"))
    second = _write(tmp_path / "two" / f"{name}.py", GOOD_TOOL.format(name="b"))
    Toolkit.from_path(first)
    error = _load_failure(second)
    assert error.message == (
        f"cannot import {second} as module '{name}': that name is already used by {first}; "
        "rename the file or directory"
    )


def test_loaded_tools_are_tools(tmp_path: Path) -> None:
    """What a toolkit holds are Tool objects from the loaded module."""
    name = _unique()
    toolkit = Toolkit.from_path(_write(tmp_path / f"{name}.py", GOOD_TOOL.format(name="w")))
    assert all(isinstance(t, Tool) for t in toolkit)
    assert sys.modules[name].w is toolkit.get("w")


@pytest.mark.parametrize(
    "raised", ["GeneratorExit", "asyncio.CancelledError", "type('Odd', (BaseException,), {})"]
)
def test_a_module_raising_a_base_exception_is_a_load_error(
    tmp_path: Path, raised: str, request: pytest.FixtureRequest
) -> None:
    """A module that raises a BaseException other than an exit or an interrupt while it is
    imported is a ToolkitLoadError, as any other exception is."""
    name = f"hostile_import_{request.node.callspec.id.replace('-', '_').replace('.', '_')}"
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    path = tmp_path / f"{name}.py"
    path.write_text(f"import asyncio\nraise {raised}()\n")
    with pytest.raises(ToolkitLoadError) as caught:
        Toolkit.from_path(path)
    assert "could not import module" in caught.value.message
