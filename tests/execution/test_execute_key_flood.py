"""A flood of unknown argument keys costs what copying them costs, not an error each.

pydantic builds one error per unknown key (about 2 us each: a 4 MiB body of short keys held
the event loop 0.7 s), while an input error lists 20 problems at most. Measured as a ratio to
copying the same dict in the same run, never against the clock."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Annotated, Any

import pytest

from tdk import Toolkit, tool


@tool
def lookup(word: Annotated[str, "The word to look up."]) -> str:
    """Look a word up."""
    return word.upper()


#: A call with the flood may cost this many copies of it at most (measured: about 0.5; an
#: error per key made it 10 to 20).
MOST_COPIES = 3.0


def _best(call: Callable[[], object], repeats: int = 7) -> float:
    best = float("inf")
    collecting = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - start)
    finally:
        if collecting:
            gc.enable()
    return best


def _flood(size: int, *, known: bool) -> dict[str, Any]:
    arguments: dict[str, Any] = {f"k{index}": index for index in range(size)}
    if known:
        arguments["word"] = "bug"
    return arguments


@pytest.mark.parametrize("known", [True, False], ids=["with-the-parameter", "without-it"])
def test_a_flood_of_unknown_keys_costs_about_a_copy_of_them(known: bool) -> None:
    """100,000 unknown keys: the call costs a few copies of the dict, not an error per key."""
    arguments = _flood(100_000, known=known)
    loop = asyncio.new_event_loop()
    try:

        def call() -> object:
            return loop.run_until_complete(lookup.run(arguments))

        seen = []
        for _ in range(3):  # (a busy spell may slow one measure: three chances)
            # (the yardstick: one pass of Python over the keys, copying each)
            copy = _best(lambda: {key: value for key, value in arguments.items()})  # noqa: C416
            ratio = _best(call) / copy
            seen.append(ratio)
            if ratio < MOST_COPIES:
                break
        else:
            raise AssertionError(f"the call took {seen} times a copy of its arguments")
    finally:
        loop.close()


@pytest.mark.parametrize(
    ("size", "listed", "more"),
    [
        pytest.param(21, 20, 1, id="one-more-than-listed"),
        pytest.param(52, 20, 32, id="at-the-cut"),
        pytest.param(53, 20, 33, id="past-the-cut"),
        pytest.param(10_000, 20, 9_980, id="a-flood"),
    ],
)
def test_the_error_counts_every_unknown_key(size: int, listed: int, more: int) -> None:
    """Cut or not, the error lists 20 problems and counts the rest of the keys."""
    result = asyncio.run(Toolkit("words", [lookup]).run("lookup", _flood(size, known=True)))
    assert result.kind == "TOOL_RUNTIME_BAD_INPUT_VALUE"
    assert result.error is not None
    assert len(result.error.details["errors"]) == listed
    assert f"and {more} more problems" in result.error.message


def test_the_known_keys_of_a_flood_are_still_checked() -> None:
    """A bad value of a real parameter is named even in a flood of unknown keys."""
    arguments = _flood(1_000, known=False)
    arguments["word"] = 7
    result = asyncio.run(lookup.run(arguments))
    assert result.error is not None
    assert result.error.message.startswith("Invalid arguments: 'word' should be a valid string")
