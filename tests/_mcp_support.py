"""Small helpers of the MCP tests, as ``tests/test_mcp_serve.py`` has them (copied: a test
module is no library): a bounded event loop, free ports, raw JSON-RPC messages, pipes standing
in for a stdio server's stdin and stdout, and the parts of a ``CallToolResult`` the tests
read."""

from __future__ import annotations

import asyncio
import io
import json
import os
import select
import socket
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from mcp import types

T = TypeVar("T")

#: Bounds, in seconds: one client scenario, a server's start, a subprocess's end.
SCENARIO_TIMEOUT = 60.0
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0
HOST = "127.0.0.1"

#: The headers a streamable HTTP client sends with each POST.
RAW_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call_request(number: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A ``tools/call`` request."""
    return {
        "jsonrpc": "2.0",
        "id": number,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` in a new event loop, failing it after ``SCENARIO_TIMEOUT`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, SCENARIO_TIMEOUT))


def free_port(host: str = HOST) -> int:
    """A TCP port on ``host`` that nothing listens on (as far as the OS knows now)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def accepts(port: int, host: str = HOST) -> bool:
    """Whether something accepts a connection on ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=0.5).close()
    except OSError:
        return False
    return True


async def can_connect(port: int, host: str = HOST) -> bool:
    """Whether a connection to ``host:port`` is accepted, from inside a loop."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    await writer.wait_closed()
    return True


def facts(answered: types.CallToolResult) -> dict[str, Any]:
    """The ``_meta["tdk/error"]`` of a failure."""
    assert answered.meta is not None
    error: dict[str, Any] = answered.meta["tdk/error"]
    return error


def text_of(answered: types.CallToolResult) -> str:
    """The one text content of a result."""
    [content] = answered.content
    assert isinstance(content, types.TextContent)
    return content.text


class Pipes:
    """Pipes standing in for a server's stdin and stdout, and a raw JSON-RPC client on the
    other ends, run in a thread: it sends each request and reads until its answer, then
    closes stdin (the client goes). It gives up after ``SCENARIO_TIMEOUT`` seconds."""

    def __init__(self, requests: list[dict[str, Any] | str]) -> None:
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        self.stdin = io.TextIOWrapper(os.fdopen(stdin_read, "rb"), encoding="utf-8")
        self.stdout = io.TextIOWrapper(
            os.fdopen(stdout_write, "wb"), encoding="utf-8", write_through=True
        )
        self._to_server = os.fdopen(stdin_write, "wb", buffering=0)
        self._from_server = stdout_read
        self._requests = requests
        self.answers: dict[Any, dict[str, Any]] = {}
        self.problem: str | None = None
        self._thread = threading.Thread(target=self._talk, daemon=True)

    def __enter__(self) -> Pipes:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join(SCENARIO_TIMEOUT)
        for stream in (self.stdin, self.stdout):
            stream.close()
        os.close(self._from_server)

    def _talk(self) -> None:
        pending = b""
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        try:
            for request in self._requests:
                line = request if isinstance(request, str) else json.dumps(request)
                self._to_server.write(line.encode() + b"\n")
                wanted = None if isinstance(request, str) else request.get("id")
                while wanted is not None and wanted not in self.answers:
                    ready, _, _ = select.select([self._from_server], [], [], 0.1)
                    if time.monotonic() > deadline:
                        self.problem = f"no answer to {request}"
                        return
                    if not ready:
                        continue
                    chunk = os.read(self._from_server, 65536)
                    if not chunk:
                        self.problem = f"stdout closed before the answer to {request}"
                        return
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for each in lines:
                        message = json.loads(each)
                        if "id" in message:
                            self.answers[message["id"]] = message
        finally:
            self._to_server.close()
