"""What one MCP server holds at once, and what a request costs it: the calls in flight and the
answers a client leaves unread are bounded (the excess answered at once with a retryable
``TOOL_RUNTIME_BULKHEAD_FULL``), and an unknown tool name costs no work in its length. What
docs/mcp.md promises in "Limits".

Counts, never clocks: the calls in flight are held by an event; the unread answers are
answers larger than a pipe holds, written to a client that reads nothing until the test says;
the cost of a name is the number of Python lines run to answer it.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import sys
import termios
import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

import mcp
import pytest
from _mcp_support import (
    INITIALIZE,
    INITIALIZED,
    SCENARIO_TIMEOUT,
    call_request,
    facts,
    run,
    text_of,
)
from mcp import types

from tdk import Toolkit, ToolRunner, tool
from tdk.hosts import mcp as tdk_mcp

MODES = ["auto", "legacy"]

# -- calls in flight -------------------------------------------------------------------------


class Holding:
    """A toolkit of ``hold`` (waits until released, counting the bodies that started) and
    ``add``."""

    def __init__(self) -> None:
        self.started = 0
        self.all_in = asyncio.Event()
        self.release = asyncio.Event()
        self.expected = 0

        @tool(read_only=True)
        async def hold(label: Annotated[str, "A label."]) -> str:
            """Wait until released."""
            self.started += 1
            if self.started >= self.expected:
                self.all_in.set()
            await self.release.wait()
            return label

        @tool(read_only=True)
        def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
            """Add two numbers."""
            return a + b

        self.toolkit = Toolkit("holding", [hold, add])


def busy(answer: types.CallToolResult) -> None:
    """``answer`` is the server's "busy": retryable, of kind TOOL_RUNTIME_BULKHEAD_FULL."""
    assert answer.is_error is True, answer.structured_content
    assert answer.structured_content is None
    error = facts(answer)
    assert error["kind"] == "TOOL_RUNTIME_BULKHEAD_FULL", text_of(answer)
    assert error["category"] == "bulkhead_full"
    assert error["retryable"] is True
    assert "busy" in json.loads(text_of(answer))["message"]


@pytest.mark.parametrize("mode", MODES)
def test_a_call_past_max_in_flight_is_answered_busy(mode: str) -> None:
    """With ``max_in_flight=2`` and two calls held, a third call is answered "busy" at once
    (its tool not run); once the two end, calls are run again."""
    kit = Holding()
    kit.expected = 2
    server = tdk_mcp.server(kit.toolkit, max_in_flight=2)

    async def scenario() -> tuple[list[types.CallToolResult], types.CallToolResult, Any]:
        async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
            held = [
                asyncio.ensure_future(client.call_tool("hold", {"label": label}))
                for label in ("a", "b")
            ]
            await kit.all_in.wait()
            third = await client.call_tool("hold", {"label": "c"})
            other = await client.call_tool("add", {"a": 1})
            started = kit.started
            kit.release.set()
            done = await asyncio.gather(*held)
            after = await client.call_tool("add", {"a": 2})
            return done, third, (other, started, after)

    done, third, (other, started, after) = run(scenario())
    busy(third)
    busy(other)  # (the bound is the server's, over all tools)
    assert started == 2
    assert [each.structured_content for each in done] == [{"result": "a"}, {"result": "b"}]
    assert after.structured_content == {"result": 4}


def test_the_runner_sees_no_busy_call() -> None:
    """A call answered "busy" never reaches the runner: its policies count nothing."""
    kit = Holding()
    kit.expected = 1
    runner = ToolRunner(kit.toolkit)
    server = tdk_mcp.server(kit.toolkit, runner=runner, max_in_flight=1)

    async def scenario() -> types.CallToolResult:
        async with mcp.Client(server) as client:
            held = asyncio.ensure_future(client.call_tool("hold", {"label": "a"}))
            await kit.all_in.wait()
            refused = await client.call_tool("add", {"a": 1})
            kit.release.set()
            await held
            return refused

    busy(run(scenario()))
    assert kit.started == 1


BAD_BOUNDS = [
    pytest.param({"max_in_flight": 0}, id="in-flight-zero"),
    pytest.param({"max_in_flight": -1}, id="in-flight-negative"),
    pytest.param({"max_in_flight": 2.5}, id="in-flight-float"),
    pytest.param({"max_in_flight": True}, id="in-flight-bool"),
    pytest.param({"max_unread": 0}, id="unread-zero"),
    pytest.param({"max_unread": "8"}, id="unread-text"),
]


@pytest.mark.parametrize("options", BAD_BOUNDS)
def test_a_bound_that_is_no_positive_int_is_refused(options: dict[str, Any]) -> None:
    """``server()`` refuses a bound that is not a positive int, naming it."""
    with pytest.raises(ValueError, match=next(iter(options))):
        tdk_mcp.server(Holding().toolkit, **options)


# -- answers the client leaves unread --------------------------------------------------------


