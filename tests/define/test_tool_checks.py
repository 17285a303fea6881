"""Every definition check of ``@tool``: a bad tool written to a real module, really imported.

Each case writes a module to a temporary directory, imports it, and checks the error class,
each problem's kind and parameter, and the exact ``str()`` a developer reads.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tdk import ProblemKind
from tdk.errors import (
    ErrorKind,
    ToolDefinitionError,
    ToolInputSchemaError,
    ToolOutputSchemaError,
)

HEADER = """\
from typing import Annotated, Any, Callable

from pydantic import Field

from tdk import ToolContext, tool
"""

PROBLEMS = Path(__file__).resolve().parents[2] / "docs" / "problems.md"


def _source(body: str) -> str:
    """The module text: a ``from __future__`` line first, then the common imports."""
    body = textwrap.dedent(body).lstrip("\n")
    if body.startswith("from __future__"):
        first, _, rest = body.partition("\n")
        return f"{first}\n{HEADER}{rest}"
    return f"{HEADER}\n\n{body}"


@pytest.fixture
def load_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], ModuleType]]:
    """Write a module with the given body to a temporary directory and import it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def load(body: str) -> ModuleType:
        name = f"tools_{uuid.uuid4().hex}"
        names.append(name)
        (tmp_path / f"{name}.py").write_text(_source(body))
        importlib.invalidate_caches()
        return importlib.import_module(name)

    yield load
    for name in names:
        sys.modules.pop(name, None)


def _raised(load: Callable[[str], ModuleType], body: str) -> ToolDefinitionError:
    with pytest.raises(ToolDefinitionError) as caught:
        load(body)
    return caught.value


def _kinds(error: ToolDefinitionError) -> list[tuple[str, str | None]]:
    return [(p["kind"], p["parameter"]) for p in error.details["problems"]]


#: The error classes a definition error can be, by name (as ``str()`` of the error names it).
_CLASSES = {
    cls.__name__: cls for cls in (ToolDefinitionError, ToolInputSchemaError, ToolOutputSchemaError)
}
_EXAMPLE = re.compile(
    r"^### (?P<title>.+?)\n\n```py\n(?P<body>.*?)^```\n\n```text\n(?P<text>.*?)\n```\n\n"
    r"Reported: (?P<reported>.*?)\.\n",
    re.DOTALL | re.MULTILINE,
)
_REPORTED = re.compile(r"`(?P<kind>\w+)`(?: at `(?P<parameter>[^`]+)`)?")


def _documented_checks() -> list[Any]:
    """The cases of ``docs/problems.md``: each example module, the class and problems its
    import reports, and the exact text (the page is the one source of them)."""
    section = PROBLEMS.read_text().split("## Every check", 1)[1]
    cases = []
    for match in _EXAMPLE.finditer(section):
        text = match["text"]
        class_name = text.split("] ", 1)[1].split(" ", 1)[0].rstrip(":")
        problems = [(m["kind"], m["parameter"]) for m in _REPORTED.finditer(match["reported"])]
        slug = re.sub(r"[^a-z0-9]+", "_", match["title"].lower()).strip("_")
        cases.append(pytest.param(match["body"], _CLASSES[class_name], problems, text, id=slug))
    assert len(cases) == section.count("\n### "), "an example of docs/problems.md is malformed"
    return cases


CHECKS = _documented_checks()


@pytest.mark.parametrize(("body", "error_class", "problems", "text"), CHECKS)
def test_check(
    load_module: Callable[[str], ModuleType],
    body: str,
    error_class: type[ToolDefinitionError],
    problems: list[tuple[str, str | None]],
    text: str,
) -> None:
    """Importing a module with a bad tool raises the error of the class the rule picks,
    listing the problem with its kind and parameter, and reads as documented."""
    error = _raised(load_module, body)
    assert type(error) is error_class
    assert _kinds(error) == problems
    assert str(error) == text


