"""``@tool`` as users apply it: forms, options, the Tool, and where descriptions come from."""

from __future__ import annotations

import asyncio
import inspect
import pickle
from typing import Annotated, Any

import pytest
from pydantic import Field, ValidationError

from tdk import Tool, ToolDefinition, tool
from tdk.errors import RetryableToolError, ToolDefinitionError


@tool
def search_issues(q: Annotated[str, "The query."], limit: Annotated[int, "At most."] = 10) -> str:
    """Search the issues of a repository."""
    return f"{q}:{limit}"


@tool(
    name="get-issue",
    description="Fetch one issue by number.",
    requires_secrets=["GITHUB_TOKEN"],
    requires_metadata=["org"],
    timeout=5,
    deprecated="Use get_issue_v2.",
)
async def get_issue(number: Annotated[int, "The issue number."]) -> dict[str, int]:
    """Ignored: description= wins."""
    return {"number": number}


def test_bare_decorator_returns_a_tool() -> None:
    """``@tool`` returns a Tool named after the function, described by its docstring."""
    assert isinstance(search_issues, Tool)
    assert search_issues.name == "search_issues"
    assert search_issues.description == "Search the issues of a repository."
    assert search_issues.definition.name == "search_issues"


def test_called_decorator_applies_options() -> None:
    """``@tool(...)`` applies every option to the definition and to what execution reads."""
    definition = get_issue.definition
    assert definition.name == "get-issue"
    assert definition.description == "Fetch one issue by number."
    assert definition.requirements.secrets == ("GITHUB_TOKEN",)
    assert definition.requirements.metadata == ("org",)
    assert definition.deprecation_message == "Use get_issue_v2."
    assert get_issue.spec.timeout == 5.0
    assert get_issue.spec.requirements == definition.requirements
    assert get_issue.spec.is_async is True
    assert search_issues.spec.is_async is False
    assert search_issues.spec.timeout is None


def test_called_without_options() -> None:
    """``@tool()`` works like ``@tool``."""

    @tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    assert isinstance(ping, Tool)
    assert ping.name == "ping"


def test_calling_the_tool_calls_the_function() -> None:
    """A sync tool returns the function's value, positionally or by keyword."""
    assert search_issues("bug") == "bug:10"
    assert search_issues(q="bug", limit=3) == "bug:3"


def test_calling_an_async_tool_returns_a_coroutine() -> None:
    """An async tool stays async: calling it gives a coroutine to await."""
    pending = get_issue(7)
    assert inspect.iscoroutine(pending)
    assert asyncio.run(pending) == {"number": 7}


def test_an_async_tool_raising_a_tdk_error_raises_it_unchanged() -> None:
    """Awaiting a direct call re-raises a tdk error as it is, not chained to itself."""

    @tool
    async def picky() -> int:
        """Fail."""
        raise RetryableToolError("again", additional_prompt_content="Try later.")

    with pytest.raises(RetryableToolError) as caught:
        asyncio.run(picky())
    assert caught.value.__cause__ is None
    assert caught.value.tool_name == "picky"


def test_tool_looks_like_its_function() -> None:
    """Name, docstring, module, signature and the wrapped function are those of the function."""
    assert search_issues.__name__ == "search_issues"
    assert search_issues.__doc__ == "Search the issues of a repository."
    assert search_issues.__module__ == __name__
    assert search_issues.__wrapped__ is search_issues.fn
    assert inspect.signature(search_issues) == inspect.signature(search_issues.fn)


def test_repr_names_the_tool_and_its_function() -> None:
    """``repr()`` says which tool and which function."""
    assert repr(search_issues) == f"<Tool 'search_issues' of {__name__}.search_issues>"


def test_tools_pickle_by_reference() -> None:
    """A module-level tool pickles as a reference to itself, like a function."""
    assert pickle.loads(pickle.dumps(search_issues)) is search_issues


def test_definition_is_frozen_and_serialisable() -> None:
    """A definition cannot be changed and round-trips through JSON."""
    definition = get_issue.definition
    with pytest.raises(ValidationError):
        definition.name = "other"  # type: ignore[misc]
    assert ToolDefinition.model_validate_json(definition.model_dump_json()) == definition
    assert definition.model_dump(mode="json")["requirements"] == {
        "secrets": ["GITHUB_TOKEN"],
        "metadata": ["org"],
        "scopes": [],
        "auth": None,
    }
    assert definition.toolkit is None


