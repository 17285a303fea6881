"""An MCP server over streamable HTTP in a task of the test's own loop, on a free port of
127.0.0.1 (uvicorn, as ``tdk serve --http`` runs it), and SDK clients of it with headers of
the test's choosing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import mcp
import uvicorn
from _mcp_support import HOST, START_TIMEOUT, free_port
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

#: The DNS-rebinding check of a loopback server, as tdk's own is for 127.0.0.1.
LOOPBACK = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=[f"{HOST}:*"],
    allowed_origins=[f"http://{HOST}:*"],
)


@contextlib.asynccontextmanager
async def serving_app(app: ASGIApp) -> AsyncIterator[str]:
    """``app`` served by uvicorn in a task of the running loop: the URL of its ``/mcp`` until
    the block ends, when the server shuts down as on Ctrl-C."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(START_TIMEOUT):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield f"http://{HOST}:{port}/mcp"
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def serving(server: Server[Any], **options: Any) -> AsyncIterator[str]:
    """The MCP ``server`` over streamable HTTP (its SDK app with ``options``) in a task of
    the running loop: its URL until the block ends."""
    app = server.streamable_http_app(host=HOST, transport_security=LOOPBACK, **options)
    async with serving_app(app) as url:
        yield url


@contextlib.asynccontextmanager
async def connected(
    url: str, *, headers: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[mcp.Client]:
    """An SDK client of ``url``, connected, sending ``headers`` with every request."""
    async with httpx2.AsyncClient(headers=headers or {}, timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with mcp.Client(transport, **options) as each:
            yield each