@pytest.mark.parametrize(("body", "error_class", "problems", "text"), CHECKS)
def test_problem_entries_have_fixed_keys(
    load_module: Callable[[str], ModuleType],
    body: str,
    error_class: type[ToolDefinitionError],
    problems: list[tuple[str, str | None]],
    text: str,
) -> None:
    """Every entry of ``details["problems"]`` has exactly parameter, problem, kind and a
    non-empty hint, and ``to_dict()`` serialises to JSON."""
    error = _raised(load_module, body)
    for entry in error.details["problems"]:
        assert set(entry) == {"parameter", "problem", "kind", "hint"}
        assert entry["problem"]
        assert entry["hint"]
    assert (
        json.loads(json.dumps(error.to_dict()))["details"]["problems"]
        == (error.details["problems"])
    )


def test_every_problem_kind_has_a_check() -> None:
    """The catalogue exercises every problem kind ``@tool`` can report."""
    tested = {kind for case in CHECKS for kind, _ in case.values[2]}
    assert tested == {kind.value for kind in ProblemKind}


def test_every_problem_kind_is_documented() -> None:
    """docs/problems.md names every problem kind in its table."""
    table = PROBLEMS.read_text().split("## Every check", 1)[0]
    missing = [kind.value for kind in ProblemKind if f"| `{kind.value}` |" not in table]
    assert missing == []


BELOW = "@tool resolves annotations as soon as it is applied"
TYPING_ONLY = "import or define 'Order' at module level, not only under `if TYPE_CHECKING:`"
ANYWHERE = "import or define 'Order' above the tool"
USES_ORDER = '''
@tool
def create(order: Annotated[Order, "The order."]) -> str:
    """Create an order."""
    return str(order)
'''


MOVE = "move the {what} of 'Order' at line {line} above the tool; " + BELOW


@pytest.mark.parametrize(
    ("above", "below", "expected"),
    [
        pytest.param("", "class Order(dict):\n    pass", "definition", id="class"),
        pytest.param("", "def Order() -> None:\n    pass", "definition", id="def"),
        pytest.param("", "async def Order() -> None:\n    pass", "definition", id="async-def"),
        pytest.param("", "Order = int", "definition", id="assignment"),
        pytest.param("", "Order, Other = int, str", "definition", id="tuple-assignment"),
        pytest.param("", "Order: Any = int", "definition", id="annotated-assignment"),
        pytest.param("", "from decimal import Decimal as Order", "import", id="import-from"),
        pytest.param("", "import Order", "import", id="import"),
        pytest.param(
            "", "try:\n    Order = int\nexcept ImportError:\n    pass", "definition", id="in-try"
        ),
        pytest.param(
            "", "try:\n    pass\nexcept ImportError:\n    Order = int", "definition", id="in-except"
        ),
        pytest.param(
            "",
            "if TYPE_CHECKING:\n    pass\nelse:\n    Order = int",
            "definition",
            id="in-else-of-type-checking",
        ),
        pytest.param(
            "if TYPE_CHECKING:\n    from decimal import Decimal as Order",
            "",
            TYPING_ONLY,
            id="type-checking",
        ),
        pytest.param(
            "import typing\n\nif typing.TYPE_CHECKING:\n    Order = int",
            "",
            TYPING_ONLY,
            id="typing-dot-type-checking",
        ),
        pytest.param("", "", ANYWHERE, id="nowhere"),
        pytest.param("if 1 > 2:\n    Order = int", "", ANYWHERE, id="above-but-not-run"),
        pytest.param("", "Order: Any", ANYWHERE, id="annotation-without-value"),
        pytest.param(
            "", "def make() -> None:\n    Order = int", ANYWHERE, id="bound-in-a-function"
        ),
        pytest.param("", "class Shop:\n    Order = int", ANYWHERE, id="bound-in-a-class"),
        pytest.param("", "settings = {}\nsettings['Order'] = int", ANYWHERE, id="item-assignment"),
    ],
)
def test_hint_for_an_undefined_name_says_where_it_is(
    load_module: Callable[[str], ModuleType], above: str, below: str, expected: str
) -> None:
    """The fix for an undefined name in an annotation depends on where the module binds it:
    below the tool (move it up, naming the line), only for type checkers, or nowhere."""
    future = "from __future__ import annotations\n\nfrom typing import TYPE_CHECKING\n\n"
    body = f"{future}{above}\n\n{USES_ORDER}\n\n{below}\n"
    error = _raised(load_module, body)
    assert _kinds(error) == [("unresolved_annotation", "order")]
    if expected in ("definition", "import"):  # the line of `below` that binds Order
        source = _source(body)
        first = source[: source.index(below)].count("\n") + 1
        offset = next(i for i, text in enumerate(below.splitlines()) if "Order" in text)
        expected = MOVE.format(what=expected, line=first + offset)
    assert error.details["problems"][0]["hint"] == expected


