"""Tools of the asks tests: one per kind of request, an approval, a body that asks a new key
each round, one that writes before it asks, and a record of what each body did."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import httpx
from pydantic import BaseModel, Field

import tdk
from tdk import ToolContext, Toolkit, tool

#: What the bodies did, in order (a test clears it).
DONE: list[str] = []


class Size(enum.StrEnum):
    """A room size."""

    SMALL = "small"
    LARGE = "large"


class Booking(BaseModel):
    """The form of a booking."""

    name: str = Field(min_length=1, description="Who books.")
    seats: int
    size: Size = Size.SMALL
    floor: Literal["1", "2"] | None = None


@tool
async def delete_branch(
    branch: Annotated[str, "The branch."], context: ToolContext
) -> Annotated[str, "What happened."]:
    """Delete a branch, once the user confirms."""
    if not await context.ask("sure", tdk.Confirm(f"Delete {branch}?")):
        DONE.append("kept")
        return "kept"
    DONE.append(f"deleted {branch} with key {context.idempotency_key}")
    return "deleted"


@tool
async def book(day: Annotated[str, "The day."], context: ToolContext) -> dict[str, Any]:
    """Book a room: asks which room, then the booking form."""
    room = await context.ask("room", tdk.Choose("Which room?", ["red", "blue"]))
    form = await context.ask("booking", tdk.Form("Who and how many?", Booking))
    DONE.append(f"booked {room}")
    return {"day": day, "room": room, "name": form.name, "seats": form.seats}


@tool
async def sign_in(context: ToolContext) -> str:
    """Sign in somewhere first."""
    await context.ask("login", tdk.OpenUrl("Sign in to GitHub", "https://github.com/login"))
    DONE.append("signed in")
    return "signed in"


@tool(requires_approval=True)
def pay(amount: Annotated[int, "How much."], api_key: Annotated[str, "The payer's key."]) -> str:
    """Send money."""
    DONE.append(f"paid {amount}")
    return "paid"


@tool(requires_approval=lambda arguments, context: arguments["amount"] > 100)
def tip(amount: Annotated[int, "How much."]) -> str:
    """Tip: large tips need approval."""
    DONE.append(f"tipped {amount}")
    return "tipped"


@tool
async def greedy(context: ToolContext) -> str:
    """Asks a new key on every round: never finishes."""
    n = 0
    while await context.ask(f"q{n}", tdk.Confirm(f"Question {n}?")):
        n += 1
    return "no"


@tool
async def write_then_ask(url: Annotated[str, "Where to write."], context: ToolContext) -> str:
    """Writes upstream, then asks: the wrong order."""
    async with tdk.install(httpx.AsyncClient()) as client:
        await client.post(url, json={"x": 1})
    await context.ask("after", tdk.Confirm("Was that right?"))
    DONE.append("wrote and asked")
    return "done"


@tool(destructive=True)
def drop_table(table: Annotated[str, "The table."]) -> str:
    """Drop a table (declared destructive)."""
    DONE.append(f"dropped {table}")
    return "dropped"


def toolkit() -> Toolkit:
    """All of them."""
    return Toolkit(
        "asks",
        [delete_branch, book, sign_in, pay, tip, greedy, write_then_ask, drop_table],
    )
