"""What crosses the wire between an MCP client and tdk's server, when it is more than the
SDK's JSON reader and writer take: values nested deeper than a client reads (or than the
SDK's writer writes), integers longer than Python converts, and request lines the SDK's reader
refuses. What docs/mcp.md promises in "Limits": every call and every request that carries an
id gets one answer, and the server goes on serving.

Values go through the ``mcp`` SDK's own client, in memory and against ``python -m tdk serve``
subprocesses over stdio and streamable HTTP. Request lines are written raw to a ``tdk serve``
subprocess's stdin, one at a time, each answer read before the next line. Every subprocess and
every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp
import pytest
from _mcp_support import (
    HOST,
    INITIALIZE,
    INITIALIZED,
    START_TIMEOUT,
    Pipes,
    RawStdio,
    accepts,
    call_request,
    facts,
    free_port,
    run,
    text_of,
)
from mcp import StdioServerParameters, types
from mcp.client.stdio import stdio_client

from tdk import Toolkit, ToolResult
from tdk.hosts import mcp as tdk_mcp
from tdk.hosts._mcp_answer import MAX_VALUE_DEPTH, READABLE_DEPTH

TOOLS_MODULE = '''
"""Tools whose values test what the wire carries."""

from __future__ import annotations

from typing import Annotated, Any

from tdk import tool


@tool(read_only=True)
def nested(depth: Annotated[int, "How many lists deep."]) -> Any:
    """A number inside ``depth`` lists."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@tool(read_only=True)
def nested_object(depth: Annotated[int, "How many objects deep."]) -> dict[str, Any]:
    """``{"a": {"a": ... 1}}``: ``depth`` objects."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@tool(read_only=True)
def number(digits: Annotated[int, "How many digits."]) -> Any:
    """An integer of ``digits`` nines."""
    return 10**digits - 1


@tool(read_only=True)
def echo(value: Annotated[Any, "Anything."]) -> Any:
    """The value sent."""
    return value


@tool(read_only=True)
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
    """Add two numbers."""
    return a + b
'''


def lists(depth: int) -> Any:
    """A number inside ``depth`` lists."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def objects(depth: int) -> Any:
    """``depth`` objects ``{"a": ...}`` around a number."""
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tools, in a folder of their own."""
    path = tmp_path_factory.mktemp("wire") / "mcp_wire_tools.py"
    path.write_text(TOOLS_MODULE)
    return path


def serve_argv(target: Path, *extra: str) -> list[str]:
    """The command line of ``python -m tdk serve target``."""
    return [sys.executable, "-m", "tdk", "serve", str(target), *extra]


# -- values: sent whole, or the call's TOOL_RUNTIME_BAD_OUTPUT_VALUE --------------------------

#: (tool, arguments, the value the client must receive, or None for a failure of the call).
#: A wrapped value sits three levels down in its answer (the message, ``result``,
#: ``structuredContent``); an object output two.
VALUES = [
    pytest.param(
        "nested",
        {"depth": MAX_VALUE_DEPTH},
        {"result": lists(MAX_VALUE_DEPTH)},
        id="deepest-readable",
    ),
    pytest.param("nested", {"depth": MAX_VALUE_DEPTH + 1}, None, id="one-level-too-deep"),
    pytest.param("nested", {"depth": 250}, None, id="250-levels"),
    pytest.param("nested", {"depth": 253}, None, id="deeper-than-the-sdk-writer"),
    pytest.param("nested", {"depth": 300}, None, id="deeper-than-pydantic-writes"),
    pytest.param(
        "nested_object",
        {"depth": MAX_VALUE_DEPTH + 1},
        objects(MAX_VALUE_DEPTH + 1),
        id="deepest-object",
    ),
    pytest.param("nested_object", {"depth": MAX_VALUE_DEPTH + 2}, None, id="object-too-deep"),
    pytest.param("number", {"digits": 4300}, {"result": int("9" * 4300)}, id="4300-digits"),
    pytest.param("number", {"digits": 4301}, None, id="4301-digits"),
]
TRANSPORTS = ["memory", "memory-legacy", "stdio", "http"]


async def each_value(
    client: mcp.Client,
) -> list[tuple[str, types.CallToolResult, types.CallToolResult]]:
    """Each case of ``VALUES`` called, then ``add``: (the case's id, both results)."""
    answered = []
    for case in VALUES:
        name, arguments, _ = case.values
        result = await client.call_tool(name, arguments)  # type: ignore[arg-type]
        after = await client.call_tool("add", {"a": 1})
        answered.append((str(case.id), result, after))
    return answered


@contextlib.asynccontextmanager
async def session(transport: str, tools_file: Path, log: Path) -> AsyncIterator[mcp.Client]:
    """The SDK's client with the tools served: in memory, or by ``tdk serve``."""
    if transport.startswith("memory"):
        mode = "legacy" if transport.endswith("legacy") else "auto"
        server = tdk_mcp.server(Toolkit.from_path(tools_file))
        async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
            yield client
        return
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable, args=serve_argv(tools_file)[1:], cwd=tools_file.parent
        )
        with log.open("w") as errlog:
            async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
                yield client
        return
    with http_served(tools_file, log) as url:
        async with mcp.Client(url) as client:
            yield client


