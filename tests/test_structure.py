"""The shape of the package: what each module imports, and how long its functions are."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tdk

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tdk"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: Longest function allowed, in lines (its signature and docstring included).
MAX_FUNCTION_LINES = 80


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _ancestors(name: str) -> set[str]:
    """The packages above module ``name`` (Python loads each before the module)."""
    parts = name.split(".")
    return {".".join(parts[:n]) for n in range(1, len(parts))}


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _walk(node: ast.AST, *, type_checking: bool = False) -> Iterator[ast.AST]:
    """Every node under ``node``, at any depth (functions, classes, ``if``, ``try``...), the
    bodies of ``if TYPE_CHECKING:`` only when ``type_checking`` (they never run)."""
    for child in ast.iter_child_nodes(node):
        yield child
        if isinstance(child, ast.If) and _is_type_checking(child) and not type_checking:
            for orelse in child.orelse:
                yield orelse
                yield from _walk(orelse)
        else:
            yield from _walk(child, type_checking=type_checking)


def _absolute(importer: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative ones resolved."""
    if not node.level:
        return node.module or ""
    package = importer if MODULES[importer].name == "__init__.py" else importer.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _lazy_names(package: str) -> dict[str, str]:
    """The names a package's module ``__getattr__`` loads on first use -> the module each is
    loaded from, as its ``if TYPE_CHECKING:`` imports (written for type checkers) name them;
    empty for a package without one. ``tdk/__init__`` names the error tree there too."""
    tree = ast.parse(MODULES[package].read_text())
    if not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
        return {}
    return {
        alias.asname or alias.name: node.module
        for check in tree.body
        if _is_type_checking(check)
        for node in ast.walk(check)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


LAZY_NAMES = {name: _lazy_names(name) for name in MODULES if MODULES[name].name == "__init__.py"}


def _targets(importer: str, module: str, names: list[str]) -> set[str]:
    """The tdk modules an import of ``names`` from ``module`` (or of ``module`` itself) loads:
    the module, the packages above it, and each name that is a module of its own or one that
    the package's ``__getattr__`` loads. A package above the importer is left out: it is
    loaded before the importer, and reading a name it defines loads nothing more."""
    found = {module, *_ancestors(module)}
    for name in names:
        if f"{module}.{name}" in MODULES:
            found.add(f"{module}.{name}")
        elif name in LAZY_NAMES.get(module, {}):
            found.add(LAZY_NAMES[module][name])
    return {t for t in found if t in MODULES and t != importer} - _ancestors(importer)


def _imports(name: str, *, type_checking: bool = False) -> set[str]:
    """Every tdk module that loading ``name``, or calling anything in it, may import: import
    statements at any depth, ``importlib.import_module("...")`` of a literal name, and, for a
    package with a module ``__getattr__``, every module it loads names from. Imports under
    ``if TYPE_CHECKING:`` (which never run) count only when ``type_checking``."""
    found = {*LAZY_NAMES.get(name, {}).values()} - {name}
    for node in _walk(ast.parse(MODULES[name].read_text()), type_checking=type_checking):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found |= _targets(name, alias.name, [])
        elif isinstance(node, ast.ImportFrom):
            found |= _targets(name, _absolute(name, node), [a.name for a in node.names])
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found |= _targets(name, str(node.args[0].value), [])
    return found


#: The tdk modules that exist to wrap an optional extra (``mcp``, ``redis``), which ``import
#: tdk`` must not load: the only ones an exempted import may reach.
EXTRA_WRAPPERS = frozenset(
    {"tdk.hosts.mcp", "tdk.runner._redis", "tdk.runner._redis_links", "tdk.runner._redis_scripts"}
)
#: Imports left out of the import graph: (importer, imported) -> why. Only an import, inside a
#: function, of one of :data:`EXTRA_WRAPPERS` may be listed, and only while it closes a
#: circle. None does: every import counts.
EXEMPT: dict[tuple[str, str], str] = {}


def _graph() -> dict[str, set[str]]:
    return {
        name: {target for target in _imports(name) if (name, target) not in EXEMPT}
        for name in MODULES
    }


def test_tdk_errors_imports_nothing_of_tdk() -> None:
    """``tdk.errors`` is the foot of the graph: no import of a tdk module at any depth, not
    even one for type checkers, and no dynamic import at all."""
    source = MODULES["tdk.errors"].read_text()
    assert _imports("tdk.errors", type_checking=True) == set()
    assert "import_module" not in source
    assert "__import__" not in source


def test_importing_tdk_errors_loads_no_other_tdk_module() -> None:
    """``import tdk.errors`` loads the package (which loads nothing of its own) and itself."""
    code = "import sys, tdk.errors; print(sorted(m for m in sys.modules if m.startswith('tdk')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "['tdk', 'tdk.errors']"


#: What a user may do with ``tdk.errors`` alone, in a fresh process, that needs the error
#: pipeline ``tdk.errors`` delegates to: each line must print what follows it.
FRESH_PROCESS_USES = [
    pytest.param(
        "ErrorInfo.from_exception(TimeoutError('slow')).kind.value",
        "'TOOL_RUNTIME_TIMEOUT'",
        id="from_exception",
    ),
    pytest.param(
        "ErrorInfo.from_error_string('[TOOL_RUNTIME_RETRY] RetryableToolError: again').error",
        "'RetryableToolError'",
        id="from_error_string",
    ),
    pytest.param(
        "ToolError('m', details={1: {2, 3}}).details", "{'1': [2, 3]}", id="details-cleaned"
    ),
    pytest.param(
        "ToolError('a\\nb', tool_name='t').to_log_line()",
        "'kind=UNKNOWN tool=t category=execution retryable=false status=- retry_after_ms=- "
        'cause=- message="a\\\\nb"\'',
        id="to_log_line",
    ),
    pytest.param("ToolError('m').to_error_info().message", "'m'", id="to_error_info"),
]


@pytest.mark.parametrize(("expression", "expected"), FRESH_PROCESS_USES)
def test_tdk_errors_alone_reaches_its_pipeline(expression: str, expected: str) -> None:
    """``from tdk.errors import ...`` alone, in a fresh process (nothing else of tdk
    imported first), gives every method that the error pipeline does for ``tdk.errors``."""
    code = f"from tdk.errors import ErrorInfo, ToolError\nprint(repr({expression}))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == expected


def test_the_graph_sees_imports_inside_functions() -> None:
    """The graph counts an import inside a function as an import (the lazy httpx rows of the
    mapping table are one), and the names a package's ``__getattr__`` loads."""
    assert "tdk._failures.httpx_rows" in _imports("tdk._failures.table")
    assert "tdk.http._classify" in _imports("tdk._failures.foreign")
    assert "tdk.http" in _imports("tdk._failures.foreign")  # (its package runs first)
    assert {"tdk._define.tool", "tdk.errors", "tdk._failures.link"} <= _imports("tdk")
    assert "tdk.runner._redis" in _imports("tdk.runner")


def test_lazy_names_are_loaded_from_the_modules_the_graph_reads() -> None:
    """The root package loads each name from the module its ``if TYPE_CHECKING:`` imports
    name (which the graph reads): the two lists cannot drift apart."""
    loaded_from = {  # (``RedisStore``: through ``tdk.runner``'s own ``__getattr__``)
        name: LAZY_NAMES.get(module, {}).get(name, module) for name, module in tdk._LAZY.items()
    }
    assert loaded_from == {n: m for n, m in LAZY_NAMES["tdk"].items() if m != "tdk.errors"}
    assert {n for n, m in LAZY_NAMES["tdk"].items() if m == "tdk.errors"} == {
        n for n in tdk.__all__ if n not in tdk._LAZY and n != "__version__"
    }


def test_the_import_graph_has_no_circle() -> None:
    """No circle among tdk modules, counting every import (see :func:`_imports`)."""
    assert {imported for _, imported in EXEMPT} <= EXTRA_WRAPPERS
    graph = _graph()
    state: dict[str, str] = {}

    def walk(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                circle = [*path[path.index(target) :], target]
                pytest.fail("import circle: " + " -> ".join(circle))
            if target not in state:
                walk(target, [*path, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])


def test_the_http_hook_needs_nothing_of_the_error_pipeline() -> None:
    """The dependency between the mapping table and the classifier points one way: the
    httpx rows use ``tdk.http``; ``tdk.http`` reaches no module of the pipeline but the list of
    hidden characters and the redaction of secrets (two leaves: they import nothing)."""
    reached: set[str] = set()
    todo = [name for name in MODULES if name.startswith("tdk.http")]
    graph = _graph()
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(graph[name])
    assert {name for name in reached if name.startswith("tdk._failures")} == {
        "tdk._failures",
        "tdk._failures.hidden",
        "tdk._failures.redact",
    }
    assert not graph["tdk._failures.hidden"]
    assert not graph["tdk._failures.redact"]


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    return [
        (f"{_module_name(path)}.{node.name}:{node.lineno}", node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno
    ]


def test_no_function_is_longer_than_80_lines() -> None:
    long = [
        f"{name} ({lines} lines)"
        for path in MODULES.values()
        for name, lines in _functions(path)
        if lines > MAX_FUNCTION_LINES
    ]
    assert long == []


#: Size limits of packages split by idea (issue 23): longest module, class and function, in
#: lines (a function's and a class's signature and docstring included).
SPLIT_PACKAGES = {"tdk.runner": {"module": 700, "class": 450, "function": 60}}


def _sizes(path: Path, kind: str) -> list[tuple[str, int]]:
    """The modules, classes or functions of ``path`` (by ``kind``) and their lengths."""
    if kind == "module":
        return [(_module_name(path), len(path.read_text().splitlines()))]
    if kind == "function":
        return _functions(path)
    return [
        (f"{_module_name(path)}.{node.name}:{node.lineno}", node.end_lineno - node.lineno + 1)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and node.end_lineno
    ]


@pytest.mark.parametrize(
    ("package", "kind"),
    [(p, k) for p, limits in SPLIT_PACKAGES.items() for k in limits],
    ids=[f"{p}-{k}" for p, limits in SPLIT_PACKAGES.items() for k in limits],
)
def test_split_packages_keep_their_size_limits(package: str, kind: str) -> None:
    limit = SPLIT_PACKAGES[package][kind]
    over = [
        f"{name} ({lines} lines)"
        for module, path in MODULES.items()
        if module == package or module.startswith(f"{package}.")
        for name, lines in _sizes(path, kind)
        if lines > limit
    ]
    assert over == []


#: What ``tdk/`` lists besides its package files: the public modules and a few private
#: packages by concern (docs/architecture.md draws the plan).
TOP_LEVEL = {
    "errors.py", "http", "hosts", "runner",  # public
    "_execution", "_define", "_failures", "_cli", "_compat",  # private, by concern
}  # fmt: skip
MAX_TOP_LEVEL = 12


def test_the_top_level_shows_the_floor_plan() -> None:
    """``tdk/`` holds its public modules and a handful of folders: a new module goes into the
    package of its concern (the limit of issue 23 is 12 entries)."""
    entries = {
        entry.name
        for entry in PACKAGE.iterdir()
        if entry.name not in {"__init__.py", "__main__.py", "py.typed", "__pycache__"}
    }
    assert entries == TOP_LEVEL
    assert len(entries) <= MAX_TOP_LEVEL


def test_no_function_length_is_excused() -> None:
    excused = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in MODULES.values()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "PLR0915" in line
    ]
    assert excused == []


#: What the definition phase hands the rest of tdk: its records and the public objects built
#: on them, and the import of the modules they are loaded from (which the ``tdk`` command's
#: targets read too). The checks that make a definition (build, options, docstrings,
#: signature, schema, problems) are private to ``tdk._define``.
DEFINITION_PRODUCTS = frozenset(
    {"tdk._define.definition", "tdk._define.modules", "tdk._define.tool", "tdk._define.toolkit"}
)


def test_only_the_tool_module_calls_into_the_definition_phase() -> None:
    """The checks of ``tdk._define`` are entered by ``@tool`` alone (``tdk/__init__`` names
    ``ProblemKind`` there for lazy loading); the rest of tdk reads only its products."""
    callers = set()
    for name, path in MODULES.items():
        if name == "tdk" or (name.startswith("tdk._define") and name not in DEFINITION_PRODUCTS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if (module or "").startswith("tdk._define") and module not in DEFINITION_PRODUCTS:
                callers.add(name)
    assert callers == {"tdk._define.tool"}


#: The verbs every host module of ``tdk.hosts`` offers, each meaning the same in every host
#: (MISSION sections 9 and 10 name them).
HOST_VERBS = frozenset({"tools", "calls", "results"})


def test_no_two_modules_or_functions_share_a_name() -> None:
    """A name means one thing across the package: no two modules called the same, and no two
    module-level functions (``@overload`` stubs, module hooks, and the host verbs of the
    public host modules, aside)."""
    modules = [name.rpartition(".")[2] for name in MODULES if not name.endswith("__init__")]
    packages = {name for name in MODULES if MODULES[name].name == "__init__.py"}
    stems = [stem for stem, name in zip(modules, MODULES, strict=True) if name not in packages]
    assert sorted({s for s in stems if stems.count(s) > 1}) == []
    seen: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        host = name.startswith("tdk.hosts.") and not name.rpartition(".")[2].startswith("_")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not any(
                "overload" in ast.unparse(d) for d in node.decorator_list
            ):
                if (host and node.name in HOST_VERBS) or node.name.startswith("__"):
                    continue  # (module hooks such as ``__getattr__`` are the language's names)
                seen.setdefault(node.name, []).append(name)
    assert {f: m for f, m in seen.items() if len(m) > 1} == {}


#: Libraries whose private names tdk may read in :mod:`tdk._compat` only.
FOREIGN = frozenset(
    {
        "anyio",
        "asyncio",
        "httpcore",
        "httpx",
        "logging",
        "mcp",
        "opentelemetry",
        "pydantic",
        "pydantic_core",
        "redis",
        "starlette",
        "sys",
        "threading",
        "uvicorn",
    }
)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _foreign_private_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] in FOREIGN and any(_private(part) for part in parts[1:])


def _foreign_names(tree: ast.AST) -> set[str]:
    """The names a module binds to a foreign module or to a name imported from one."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FOREIGN:
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FOREIGN:
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _reads_by_name(node: ast.AST, foreign: set[str]) -> bool:
    """``getattr(x, "_name")`` or ``hasattr(...)`` of a foreign ``x``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    if node.func.id not in ("getattr", "hasattr") or len(node.args) < 2:
        return False
    target, name = node.args[0], node.args[1]
    return (
        _root(target) in foreign
        and isinstance(name, ast.Constant)
        and isinstance(name.value, str)
        and _private(name.value)
    )


def _foreign_internals(tree: ast.AST) -> list[str]:
    """Where a module reads a private name of a foreign library: an import from a private
    module or of a private name, an attribute (``asyncio.tasks._current_tasks``, a slot taken
    from a class's ``__dict__``), ``getattr``/``hasattr`` of one, or a private module named
    in a string (``importlib.import_module("httpx._auth")``)."""
    foreign = _foreign_names(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if _foreign_private_module(module) or (
                module.split(".")[0] in FOREIGN and any(_private(a.name) for a in node.names)
            ):
                found.append(f"{line}: from {module} import ...")
        elif isinstance(node, ast.Import):
            found += [
                f"{line}: import {a.name}" for a in node.names if _foreign_private_module(a.name)
            ]
        elif isinstance(node, ast.Attribute) and _root(node.value) in foreign:
            if (
                _private(node.attr) or node.attr == "__dict__"
            ):  # (a class's slots, a module's globals)
                found.append(f"{line}: {ast.unparse(node)}")
        elif _reads_by_name(node, foreign) or (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _foreign_private_module(node.value)
            and " " not in node.value
        ):
            found.append(f"{line}: {ast.unparse(node)}")
    return found


#: The package allowed to read other libraries' internals.
COMPAT = "tdk._compat"


def test_only_the_compat_package_reads_other_libraries_internals() -> None:
    """Every private name of a foreign library that tdk reads is read in :mod:`tdk._compat`,
    where its versions and its public fallback are written down and tested."""
    found = {
        name: reads
        for name, path in MODULES.items()
        if name != COMPAT and not name.startswith(COMPAT + ".")
        if (reads := _foreign_internals(ast.parse(path.read_text())))
    }
    assert found == {}


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import asyncio\nasyncio.tasks._current_tasks.get", id="attribute"),
        pytest.param("from httpx._auth import FunctionAuth", id="private-module"),
        pytest.param("from asyncio.tasks import _current_tasks", id="private-name"),
        pytest.param("import opentelemetry.metrics._internal", id="import-private"),
        pytest.param("from pydantic import BaseModel\nBaseModel.__dict__['__dict__']", id="slot"),
        pytest.param("import asyncio\ngetattr(asyncio.tasks, '_current_tasks')", id="getattr"),
        pytest.param("import sys\nsys._getframe(1)", id="sys"),
        pytest.param("importlib.import_module('httpx._auth')", id="string"),
    ],
)
def test_the_internals_scan_sees_each_way_of_reading(source: str) -> None:
    assert len(_foreign_internals(ast.parse(source))) == 1


@pytest.mark.parametrize(
    "name", ["frames", "httpx_auth", "otel_globals", "pydantic_slots", "running_task"]
)
def test_the_compat_modules_are_what_the_scan_would_catch(name: str) -> None:
    """The exemption is not for nothing: each compat module reads what the scan looks for."""
    assert _foreign_internals(ast.parse(MODULES[f"{COMPAT}.{name}"].read_text()))


def _private_imports(name: str) -> list[str]:
    """The private names (``_log_failure``, not a module like ``_breaker``) that module
    ``name`` imports from another tdk module."""
    found = []
    for node in _walk(ast.parse(MODULES[name].read_text()), type_checking=True):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = _absolute(name, node)
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if module.startswith("tdk") and private and f"{module}.{alias.name}" not in MODULES:
                found.append(f"{name}: {module}.{alias.name}")
    return found


def test_no_module_imports_a_private_name_of_another() -> None:
    """What modules share is named as shared (``tdk._execution.call_scope.failed_instead``): no host
    reaches into execution, nor any module into another's privates."""
    assert [found for name in MODULES for found in _private_imports(name)] == []


#: Calls that make a ToolResult from its fields.
_RESULT_MAKERS = (
    "ToolResult(",
    "maker(ToolResult)",
    "ToolResult.model_validate",
    "model_construct",
)


def test_only_the_call_scope_makes_a_result() -> None:
    """Every front door (a tool, a toolkit, the runner, a host) has its results, failures
    above all, made by ``tdk._execution.call_scope``: one place classifies, redacts and logs
    them."""
    makers = {
        name
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and ast.unparse(node).startswith(_RESULT_MAKERS)
    }
    assert makers == {"tdk._execution.call_scope"}


def test_the_runner_reports_its_decisions_only_through_its_instruments() -> None:
    """The runner emits typed events (``tdk.runner._events``); tdk's log records and
    OpenTelemetry events and metrics are instruments that hear them (``_instruments``), not
    calls spread through the guards and the attempt loop. (The Redis store's records about its
    connection are the store's own.)"""
    reporting = {"event", "counted", "circuit_changed"}
    callers = {
        name
        for name in MODULES
        if name.startswith("tdk.runner.") and name != "tdk.runner._instruments"
        for node in ast.walk(ast.parse(MODULES[name].read_text()))
        if (
            (isinstance(node, ast.ImportFrom) and node.module == "tdk._execution.telemetry")
            and reporting & {alias.name for alias in node.names}
        )
        or (
            (isinstance(node, ast.Call) and ast.unparse(node.func) == "logger.info")
            and not name.startswith("tdk.runner._redis")
        )
    }
    assert callers == set()
