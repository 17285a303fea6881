"""Cost of ``await tool.run(args)`` against the floor, measured in one run.

The floor is what any framework must do for a call: validate the arguments with a pydantic
model, call the function, validate and serialise the return value (the "validate-call-serialise
floor" of bench/README.md's guards). Every path is a ratio to that one floor, measured in the
same rounds: success (async, sync, inline sync), the error path (the tool raises) and the
invalid-arguments path; the sync tool's floor hops to a worker thread as the tool does.

When arcade-core is installed (``pip install -e '.[bench]'``), the same functions also run
through its ``ToolExecutor.run``, in the same rounds, and the last column says how many times
faster tdk is. Timings are the best of several interleaved rounds (a shared machine: the
minimum is the least disturbed).

The last row starts 1000 calls at once in one ``TaskGroup``, the floor's and tdk's in turn
(guard: at most 1.45x).

Run: python bench/bench_execute.py [--calls N]
"""

import argparse
import asyncio
import functools
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter

from tdk import tool

ARGS = {"query": "python", "limit": 5, "exact": False}
BAD_ARGS = {"query": "python", "limit": "many"}


# The plain functions: tdk and arcade-core each define their tools from these same ones.
# (No ``from __future__ import annotations`` here: arcade-core reads the annotations as objects.)
async def search_fn(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."],
    exact: Annotated[bool, "Match exactly."] = False,
) -> Annotated[list[str], "The results."]:
    """Search."""
    return [query] * limit


def search_sync_fn(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."],
    exact: Annotated[bool, "Match exactly."] = False,
) -> Annotated[list[str], "The results."]:
    """Search (sync)."""
    return [query] * limit


async def failing_fn(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."],
    exact: Annotated[bool, "Match exactly."] = False,
) -> Annotated[list[str], "The results."]:
    """Fail."""
    raise KeyError(query)


search = tool(name="search")(search_fn)
search_sync = tool(name="search_sync")(search_sync_fn)
search_inline = tool(name="search_inline", inline=True)(search_sync_fn)
failing = tool(name="failing")(failing_fn)


class Arguments(BaseModel):
    query: str
    limit: int
    exact: bool = False


OUTPUT = TypeAdapter(list[str])


async def floor_async() -> None:
    model = Arguments.model_validate(ARGS)
    value = await search_fn(**model.__dict__)
    OUTPUT.dump_python(OUTPUT.validate_python(value), mode="json")


async def floor_sync() -> None:
    model = Arguments.model_validate(ARGS)
    loop = asyncio.get_running_loop()
    value = await loop.run_in_executor(None, functools.partial(search_sync_fn, **model.__dict__))
    OUTPUT.dump_python(OUTPUT.validate_python(value), mode="json")


async def floor_inline() -> None:
    model = Arguments.model_validate(ARGS)
    value = search_sync_fn(**model.__dict__)
    OUTPUT.dump_python(OUTPUT.validate_python(value), mode="json")


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


def arcade_runner(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], Awaitable[Any]] | None:
    """``fn`` as arcade-core runs a tool (``ToolExecutor.run``), or None when it is not
    installed. Its ``@tool`` lives in another package (arcade-tdk): the two attributes that
    decorator sets are set here."""
    try:
        from arcade_core.catalog import ToolCatalog
        from arcade_core.executor import ToolExecutor
        from arcade_core.schema import ToolContext
    except ImportError:
        return None

    runnable: Any = fn
    runnable.__tool_name__ = fn.__name__
    runnable.__tool_description__ = fn.__doc__
    catalog = ToolCatalog()
    catalog.add_tool(runnable, "Bench")
    materialized = catalog.get_tool_by_name(f"Bench.{catalog.get_tool_names()[0].name}")
    context = ToolContext()

    def run(arguments: dict[str, Any]) -> Awaitable[Any]:
        return ToolExecutor.run(
            materialized.tool,
            materialized.definition,
            materialized.input_model,
            materialized.output_model,
            context,
            **arguments,
        )

    return run


async def main(calls: int) -> None:
    # The guards of bench/README.md: success 1.8x on Python 3.11 and 1.5x on later versions.
    success = 1.8 if sys.version_info < (3, 12) else 1.5
    rows = [
        ("success, async tool", floor_async, search.run, search_fn, ARGS, success),
        ("success, sync tool (thread hop)", floor_sync, search_sync.run, search_sync_fn, ARGS, 1.1),
        ("success, sync tool inline", floor_inline, search_inline.run, None, ARGS, success),
        ("error path (tool raises)", floor_async, failing.run, failing_fn, ARGS, 3.6),
        ("invalid arguments", floor_async, search.run, search_fn, BAD_ARGS, 3.6),
    ]
    arcade_installed = arcade_runner(search_fn) is not None
    header = f"{'path':34} {'floor us':>9} {'tdk us':>8} {'ratio':>6} {'guard':>7}"
    print(header + (f" {'arcade us':>10} {'tdk faster':>10}" if arcade_installed else ""))
    for label, floor, ours, fn, arguments, target in rows:
        calls_here = calls // 10 if "sync" in label else calls
        paths: list[Callable[[], Awaitable[Any]]] = [floor, functools.partial(ours, arguments)]
        arcade = arcade_runner(fn) if fn is not None else None
        if arcade is not None:
            paths.append(functools.partial(arcade, arguments))
        timings = await per_call_us(calls_here // 4, *paths)
        floor_us, ours_us = timings[:2]
        ratio = ours_us / floor_us
        line = f"{label:34} {floor_us:9.2f} {ours_us:8.2f} {ratio:5.2f}x {target:6.1f}x"
        if arcade is not None:
            line += f" {timings[2]:10.2f} {timings[2] / ours_us:9.1f}x"
        print(line)
    if not arcade_installed:
        print("(arcade-core is not installed: pip install -e '.[bench]' adds the comparison)")
    floor_ms, ours_ms = await concurrent_ms(1000)
    print(
        f"{'1000 concurrent calls (ms)':34} {floor_ms:9.2f} {ours_ms:8.2f} "
        f"{ours_ms / floor_ms:5.2f}x {1.45:6.2f}x"
    )


async def concurrent_ms(count: int, rounds: int = 15) -> tuple[float, float]:
    """Best time of ``count`` calls started at once in one TaskGroup: the floor's, and
    ``search.run``'s (the two measured in turn)."""

    async def batch(call: Callable[[], Awaitable[Any]]) -> float:
        start = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for _ in range(count):
                group.create_task(call())
        return (time.perf_counter() - start) * 1e3

    ours = functools.partial(search.run, ARGS)
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for index, call in enumerate((floor_async, ours)):
            best[index] = min(best[index], await batch(call))
    return best[0], best[1]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().calls))