@contextlib.contextmanager
def http_served(tools_file: Path, log: Path) -> Iterator[str]:
    """``tdk serve --http`` of the tools while the block runs: its URL."""
    port = free_port()
    with log.open("w") as err:
        process = subprocess.Popen(
            serve_argv(tools_file, "--http", "--port", str(port)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=tools_file.parent,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not accepts(port):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield f"http://{HOST}:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_value_is_sent_whole_or_is_that_calls_bad_output(
    tools_file: Path, tmp_path: Path, transport: str
) -> None:
    """Over every transport, with the SDK's own client: a value the client can read back
    arrives whole; one nested deeper than the SDK's reader takes (whether or not the SDK's
    writer could write it), or holding an integer longer than Python converts, is that call's
    ``TOOL_RUNTIME_BAD_OUTPUT_VALUE``; and the next call is answered."""

    async def scenario() -> list[tuple[str, types.CallToolResult, types.CallToolResult]]:
        async with session(transport, tools_file, tmp_path / "server.log") as client:
            return await each_value(client)

    answered = run(scenario())
    expected = {str(case.id): case.values[2] for case in VALUES}
    for case, result, after in answered:
        wanted = expected[case]
        if wanted is None:
            assert result.is_error is True, case
            assert result.structured_content is None, case
            assert facts(result)["kind"] == "TOOL_RUNTIME_BAD_OUTPUT_VALUE", case
            assert json.loads(text_of(result))["kind"] == "TOOL_RUNTIME_BAD_OUTPUT_VALUE", case
        else:
            assert result.is_error is False, (case, text_of(result)[:200])
            assert result.structured_content == wanted, case
        assert after.structured_content == {"result": 3}, case


def test_the_depth_bound_is_the_sdk_readers() -> None:
    """The bound is what the SDK's reader takes: a message exactly ``READABLE_DEPTH`` deep is
    read, one level more is refused."""
    readable = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"structuredContent": lists(READABLE_DEPTH - 2)},
    }
    types.jsonrpc_message_adapter.validate_json(json.dumps(readable))
    deeper = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": lists(READABLE_DEPTH - 1)}}
    with pytest.raises(ValueError, match="recursion"):
        types.jsonrpc_message_adapter.validate_json(json.dumps(deeper))


def test_result_of_a_value_too_deep_is_a_failure() -> None:
    """``tdk.hosts.mcp.result()`` shapes a hand-made result the same way."""
    shaped = tdk_mcp.result(ToolResult(tool="nested", value=lists(MAX_VALUE_DEPTH + 1)))
    assert shaped.is_error is True
    assert facts(shaped)["kind"] == "TOOL_RUNTIME_BAD_OUTPUT_VALUE"
    whole = tdk_mcp.result(ToolResult(tool="nested", value=lists(MAX_VALUE_DEPTH)))
    assert whole.structured_content == {"result": lists(MAX_VALUE_DEPTH)}


# -- request lines the SDK's reader refuses: each answered -----------------------------------

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


def raw_call(request_id: Any, arguments: str, *, params: str | None = None) -> str:
    """A ``tools/call`` of ``echo`` as one line, its arguments (or whole params) as given."""
    params = params if params is not None else f'{{"name":"echo","arguments":{arguments}}}'
    return (
        f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"tools/call","params":{params}}}'
    )