def test_hint_for_a_return_type_defined_below(load_module: Callable[[str], ModuleType]) -> None:
    """The return annotation gets the same fix as a parameter's."""
    error = _raised(
        load_module,
        '''
        from __future__ import annotations


        @tool
        def report() -> Report:
            """Build the weekly report."""
            return Report()


        class Report(dict):
            pass
        ''',
    )
    assert _kinds(error) == [("unresolved_return_annotation", "return")]
    assert error.details["problems"][0]["hint"] == (
        f"move the definition of 'Report' at line 15 above the tool; {BELOW}"
    )


GENERATED = r'''
import pathlib

SOURCE = """from __future__ import annotations

@tool(description="Create an order.")
def create(order: Annotated[Order, "The order."]) -> str:
    return str(order)

class Order(dict):
    pass
"""
FILE = {file}
if FILE != "<generated>":
    FILE = str(pathlib.Path(__file__).with_name(FILE))
    pathlib.Path(FILE).write_text("This file is no longer Python (")
exec(compile(SOURCE, FILE, "exec"), globals())
'''


@pytest.mark.parametrize(
    "file",
    ["<generated>", "changed.py"],
    ids=["no-source", "source-not-python-any-more"],
)
def test_hint_without_readable_source(load_module: Callable[[str], ModuleType], file: str) -> None:
    """A tool whose source cannot be read or parsed still gets a useful fix."""
    error = _raised(load_module, GENERATED.format(file=repr(file)))
    assert error.details["problems"][0]["hint"] == ANYWHERE


def test_five_mistakes_in_one_error(load_module: Callable[[str], ModuleType]) -> None:
    """A tool with five different mistakes gets all five, in one error, tool-level problems
    first and then in signature order."""
    error = _raised(
        load_module,
        '''
        @tool(name="find things", timeout=0)
        def find(q, limit: int = "ten"):
            """Find things.

            Args:
                q: The query.
                limit: How many results.
            """
        ''',
    )
    assert type(error) is ToolDefinitionError
    assert error.kind is ErrorKind.TOOL_DEFINITION_BAD_DEFINITION
    assert _kinds(error) == [
        ("invalid_name", None),
        ("invalid_timeout", None),
        ("missing_annotation", "q"),
        ("invalid_default", "limit"),
        ("missing_return_annotation", "return"),
    ]
    assert error.message.startswith("5 problems: tool name 'find things' (name=) is not")
    assert "\n" not in error.message


def test_input_and_output_problems_mixed_are_a_definition_error(
    load_module: Callable[[str], ModuleType],
) -> None:
    """Input and output problems together (and nothing else) raise the base class."""
    error = _raised(
        load_module,
        '''
        @tool
        def search(q):
            """Search the issues.

            Args:
                q: The query.
            """
        ''',
    )
    assert type(error) is ToolDefinitionError
    assert _kinds(error) == [("missing_annotation", "q"), ("missing_return_annotation", "return")]


