"""Progress over MCP: the reports of a call (``ToolContext.progress()``, the runner's waits)
as ``notifications/progress`` to the client that asked for them.

Each ``tools/call`` listens for its reports (:mod:`tdk._execution.progress`); the first one
makes the call's :class:`~tdk._execution.progress.Reporter` (throttled, monotonic), which
sends through the SDK's request-scoped ``report_progress``: to the progress token of a
JSON-RPC request (stdio, streamable HTTP, in both eras), or the callback of an in-process
client. A client that gave no token gets nothing (the SDK drops the notification). The last
report is sent before the call's result; a call cancelled sends nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable
from typing import Any, TypeVar

from mcp.server.context import ServerRequestContext

from tdk._execution.progress import Reporter, listening

__all__ = ["with_progress"]

T = TypeVar("T")


class _CallProgress:
    """The listener of one call: makes its reporter on the first report (most calls report
    none, and pay for none)."""

    __slots__ = ("_loop", "_request", "_thread", "reporter")

    def __init__(self, request: ServerRequestContext[Any, Any]) -> None:
        self._request = request
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.reporter: Reporter | None = None

    def hear(
        self,
        done: float | None,
        total: float | None,
        message: str | None,
        secrets: tuple[str, ...],
    ) -> None:
        reporter = self.reporter
        if reporter is None:
            if threading.get_ident() != self._thread:  # a sync tool's worker thread
                with contextlib.suppress(RuntimeError):  # (the loop has closed: call over)
                    self._loop.call_soon_threadsafe(self.hear, done, total, message, secrets)
                return
            reporter = self.reporter = Reporter(self._request.session.report_progress)
        reporter.hear(done, total, message, secrets)


async def with_progress(request: ServerRequestContext[Any, Any], running: Awaitable[T]) -> T:
    """Await ``running`` (the call of ``request``) with its reports sent to the client; the
    last one is sent before this returns."""
    progress = _CallProgress(request)
    try:
        with listening(progress.hear):
            outcome = await running
    except BaseException:
        if progress.reporter is not None:
            progress.reporter.cancel()
        raise
    if progress.reporter is not None:
        await progress.reporter.close()
    return outcome