def deep_arguments(levels: int) -> str:
    """``{"value": [[...1...]]}`` with ``levels`` lists, as text."""
    return '{"value":' + "[" * levels + "1" + "]" * levels + "}"


#: (the line, the id the answer must carry, the JSON-RPC error code).
LINES = [
    pytest.param(
        raw_call(11, '{"value":' + "1" * 4301 + "}"),
        11,
        INVALID_PARAMS,
        id="integer-of-4301-digits",
    ),
    pytest.param(raw_call(12, deep_arguments(201)), 12, INVALID_PARAMS, id="arguments-201-deep"),
    pytest.param(
        raw_call("deep-13", deep_arguments(500)), "deep-13", INVALID_PARAMS, id="arguments-500-deep"
    ),
    pytest.param(
        '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":'
        + deep_arguments(250)
        + '},"id":14}',
        14,
        INVALID_PARAMS,
        id="id-after-deep-params",
    ),
    pytest.param(raw_call(15, "", params='"tools"'), 15, INVALID_REQUEST, id="params-a-string"),
    pytest.param(raw_call(16, "", params="[1,2]"), 16, INVALID_PARAMS, id="params-an-array"),
    pytest.param(raw_call(17, "", params="7"), 17, INVALID_REQUEST, id="params-a-number"),
    pytest.param(
        '{"jsonrpc":"1.0","id":18,"method":"tools/call","params":{"name":"add","arguments":{"a":1}}}',
        18,
        INVALID_REQUEST,
        id="jsonrpc-1.0",
    ),
    pytest.param('{"id":19,"method":"ping"}', 19, INVALID_REQUEST, id="no-jsonrpc"),
    pytest.param('{"jsonrpc":"2.0","id":20,"method":5}', 20, INVALID_REQUEST, id="method-a-number"),
    pytest.param(
        '{"jsonrpc":"2.0","id":true,"method":"ping"}', None, INVALID_REQUEST, id="id-a-bool"
    ),
    pytest.param(
        '{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, INVALID_REQUEST, id="id-a-float"
    ),
    pytest.param(
        '{"jsonrpc":"2.0","id":null,"method":"ping"}', None, INVALID_REQUEST, id="id-null"
    ),
    pytest.param(
        r'{"jsonrpc":"2.0","id":"\ud800","method":"ping"}',
        None,
        INVALID_REQUEST,
        id="id-a-lone-surrogate",
    ),
    pytest.param(
        raw_call("x", deep_arguments(5000)), None, PARSE_ERROR, id="too-deep-to-read-at-all"
    ),
    pytest.param('{"jsonrpc":"2.0","id":21,"method":', None, PARSE_ERROR, id="cut-short"),
    pytest.param("not json", None, PARSE_ERROR, id="not-json"),
    pytest.param(
        '[{"jsonrpc":"2.0","id":22,"method":"ping"}]', None, INVALID_REQUEST, id="a-batch"
    ),
    pytest.param(
        raw_call(23, '{"value":"' + "x" * (5 << 20) + '"}'),
        23,
        INVALID_REQUEST,
        id="longer-than-4-MiB",
    ),
    pytest.param(
        '{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"value":"'
        + "x" * (5 << 20)
        + '"}},"id":24}',
        None,
        INVALID_REQUEST,
        id="longer-than-4-MiB-id-at-the-end",
    ),
]


@pytest.fixture(scope="module")
def raw_server(tools_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    """One ``tdk serve`` of the tools over stdio for the module, initialized."""
    server = RawStdio(
        serve_argv(tools_file),
        cwd=tools_file.parent,
        log=tmp_path_factory.mktemp("logs") / "stdio.log",
    )
    try:
        assert server.ask(INITIALIZE)["id"] == "init"
        server.send(json.dumps(INITIALIZED))
        yield server
    finally:
        server.close()


@pytest.mark.parametrize(("line", "request_id", "code"), LINES)
def test_a_request_the_sdk_reader_refuses_is_answered(
    raw_server: RawStdio, line: str, request_id: Any, code: int
) -> None:
    """A line written to ``tdk serve``'s stdin that the SDK's reader refuses is answered with
    the JSON-RPC error saying why (no text of the line repeated), with the request's id when
    it can be read; the server goes on answering."""
    answered = raw_server.ask(line)
    assert answered["id"] == request_id
    assert answered["error"]["code"] == code
    assert "x" * 100 not in json.dumps(answered)
    after = raw_server.ask(call_request(99, "add", {"a": 1}))
    assert after["id"] == 99
    assert after["result"]["structuredContent"] == {"result": 3}


NOT_ANSWERED = [
    pytest.param('{"jsonrpc":"1.0","method":"notifications/initialized"}', id="notification"),
    pytest.param(
        '{"jsonrpc":"2.0","method":"notifications/x","params":"text"}', id="notification-params"
    ),
    pytest.param('{"jsonrpc":"2.0","id":5,"result":' + "[" * 300 + "]" * 300 + "}", id="response"),
    pytest.param(
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"id"}}',
        id="notification-naming-id",
    ),
    pytest.param("", id="blank-line"),
    pytest.param("   ", id="spaces"),
]