def test_several_problems_of_one_parameter(load_module: Callable[[str], ModuleType]) -> None:
    """One parameter can have several problems; all are reported."""
    error = _raised(
        load_module,
        '''
        @tool
        def search(q, /) -> str:
            """Search the issues."""
            return ""
        ''',
    )
    assert type(error) is ToolInputSchemaError
    assert _kinds(error) == [
        ("positional_only_parameter", "q"),
        ("missing_annotation", "q"),
        ("missing_parameter_description", "q"),
    ]


def test_every_unsupported_parameter_is_named(load_module: Callable[[str], ModuleType]) -> None:
    """When several parameters have unusable types, each is reported, and a bad default of
    another parameter is still found."""
    error = _raised(
        load_module,
        '''
        class Connection:
            pass


        @tool
        def run(
            conn: Annotated[Connection, "The connection."],
            limit: Annotated[int, "How many."] = "ten",
            callback: Annotated[Callable[[], None], "Called at the end."] = print,
        ) -> str:
            """Run it."""
            return ""
        ''',
    )
    assert type(error) is ToolInputSchemaError
    assert _kinds(error) == [
        ("unsupported_type", "conn"),
        ("invalid_default", "limit"),
        ("unsupported_type", "callback"),
    ]


def test_developer_message_names_the_function_and_its_file(
    load_module: Callable[[str], ModuleType],
) -> None:
    """The developer message says where the function is and lists one problem per line."""
    error = _raised(
        load_module,
        '''
        @tool
        def search(q, limit) -> str:
            """Search the issues."""
            return ""
        ''',
    )
    assert error.developer_message is not None
    head, *lines = error.developer_message.splitlines()
    assert head.startswith("@tool found 4 problems in tools_")
    assert ".search (" in head
    assert ".py:" in head
    assert lines[0] == (
        "- missing_annotation: parameter 'q' has no type annotation. Fix: add one, e.g. q: str."
    )
    assert len(lines) == 4


def test_a_module_with_a_bad_tool_is_not_left_imported(
    load_module: Callable[[str], ModuleType],
) -> None:
    """The failed import leaves nothing behind in ``sys.modules`` (the error stops it)."""
    before = set(sys.modules)
    _raised(load_module, "@tool\ndef ping() -> str:\n    return 'pong'\n")
    assert {name for name in set(sys.modules) - before if name.startswith("tools_")} == set()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="typing.TypedDict works from 3.12")
def test_typing_typeddict_before_312_says_what_to_use(
    load_module: Callable[[str], ModuleType],
) -> None:
    """pydantic's own reason is kept when it tells the fix (here: which TypedDict to use)."""
    error = _raised(
        load_module,
        '''
        from typing import TypedDict


        class Filters(TypedDict):
            state: str


        @tool
        def search(filters: Annotated[Filters, "Filters."]) -> str:
            """Search the issues."""
            return ""
        ''',
    )
    assert _kinds(error) == [("unsupported_type", "filters")]
    assert (
        "Please use `typing_extensions.TypedDict` instead of `typing.TypedDict`"
        in (error.details["problems"][0]["problem"])
    )


# ---------------------------------------------------------------------------------------------
# Methods as tools: what works, and what a method decorated in its class body is told

_METHOD_TOOLS = {
    "bound-method": """
        class Weather:
            def __init__(self, unit: str) -> None:
                self.unit = unit

            def forecast(self, city: Annotated[str, "The city."]) -> str:
                \"\"\"Forecast the weather of a city.\"\"\"
                return f"{city}: 20 {self.unit}"


        forecast = tool(Weather("C").forecast)
        """,
    "bound-async-method": """
        class Weather:
            def __init__(self, unit: str) -> None:
                self.unit = unit

            async def forecast(self, city: Annotated[str, "The city."]) -> str:
                \"\"\"Forecast the weather of a city.\"\"\"
                return f"{city}: 20 {self.unit}"


        forecast = tool(Weather("C").forecast)
        """,
    "classmethod-bound-to-its-class": """
        class Weather:
            unit = "C"

            @classmethod
            def forecast(cls, city: Annotated[str, "The city."]) -> str:
                \"\"\"Forecast the weather of a city.\"\"\"
                return f"{city}: 20 {cls.unit}"


        forecast = tool(Weather.forecast)
        """,
    "tool-over-staticmethod": """
        class Weather:
            @tool
            @staticmethod
            def forecast(city: Annotated[str, "The city."]) -> str:
                \"\"\"Forecast the weather of a city.\"\"\"
                return f"{city}: 20 C"


        forecast = Weather.forecast
        """,
    "staticmethod-over-tool": """
        class Weather:
            @staticmethod
            @tool
            def forecast(city: Annotated[str, "The city."]) -> str:
                \"\"\"Forecast the weather of a city.\"\"\"
                return f"{city}: 20 C"


        forecast = Weather().forecast
        """,
}


