"""Scopes in process: ``@tool(requires_scopes=...)`` against ``ToolContext.scopes`` (a call,
a runner's call, an MCP server driven by the SDK's in-memory client), and the context's
``scopes`` and ``claims`` themselves."""

from __future__ import annotations

import asyncio
import pickle
from typing import Annotated, Any

import mcp
import pytest
from _mcp_support import run, text_of

from tdk import ToolContext, Toolkit, ToolRunner, tool
from tdk.errors import ErrorKind
from tdk.hosts import mcp as tdk_mcp


@tool(requires_scopes=["repo:read", "repo:write"])
def close_issue(number: Annotated[int, "The issue."]) -> str:
    """Close an issue."""
    return f"closed {number}"


@tool(read_only=True)
def whoami(context: ToolContext) -> dict[str, Any]:
    """Who calls, as the context says."""
    return {"user": context.user_id, "scopes": sorted(context.scopes)}


TOOLKIT = Toolkit("issues", [close_issue, whoami])

CONTEXTS = [
    pytest.param(None, ["repo:read", "repo:write"], id="no-context"),
    pytest.param(ToolContext(), ["repo:read", "repo:write"], id="no-scopes"),
    pytest.param(ToolContext(scopes=["repo:read"]), ["repo:write"], id="one-missing"),
    pytest.param(ToolContext(scopes={"repo:read", "repo:write", "x"}), [], id="all-held"),
]


@pytest.mark.parametrize(("context", "missing"), CONTEXTS)
def test_a_call_without_the_scopes_is_a_missing_requirement(
    context: ToolContext | None, missing: list[str]
) -> None:
    """The body runs only with every scope the tool requires; else the result is
    ``TOOL_RUNTIME_MISSING_REQUIREMENT`` naming the scopes missing, before the body runs,
    from a tool's call and a runner's alike."""
    direct = asyncio.run(close_issue.run({"number": 7}, context=context))
    by_runner = asyncio.run(ToolRunner(TOOLKIT).run("close_issue", {"number": 7}, context=context))
    for result in (direct, by_runner):
        if not missing:
            assert result.value == "closed 7"
            continue
        assert result.error is not None
        assert (result.kind, result.attempts) == (ErrorKind.TOOL_RUNTIME_MISSING_REQUIREMENT, 0)
        assert result.error.details["missing_scopes"] == missing
        for scope in missing:
            assert f"scope '{scope}'" in result.error.message


def test_the_definition_lists_the_scopes() -> None:
    """``requirements.scopes``, in the order given."""
    assert close_issue.definition.requirements.scopes == ("repo:read", "repo:write")
    assert whoami.definition.requirements.scopes == ()


@pytest.mark.parametrize(
    ("scopes", "listed"),
    [
        (set(), ["whoami"]),
        ({"repo:read"}, ["whoami"]),
        ({"repo:read", "repo:write"}, ["close_issue", "whoami"]),
    ],
    ids=["none", "some", "all"],
)
def test_an_mcp_server_lists_only_what_the_caller_may_call(
    scopes: set[str], listed: list[str]
) -> None:
    """Over MCP, a tool whose scopes the caller lacks is not listed, and a call of it is the
    missing requirement (no HTTP here: no step-up)."""

    async def scenario() -> tuple[list[str], mcp.types.CallToolResult]:
        server = tdk_mcp.server(TOOLKIT, context=ToolContext(scopes=scopes))
        async with mcp.Client(server) as client:
            tools = await client.list_tools()
            called = await client.call_tool("close_issue", {"number": 1})
        return [each.name for each in tools.tools], called

    names, called = run(scenario())
    assert names == listed
    if "close_issue" in listed:
        assert called.structured_content == {"result": "closed 1"}
    else:
        assert called.is_error
        assert "scope 'repo:write'" in text_of(called)


def test_scopes_and_claims_are_read_only_and_travel() -> None:
    """``scopes`` is a frozenset, ``claims`` a read-only copy; both survive a pickle; the
    repr names the scopes and the claims' names, never their values."""
    claims = {"sub": "alice", "email": "alice@example.test"}
    context = ToolContext(user_id="alice", scopes=["b", "a"], claims=claims)
    claims["email"] = "changed@example.test"
    assert context.scopes == frozenset({"a", "b"})
    assert context.claims == {"sub": "alice", "email": "alice@example.test"}
    with pytest.raises(TypeError):
        context.claims["sub"] = "mallory"  # type: ignore[index]
    copy = pickle.loads(pickle.dumps(context))
    assert (copy.scopes, dict(copy.claims), copy.user_id) == (
        context.scopes,
        dict(context.claims),
        "alice",
    )
    assert "scopes=['a', 'b']" in repr(context)
    assert "claims=['email', 'sub']" in repr(context)
    assert "alice@example.test" not in repr(context)


@pytest.mark.parametrize(
    "scopes", ["repo:read repo:write", [1], [None]], ids=["one-string", "int", "none"]
)
def test_scopes_must_be_strings(scopes: object) -> None:
    """A single string (a token's ``scope`` claim, not split) is refused, as are non-strings."""
    with pytest.raises(TypeError, match="scopes="):
        ToolContext(scopes=scopes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("scopes", "suggested"),
    [(set(), False), ({"repo:read"}, False), ({"repo:read", "repo:write"}, True)],
    ids=["none", "some", "all"],
)
def test_a_misspelt_call_does_not_reveal_a_tool_the_caller_may_not_see(
    scopes: set[str], suggested: bool
) -> None:
    """A tool left out of the caller's list is left out of ``TOOL_NOT_FOUND`` too: neither
    the model's text ("Did you mean ...?") nor ``available_tools`` or ``suggestions`` name
    it, over MCP and from a runner or a toolkit in process."""

    async def scenario() -> mcp.types.CallToolResult:
        server = tdk_mcp.server(TOOLKIT, context=ToolContext(scopes=scopes))
        async with mcp.Client(server) as client:
            return await client.call_tool("close_issu", {"number": 1})

    called = run(scenario())
    assert called.is_error
    assert ("close_issue" in text_of(called)) is suggested
    context = ToolContext(scopes=scopes)
    for result in (
        asyncio.run(ToolRunner(TOOLKIT).run("close_issu", {"number": 1}, context=context)),
        asyncio.run(TOOLKIT.run("close_issu", {"number": 1}, context=context)),
    ):
        assert result.error is not None
        assert result.kind is ErrorKind.TOOL_NOT_FOUND
        assert ("close_issue" in result.for_model()) is suggested
        assert ("close_issue" in result.error.details["suggestions"]) is suggested
        assert ("close_issue" in result.error.details["available_tools"]) is suggested
        assert "whoami" in result.error.details["available_tools"]
