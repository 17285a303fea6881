"""Cost of ``await tool.run(args)`` against the floor, measured in one run.

The floor is what any framework must do: validate the arguments with a pydantic model, call the
function, validate and serialise the return value. Paths measured: success (async and sync),
the error path (the tool raises) and the invalid-arguments path. (A comparison with
arcade-core's ``ToolExecutor.run`` is not written yet.)

Run: python bench/bench_execute.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter

from tdk import tool

ARGS = {"query": "python", "limit": 5, "exact": False}
BAD_ARGS = {"query": "python", "limit": "many"}


@tool
async def search(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."],
    exact: Annotated[bool, "Match exactly."] = False,
) -> list[str]:
    """Search."""
    return [query] * limit


@tool
def search_sync(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."],
    exact: Annotated[bool, "Match exactly."] = False,
) -> list[str]:
    """Search (sync)."""
    return [query] * limit


@tool(inline=True)
def search_inline(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."],
    exact: Annotated[bool, "Match exactly."] = False,
) -> list[str]:
    """Search (sync, inline)."""
    return [query] * limit


@tool
async def failing(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."],
    exact: Annotated[bool, "Match exactly."] = False,
) -> list[str]:
    """Fail."""
    raise KeyError(query)


class Arguments(BaseModel):
    query: str
    limit: int
    exact: bool = False


OUTPUT = TypeAdapter(list[str])


async def floor_async() -> None:
    model = Arguments.model_validate(ARGS)
    value = await search.fn(**model.__dict__)
    OUTPUT.dump_python(OUTPUT.validate_python(value), mode="json")


async def floor_sync() -> None:
    model = Arguments.model_validate(ARGS)
    loop = asyncio.get_running_loop()
    value = await loop.run_in_executor(None, functools.partial(search_sync.fn, **model.__dict__))
    OUTPUT.dump_python(OUTPUT.validate_python(value), mode="json")


async def floor_inline() -> None:
    model = Arguments.model_validate(ARGS)
    value = search_inline.fn(**model.__dict__)
    OUTPUT.dump_python(OUTPUT.validate_python(value), mode="json")


async def floor_error() -> None:
    model = Arguments.model_validate(ARGS)
    try:
        await failing.fn(**model.__dict__)
    except KeyError as exc:
        _ = {"error": type(exc).__name__, "message": "failed"}


async def floor_invalid() -> None:
    try:
        Arguments.model_validate(BAD_ARGS)
    except Exception as exc:
        _ = {"error": type(exc).__name__}


async def per_call_us(
    calls: int, *paths: Callable[[], Awaitable[Any]], rounds: int = 7
) -> list[float]:
    """Best-of-``rounds`` mean time per call of each path, in microseconds. The paths take
    turns round by round, so that a noisy moment on a shared machine hits them alike."""
    for call in paths:
        for _ in range(min(calls, 200)):
            await call()
    best = [float("inf")] * len(paths)
    for _ in range(rounds):
        for index, call in enumerate(paths):
            start = time.perf_counter()
            for _ in range(calls):
                await call()
            best[index] = min(best[index], (time.perf_counter() - start) / calls * 1e6)
    return best


async def main(calls: int) -> None:
    rows = [
        ("success, async tool", floor_async, lambda: search.run(ARGS), 1.5),
        ("success, sync tool (thread hop)", floor_sync, lambda: search_sync.run(ARGS), 1.1),
        ("success, sync tool inline", floor_inline, lambda: search_inline.run(ARGS), 1.5),
        ("error path (tool raises)", floor_error, lambda: failing.run(ARGS), 3.0),
        ("invalid arguments", floor_invalid, lambda: search.run(BAD_ARGS), 3.0),
    ]
    print(f"{'path':34} {'floor us':>9} {'tdk us':>8} {'ratio':>6} {'target':>7}")
    for label, floor, ours, target in rows:
        calls_here = calls // 10 if "sync" in label else calls
        floor_us, ours_us = await per_call_us(calls_here // 4, floor, ours)
        ratio = ours_us / floor_us
        print(f"{label:34} {floor_us:9.2f} {ours_us:8.2f} {ratio:5.2f}x {target:6.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().calls))
