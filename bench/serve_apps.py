"""The servers ``bench_serve.py`` compares, each serving the same tool over streamable HTTP.

- ``toolkit``: tdk's, served by ``tdk serve serve_apps.py:toolkit --http [--workers N]``;
- ``sdk_app()``: the ``mcp`` SDK's own ``MCPServer``, an app factory for uvicorn;
- ``fastmcp_app()``: FastMCP's, an app factory for uvicorn (extra ``bench``).

uvicorn runs the factories (``--factory``), once per worker; with more than one worker
(``BENCH_STATELESS=1``) each app keeps no session, as ``tdk serve --workers`` does.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from tdk import Toolkit, tool


async def search_fn(
    query: Annotated[str, "What to search for."], limit: Annotated[int, "How many results."]
) -> list[str]:
    """Search."""
    return [query] * limit


search = tool(name="search", read_only=True)(search_fn)
toolkit = Toolkit("bench", [search])


def _stateless() -> bool:
    return os.environ.get("BENCH_STATELESS") == "1"


def sdk_app() -> Any:
    """The ``mcp`` SDK's ``MCPServer`` with the same function as its tool, as an ASGI app."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")
    server.tool(name="search")(search_fn)
    return server.streamable_http_app(stateless_http=_stateless())


def fastmcp_app() -> Any:
    """FastMCP with the same function as its tool, as an ASGI app."""
    from fastmcp import FastMCP

    server = FastMCP("bench")
    server.tool(name="search")(search_fn)
    return server.http_app(path="/mcp", stateless_http=_stateless())
