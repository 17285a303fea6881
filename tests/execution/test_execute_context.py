"""Running tools with a context, its requirements, through a Toolkit and with run_sync()."""

from __future__ import annotations

import asyncio
from typing import Annotated

import pytest
from _execute_support import (
    add,
    run,
    search,
)

from tdk import ToolContext, Toolkit, tool
from tdk.errors import (
    ErrorCategory,
    ErrorKind,
)


@tool(requires_secrets=["API_KEY"], requires_metadata=["tenant"])
def needs_key(
    q: Annotated[str, "Query."],
    context: ToolContext,
) -> str:
    """Use a secret."""
    return f"{context.metadata['tenant']}:{len(context.get_secret('API_KEY'))}:{q}"


def test_context_reaches_the_tool() -> None:
    """The ToolContext parameter receives the context and is not an argument."""
    context = ToolContext(secrets={"API_KEY": "k-12345"}, metadata={"tenant": "acme"})
    assert run(needs_key, {"q": "x"}, context=context).value == "acme:7:x"
    assert "context" not in needs_key.definition.input_schema["properties"]


@pytest.mark.parametrize(
    ("context", "secrets", "metadata"),
    [
        pytest.param(None, ["API_KEY"], ["tenant"], id="no-context"),
        pytest.param(ToolContext(metadata={"tenant": "a"}), ["API_KEY"], None, id="no-secret"),
        pytest.param(
            ToolContext(secrets={"API_KEY": ""}, metadata={"tenant": "a"}),
            ["API_KEY"],
            None,
            id="empty-secret",
        ),
        pytest.param(ToolContext(secrets={"API_KEY": "k-1"}), None, ["tenant"], id="no-metadata"),
    ],
)
def test_missing_requirements_stop_the_call(
    context: ToolContext | None, secrets: list[str] | None, metadata: list[str] | None
) -> None:
    """Missing secrets or metadata -> a configuration error naming them; the body never runs."""
    result = run(needs_key, {"q": "x"}, context=context)
    assert result.kind is ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT
    assert result.category is ErrorCategory.CONFIGURATION
    assert result.retryable is False
    assert result.attempts == 0
    assert result.error is not None
    assert result.error.details.get("missing_secrets") == secrets
    assert result.error.details.get("missing_metadata") == metadata
    for name in (secrets or []) + (metadata or []):
        assert f"'{name}'" in result.error.message


def test_toolkit_runs_by_name() -> None:
    """toolkit.run finds the tool case-insensitively and runs it."""
    toolkit = Toolkit("maths", tools=[add])
    result = asyncio.run(toolkit.run("ADD", {"a": 1, "b": 2}, call_id="7"))
    assert (result.value, result.tool, result.call_id) == (3, "add", "7")


def test_toolkit_unknown_tool_is_a_result() -> None:
    """An unknown name is a TOOL_NOT_FOUND result with suggestions, zero attempts."""
    toolkit = Toolkit("maths", tools=[add, search])
    result = asyncio.run(toolkit.run("serch", {}))
    assert result.kind is ErrorKind.TOOL_NOT_FOUND
    assert result.attempts == 0
    assert result.tool == "serch"
    assert result.error is not None
    assert result.error.details["suggestions"] == ["search"]


def test_toolkit_stacktrace_flag() -> None:
    """A toolkit can opt in to stack traces for all its calls."""

    @tool
    def broken() -> int:
        """Fail."""
        raise KeyError("x")

    toolkit = Toolkit("t", tools=[broken], include_stacktrace=True)
    result = asyncio.run(toolkit.run("broken", {}))
    assert result.error is not None
    assert result.error.stacktrace is not None


def test_run_sync() -> None:
    """run_sync runs a call from synchronous code."""
    assert add.run_sync({"a": 1, "b": 1}).value == 2


def test_run_sync_refuses_a_running_loop() -> None:
    """run_sync inside an event loop says to await run() instead."""

    async def scenario() -> None:
        with pytest.raises(RuntimeError, match="await run"):
            add.run_sync({"a": 1, "b": 1})

    asyncio.run(scenario())
