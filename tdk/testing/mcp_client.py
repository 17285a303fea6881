"""``tdk_mcp``: the official MCP client, in memory, connected to a toolkit or a runner, in
each protocol era.

::

    def test_over_mcp(tdk_mcp):
        async def scenario():
            async with tdk_mcp.connect(toolkit) as client:
                return await client.call_tool("search_issues", {"q": "bug"})

        answered = asyncio.run(scenario())

The fixture runs each test that uses it once per era: ``2025-11-25`` (the initialize
handshake; the SDK's ``mode="legacy"``) and ``2026-07-28`` (the stateless era, pinned with
``mode="2026-07-28"``); ``tdk_mcp.era`` says which. The server is tdk's own
(:func:`tdk.hosts.mcp.server`) and the client is the SDK's ``mcp.Client``: nothing of tdk on the
client's side, as with any host. Every answer the client gets is kept in
:attr:`McpClients.answers` and shown to ``tdk_secrets`` when the test uses it.

.. versionadded:: 0.2.0
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Final

from tdk._define.toolkit import Toolkit
from tdk._execution.context import ToolContext
from tdk.runner import ToolRunner
from tdk.testing.canaries import witness

if TYPE_CHECKING:
    import mcp
    from mcp import types

__all__ = ["ERAS", "McpClients", "RecordingClient"]

#: The protocol eras a test runs in, and the client's ``mode=`` for each.
ERAS: Final = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28"}


class RecordingClient:
    """The SDK's ``mcp.Client`` (as :attr:`client`), with the answers of
    :meth:`call_tool` and :meth:`list_tools` recorded."""

    def __init__(self, client: mcp.Client, clients: McpClients) -> None:
        self.client: Final = client
        """The SDK's client, for everything else."""
        self._clients = clients

    @property
    def protocol_version(self) -> str:
        """The protocol version the session speaks."""
        return self.client.protocol_version

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, **options: Any
    ) -> types.CallToolResult:
        """``tools/call``, as the SDK's client makes it; the answer is recorded."""
        answered = await self.client.call_tool(name, arguments, **options)
        self._clients.answers.append(answered)
        witness("MCP answer", f"tools/call {name!r} ({self._clients.era})", answered)
        return answered

    async def list_tools(self, **options: Any) -> types.ListToolsResult:
        """``tools/list``, as the SDK's client makes it; the answer is recorded."""
        listed = await self.client.list_tools(**options)
        witness("MCP answer", f"tools/list ({self._clients.era})", listed)
        return listed


class McpClients:
    """Connects the SDK's client in memory to tdk's MCP server, in one protocol era."""

    def __init__(self, era: str = "2026-07-28") -> None:
        if era not in ERAS:
            raise ValueError(f"unknown MCP era {era!r}: one of {', '.join(ERAS)}")
        self.era = era
        """The protocol version the clients negotiate (the fixture's parameter)."""
        self.answers: list[types.CallToolResult] = []
        """Every ``tools/call`` answer the clients got, in order."""

    @contextlib.asynccontextmanager
    async def connect(
        self,
        source: Toolkit | ToolRunner,
        *,
        context: ToolContext | Callable[[], ToolContext] | None = None,
        era: str | None = None,
        **client_options: Any,
    ) -> AsyncIterator[RecordingClient]:
        """A client session with tdk's server for ``source`` (a toolkit, or a runner whose
        policies then apply to every call), each call with ``context``. ``era`` overrides
        the fixture's; ``client_options`` go to ``mcp.Client`` (``elicitation_callback=``...)."""
        try:
            import mcp

            from tdk.hosts import mcp as tdk_mcp
        except ImportError as missing:
            raise ImportError(
                "tdk_mcp needs the mcp package: pip install 'tdk-tools[testing]'"
            ) from missing
        chosen = self.era if era is None else era
        if chosen not in ERAS:
            raise ValueError(f"unknown MCP era {chosen!r}: one of {', '.join(ERAS)}")
        if isinstance(source, ToolRunner):
            server = tdk_mcp.server(source.toolkit, runner=source, context=context)
        else:
            server = tdk_mcp.server(source, context=context)
        async with mcp.Client(server, mode=ERAS[chosen], **client_options) as client:
            yield RecordingClient(client, self)
