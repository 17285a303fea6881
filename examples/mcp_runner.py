"""A module that says how its tools are served: a ``ToolRunner`` with policies, which
``tdk serve`` serves as it is (its retries, rate limit, circuit breaker and deadline).

Serve it (what an MCP host's configuration runs, on stdio)::

    tdk serve examples/mcp_runner.py           # the module's one ToolRunner
    tdk serve examples/mcp_runner.py:runner    # the same, named

Running this file instead starts that command as a subprocess and talks to it with the
``mcp`` SDK's own client, as any MCP host would. The server is named after the toolkit. A
quote meets an upstream over its rate limit once (429, ``Retry-After: 1``): the runner waits
and tries again, and the client hears why it waits (a progress notification). A report
tells its progress page by page. A status check meets an upstream that is down: its circuit
opens, the tool leaves the list, and the client, listening for changes, is told.

Offline: the upstream is an ``httpx.MockTransport``.

Run: python examples/mcp_runner.py
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

import httpx

import tdk.http
from tdk import (
    CircuitBreaker,
    RateLimit,
    RetryPolicy,
    ToolContext,
    Toolkit,
    ToolRunner,
    tool,
)

_LIMITED: set[str] = set()


def upstream(request: httpx.Request) -> httpx.Response:
    """A market-data API: each symbol's first quote is over its rate limit; status is down."""
    if request.url.path == "/status":
        return httpx.Response(503, text="maintenance")
    symbol = request.url.params["symbol"]
    if symbol not in _LIMITED:
        _LIMITED.add(symbol)
        return httpx.Response(429, headers={"Retry-After": "1"}, text="slow down")
    return httpx.Response(200, json={"symbol": symbol, "price": 101.5})


api = tdk.http.install(
    httpx.Client(base_url="https://market.example.test", transport=httpx.MockTransport(upstream))
)


@tool(read_only=True)
def quote(symbol: Annotated[str, "A ticker symbol, e.g. 'ACME'."]) -> dict[str, Any]:
    """The latest price of a symbol."""
    return api.get("/quote", params={"symbol": symbol}).json()


@tool(read_only=True)
async def report(pages: Annotated[int, "How many pages, 1 to 20."], context: ToolContext) -> str:
    """Write a market report, page by page."""
    for page in range(1, pages + 1):
        await asyncio.sleep(0.3)  # (writing the page)
        await context.progress(page, pages, f"page {page} of {pages}")
    return f"a report of {pages} pages"


@tool(read_only=True)
def status() -> str:
    """Whether the market-data service is up."""
    return api.get("/status").text


toolkit = Toolkit("market", [quote, report, status], version="1.0")
runner = ToolRunner(
    toolkit,
    retry=RetryPolicy(),
    rate_limit=RateLimit(calls=20, period=1.0, max_wait=2.0),
    deadline=20.0,
)
runner.configure("status", retry=None, circuit_breaker=CircuitBreaker(failure_threshold=1))


async def show_what_a_host_sees() -> None:
    import mcp

    server = mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "tdk", "serve", __file__]
    )

    async def heard(done: float, total: float | None, message: str | None) -> None:
        of = "" if total is None else f" of {total:g}"
        print(f"  progress {done:g}{of}: {message}")

    async with mcp.Client(server) as client:
        info = client.server_info
        print(f"server {info.name if info else '?'}, protocol {client.protocol_version}")
        print("tools:", [each.name for each in (await client.list_tools()).tools])
        print("\nquote(ACME):")
        answer = await client.call_tool("quote", {"symbol": "ACME"}, progress_callback=heard)
        print(f"  -> {answer.structured_content}")
        print("\nreport(pages=3):")
        answer = await client.call_tool("report", {"pages": 3}, progress_callback=heard)
        print(f"  -> {answer.structured_content}")
        async with client.listen(tools_list_changed=True) as changes:
            print("\nstatus():")
            answer = await client.call_tool("status", {})
            print(f"  -> isError={answer.is_error}: {answer.content[0].text}")  # type: ignore[union-attr]
            event = await asyncio.wait_for(anext(aiter(changes)), 10)
            print(f"\nheard: {type(event).__name__}")
        print("tools:", [each.name for each in (await client.list_tools()).tools])


if __name__ == "__main__":
    asyncio.run(show_what_a_host_sees())