@pytest.mark.parametrize("body", _METHOD_TOOLS.values(), ids=_METHOD_TOOLS.keys())
def test_a_method_made_a_tool_the_documented_ways_runs(
    load_module: Callable[[str], ModuleType], body: str
) -> None:
    """A bound method (of an instance, or a classmethod of its class) and a static method
    make tools whose schema holds the arguments a model sends, and which run, are loaded
    from their module, and can be called directly."""
    from tdk import Tool, Toolkit

    module = load_module(body)
    forecast = module.forecast
    assert isinstance(forecast, Tool)
    assert forecast.name == "forecast"
    assert forecast.description == "Forecast the weather of a city."
    assert forecast.definition.input_schema["required"] == ["city"]
    assert list(forecast.definition.input_schema["properties"]) == ["city"]
    assert forecast.run_sync({"city": "Oslo"}).value == "Oslo: 20 C"
    assert Toolkit.from_module(module).get("forecast") is forecast
    called = forecast(city="Bergen")
    if forecast.spec.is_async:
        called = asyncio.run(called)
    assert called == "Bergen: 20 C"


def test_a_method_with_other_problems_lists_them_all(
    load_module: Callable[[str], ModuleType],
) -> None:
    """A method decorated in its class body is one problem at its receiver; the problems of
    its other parameters are listed with it, in signature order."""
    error = _raised(
        load_module,
        '''
        class Issues:
            @tool
            def search(self, query) -> str:
                """Search the issues."""
                return query
        ''',
    )
    assert type(error) is ToolDefinitionError
    assert _kinds(error) == [
        ("method", "self"),
        ("missing_annotation", "query"),
        ("missing_parameter_description", "query"),
    ]
    assert "e.g. self: str" not in str(error)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            """
            @tool
            def search(self, query: Annotated[str, "Words."]) -> str:
                \"\"\"Search the issues.\"\"\"
                return query
            """,
            id="module-level-function",
        ),
        pytest.param(
            """
            def make():
                @tool
                def search(self, query: Annotated[str, "Words."]) -> str:
                    \"\"\"Search the issues.\"\"\"
                    return query

                return search


            search = make()
            """,
            id="function-in-a-function",
        ),
    ],
)
def test_a_parameter_named_self_outside_a_class_is_no_method(
    load_module: Callable[[str], ModuleType], body: str
) -> None:
    """Outside a class body, a first parameter named ``self`` is an ordinary parameter (here:
    one without an annotation), not a method's receiver."""
    error = _raised(load_module, body)
    assert ("missing_annotation", "self") in _kinds(error)
    assert "method" not in [kind for kind, _ in _kinds(error)]


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(classmethod(_source), id="classmethod-outside-a-class"),
        pytest.param(staticmethod(len), id="staticmethod-of-a-builtin"),
    ],
)
def test_a_wrapper_of_something_else_than_a_method_is_not_a_function(target: Any) -> None:
    """A classmethod or staticmethod that is no method of a class is not a function, and
    the fix says to define one."""
    from tdk import tool

    with pytest.raises(ToolDefinitionError) as raised:
        tool(target)
    [problem] = raised.value.details["problems"]
    assert (problem["kind"], problem["hint"]) == (
        "not_a_function",
        "define the tool as a module-level function",
    )