@pytest.mark.parametrize("line", NOT_ANSWERED)
def test_a_refused_line_without_an_id_is_not_answered(raw_server: RawStdio, line: str) -> None:
    """A notification, a response or a blank line the SDK's reader refuses gets no answer (as
    JSON-RPC says): the next message written is the answer to the next request."""
    raw_server.send(line)
    after = raw_server.ask({"jsonrpc": "2.0", "id": "after", "method": "ping"})
    assert after == {"jsonrpc": "2.0", "id": "after", "result": {}}


def test_a_request_the_sdk_reader_takes_is_served_as_ever(raw_server: RawStdio) -> None:
    """Deep and long values the SDK's reader takes reach the tool: 200 levels in all, an
    integer of 4,300 digits."""
    arguments = '{"value":' + "[" * 195 + "1" + "]" * 195 + "}"
    deep = raw_server.ask(raw_call(30, arguments))
    assert deep["id"] == 30
    assert deep["result"]["structuredContent"] == {"result": lists(195)}
    long = raw_server.ask(raw_call(31, '{"value":' + "7" * 4300 + "}"))
    assert long["result"]["structuredContent"] == {"result": int("7" * 4300)}


def test_stdio_answers_a_message_it_cannot_write_and_lives(
    tools_file: Path, tmp_path: Path
) -> None:
    """What the client sent cannot make the server die: after every refused line and every
    value it could not send, ``tdk serve`` still runs, and ends with status 0 when its
    client goes."""
    server = RawStdio(serve_argv(tools_file), cwd=tools_file.parent, log=tmp_path / "stdio.log")
    try:
        server.ask(INITIALIZE)
        server.send(json.dumps(INITIALIZED))
        for number, depth in enumerate((250, 253, 254, 300), start=1):
            answered = server.ask(call_request(number, "nested", {"depth": depth}))
            assert (
                answered["result"]["_meta"]["tdk/error"]["kind"] == "TOOL_RUNTIME_BAD_OUTPUT_VALUE"
            )
        assert server.ask(call_request(9, "add", {"a": 1}))["result"]["structuredContent"] == {
            "result": 3
        }
    finally:
        status = server.close()
    assert status == 0, (tmp_path / "stdio.log").read_text()
    assert "Traceback" not in (tmp_path / "stdio.log").read_text()
    assert os.path.getsize(tmp_path / "stdio.log") < 10_000


# -- messages that cannot be written ---------------------------------------------------------

#: A tool whose descriptions hold a lone surrogate (as text decoded with ``surrogateescape``).
UNWRITABLE_TEXT_MODULE = r'''
from typing import Annotated

from tdk import tool


@tool(read_only=True)
def odd(a: Annotated[int, "A number \udcff."]) -> int:
    """Odd \udce9 text."""
    return a
'''


@pytest.mark.parametrize("transport", ["memory", "stdio"])
def test_a_listing_with_text_that_is_not_unicode_is_sent(tmp_path: Path, transport: str) -> None:
    """A description holding a lone surrogate is listed with U+FFFD in its place (as a value's
    text is sent), and the tool is called: the SDK's writer could not write the listing, and
    ended the stdio server with every call in flight."""
    target = tmp_path / "odd_text.py"
    target.write_text(UNWRITABLE_TEXT_MODULE)

    async def scenario() -> tuple[types.Tool, types.CallToolResult]:
        async with session(transport, target, tmp_path / "server.log") as client:
            [listed] = (await client.list_tools()).tools
            return listed, await client.call_tool("odd", {"a": 5})

    listed, called = run(scenario())
    assert listed.description == "Odd \ufffd text."
    assert listed.input_schema["properties"]["a"]["description"] == "A number \ufffd."
    assert called.structured_content == {"result": 5}


