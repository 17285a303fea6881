"""The shape of the package: what each module imports, and how long its functions are."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tdk"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: Longest function allowed, in lines (its signature and docstring included).
MAX_FUNCTION_LINES = 80


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported_at_load(name: str) -> set[str]:
    """The tdk modules ``name`` imports when it is loaded: module-level imports only, outside
    ``if TYPE_CHECKING:`` (imports inside functions run when called, not when loaded)."""
    tree = ast.parse(MODULES[name].read_text())
    found: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.If | ast.Try):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return {module for module in found if module in MODULES and module != name}


def test_importing_tdk_errors_loads_no_other_tdk_module() -> None:
    """``tdk.errors`` is a leaf: the package itself loads its names on first use."""
    code = "import sys, tdk.errors; print(sorted(m for m in sys.modules if m.startswith('tdk')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "['tdk', 'tdk.errors']"


def test_tdk_errors_imports_nothing_of_tdk_when_loaded() -> None:
    assert _imported_at_load("tdk.errors") == set()


def test_the_import_graph_has_no_circle() -> None:
    graph = {name: _imported_at_load(name) for name in MODULES}
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


def test_no_function_length_is_excused() -> None:
    excused = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in MODULES.values()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "PLR0915" in line
    ]
    assert excused == []


def test_only_the_tool_module_calls_into_the_definition_phase() -> None:
    """``tdk._define`` is entered by ``@tool`` alone (``tdk/__init__`` names ``ProblemKind``
    there for lazy loading)."""
    callers = set()
    for name, path in MODULES.items():
        if name.startswith("tdk._define") or name == "tdk":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tdk._define"):
                callers.add(name)
    assert callers == {"tdk._tool"}


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