class Listener(logging.Handler):
    """Notes the kinds of the failures tdk logs, and wakes a thread waiting for one."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.kinds: list[str] = []
        self.seen = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        error = getattr(record, "tdk_error", None)
        if error is not None:
            with self.seen:
                self.kinds.append(error["kind"])
                self.seen.notify_all()

    def wait_for(self, kind: str) -> None:
        with self.seen:
            assert self.seen.wait_for(lambda: kind in self.kinds, SCENARIO_TIMEOUT), self.kinds


@pytest.fixture
def listener() -> Iterator[Listener]:
    """A handler on the ``tdk`` logger for the test."""
    handler = Listener()
    logger = logging.getLogger("tdk")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


class SlowReader:
    """A raw client of a stdio server on pipes (given as the server's ``sys.stdin`` and
    ``sys.stdout``), run in a thread by the test: it writes what it is told, and reads only
    when told to."""

    def __init__(self) -> None:
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        self.stdin = open(stdin_read, encoding="utf-8")  # noqa: SIM115 (closed by close())
        self.stdout = open(stdout_write, "w", encoding="utf-8")  # noqa: SIM115
        self.to_server = os.fdopen(stdin_write, "wb", buffering=0)
        self.from_server = stdout_read
        self.capacity = fcntl.fcntl(stdout_read, fcntl.F_GETPIPE_SZ)
        self.pending = b""

    def send(self, message: dict[str, Any]) -> None:
        self.to_server.write(json.dumps(message).encode() + b"\n")

    def wait_until_full(self) -> None:
        """Wait until the server's writes fill the pipe (it is then blocked writing)."""
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        while self.unread() < self.capacity:
            assert time.monotonic() < deadline, f"{self.unread()} of {self.capacity} bytes"
            time.sleep(0.01)

    def unread(self) -> int:
        held = bytearray(4)
        fcntl.ioctl(self.from_server, termios.FIONREAD, held)
        return int.from_bytes(held, sys.byteorder)

    def answer(self) -> dict[str, Any]:
        """Read the next message."""
        while b"\n" not in self.pending:
            chunk = os.read(self.from_server, 1 << 20)
            assert chunk, "the server closed its stdout"
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> None:
        self.to_server.close()
        for stream in (self.stdin, self.stdout):
            stream.close()
        os.close(self.from_server)


def test_a_client_that_reads_nothing_makes_the_server_hold_no_more(
    monkeypatch: pytest.MonkeyPatch, listener: Listener
) -> None:
    """Over stdio with ``max_unread=1``, while an answer larger than the pipe waits for a
    client that reads nothing, the next call is answered "busy" (its tool not run) and the
    one after is not even read; once the client reads, that one is served."""
    ran: list[int] = []

    @tool(read_only=True)
    def big(n: Annotated[int, "A number."]) -> str:
        """A long text."""
        ran.append(n)
        return "x" * (1 << 20)

    client = SlowReader()
    monkeypatch.setattr(sys, "stdin", client.stdin)
    monkeypatch.setattr(sys, "stdout", client.stdout)
    answers: dict[Any, dict[str, Any]] = {}
    problems: list[BaseException] = []

    def talk() -> None:
        try:
            client.send(INITIALIZE)
            answers["init"] = client.answer()
            client.send(INITIALIZED)
            client.send(call_request(1, "big", {"n": 1}))
            client.wait_until_full()  # answer 1 waits: the client reads nothing
            client.send(call_request(2, "big", {"n": 2}))
            listener.wait_for("TOOL_RUNTIME_BULKHEAD_FULL")  # answered busy, not run
            client.send(call_request(3, "big", {"n": 3}))
            for _ in range(3):
                answered = client.answer()
                answers[answered["id"]] = answered
        except BaseException as failed:
            problems.append(failed)
        finally:
            client.to_server.close()  # the client goes: the server ends

    thread = threading.Thread(target=talk, daemon=True)
    thread.start()
    try:
        run(tdk_mcp.serve(Toolkit("big", [big]), max_unread=1))
    finally:
        thread.join(SCENARIO_TIMEOUT)
        client.close()
    assert problems == []
    assert answers[1]["result"]["structuredContent"] == {"result": "x" * (1 << 20)}
    refused = answers[2]["result"]
    assert refused["isError"] is True
    assert refused["_meta"]["tdk/error"]["kind"] == "TOOL_RUNTIME_BULKHEAD_FULL"
    assert refused["_meta"]["tdk/error"]["retryable"] is True
    assert answers[3]["result"]["structuredContent"] == {"result": "x" * (1 << 20)}
    assert ran == [1, 3]


# -- the cost of what a client sends ---------------------------------------------------------


def lines_run(server: Any, name: str, arguments: dict[str, Any]) -> int:
    """How many Python lines run (client and server, in this thread) to call ``name``."""
    counted = [0]

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            counted[0] += 1
        return trace

    async def scenario() -> types.CallToolResult:
        async with mcp.Client(server) as client:
            # (the tracer in place, coverage's under pytest-cov, comes back afterwards)
            previous = sys.gettrace()
            sys.settrace(trace)
            try:
                return await client.call_tool(name, arguments)
            finally:
                sys.settrace(previous)

    answered = run(scenario())
    assert answered.is_error is True
    assert facts(answered)["kind"] == "TOOL_NOT_FOUND"
    return counted[0]


@pytest.mark.parametrize("size", [10_000, 1_000_000], ids=["10-kB", "1-MB"])
def test_an_unknown_name_costs_no_work_in_its_length(size: int) -> None:
    """Answering an unknown tool name of ``size`` characters runs no more Python lines than
    answering one of 100 characters: a name too long to be close to any tool's is compared
    with none, and the work on it is in C (lowering, searching, cutting)."""
    server = tdk_mcp.server(Holding().toolkit)
    short = lines_run(server, "h" * 100, {})
    long = lines_run(server, "h" * size, {})
    assert long <= short + 50, (short, long)


def test_a_near_name_still_gets_suggestions() -> None:
    """The names that may be close are compared as ever: ``hols`` suggests ``hold``."""
    server = tdk_mcp.server(Holding().toolkit)

    async def scenario() -> types.CallToolResult:
        async with mcp.Client(server) as client:
            return await client.call_tool("hols", {})

    assert "hold" in text_of(run(scenario()))