def _described(fn: Any) -> tuple[str, dict[str, str]]:
    made = tool(fn)
    properties = made.definition.input_schema["properties"]
    return made.description, {name: prop["description"] for name, prop in properties.items()}


def _google(q: str, limit: int = 5) -> list[str]:
    """Search the issues.

    Matches titles and bodies.

    Args:
        q: The query.
        limit (int): How many results
            to return at most.

    Returns:
        The matching titles.
    """
    return []


def _numpy(q: str, limit: int = 5) -> list[str]:
    """Search the issues.

    Matches titles and bodies.

    Parameters
    ----------
    q : str
        The query.
    limit : int
        How many results
        to return at most.

    Returns
    -------
    list of str
        The matching titles.
    """
    return []


def _rest(q: str, limit: int = 5) -> list[str]:
    """Search the issues.

    Matches titles and bodies.

    :param q: The query.
    :param int limit: How many results
        to return at most.
    :returns: The matching titles.
    """
    return []


def _epydoc(q: str, limit: int = 5) -> list[str]:
    """Search the issues.

    Matches titles and bodies.

    @param q: The query.
    @param limit: How many results
        to return at most.
    @return: The matching titles.
    """
    return []


@pytest.mark.parametrize("fn", [_google, _numpy, _rest, _epydoc], ids=lambda f: f.__name__[1:])
def test_docstring_styles(fn: Any) -> None:
    """Parameter descriptions come from the docstring in any common style, and the tool's
    description is the docstring without its parameter section."""
    description, parameters = _described(fn)
    assert description == (
        "Search the issues.\n\nMatches titles and bodies.\n\nReturns: The matching titles."
    )
    assert parameters == {"q": "The query.", "limit": "How many results\nto return at most."}


def test_other_sections_are_kept_in_plain_form() -> None:
    """Raises and Examples sections stay in the description; Args does not."""

    def divide(a: float, b: float) -> float:
        """Divide two numbers.

        Args:
            a: The dividend.
            b: The divisor.

        Raises:
            ZeroDivisionError: When b is zero.

        Examples:
            >>> divide(1, 2)
            0.5
        """
        return a / b

    description, _ = _described(divide)
    assert description == (
        "Divide two numbers.\n\n"
        "Raises ZeroDivisionError: When b is zero.\n\n"
        "Examples:\n>>> divide(1, 2)\n0.5"
    )


def test_sections_without_text_and_attributes_are_left_out() -> None:
    """A Returns section that only names a type adds nothing, and an Attributes section
    documents no parameter."""

    def search(q: str) -> list[str]:
        """Search the issues.

        Parameters
        ----------
        q : str
            The query.

        Attributes
        ----------
        cache : dict
            Not a parameter.

        Returns
        -------
        list
        """
        return [q]

    description, parameters = _described(search)
    assert description == "Search the issues."
    assert parameters == {"q": "The query."}


def test_explicit_descriptions_win_over_the_docstring() -> None:
    """``Annotated`` strings and ``Field(description=...)`` beat the docstring entry;
    surrounding blanks are dropped."""

    def search(
        q: Annotated[str, "  From Annotated.  "],
        limit: Annotated[int, Field(description="From Field.")] = 5,
        page: int = 1,
    ) -> str:
        """Search.

        Args:
            q: From the docstring.
            limit: From the docstring.
            page: From the docstring.
        """
        return q

    _, parameters = _described(search)
    assert parameters == {
        "q": "From Annotated.",
        "limit": "From Field.",
        "page": "From the docstring.",
    }


def test_description_option_keeps_docstring_parameter_docs() -> None:
    """``description=`` replaces the docstring's text but its Args entries still describe
    the parameters; a multi-line description= is dedented."""

    @tool(
        description="""
        Search everything.
          Indented detail.
        """
    )
    def search(q: str) -> str:
        """Old text.

        Args:
            q: The query.
        """
        return q

    assert search.description == "Search everything.\n  Indented detail."
    assert search.definition.input_schema["properties"]["q"]["description"] == "The query."


def test_renamed_parameter_is_recorded() -> None:
    """Execution can map Python parameter names to the names the schema advertises."""

    @tool
    def find(q: Annotated[str, "query", "The query."], limit: Annotated[int, "At most."]) -> str:
        """Find things."""
        return q

    assert dict(find.spec.renames) == {"q": "query"}
    assert (find.spec.advertised("q"), find.spec.advertised("limit")) == ("query", "limit")
    assert dict(search_issues.spec.renames) == {}


