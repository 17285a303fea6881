"""Small helpers of the MCP tests: a bounded event loop, free ports, raw JSON-RPC messages,
pipes standing in for a stdio server's stdin and stdout, a stdio server asked only to
initialize, a stdio server spoken to in raw lines, a tool that holds its call, the parts of a
``CallToolResult`` the tests read, and bounded calls through the SDK's own client (in memory,
or with ``tdk serve`` over stdio)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import mcp
import pytest
from mcp import StdioServerParameters, types
from mcp.client.stdio import stdio_client

from tdk import Toolkit, ToolRunner, tool
from tdk.runner import Bulkhead

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


def initialize_once(
    argv: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """Start a stdio server (``argv``), send it ``initialize`` and close its stdin: its exit
    status, stdout and stderr (it is killed if it has not ended in ``SCENARIO_TIMEOUT``)."""
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    try:
        out, err = process.communicate(
            (json.dumps(INITIALIZE) + "\n").encode(), timeout=SCENARIO_TIMEOUT
        )
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)
    return process.returncode, out, err


class Held:
    """A toolkit ``name`` of one tool, ``hold``, that waits until released, noting when a call
    starts and how each ended; ``runner`` runs it with a bulkhead of one."""

    def __init__(self, name: str) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.ended: list[Literal["done", "cancelled"]] = []

        @tool(read_only=True)
        async def hold(label: Annotated[str, "A label."]) -> str:
            """Wait until released."""
            self.entered.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.ended.append("cancelled")
                raise
            self.ended.append("done")
            return label

        self.toolkit = Toolkit(name, [hold])
        self.runner = ToolRunner(self.toolkit, bulkhead=Bulkhead(max_concurrent=1))


class RawStdio:
    """A ``tdk serve`` subprocess over stdio, spoken to in raw JSON-RPC lines: each line is
    written whole, and answers are read one line at a time, each within ``SCENARIO_TIMEOUT``
    seconds. Its stderr goes to ``log``. ``close()`` ends it (stdin closed, then killed if it
    lingers)."""

    def __init__(self, argv: list[str], *, cwd: Path, log: Path) -> None:
        with log.open("w") as err:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=cwd
            )
        self.log = log
        self._pending = b""

    def send(self, line: str | bytes) -> None:
        """Write ``line`` (a newline added)."""
        assert self.process.stdin is not None
        data = line.encode() if isinstance(line, str) else line
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        """The next message the server writes; fails the test if none comes in time."""
        assert self.process.stdout is not None
        out = self.process.stdout.fileno()
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([out], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no answer in {SCENARIO_TIMEOUT} s: {self.log.read_text()}")
            chunk = os.read(out, 1 << 20)
            if not chunk:
                raise AssertionError(f"the server's stdout closed: {self.log.read_text()}")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def ask(self, request: dict[str, Any] | str) -> dict[str, Any]:
        """Send ``request`` (a message, or a line as it is) and read the next message."""
        self.send(request if isinstance(request, str) else json.dumps(request))
        return self.answer()

    def close(self) -> int:
        """End the server: its stdin closed, killed if it has not ended in ``STOP_TIMEOUT``
        seconds. Its exit status."""
        assert self.process.stdin is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=STOP_TIMEOUT)
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()


# -- calls through the SDK's client, bounded ------------------------------------------------


#: Bound of one call, in seconds: a server that died (or hangs) fails the test, not the run.
CALL_TIMEOUT = 10.0


#: What a call gave: its result, or what went wrong with it as text (a protocol error, a
#: server gone, no answer within ``CALL_TIMEOUT``).
Answer = types.CallToolResult | str


async def attempt(client: mcp.Client, name: str, arguments: dict[str, Any]) -> Answer:
    """One call, bounded by ``CALL_TIMEOUT``: its result, or its failure as text."""
    try:
        return await asyncio.wait_for(client.call_tool(name, arguments), CALL_TIMEOUT)
    except Exception as failed:
        return f"{type(failed).__name__}: {failed}"


def success(answer: Answer) -> types.CallToolResult:
    """``answer`` as the success it must be."""
    assert isinstance(answer, types.CallToolResult), answer
    assert answer.is_error is False, answer.content
    return answer


def failure(answer: Answer, kind: str) -> types.CallToolResult:
    """``answer`` as a failure of ``kind``: ``isError``, no structured content, one text."""
    assert isinstance(answer, types.CallToolResult), answer
    assert answer.is_error is True, answer.structured_content
    assert answer.structured_content is None
    assert facts(answer)["kind"] == kind, text_of(answer)
    assert json.loads(text_of(answer))["kind"] == kind
    return answer


async def in_memory(server: Any, mode: str, body: Callable[[mcp.Client], Awaitable[T]]) -> T:
    """``body(client)`` in one session of the SDK's in-memory client with ``server``."""
    async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
        return await body(client)


def run_contained(coro: Coroutine[Any, Any, T]) -> T:
    """``run(coro)``; a ``KeyboardInterrupt`` or ``SystemExit`` escaping the server fails the
    test instead of ending the test run."""
    try:
        return run(coro)
    except (KeyboardInterrupt, SystemExit) as escaped:
        pytest.fail(f"{type(escaped).__name__} escaped the server: {escaped!r}")


@contextlib.asynccontextmanager
async def stdio_session(
    target: Path, log: Path, *, cwd: Path | None = None, **options: Any
) -> AsyncIterator[mcp.Client]:
    """An SDK client session with ``python -m tdk serve target`` over stdio (a process the
    SDK launches, and ends with the session), the server's stderr to ``log``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tdk", "serve", str(target)],
        env=dict(os.environ),
        cwd=cwd or target.parent,
    )
    with log.open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog), **options) as client:
            yield client