def test_a_message_that_cannot_be_written_costs_only_itself(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Over stdio, an answer whose JSON cannot be made (here ``initialize``'s, for a server
    given a name holding a lone surrogate) is answered as an internal error of its request,
    logged, and the server goes on answering."""
    kit = Toolkit.from_path(Path(__file__).with_name("_transport_tools.py"))
    ping = {"jsonrpc": "2.0", "id": "after", "method": "ping"}
    with Pipes([INITIALIZE, ping]) as pipes:
        monkeypatch.setattr(sys, "stdin", pipes.stdin)
        monkeypatch.setattr(sys, "stdout", pipes.stdout)
        run(tdk_mcp.serve(kit, name="kit\udcff"))
    assert pipes.problem is None
    assert pipes.answers["init"]["error"]["code"] == -32603
    assert pipes.answers["after"] == {"jsonrpc": "2.0", "id": "after", "result": {}}
    assert "could not be written" in caplog.text


# -- the host closing stdin: every request read before is answered ---------------------------

CANCELLED = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}

#: (the requests written before stdin is closed, the ids answered: each once, in any order).
#: The SDK cancels what it was handling when its input ends; a request read and not started
#: yet (the last lines of a client that writes them all and closes stdin) went unanswered.
CLOSING = [
    pytest.param(
        [call_request(number, "add", {"a": number}) for number in range(40)],
        list(range(40)),
        id="pipelined",
    ),
    pytest.param([call_request(7, "add", {"a": 1}) for _ in range(5)], [7] * 5, id="one-id-reused"),
    pytest.param(
        [call_request(number, "add", {"a": number}) for number in range(1, 20)]
        + [{"jsonrpc": "2.0", "id": "ping", "method": "ping"}],
        [*range(1, 20), "ping"],
        id="pipelined-then-ping",
    ),
]


@pytest.mark.parametrize(("requests", "answered"), CLOSING)
def test_every_request_read_before_stdin_closes_is_answered(
    tools_file: Path, requests: list[dict[str, Any]], answered: list[Any]
) -> None:
    """A host that writes its requests and closes stdin at once (``tdk serve < requests``)
    while it still reads stdout gets one answer for each request: its result, or the
    "Connection closed" error of a call cancelled because the host left."""
    lines = [INITIALIZE, INITIALIZED, *requests]
    served = subprocess.run(
        serve_argv(tools_file),
        input="".join(json.dumps(line) + "\n" for line in lines).encode(),
        capture_output=True,
        cwd=tools_file.parent,
        timeout=START_TIMEOUT * 3,
        check=False,
    )
    assert served.returncode == 0, served.stderr.decode(errors="replace")
    messages = [json.loads(line) for line in served.stdout.splitlines()]
    assert messages[0]["id"] == "init"
    ids = [message["id"] for message in messages[1:]]
    assert sorted(ids, key=repr) == sorted(answered, key=repr)
    for message in messages[1:]:
        if "error" in message:
            assert message["error"] == {"code": -32000, "message": "Connection closed"}


def test_a_request_the_host_cancelled_before_closing_stdin_gets_no_answer(
    tools_file: Path,
) -> None:
    """A request the host cancelled is not answered when the host then closes stdin (the
    MCP specification: no answer after a cancellation); the others are."""
    requests = [call_request(number, "add", {"a": number}) for number in range(1, 6)]
    lines = [INITIALIZE, INITIALIZED, *requests, CANCELLED]
    served = subprocess.run(
        serve_argv(tools_file),
        input="".join(json.dumps(line) + "\n" for line in lines).encode(),
        capture_output=True,
        cwd=tools_file.parent,
        timeout=START_TIMEOUT * 3,
        check=False,
    )
    ids = [json.loads(line)["id"] for line in served.stdout.splitlines()[1:]]
    assert sorted(number for number in ids if number != 3) == [1, 2, 4, 5]
    assert ids.count(3) <= 1