def test_a_parameter_without_description_still_has_its_default_checked() -> None:
    """Every problem of one parameter is reported together: no description AND a bad default."""
    from tdk.errors import ToolInputSchemaError

    def search(limit: int = "ten") -> int:  # type: ignore[assignment]
        """Search."""
        return 0

    with pytest.raises(ToolInputSchemaError) as caught:
        tool(search)
    problems = [(p["kind"], p["parameter"]) for p in caught.value.details["problems"]]
    assert problems == [("missing_parameter_description", "limit"), ("invalid_default", "limit")]


class _RaisingDict:
    @property
    def __dict__(self) -> Any:  # type: ignore[override]
        raise RuntimeError("no dict")


class _NonMappingDict:
    @property
    def __dict__(self) -> Any:  # type: ignore[override]
        return 42


class _HostileName:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


class _LyingClass:
    @property  # type: ignore[misc]
    def __class__(self) -> Any:  # type: ignore[override]
        raise RuntimeError("no class")


class _HoldsADefinition:
    """A user's registry entry that keeps a tool's definition: not a tool itself."""

    def __init__(self) -> None:
        self.definition = search_issues.definition


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(_RaisingDict(), id="dict-property-raises"),
        pytest.param(_NonMappingDict(), id="dict-property-not-a-mapping"),
        pytest.param(_HostileName(), id="getattr-raises"),
        pytest.param(_LyingClass(), id="class-property-raises"),
        pytest.param(_HoldsADefinition(), id="holds-a-tools-definition"),
    ],
)
def test_any_object_that_is_not_a_function_is_one_definition_problem(target: object) -> None:
    """Whatever the object, ``@tool`` reports it as not a function, reading it by type only:
    it never raises the object's own exceptions, and never takes it for a tool."""
    with pytest.raises(ToolDefinitionError) as raised:
        tool(target)  # type: ignore[call-overload]
    assert [p["kind"] for p in raised.value.details["problems"]] == ["not_a_function"]
    assert f"of type {type(target).__name__}, not a function" in str(raised.value)


def test_a_tool_given_again_is_already_a_tool() -> None:
    with pytest.raises(ToolDefinitionError) as raised:
        tool(search_issues)  # type: ignore[call-overload]
    assert [p["kind"] for p in raised.value.details["problems"]] == ["already_a_tool"]
    assert "'search_issues', which is already a tool" in str(raised.value)


@pytest.mark.parametrize(
    ("marks", "expected"),
    [
        pytest.param({}, (False, False, True, True), id="defaults-are-mcps"),
        pytest.param({"read_only": True}, (True, True, False, True), id="read-only-implies"),
        pytest.param({"idempotent": True}, (False, True, True, True), id="idempotent-write"),
        pytest.param(
            {"idempotent": True, "destructive": False},
            (False, True, False, True),
            id="idempotent-not-destructive",
        ),
        pytest.param({"open_world": False}, (False, False, True, False), id="closed-world"),
        pytest.param(
            {"read_only": True, "idempotent": True, "destructive": False},
            (True, True, False, True),
            id="read-only-said-in-full",
        ),
    ],
)
def test_side_effect_marks(marks: dict[str, bool], expected: tuple[bool, ...]) -> None:
    """The marks take MCP's defaults; ``read_only=True`` makes the tool idempotent and not
    destructive unless said otherwise (which is a contradiction, see docs/problems.md)."""

    @tool(**marks)
    def act() -> str:
        """Act."""
        return ""

    annotations = act.definition.annotations
    got = (
        annotations.read_only,
        annotations.idempotent,
        annotations.destructive,
        annotations.open_world,
    )
    assert got == expected
    assert annotations.repeatable is (expected[0] or expected[1])
    assert act.definition.model_dump()["annotations"] == dict(
        zip(("read_only", "idempotent", "destructive", "open_world"), expected, strict=True)
    )


def test_a_tool_timeout_beyond_any_float_is_a_definition_problem() -> None:
    """``@tool(timeout=10**5000)`` is an invalid-timeout problem, whose text names the value."""
    with pytest.raises(ToolDefinitionError) as caught:

        @tool(timeout=10**5000)
        def forever() -> int:
            """Never time out."""
            return 1

    assert "an int of 16610 bits" in caught.value.message
