"""Cost of a ``tools/call`` served by ``tdk.hosts.mcp`` over the same call through ``ToolRunner``.

1. tdk's part of a call: the server's ``tools/call`` handler (from the SDK's
   ``server.get_request_handler``), which runs the call through the runner and builds the
   result, against ``await runner.run(...)`` alone (target: under 1.5x).
2. A whole round trip with the ``mcp`` SDK's own client over its in-memory transport
   (``mcp.Client(server)``): JSON-RPC messages, the SDK's validation of each, and the streams
   between client and server. The same round trip to the SDK's own ``MCPServer`` with the same
   function as a tool is the comparison: a server without tdk.

Timings are the best of several interleaved rounds (a shared machine: the minimum is the
least disturbed), per call, with ratios to the bare runner call.

Run: python bench/bench_mcp.py [--calls N]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Annotated, Any

import mcp
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolRequestParams

from tdk import Toolkit, ToolRunner, tool
from tdk.hosts import mcp as tdk_mcp

ARGS = {"query": "python", "limit": 5}


def search_fn(
    query: Annotated[str, "What to search for."], limit: Annotated[int, "How many results."]
) -> list[str]:
    """Search."""
    return [query] * limit


search = tool(name="search", read_only=True, inline=True)(search_fn)


async def per_call_us(
    calls: int, *paths: Callable[[], Awaitable[Any]], rounds: int = 5
) -> list[float]:
    """The best time per call of each path, interleaved round by round."""
    best = [float("inf")] * len(paths)
    for _ in range(rounds):
        for index, path in enumerate(paths):
            started = time.perf_counter()
            for _ in range(calls):
                await path()
            best[index] = min(best[index], (time.perf_counter() - started) / calls * 1e6)
    return best


async def main(calls: int) -> None:
    toolkit = Toolkit("bench", [search])
    runner = ToolRunner(toolkit)

    async def bare() -> object:
        return await runner.run("search", ARGS)

    server = tdk_mcp.server(toolkit, runner=runner)
    entry = server.get_request_handler("tools/call")
    assert entry is not None
    params = CallToolRequestParams(name="search", arguments=ARGS)
    request = SimpleNamespace(request_id=1)  # all the handler reads of the SDK's context

    async def handler() -> object:
        return await entry.handler(request, params)  # type: ignore[arg-type]

    sdk_server = MCPServer("sdk")
    sdk_server.tool(name="search")(search_fn)
    async with (
        mcp.Client(server) as ours,
        mcp.Client(sdk_server) as theirs,
    ):
        assert (await ours.call_tool("search", ARGS)).structured_content == {
            "result": ["python"] * 5
        }
        assert not (await theirs.call_tool("search", ARGS)).is_error

        async def round_trip() -> object:
            return await ours.call_tool("search", ARGS)

        async def sdk_round_trip() -> object:
            return await theirs.call_tool("search", ARGS)

        runner_us, handler_us = await per_call_us(calls, bare, handler)
        trip_us, sdk_us = await per_call_us(max(calls // 20, 5), round_trip, sdk_round_trip)
    print(f"{'path':<52} {'us/call':>9} {'vs runner':>10}")
    for label, measured in [
        ("ToolRunner.run (the floor here)", runner_us),
        ("tdk's tools/call handler (run, then the result)", handler_us),
        ("round trip, mcp.Client in memory, tdk server", trip_us),
        ("round trip, mcp.Client in memory, SDK's MCPServer", sdk_us),
    ]:
        print(f"{label:<52} {measured:9.1f} {measured / runner_us:9.2f}x")
    print(f"tdk's round trip vs the SDK's own server: {trip_us / sdk_us:.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000)
    asyncio.run(main(parser.parse_args().calls))
