"""Tools served over every transport by ``tests/hosts/test_mcp_transports.py``: copied to a temp
dir, served there by ``tdk serve`` in subprocesses (stdio and HTTP) and loaded in process with
``Toolkit.from_path``.

They return text that is not valid UTF-8 (names as ``os.listdir`` gives them for bytes that
are not: lone surrogates, by ``surrogateescape``), or exit or are interrupted in their body.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel

from tdk import tool

#: A file name whose byte 0xE9 (Latin-1 "é") is no UTF-8: ``os.fsdecode`` gives a surrogate.
NAME = "caf\udce9.txt"

How = Literal["exit", "exit-message", "argparse", "interrupt"]


class Entry(BaseModel):
    """A file of a listing."""

    name: str
    size: int


@tool(read_only=True)
def file_names() -> list[str]:
    """The names in a folder, one of them not UTF-8."""
    return [NAME, "plain.txt"]


@tool(read_only=True)
def sizes() -> dict[str, int]:
    """The size of each file, by name."""
    return {NAME: 4}


@tool(read_only=True)
def listing() -> dict[str, Any]:
    """Each file by name, with its details (values of no declared type)."""
    return {NAME: {"name": NAME}}


@tool(read_only=True)
def file_name() -> str:
    """The one name of a folder."""
    return NAME


@tool(read_only=True)
def entry() -> Entry:
    """The one file of a folder."""
    return Entry(name=NAME, size=4)


def _bail(how: How) -> None:
    if how == "exit":
        sys.exit(3)
    if how == "exit-message":
        sys.exit("giving up")
    if how == "argparse":  # argparse rejecting what the model sent: SystemExit(2)
        parser = argparse.ArgumentParser(prog="bail")
        parser.add_argument("--count", type=int)
        parser.parse_args(["--count", "many"])
    raise KeyboardInterrupt


@tool
def bail(how: Annotated[How, "How to stop."]) -> str:
    """Stop the way a script would (sync body)."""
    _bail(how)
    return "unreachable"


@tool
async def bail_async(how: Annotated[How, "How to stop."]) -> str:
    """Stop the way a script would (async body)."""
    await asyncio.sleep(0)
    _bail(how)
    return "unreachable"


@tool(read_only=True)
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
    """Add two numbers."""
    return a + b
