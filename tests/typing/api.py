"""Type-checker test: ``@tool`` keeps the decorated function's signature.

mypy checks this file (``[tool.mypy] files`` in pyproject.toml); nobody runs it. Every
``type: ignore`` below must be needed (``--strict`` reports unused ones), so each proves that
the checker still rejects a wrong call.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

from tdk import (
    DEFAULT,
    ProblemKind,
    Tool,
    ToolContext,
    ToolDefinition,
    Toolkit,
    ToolResult,
    ToolRunner,
    tool,
)
from tdk.hosts import mcp as tdk_mcp
from tdk.hosts.mcp import CallRequest
from tdk.runner import InMemoryStore

_R = TypeVar("_R")


@tool
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."]) -> int:
    """Add two numbers."""
    return a + b


@tool(name="greet", requires_secrets=["API_KEY"], timeout=5.0, deprecated="Use hello.")
async def greet(name: Annotated[str, "Who."], context: ToolContext, *, loud: bool = False) -> str:
    """Greet someone.

    Args:
        loud: Shout.
    """
    return context.get_secret("API_KEY") + name


def sync_tools_stay_sync() -> None:
    total: int = add(1, 2)
    by_keyword: int = add(a=1, b=2)
    as_callable: Callable[[int, int], int] = add
    as_tool: Tool[[int, int], int] = add
    add("1", 2)  # type: ignore[arg-type]
    add(1)  # type: ignore[call-arg]
    add(1, 2, c=3)  # type: ignore[call-arg]
    wrong: str = add(1, 2)  # type: ignore[assignment]
    del total, by_keyword, as_callable, as_tool, wrong


async def async_tools_stay_async() -> None:
    pending: Coroutine[Any, Any, str] = greet("Ada", ToolContext(), loud=True)
    text: str = await pending
    await greet("Ada", ToolContext(), True)  # type: ignore[call-arg]
    del text


def tool_attributes() -> None:
    definition: ToolDefinition = add.definition
    name: str = add.name
    description: str = add.description
    function: Callable[[int, int], int] = add.fn
    secrets: tuple[str, ...] = greet.definition.requirements.secrets
    del definition, name, description, function, secrets


def toolkits() -> None:
    toolkit = Toolkit("math", [add, greet], version="1.0")
    found: Tool[..., Any] = toolkit.get("add")
    count: int = len(toolkit)
    names: list[str] = [each.name for each in toolkit]
    definitions: list[ToolDefinition] = toolkit.definitions()
    loaded: Toolkit = Toolkit.from_path("tools.py")
    del found, count, names, definitions, loaded


def sync_calls() -> None:
    toolkit = Toolkit("math", [add])
    runner = ToolRunner(toolkit)
    one: ToolResult = add.run_sync({"a": 1, "b": 2}, timeout=None)
    one = toolkit.run_sync("add", {"a": 1, "b": 2}, call_id="c-1")
    one = runner.run_sync("add", '{"a": 1, "b": 2}')
    many: list[ToolResult] = runner.run_many_sync([("add", {"a": 1, "b": 2})])
    runner.run_many_sync("add")  # type: ignore[arg-type]
    del one, many


async def not_given_is_one_value() -> None:
    """``tdk.DEFAULT`` stands for "not given" wherever None means something else."""
    result: ToolResult = await add.run({"a": 1, "b": 2}, timeout=DEFAULT)
    result = await add.run({"a": 1, "b": 2}, timeout=None)
    result = await add.run({"a": 1, "b": 2}, timeout="soon")  # type: ignore[arg-type]
    runner = ToolRunner(Toolkit("math", [add]))
    runner.configure("add", timeout=DEFAULT, retry=None)
    runner.configure("add", retry="never")  # type: ignore[arg-type]
    kind: ProblemKind = ProblemKind.MISSING_DESCRIPTION
    del result, kind


def contexts_carry_a_key(maybe: str | None) -> None:
    """A tool reads its idempotency key as a ``str``; a caller may still pass None."""
    context = ToolContext(idempotency_key=maybe)
    key: str = context.idempotency_key
    headers: dict[str, str] = {"Idempotency-Key": context.idempotency_key}
    del key, headers


class _UpdateOnly:
    """A store written against ``update`` alone (before the named operations)."""

    async def update(self, key: str, change: Callable[..., tuple[Any, _R]], *args: Any) -> _R:
        state, answer = change(None, *args)
        del key, state
        return answer


def a_store_with_update_alone_is_taken() -> None:
    """``ToolRunner(store=...)`` takes a store that implements ``update`` alone."""
    ToolRunner(Toolkit("math", [add]), store=_UpdateOnly())
    ToolRunner(Toolkit("math", [add]), store=InMemoryStore())
    ToolRunner(Toolkit("math", [add]), store="redis://")  # type: ignore[arg-type]


async def _reports(context: ToolContext) -> None:
    """``progress()`` is awaited in an async tool, and called as it is in a sync one."""
    await context.progress(1, 2, "half way")
    context.progress(2)
    await context.progress("3")  # type: ignore[arg-type]


def _context_of(request: CallRequest) -> ToolContext:
    """A context function of the request."""
    return ToolContext(user_id=request.client.name if request.client else None)


async def _async_context_of(request: CallRequest) -> ToolContext:
    """An async one."""
    return ToolContext(metadata=dict(request.meta))


_served = tdk_mcp.server(Toolkit("typed", [add]), context=_context_of)
_served_async = tdk_mcp.server(Toolkit("typed", [add]), context=_async_context_of)


def _context() -> ToolContext:
    """A context function of no argument."""
    return ToolContext(user_id="u-1")


_served_plain = tdk_mcp.server(Toolkit("typed", [add]), context=_context)
