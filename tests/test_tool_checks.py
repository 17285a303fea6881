"""Every definition check of ``@tool``: a bad tool written to a real module, really imported.

Each case writes a module to a temporary directory, imports it, and checks the error class,
each problem's kind and parameter, and the exact ``str()`` a developer reads.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

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

DOCS = Path(__file__).parent.parent / "docs" / "definitions.md"


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


CHECKS = [
    pytest.param(
        """
        @tool
        def ping() -> str:
            return "pong"
        """,
        ToolDefinitionError,
        [("missing_description", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool 'ping': "
            "1 problem: the tool has no description: no docstring and no description= (add a "
            "docstring saying what the tool does, or pass description='...')"
        ),
        id="missing_description",
    ),
    pytest.param(
        """
        @tool(description="   ")
        def ping() -> str:
            return "pong"
        """,
        ToolDefinitionError,
        [("missing_description", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool 'ping': "
            "1 problem: description= must be a non-blank string (say what the tool does, e.g. "
            "description='Search the issues of a repository')"
        ),
        id="blank_description",
    ),
    pytest.param(
        '''
        @tool(name="search issues")
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_name", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool 'search "
            "issues': 1 problem: tool name 'search issues' (name=) is not 1-64 letters, digits, "
            "'_' or '-' (pass a valid name, e.g. @tool(name='search_issues'))"
        ),
        id="invalid_name",
    ),
    pytest.param(
        '''
        def _make():
            def search() -> str:
                """Search the issues."""
                return ""

            search.__name__ = "search." + "x" * 70
            return search


        search = tool(_make())
        ''',
        ToolDefinitionError,
        [("invalid_name", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx': 1 "
            "problem: tool name 'search.xxxxxxxxxxxxxxxxxxxx...xxxxxxxxxxxxxxxxxxxxxxxxxxxx' "
            "(the function name) is not 1-64 letters, digits, '_' or '-' (pass a valid name, "
            "e.g. @tool(name='search_issues'))"
        ),
        id="invalid_function_name",
    ),
    pytest.param(
        '''
        @tool(name=42)
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_name", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: name= must be a string, not int (pass a name such as "
            "name='search_issues')"
        ),
        id="name_not_a_string",
    ),
    pytest.param(
        '''
        @tool(requires_secrets="API_KEY")
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_requirement", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: requires_secrets= must be a list of names, not str (write "
            "requires_secrets=['API_KEY'] even for a single secret)"
        ),
        id="requirements_a_string",
    ),
    pytest.param(
        '''
        @tool(requires_metadata=["tenant", " "])
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_requirement", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: requires_metadata= contains ' ', which is not a non-blank name "
            "(list each metadata value by its name, e.g. requires_metadata=['tenant_id'])"
        ),
        id="blank_requirement",
    ),
    pytest.param(
        '''
        @tool(requires_secrets=["API_KEY", "api_key"])
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("duplicate_requirement", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: requires_secrets= names 'API_KEY' and 'api_key', which are the "
            "same ignoring case (list each secret once)"
        ),
        id="duplicate_requirement",
    ),
    pytest.param(
        '''
        @tool(timeout=0)
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_timeout", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: timeout= must be a positive number of seconds, not 0 (pass "
            "e.g. timeout=30, or leave it out for no time limit)"
        ),
        id="zero_timeout",
    ),
    pytest.param(
        '''
        @tool(inline="yes")
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_inline", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: inline= must be True or False, not 'yes' (pass inline=True "
            "for a trivial sync tool, or leave it out)"
        ),
        id="inline_not_a_bool",
    ),
    pytest.param(
        '''
        @tool(inline=True)
        async def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_inline", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: inline=True applies to sync tools only; an async tool "
            "already runs on the loop (remove inline=True)"
        ),
        id="inline_async",
    ),
    pytest.param(
        '''
        @tool(inline=True, timeout=5)
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_inline", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: inline=True and timeout= cannot be combined: an inline call "
            "blocks the event loop, so no time limit can interrupt it (drop inline=True to run "
            "the tool in a worker thread, or drop timeout=)"
        ),
        id="inline_with_timeout",
    ),
    pytest.param(
        '''
        @tool(timeout="30")
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_timeout", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: timeout= must be a positive number of seconds, not '30' (pass "
            "e.g. timeout=30, or leave it out for no time limit)"
        ),
        id="timeout_not_a_number",
    ),
    pytest.param(
        '''
        @tool(deprecated="")
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("invalid_deprecation", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: deprecated= must be a non-blank message, not '' (say what to "
            "use instead, e.g. deprecated='use search_issues instead')"
        ),
        id="blank_deprecation",
    ),
    pytest.param(
        '''
        @tool
        def numbers() -> list[int]:
            """Count to three."""
            yield from (1, 2, 3)
        ''',
        ToolDefinitionError,
        [("generator_function", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'numbers': 1 problem: function 'numbers' yields values instead of returning one "
            "(return the complete value, for example a list, instead of yielding parts)"
        ),
        id="generator",
    ),
    pytest.param(
        '''
        @tool
        async def numbers() -> list[int]:
            """Count to three."""
            yield 1
        ''',
        ToolDefinitionError,
        [("generator_function", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'numbers': 1 problem: function 'numbers' yields values instead of returning one "
            "(return the complete value, for example a list, instead of yielding parts)"
        ),
        id="async_generator",
    ),
    pytest.param(
        '''
        @tool
        @tool
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("already_a_tool", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: @tool was applied to 'search', which is already a tool (apply "
            "@tool once, with all options in that one call)"
        ),
        id="applied_twice",
    ),
    pytest.param(
        '''
        @tool
        class Search:
            """Search the issues."""
        ''',
        ToolDefinitionError,
        [("not_a_function", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'Search': 1 problem: @tool was applied to 'Search' of type type, not a function "
            "(apply @tool to a function defined with def or async def)"
        ),
        id="applied_to_a_class",
    ),
    pytest.param(
        '''
        @tool("search")
        def search() -> str:
            """Search the issues."""
            return ""
        ''',
        ToolDefinitionError,
        [("not_a_function", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError: 1 problem: @tool was applied "
            "to an object of type str, not a function (pass options as keywords, e.g. "
            "@tool(name='search'))"
        ),
        id="name_passed_positionally",
    ),
    pytest.param(
        '''
        @tool
        def search(q) -> str:
            """Search the issues.

            Args:
                q: The query.
            """
            return q
        ''',
        ToolInputSchemaError,
        [("missing_annotation", "q")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameter 'q' has no type annotation (add one, e.g. q: str)"
        ),
        id="missing_annotation",
    ),
    pytest.param(
        '''
        from __future__ import annotations

        from typing import TYPE_CHECKING

        if TYPE_CHECKING:
            from decimal import Decimal


        @tool
        def refund(amount: Decimal) -> str:
            """Refund an order.

            Args:
                amount: How much to refund.
            """
            return str(amount)
        ''',
        ToolInputSchemaError,
        [("unresolved_annotation", "amount")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'refund': 1 problem: the annotation of parameter 'amount' refers to 'Decimal', "
            "which is not defined where the tool is defined (import or define 'Decimal' at "
            "module level, not only under `if TYPE_CHECKING:`)"
        ),
        id="unresolved_annotation",
    ),
    pytest.param(
        '''
        from __future__ import annotations

        from pydantic import BaseModel


        @tool
        def create(order: Order) -> str:
            """Create an order.

            Args:
                order: The order to create.
            """
            return order.sku


        class Order(BaseModel):
            sku: str
        ''',
        ToolInputSchemaError,
        [("unresolved_annotation", "order")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'create': 1 problem: the annotation of parameter 'order' refers to 'Order', "
            "which is not defined where the tool is defined (move the definition of 'Order' "
            "at line 21 above the tool; @tool resolves annotations as soon as it is applied)"
        ),
        id="model_defined_below_the_tool",
    ),
    pytest.param(
        '''
        class Connection:
            pass


        @tool
        def query(conn: Connection) -> str:
            """Run a query.

            Args:
                conn: The database connection.
            """
            return ""
        ''',
        ToolInputSchemaError,
        [("unsupported_type", "conn")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'query': 1 problem: parameter 'conn' has type Connection, which pydantic cannot "
            "validate (use a JSON-friendly type: str, int, float, bool, None, an Enum or "
            "Literal, list/tuple/set/dict[str, T] of those, a pydantic model, a dataclass or a "
            "TypedDict)"
        ),
        id="unsupported_type",
    ),
    pytest.param(
        '''
        @tool
        def apply(callback: Callable[[int], int]) -> int:
            """Apply a function.

            Args:
                callback: The function to apply.
            """
            return callback(1)
        ''',
        ToolInputSchemaError,
        [("unsupported_type", "callback")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'apply': 1 problem: parameter 'callback' has type Callable[[int], int], which "
            "cannot be described as JSON Schema (use a JSON-friendly type: str, int, float, "
            "bool, None, an Enum or Literal, list/tuple/set/dict[str, T] of those, a pydantic "
            "model, a dataclass or a TypedDict)"
        ),
        id="type_without_json_schema",
    ),
    pytest.param(
        '''
        @tool
        def search(q: str) -> str:
            """Search the issues."""
            return q
        ''',
        ToolInputSchemaError,
        [("missing_parameter_description", "q")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameter 'q' has no description (document it in the "
            'docstring\'s Args section as "q: ...", or use Annotated[T, "description"] or '
            "Field(description=...))"
        ),
        id="missing_parameter_description",
    ),
    pytest.param(
        '''
        @tool
        def search(q: str) -> str:
            """Search the issues.

            Args:
                q: The query.
                limit: How many results to return.
            """
            return q
        ''',
        ToolInputSchemaError,
        [("unknown_documented_parameter", "limit")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: the docstring documents parameter 'limit', which the function "
            "does not have (remove the entry or fix its spelling)"
        ),
        id="unknown_documented_parameter",
    ),
    pytest.param(
        '''
        @tool
        def search(*terms: str) -> str:
            """Search the issues.

            Args:
                terms: Words to look for.
            """
            return " ".join(terms)
        ''',
        ToolInputSchemaError,
        [("variadic_parameter", "terms")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameter '*terms' accepts any number of arguments, which a "
            "JSON Schema cannot describe (replace it with named parameters, or one parameter of "
            "type list[...] / dict[str, ...])"
        ),
        id="var_positional",
    ),
    pytest.param(
        '''
        @tool
        def search(**filters: str) -> str:
            """Search the issues.

            Args:
                filters: Field filters.
            """
            return str(filters)
        ''',
        ToolInputSchemaError,
        [("variadic_parameter", "filters")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameter '**filters' accepts any number of arguments, which a "
            "JSON Schema cannot describe (replace it with named parameters, or one parameter of "
            "type list[...] / dict[str, ...])"
        ),
        id="var_keyword",
    ),
    pytest.param(
        '''
        @tool
        def search(q: Annotated[str, "The query."], /) -> str:
            """Search the issues."""
            return q
        ''',
        ToolInputSchemaError,
        [("positional_only_parameter", "q")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameter 'q' is positional-only, but tools are called with "
            "keyword arguments (remove the '/' from the signature)"
        ),
        id="positional_only",
    ),
    pytest.param(
        '''
        @tool
        def search(context: ToolContext, again: ToolContext) -> str:
            """Search the issues."""
            return ""
        ''',
        ToolInputSchemaError,
        [("multiple_context_parameters", "again")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameters 'context' and 'again' both ask for the ToolContext "
            "(keep one ToolContext parameter)"
        ),
        id="two_context_parameters",
    ),
    pytest.param(
        '''
        @tool
        def search(limit: Annotated[int, "How many results."] = "ten") -> str:
            """Search the issues."""
            return ""
        ''',
        ToolInputSchemaError,
        [("invalid_default", "limit")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: the default of parameter 'limit' ('ten') is not a valid int: "
            "Input should be a valid integer, unable to parse string as an integer (change the "
            "default or the type, e.g. T | None for a default of None)"
        ),
        id="invalid_default",
    ),
    pytest.param(
        '''
        @tool
        def search(limit: Annotated[int, "How many results."] = None) -> str:
            """Search the issues."""
            return ""
        ''',
        ToolInputSchemaError,
        [("invalid_default", "limit")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: the default of parameter 'limit' (None) is not a valid int: "
            "Input should be a valid integer (change the default or the type, e.g. T | None for "
            "a default of None)"
        ),
        id="none_default_for_non_optional",
    ),
    pytest.param(
        '''
        @tool
        def search(limit: Annotated[int, Field(ge=1, description="How many results.")] = 0) -> str:
            """Search the issues."""
            return ""
        ''',
        ToolInputSchemaError,
        [("invalid_default", "limit")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: the default of parameter 'limit' (0) is not a valid int: Input "
            "should be greater than or equal to 1 (change the default or the type, e.g. T | None "
            "for a default of None)"
        ),
        id="default_violates_constraint",
    ),
    pytest.param(
        '''
        @tool
        def tag(
            labels: Annotated[list[str], Field(default_factory=[], description="Labels.")],
        ) -> str:
            """Tag an issue."""
            return ""
        ''',
        ToolInputSchemaError,
        [("invalid_default_factory", "labels")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'tag': 1 problem: the default_factory of parameter 'labels' is [], which is not "
            "callable (pass a function, e.g. Field(default_factory=list))"
        ),
        id="default_factory_not_callable",
    ),
    pytest.param(
        '''
        @tool
        def search(q: Annotated[str, "query", "The query.", "Words to find."]) -> str:
            """Search the issues."""
            return q
        ''',
        ToolInputSchemaError,
        [("too_many_annotated_strings", "q")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameter 'q' has 3 strings in Annotated[...], which takes at "
            'most two: a new name and a description (use Annotated[T, "description"] or '
            'Annotated[T, "new_name", "description"])'
        ),
        id="too_many_annotated_strings",
    ),
    pytest.param(
        '''
        @tool
        def search(q: Annotated[str, "search query", "The query."]) -> str:
            """Search the issues."""
            return q
        ''',
        ToolInputSchemaError,
        [("invalid_rename", "q")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameter 'q' is renamed to 'search query', which is not an "
            "identifier (use letters, digits and '_' and do not start with a digit, e.g. 'query')"
        ),
        id="rename_not_an_identifier",
    ),
    pytest.param(
        '''
        @tool
        def search(
            q: Annotated[str, Field(validation_alias="query", description="The query.")],
        ) -> str:
            """Search the issues."""
            return q
        ''',
        ToolInputSchemaError,
        [("invalid_rename", "q")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameter 'q' uses validation_alias/serialization_alias, which "
            'tools do not support (rename with Annotated[T, "new_name", "description"])'
        ),
        id="rename_with_validation_alias",
    ),
    pytest.param(
        '''
        @tool
        def search(
            q: Annotated[str, "query", "The query."],
            query: Annotated[str, "A saved query."],
        ) -> str:
            """Search the issues."""
            return q
        ''',
        ToolInputSchemaError,
        [("duplicate_parameter_name", "query")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: parameters 'q' and 'query' are both advertised as 'query' "
            "(give each parameter a distinct name in the schema)"
        ),
        id="rename_collides",
    ),
    pytest.param(
        '''
        @tool
        def search(q: Annotated[str, "The query."]):
            """Search the issues."""
            return q
        ''',
        ToolOutputSchemaError,
        [("missing_return_annotation", "return")],
        (
            "[TOOL_DEFINITION_BAD_OUTPUT_SCHEMA] ToolOutputSchemaError in definition of tool "
            "'search': 1 problem: the function has no return annotation (annotate what it "
            "returns, e.g. -> str, or -> None when it returns nothing)"
        ),
        id="missing_return_annotation",
    ),
    pytest.param(
        '''
        from __future__ import annotations


        @tool
        def report() -> Report:
            """Build the weekly report."""
            return None
        ''',
        ToolOutputSchemaError,
        [("unresolved_return_annotation", "return")],
        (
            "[TOOL_DEFINITION_BAD_OUTPUT_SCHEMA] ToolOutputSchemaError in definition of tool "
            "'report': 1 problem: the return annotation refers to 'Report', which is not defined "
            "where the tool is defined (import or define 'Report' above the tool)"
        ),
        id="unresolved_return_annotation",
    ),
    pytest.param(
        '''
        class Connection:
            pass


        @tool
        def connect() -> Connection:
            """Open a connection."""
            return Connection()
        ''',
        ToolOutputSchemaError,
        [("unsupported_return_type", "return")],
        (
            "[TOOL_DEFINITION_BAD_OUTPUT_SCHEMA] ToolOutputSchemaError in definition of tool "
            "'connect': 1 problem: the return type is Connection, which pydantic cannot "
            "serialise (use a JSON-friendly type: str, int, float, bool, None, an Enum or "
            "Literal, list/tuple/set/dict[str, T] of those, a pydantic model, a dataclass or a "
            "TypedDict)"
        ),
        id="unsupported_return_type",
    ),
    pytest.param(
        '''
        @tool
        def search(q: "list[") -> str:
            """Search the issues.

            Args:
                q: The query.
            """
            return ""
        ''',
        ToolInputSchemaError,
        [("unresolved_annotation", "q")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: the annotation of parameter 'q' cannot be evaluated (Forward "
            "reference must be an expression -- got 'list[') (write the annotation as a valid "
            "type expression)"
        ),
        id="annotation_not_an_expression",
    ),
    pytest.param(
        '''
        class Issues:
            @tool
            @staticmethod
            def search() -> str:
                """Search the issues."""
                return ""
        ''',
        ToolDefinitionError,
        [("not_a_function", None)],
        (
            "[TOOL_DEFINITION_BAD_DEFINITION] ToolDefinitionError in definition of tool "
            "'search': 1 problem: @tool was applied to 'search' of type staticmethod, not a "
            "function (define the tool as a module-level function)"
        ),
        id="applied_to_a_staticmethod",
    ),
    pytest.param(
        '''
        @tool
        def search(limit: int = Field("ten", description="How many results.")) -> str:
            """Search the issues."""
            return ""
        ''',
        ToolInputSchemaError,
        [("invalid_default", "limit")],
        (
            "[TOOL_DEFINITION_BAD_INPUT_SCHEMA] ToolInputSchemaError in definition of tool "
            "'search': 1 problem: the default of parameter 'limit' ('ten') is not a valid int: "
            "Input should be a valid integer, unable to parse string as an integer (change the "
            "default or the type, e.g. T | None for a default of None)"
        ),
        id="invalid_default_in_field",
    ),
]


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
    """The table above exercises every problem kind ``@tool`` can report."""
    tested = {kind for case in CHECKS for kind, _ in case.values[2]}
    assert tested == {kind.value for kind in ProblemKind}


def test_every_problem_kind_is_documented() -> None:
    """docs/definitions.md names every problem kind."""
    text = DOCS.read_text()
    missing = [kind.value for kind in ProblemKind if f"`{kind.value}`" not in text]
    assert missing == []


def test_documented_checks_are_cases_of_the_table() -> None:
    """Every example in docs/definitions.md's "Every check" section is a case of the table
    above, module and text alike, so the page shows what ``@tool`` really says."""
    section = DOCS.read_text().split("### Every check", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(
        r"^```py\n(.*?)^```\n\n```text\n(.*?)\n```", section, re.DOTALL | re.MULTILINE
    )
    assert len(documented) == section.count("\n#### ")
    cases = {(textwrap.dedent(case.values[0]).strip(), case.values[3]) for case in CHECKS}
    assert [text for body, text in documented if (body.strip(), text) not in cases] == []


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
