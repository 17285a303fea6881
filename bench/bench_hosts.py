"""Cost of the host adapters: ``tools()`` on a toolkit of 1000 tools, and rendering results.

1. ``oai.tools(toolkit)`` and ``ant.tools(toolkit)``: the first call renders every tool; later
   calls return the kept rendering, which should cost what copying a list of 1000 items
   costs (the floor: ``list(shapes)``).
2. ``result.for_model()`` of a success: at most one ``json.dumps`` of the value (the floor:
   ``json.dumps`` of the same value with the same options); and ``oai.results([result])``,
   which adds the message around it.

Timings are the best of several interleaved rounds (a shared machine: the minimum is the
least disturbed), printed with their ratio to the floor.

Run: python bench/bench_hosts.py [--tools N] [--number N]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Annotated, Any

from tdk import Toolkit, ToolResult, tool
from tdk.hosts import anthropic as ant
from tdk.hosts import openai as oai


def search(
    query: Annotated[str, "What to search for."],
    limit: Annotated[int, "How many results."] = 10,
    labels: Annotated[list[str] | None, "Only issues with these labels."] = None,
) -> list[dict[str, Any]]:
    """Search the issues."""
    return []


def best(function: Callable[[], object], number: int, rounds: int = 7) -> float:
    """The least time per call of ``function``, in microseconds, over ``rounds`` runs."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(number):
            function()
        times.append((time.perf_counter() - started) / number * 1e6)
    return min(times)


def row(label: str, measured: float, floor: float, floor_label: str) -> None:
    ratio = measured / floor
    print(f"{label:<44} {measured:10.2f} us   {floor_label} {floor:8.2f} us   {ratio:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--number", type=int, default=2000)
    options = parser.parse_args()

    toolkit = Toolkit(
        "bench", [tool(name=f"search_{n}", read_only=True)(search) for n in range(options.tools)]
    )
    started = time.perf_counter()
    shapes = oai.tools(toolkit)
    first = (time.perf_counter() - started) * 1e6
    print(f"{options.tools} tools, first oai.tools() (renders each): {first / 1000:.2f} ms")
    number = max(options.number // 10, 10)
    copy = best(lambda: list(shapes), number)
    row(
        f"oai.tools(), {options.tools} tools, kept",
        best(lambda: oai.tools(toolkit), number),
        copy,
        "list copy",
    )
    ant.tools(toolkit)
    row(
        f"ant.tools(), {options.tools} tools, kept",
        best(lambda: ant.tools(toolkit), number),
        copy,
        "list copy",
    )
    oai.tools(toolkit, strict=True)
    row(
        f"oai.tools(strict=True), {options.tools} tools, kept",
        best(lambda: oai.tools(toolkit, strict=True), number),
        copy,
        "list copy",
    )

    value = [
        {"number": n, "title": f"Issue {n}: the build fails on Windows", "labels": ["bug", "ci"]}
        for n in range(20)
    ]
    result = ToolResult(tool="search", call_id="call_1", value=value)

    def floor() -> str:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    dumps = best(floor, options.number)
    row(
        "for_model(), a list of 20 issues",
        best(result.for_model, options.number),
        dumps,
        "json.dumps",
    )
    row(
        "oai.results([result]), the same value",
        best(lambda: oai.results([result]), options.number),
        dumps,
        "json.dumps",
    )
    row(
        "ant.results([result]), the same value",
        best(lambda: ant.results([result]), options.number),
        dumps,
        "json.dumps",
    )


if __name__ == "__main__":
    main()
