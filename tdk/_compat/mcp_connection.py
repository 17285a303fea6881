"""The connection of a request, read from the MCP SDK's ``ServerSession``.

A server that tells its 2025-era clients that its tool list changed sends
``notifications/tools/list_changed`` on each client's connection (its standalone stream: the
stdio pipe, or the GET stream of a streamable HTTP session). mcp hands a request handler a
per-request ``ServerSession`` whose connection is private (``ServerSession._connection``,
checked on mcp 2.3.0; ``tests/test_compat.py`` fails when it moves). Read here, with its
type checked: anything else gives None, and that client is simply not told.
"""

from __future__ import annotations

from mcp.server.connection import Connection
from mcp.server.session import ServerSession

__all__ = ["connection_of"]


def connection_of(session: ServerSession) -> Connection | None:
    """The connection ``session`` (a request's) belongs to, or None when it cannot be read."""
    connection = getattr(session, "_connection", None)
    return connection if isinstance(connection, Connection) else None
