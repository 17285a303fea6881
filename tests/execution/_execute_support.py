"""Tools, models and helpers shared by the tests of ``tests/execution/``."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Annotated, Any, NotRequired

import httpx
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from tdk import Tool, ToolResult, tool

REQUEST = httpx.Request("GET", "https://api.example.com/items")


class Item(BaseModel):
    """An item."""

    id: int
    name: str


@dataclasses.dataclass
class Point:
    """A point."""

    x: float
    y: float


class Page(TypedDict):
    """A page of results."""

    items: list[str]
    cursor: NotRequired[str]


@tool
async def search(
    query: Annotated[str, "What to look for."],
    limit: Annotated[int, Field(ge=1, le=50, description="How many results.")] = 10,
) -> list[str]:
    """Search the catalogue."""
    return [f"{query}-{n}" for n in range(limit)]


@tool
def add(a: Annotated[int, "First addend."], b: Annotated[int, "Second addend."]) -> int:
    """Add two numbers."""
    return a + b


@tool
def find(term: Annotated[str, "query", "The search term."]) -> str:
    """Find something; the parameter is advertised as 'query'."""
    return term.upper()


@tool
def when() -> dt.datetime:
    """Return a fixed time."""
    return dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)


@tool
def nothing() -> None:
    """Return nothing."""


@tool
def maybe(present: Annotated[bool, "Whether to return a value."]) -> int | None:
    """Return 1 or None."""
    return 1 if present else None


@tool
def page(with_cursor: Annotated[bool, "Include a cursor."]) -> Page:
    """Return a page."""
    result: Page = {"items": ["a"]}
    if with_cursor:
        result["cursor"] = "c2"
    return result


@tool
def items(count: Annotated[int, "How many."]) -> list[Item]:
    """Return items."""
    return [Item(id=n, name=f"n{n}") for n in range(count)]


@tool
def point(item: Annotated[Item, "An item."]) -> Point:
    """Return a point; the item arrives as a model instance."""
    assert isinstance(item, Item)
    return Point(x=item.id, y=0.5)


@tool
def liar() -> int:
    """Claim an int, return something else."""
    return "not a number"  # type: ignore[return-value]


def run(t: Tool[..., Any], arguments: Any = None, **options: Any) -> ToolResult:
    return asyncio.run(t.run(arguments, **options))


@tool
def echo_number(n: Annotated[int, "A number."]) -> int:
    """Return the number."""
    return n
