"""A toolkit to serve over MCP with ``tdk serve``, and a client that shows what a host sees.

Serve it (what an MCP host's configuration runs, on stdio)::

    tdk serve examples/mcp_server.py --deadline 10

Running this file instead starts that very command as a subprocess and talks to it with the
``mcp`` SDK's own client, as any MCP host would: it lists the tools, then calls each. One
succeeds; one meets an upstream that is over its quota (429, ``Retry-After: 30``): the 30 s
wait does not fit the 10 s deadline, so the host gets the failure at once, with
``retry_after_ms`` in ``_meta["tdk/error"]``; one is called with a bad argument; one needs an
API key, read from the environment variable of its name and never shown.

Offline: the upstream is an ``httpx.MockTransport``.

Run: python examples/mcp_server.py
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Annotated, Any

import httpx

import tdk.http
from tdk import ToolContext, tool


def upstream(request: httpx.Request) -> httpx.Response:
    """A weather API, and a news API over its quota."""
    if request.url.path == "/forecast":
        days = int(request.url.params.get("days", "1"))
        return httpx.Response(200, json={"city": request.url.params["city"], "max_c": [4] * days})
    return httpx.Response(429, headers={"Retry-After": "30"}, text="quota exceeded")


api = httpx.Client(base_url="https://api.example.test", transport=httpx.MockTransport(upstream))
tdk.http.install(api)


@tool(read_only=True)
def forecast(
    city: Annotated[str, "The city, e.g. 'Oslo'."],
    days: Annotated[int, "How many days ahead, 1 to 7."] = 1,
) -> dict[str, Any]:
    """The daily maximum temperatures of a city, in degrees Celsius."""
    if not 1 <= days <= 7:
        raise ValueError("days must be between 1 and 7")
    response = api.get("/forecast", params={"city": city, "days": days})
    return response.json()


@tool(read_only=True)
def headlines(topic: Annotated[str, "What the news should be about."]) -> list[str]:
    """The latest headlines on a topic."""
    return api.get("/news", params={"q": topic}).json()["titles"]


@tool(read_only=True, requires_secrets=["WEATHER_API_KEY"])
def account(context: ToolContext) -> str:
    """Which plan the weather account is on."""
    key = context.get_secret("WEATHER_API_KEY")  # sent to the upstream, never returned
    return "plan: pro" if key.startswith("wx-") else "plan: unknown"


async def show_what_a_host_sees() -> None:
    import mcp

    server = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "tdk", "serve", __file__, "--deadline", "10"],
        env={**os.environ, "WEATHER_API_KEY": "wx-demo-key-0042"},
    )
    async with mcp.Client(server) as client:
        listed = await client.list_tools()
        for listed_tool in listed.tools:
            print(f"tool {listed_tool.name}: {listed_tool.description}")
        for name, arguments in [
            ("forecast", {"city": "Oslo", "days": 2}),
            ("headlines", {"topic": "energy"}),
            ("forecast", {"city": "Oslo", "days": "many"}),
            ("account", {}),
        ]:
            answer = await client.call_tool(name, arguments)
            error = (answer.meta or {}).get("tdk/error")
            print(f"\n{name}({arguments}) -> isError={answer.is_error}")
            print(f"  text: {answer.content[0].text}")  # type: ignore[union-attr]
            if error:
                print(f"  _meta tdk/error: {error}")
            else:
                print(f"  structuredContent: {answer.structured_content}")


if __name__ == "__main__":
    asyncio.run(show_what_a_host_sees())
