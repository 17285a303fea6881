"""MCP serving when something misbehaves: a tool (text that is not UTF-8, a body that exits, a
value its output schema does not describe), a ``context=`` function, a state store, the module
served (it prints, reads stdin, exits, takes the name ``mcp``), the command line, a request
naming another host, and a signal. What docs/mcp.md promises in "Bad clients, and tools that
misbehave" and in its ``tdk serve`` paragraphs.

Calls go through the ``mcp`` SDK's own client, which checks each success's
``structuredContent`` against the ``outputSchema`` it listed: in memory
(``mcp.Client(server)``, in its modern and legacy modes), and against ``python -m tdk serve``
subprocesses over stdio (the SDK's ``stdio_client`` launches them) and streamable HTTP. The
tools served are ``tests/_mcp_misbehaving_tools.py``. Every subprocess and every call is
bounded, and each process is ended by the test or fixture that started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import jsonschema
import mcp
import pytest
from _mcp_live import connected, serving
from _mcp_support import (
    HOST,
    INITIALIZE,
    INITIALIZED,
    RAW_HEADERS,
    SCENARIO_TIMEOUT,
    START_TIMEOUT,
    STOP_TIMEOUT,
    Pipes,
    accepts,
    call_request,
    can_connect,
    facts,
    free_port,
    initialize_once,
    run,
    text_of,
)
from mcp import StdioServerParameters, types
from mcp.client.stdio import stdio_client
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel

from tdk import ToolContext, Toolkit, ToolRunner, tool
from tdk.__main__ import main
from tdk.hosts import mcp as tdk_mcp
from tdk.runner import CircuitBreaker, InMemoryStore, RateLimit

T = TypeVar("T")

#: Bound of one call, in seconds: a server that died (or hangs) fails the test, not the run.
CALL_TIMEOUT = 10.0
#: How long a signalled server may take to exit, in seconds.
SIGNAL_EXIT_TIMEOUT = 10.0
SECRET = "planted-secret-9f3a"
#: A secret of the shape tdk's redaction recognises (an API key).
TOKEN = "sk-abcdefghijklmnopqrstuvwx"
MODES = ["auto", "legacy"]
TRANSPORTS = ["stdio", "http"]
TOOLS_SOURCE = Path(__file__).with_name("_mcp_misbehaving_tools.py")

#: What a call gave: its result, or what went wrong with it as text (a protocol error, a
#: server gone, no answer within ``CALL_TIMEOUT``).
Answer = types.CallToolResult | str


# -- helpers ---------------------------------------------------------------------------------


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


def serve_argv(target: Path, *extra: str) -> list[str]:
    """The command line of ``python -m tdk serve target``."""
    return [sys.executable, "-m", "tdk", "serve", str(target), *extra]


def stop(process: subprocess.Popen[Any]) -> None:
    """End ``process`` if it still runs: its stdin closed (the client goes), terminated,
    then killed if it lingers."""
    if process.poll() is not None:
        return
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT)


def wait_until(ready: Callable[[], bool], process: subprocess.Popen[Any], log: Path) -> None:
    """Wait (at most ``START_TIMEOUT`` s) until ``ready()``, failing if ``process`` ends."""
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"tdk serve ended ({process.returncode}): {log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"tdk serve was not ready in {START_TIMEOUT} s: {log.read_text()}")
        time.sleep(0.05)


@contextlib.contextmanager
def http_process(target: Path, log: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``tdk serve target --http --port port`` in a subprocess, its stderr to ``log``, until
    the block ends (then terminated, or killed if it lingers); yielded once it listens."""
    with log.open("w") as err:
        process = subprocess.Popen(
            serve_argv(target, "--http", "--port", str(port)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=target.parent,
        )
    try:
        wait_until(lambda: accepts(port), process, log)
        yield process
    finally:
        stop(process)


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


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The misbehaving tools in a folder of their own: one file for the whole module (a
    module name is bound to one file per process, and ``from_path`` loads it in this one)."""
    path = tmp_path_factory.mktemp("misbehaving") / "mcp_misbehaving_tools.py"
    shutil.copyfile(TOOLS_SOURCE, path)
    return path


@pytest.fixture(scope="module")
def toolkit(tools_file: Path) -> Toolkit:
    """The misbehaving tools, loaded in this process as ``tdk serve`` loads them."""
    return Toolkit.from_path(tools_file)


@pytest.fixture(scope="module")
def http_url(tools_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of one ``tdk serve --http`` of the misbehaving tools, for the module."""
    port = free_port()
    log = tmp_path_factory.mktemp("logs") / "http.log"
    with http_process(tools_file, log, port):
        yield f"http://{HOST}:{port}/mcp"


@contextlib.asynccontextmanager
async def subprocess_session(
    transport: str, tools_file: Path, http_url: str, log: Path
) -> AsyncIterator[mcp.Client]:
    """A session with ``tdk serve`` of the misbehaving tools: a new stdio process, or the
    module's HTTP server."""
    if transport == "stdio":
        async with stdio_session(tools_file, log) as client:
            yield client
        return
    async with mcp.Client(http_url) as client:
        yield client


# -- 1. text that is not UTF-8 ---------------------------------------------------------------

#: Each tool returning a lone surrogate (``caf\udce9.txt``), the value the client must get
#: (each surrogate one U+FFFD; in a key of a typed dict, pydantic-core's JSON mode writes one
#: U+FFFD per byte of the surrogate's UTF-8 form), and whether it goes out wrapped as
#: ``{"result": ...}``.
SURROGATES = [
    pytest.param("file_names", ["caf\ufffd.txt", "plain.txt"], True, id="list-of-names"),
    pytest.param("sizes", {"caf\ufffd\ufffd\ufffd.txt": 4}, False, id="dict-key"),
    pytest.param(
        "listing",
        {"caf\ufffd\ufffd\ufffd.txt": {"name": "caf\ufffd.txt"}},
        False,
        id="untyped-dict-key",
    ),
    pytest.param("file_name", "caf\ufffd.txt", True, id="plain-str"),
    pytest.param("entry", {"name": "caf\ufffd.txt", "size": 4}, False, id="model-field"),
]
SURROGATE_FIELDS = ("name", "value", "wrapped")


def check_replaced(answer: Answer, value: Any, wrapped: bool) -> None:
    """``answer`` is a success holding ``value`` (U+FFFD in place of each surrogate) in its
    structured content and, as JSON (or as is, for a string), in its one text."""
    answered = success(answer)
    assert answered.structured_content == ({"result": value} if wrapped else value)
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert text_of(answered) == (value if isinstance(value, str) else compact)
    answered.model_dump_json(by_alias=True).encode()  # the whole result encodes as UTF-8


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(SURROGATE_FIELDS, SURROGATES)
def test_lone_surrogates_over_the_in_memory_client(
    toolkit: Toolkit, mode: str, name: str, value: Any, wrapped: bool
) -> None:
    """A value holding lone surrogates is a success the client accepts, each one U+FFFD in
    the structured content and the text; the next call of the session succeeds."""

    async def body(client: mcp.Client) -> tuple[Answer, Answer]:
        return await attempt(client, name, {}), await attempt(client, "add", {"a": 1})

    answered, after = run(in_memory(tdk_mcp.server(toolkit), mode, body))
    check_replaced(answered, value, wrapped)
    assert success(after).structured_content == {"result": 3}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(SURROGATE_FIELDS, SURROGATES)
def test_lone_surrogates_over_tdk_serve(
    transport: str,
    tools_file: Path,
    http_url: str,
    tmp_path: Path,
    name: str,
    value: Any,
    wrapped: bool,
) -> None:
    """Over ``tdk serve`` (stdio and HTTP) too: the value arrives with U+FFFD in place, and
    the server answers the next call (the stdio server does not die writing the answer)."""
    log = tmp_path / "server.log"

    async def scenario() -> tuple[Answer, Answer]:
        async with subprocess_session(transport, tools_file, http_url, log) as client:
            return await attempt(client, name, {}), await attempt(client, "add", {"a": 1})

    answered, after = run(scenario())
    check_replaced(answered, value, wrapped)
    assert success(after).structured_content == {"result": 3}
    if transport == "stdio":
        assert "Traceback" not in log.read_text()


@pytest.mark.parametrize(SURROGATE_FIELDS, SURROGATES)
def test_result_of_a_value_with_lone_surrogates_encodes(
    toolkit: Toolkit, name: str, value: Any, wrapped: bool
) -> None:
    """``result()`` (the public shaping of a ``ToolResult``) gives a success whose JSON
    encodes, U+FFFD in place of each surrogate."""
    item = toolkit.get(name)
    shaped = tdk_mcp.result(item.run_sync(), definition=item.definition)
    assert shaped.is_error is False, shaped.content
    wire = json.loads(shaped.model_dump_json(by_alias=True, exclude_none=True))
    assert wire["structuredContent"] == ({"result": value} if wrapped else value)


# -- 2. a body that exits --------------------------------------------------------------------

#: Each tool body that stops as a script would, sync and async.
BAILS = [
    pytest.param(name, how, id=f"{kind}-{how}")
    for name, kind in (("bail", "sync"), ("bail_async", "async"))
    for how in ("exit", "exit-message", "argparse", "interrupt")
]
#: ``ToolRunner`` options of the server: none (the default runner), a deadline, a timeout.
RUNNERS = [
    pytest.param(None, id="default-runner"),
    pytest.param({"deadline": 20.0}, id="deadline"),
    pytest.param({"timeout": 20.0}, id="timeout"),
]


def check_fatal_stop(answer: Answer, how: str) -> None:
    """``answer`` is the ``TOOL_RUNTIME_FATAL`` result of a body that stopped ``how``."""
    answered = failure(answer, "TOOL_RUNTIME_FATAL")
    cause = "KeyboardInterrupt" if how == "interrupt" else "SystemExit"
    assert cause in text_of(answered)
    assert facts(answered)["category"] == "execution"
    assert facts(answered)["retryable"] is False


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("options", RUNNERS)
@pytest.mark.parametrize(("name", "how"), BAILS)
def test_a_body_that_exits_is_that_calls_failure(
    toolkit: Toolkit, mode: str, options: dict[str, Any] | None, name: str, how: str
) -> None:
    """``sys.exit()``, argparse's exit or ``KeyboardInterrupt`` in a body (sync or async) is
    that call's ``TOOL_RUNTIME_FATAL`` result, and the session's next call succeeds."""
    runner = None if options is None else ToolRunner(toolkit, **options)

    async def body(client: mcp.Client) -> list[Answer]:
        return [
            await attempt(client, name, {"how": how}),
            await attempt(client, "add", {"a": 1}),
            await attempt(client, name, {"how": how}),
        ]

    server = tdk_mcp.server(toolkit, runner=runner)
    stopped, after, again = run_contained(in_memory(server, mode, body))
    check_fatal_stop(stopped, how)
    assert success(after).structured_content == {"result": 3}
    check_fatal_stop(again, how)


@pytest.mark.parametrize(("name", "how"), BAILS)
def test_a_body_that_exits_over_http_tdk_serve(http_url: str, name: str, how: str) -> None:
    """Over ``tdk serve --http``: the call's ``TOOL_RUNTIME_FATAL`` result, then the same
    session's next call and another session's call succeed."""

    async def scenario() -> list[Answer]:
        async with mcp.Client(http_url) as client:
            stopped = await attempt(client, name, {"how": how})
            after = await attempt(client, "add", {"a": 1})
        async with mcp.Client(http_url) as other:
            return [stopped, after, await attempt(other, "add", {"a": 2})]

    stopped, after, other = run(scenario())
    check_fatal_stop(stopped, how)
    assert success(after).structured_content == {"result": 3}
    assert success(other).structured_content == {"result": 4}


def test_a_body_that_exits_over_stdio_tdk_serve(tools_file: Path, tmp_path: Path) -> None:
    """Over ``tdk serve`` on stdio: every way a body stops is its call's result, and the
    process serves on (one session, each call followed by a success)."""
    hows = [each.values for each in BAILS]
    log = tmp_path / "stdio.log"

    async def scenario() -> list[tuple[Answer, Answer]]:
        async with stdio_session(tools_file, log) as client:
            return [
                (
                    await attempt(client, str(name), {"how": how}),
                    await attempt(client, "add", {"a": 1}),
                )
                for name, how in hows
            ]

    for (_, how), (stopped, after) in zip(hows, run(scenario()), strict=True):
        check_fatal_stop(stopped, str(how))
        assert success(after).structured_content == {"result": 3}
    assert "Traceback" not in log.read_text()


def test_tdk_serve_over_stdio_in_process(
    tools_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``main(["serve", FILE])`` in this process, over pipes: every body that stops is its
    call's ``TOOL_RUNTIME_FATAL`` result, a value with a lone surrogate goes out with U+FFFD,
    and the server ends with status 0 when the client goes."""
    hows = [each.values for each in BAILS]
    requests: list[dict[str, Any] | str] = [INITIALIZE, INITIALIZED]
    for number, (name, how) in enumerate(hows):
        requests.append(call_request(number, str(name), {"how": how}))
    requests += [call_request(100, "file_names", {}), call_request(101, "add", {"a": 1})]
    with Pipes(requests) as pipes:
        monkeypatch.setattr(sys, "stdin", pipes.stdin)
        monkeypatch.setattr(sys, "stdout", pipes.stdout)
        status = main(["serve", str(tools_file)])
    assert (status, pipes.problem) == (0, None)
    for number in range(len(hows)):
        answered = pipes.answers[number]["result"]
        assert (answered["isError"], answered["_meta"]["tdk/error"]["kind"]) == (
            True,
            "TOOL_RUNTIME_FATAL",
        )
    names = pipes.answers[100]["result"]
    assert names["structuredContent"] == {"result": ["caf\ufffd.txt", "plain.txt"]}
    assert pipes.answers[101]["result"]["structuredContent"] == {"result": 3}
    assert "Traceback" not in capsys.readouterr().err


# -- 3. the context function -----------------------------------------------------------------


@tool(read_only=True)
def whoami(context: ToolContext) -> str:
    """Who the call is for."""
    return f"{context.user_id}"


def context_raises() -> ToolContext:
    """A context function that fails, its message holding the secret."""
    raise RuntimeError(f"the vault refused key {SECRET}")


def context_of_a_dict() -> Any:
    """A context function returning a dict (with the secret), not a ``ToolContext``."""
    return {"user_id": "ada", "secrets": {"WX_KEY": SECRET}}


def context_exits() -> ToolContext:
    """A context function that calls ``sys.exit`` with the secret."""
    sys.exit(f"no context for {SECRET}")


def context_interrupted() -> ToolContext:
    """A context function interrupted."""
    raise KeyboardInterrupt(SECRET)


async def context_async_raises() -> ToolContext:
    """An ``async def`` context function that fails."""
    await asyncio.sleep(0)
    raise LookupError(f"no session for {SECRET}")


def context_none() -> ToolContext | None:
    """A context function with no context to give."""
    return None


async def context_async() -> ToolContext:
    """An ``async def`` context function (awaited)."""
    await asyncio.sleep(0)
    return ToolContext(user_id="async-user")


def context_plain() -> ToolContext:
    """A context function as documented."""
    return ToolContext(user_id="plain-user")


#: Each ``context=`` function, and what ``whoami`` answers with it (None: a fatal failure).
CONTEXTS = [
    pytest.param(context_raises, None, id="raises"),
    pytest.param(context_of_a_dict, None, id="returns-a-dict"),
    pytest.param(context_exits, None, id="calls-sys-exit"),
    pytest.param(context_interrupted, None, id="keyboard-interrupt"),
    pytest.param(context_async_raises, None, id="async-raises"),
    pytest.param(context_none, "None", id="returns-none"),
    pytest.param(context_async, "async-user", id="async-def"),
    pytest.param(context_plain, "plain-user", id="returns-a-context"),
]


def first_call_only(function: Callable[[], Any]) -> Callable[[], Any]:
    """A context function that is ``function`` for the first call, then a good one."""
    made: list[int] = []

    def context() -> Any:
        made.append(1)
        return function() if len(made) == 1 else ToolContext(user_id="next-user")

    return context


def assert_nowhere(secret: str, answers: list[Answer], caplog: pytest.LogCaptureFixture) -> None:
    """``secret`` is in no answer (content and ``_meta``) and no log record."""
    for answer in answers:
        assert isinstance(answer, types.CallToolResult), answer
        assert secret not in answer.model_dump_json(by_alias=True)
    assert secret not in caplog.text
    for record in caplog.records:
        assert secret not in record.getMessage()
        assert secret not in (record.exc_text or "")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("function", "expected"), CONTEXTS)
def test_a_context_function_table(
    mode: str,
    function: Callable[[], Any],
    expected: str | None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``server(context=function)``: one that fails, returns a non-context or exits gives
    that call's ``TOOL_RUNTIME_FATAL`` result, whose content, ``_meta`` and log show none of
    its secret; None is no context; an ``async def`` one is awaited. The next call works."""
    caplog.set_level(logging.DEBUG)
    server = tdk_mcp.server(Toolkit("contexts", [whoami]), context=first_call_only(function))

    async def body(client: mcp.Client) -> list[Answer]:
        return [await attempt(client, "whoami", {}), await attempt(client, "whoami", {})]

    answered, after = run_contained(in_memory(server, mode, body))
    if expected is None:
        failure(answered, "TOOL_RUNTIME_FATAL")
    else:
        assert success(answered).structured_content == {"result": expected}
    assert success(after).structured_content == {"result": "next-user"}
    assert_nowhere(SECRET, [answered, after], caplog)


# -- 4. the state store ----------------------------------------------------------------------


class BrokenStore:
    """A state store that raises ``error`` while ``broken``, then keeps state in memory."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.broken = True
        self.updates = 0
        self._inner = InMemoryStore()

    async def update(self, key: str, change: Callable[..., tuple[Any, Any]], *args: Any) -> Any:
        """Fail, or apply ``change`` in memory."""
        self.updates += 1
        if self.broken:
            raise self.error
        return await self._inner.update(key, change, *args)


@tool(read_only=True)
def double(n: Annotated[int, "A number."]) -> int:
    """Double a number."""
    return 2 * n


#: What a store raises (with the secret in its message).
STORE_ERRORS = [
    pytest.param(ConnectionError, id="connection-error"),
    pytest.param(OSError, id="os-error"),
    pytest.param(RuntimeError, id="runtime-error"),
    pytest.param(TimeoutError, id="timeout-error"),
]
#: The policies that keep state in the store.
STORE_POLICIES = [
    pytest.param({"rate_limit": RateLimit(calls=5, period=1.0)}, id="rate-limit"),
    pytest.param({"circuit_breaker": CircuitBreaker()}, id="circuit-breaker"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policies", STORE_POLICIES)
@pytest.mark.parametrize("error", STORE_ERRORS)
def test_a_failing_state_store(
    mode: str,
    policies: dict[str, Any],
    error: type[Exception],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A ``StateStore`` whose ``update`` raises makes the call a ``TOOL_RUNTIME_FATAL``
    result (its message's secret nowhere); the server keeps serving: it lists its tools, and
    calls succeed once the store answers again."""
    caplog.set_level(logging.DEBUG)
    kit = Toolkit("stored", [double])
    store = BrokenStore(error(f"the store at 10.0.0.5 refused key {SECRET}"))
    runner = ToolRunner(kit, store=store, **policies)

    async def body(client: mcp.Client) -> tuple[list[Answer], list[str]]:
        broken = await attempt(client, "double", {"n": 2})
        store.broken = False
        names = [item.name for item in (await client.list_tools()).tools]
        return [broken, await attempt(client, "double", {"n": 3})], names

    server = tdk_mcp.server(kit, runner=runner)
    (broken, after), names = run_contained(in_memory(server, mode, body))
    assert store.updates >= 2  # the store was asked, for both calls
    failure(broken, "TOOL_RUNTIME_FATAL")
    assert names == ["double"]
    assert success(after).structured_content == {"result": 6}
    assert_nowhere(SECRET, [broken, after], caplog)


# -- 5. output models with aliases -----------------------------------------------------------


class Listing(BaseModel):
    """A file, its fields camel-cased on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    file_name: str
    byte_count: int


class Tagged(BaseModel):
    """A field whose name is no identifier."""

    kind_of: str = Field(alias="kind-of")
    plain: int = 0


class SerialisedAs(BaseModel):
    """A field renamed on the way out only."""

    created_at: str = Field(serialization_alias="createdAt")


class Folder(BaseModel):
    """Aliased models inside an aliased model."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    folder_name: str
    first_file: Listing
    tagged_items: list[Tagged]


@tool(read_only=True)
def listing_of(name: Annotated[str, "The file."]) -> Listing:
    """One file."""
    return Listing(file_name=name, byte_count=len(name))


@tool(read_only=True)
def tagged() -> Tagged:
    """A tagged item."""
    return Tagged.model_validate({"kind-of": "pdf", "plain": 1})


@tool(read_only=True)
def stamped() -> SerialisedAs:
    """A stamp."""
    return SerialisedAs(created_at="2024-01-01")


@tool(read_only=True)
def folder() -> Folder:
    """A folder."""
    return Folder(
        folder_name="docs",
        first_file=Listing(file_name="a.txt", byte_count=5),
        tagged_items=[Tagged.model_validate({"kind-of": "txt"})],
    )


@tool(read_only=True)
def listings() -> list[Listing]:
    """Every file (a list: wrapped as ``{"result": ...}``)."""
    return [Listing(file_name="a.txt", byte_count=5)]


@tool(read_only=True)
def listing_from_dict() -> Listing:
    """A file, returned as a dict by field name."""
    return {"file_name": "b.txt", "byte_count": 2}  # type: ignore[return-value]


ALIASED = [listing_of, tagged, stamped, folder, listings, listing_from_dict]
#: Each tool, its arguments, the value a host gets (by alias, as the schema names its fields)
#: and whether it goes out wrapped as ``{"result": ...}``.
ALIAS_CASES = [
    pytest.param(
        "listing_of",
        {"name": "a.txt"},
        {"fileName": "a.txt", "byteCount": 5},
        False,
        id="alias-generator",
    ),
    pytest.param("tagged", {}, {"kind-of": "pdf", "plain": 1}, False, id="field-alias"),
    pytest.param("stamped", {}, {"createdAt": "2024-01-01"}, False, id="serialization-alias"),
    pytest.param(
        "folder",
        {},
        {
            "folderName": "docs",
            "firstFile": {"fileName": "a.txt", "byteCount": 5},
            "taggedItems": [{"kind-of": "txt", "plain": 0}],
        },
        False,
        id="nested",
    ),
    pytest.param("listings", {}, [{"fileName": "a.txt", "byteCount": 5}], True, id="wrapped-list"),
    pytest.param(
        "listing_from_dict",
        {},
        {"fileName": "b.txt", "byteCount": 2},
        False,
        id="returned-as-dict",
    ),
]
ALIAS_FIELDS = ("name", "arguments", "value", "wrapped")


def top_level_properties(schema: dict[str, Any]) -> set[str]:
    """The property names of an object schema (through a top-level ``$ref``)."""
    if "$ref" in schema:
        schema = schema["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    return set(schema["properties"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(ALIAS_FIELDS, ALIAS_CASES)
def test_aliased_output_over_the_client(
    mode: str, name: str, arguments: dict[str, Any], value: Any, wrapped: bool
) -> None:
    """An output model with aliases goes out by alias: the names its listed
    ``outputSchema`` gives, which the client validates it against (and accepts)."""
    kit = Toolkit("aliased", ALIASED)

    async def body(client: mcp.Client) -> tuple[types.Tool, Answer]:
        [listed] = [item for item in (await client.list_tools()).tools if item.name == name]
        return listed, await attempt(client, name, arguments)

    listed, answered = run(in_memory(tdk_mcp.server(kit), mode, body))
    got = success(answered).structured_content
    assert got == ({"result": value} if wrapped else value)
    assert listed.output_schema is not None
    assert set(got) == top_level_properties(listed.output_schema)
    jsonschema.validate(got, listed.output_schema)
    assert json.loads(text_of(answered)) == value


@pytest.mark.parametrize(ALIAS_FIELDS, ALIAS_CASES)
def test_aliased_output_of_run_sync(
    name: str, arguments: dict[str, Any], value: Any, wrapped: bool
) -> None:
    """``tool.run_sync()`` serialises the value by alias too, as its output schema says."""
    item = Toolkit("aliased", ALIASED).get(name)
    outcome = item.run_sync(arguments)
    assert outcome.is_success, outcome.error
    assert outcome.value == value
    jsonschema.validate(outcome.value, item.definition.output_schema)


# -- 6. a value its output schema does not describe ------------------------------------------

OBJECT = WithJsonSchema({"type": "object"})


@tool(read_only=True)
def numbers() -> Annotated[list[int], OBJECT]:
    """Numbers, declared as an object."""
    return [1, 2]


@tool(read_only=True)
def word() -> Annotated[str, OBJECT]:
    """A word, declared as an object."""
    return "hello"


@tool(read_only=True)
def count() -> Annotated[int, OBJECT]:
    """A count, declared as an object."""
    return 3


@tool(read_only=True)
def nothing() -> Annotated[int | None, OBJECT]:
    """Nothing, declared as an object."""
    return None


LIARS = [numbers, word, count, nothing]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("liar", [pytest.param(each, id=each.name) for each in LIARS])
def test_a_value_that_is_not_the_object_declared(mode: str, liar: Any) -> None:
    """A tool whose output schema says "object" and whose value is none is that call's
    ``TOOL_RUNTIME_BAD_OUTPUT_VALUE`` result, not a protocol error; the session goes on."""
    kit = Toolkit("liars", [*LIARS, double])

    async def body(client: mcp.Client) -> tuple[Answer, Answer]:
        return await attempt(client, liar.name, {}), await attempt(client, "double", {"n": 4})

    answered, after = run(in_memory(tdk_mcp.server(kit), mode, body))
    failure(answered, "TOOL_RUNTIME_BAD_OUTPUT_VALUE")
    assert success(after).structured_content == {"result": 8}
    shaped = tdk_mcp.result(liar.run_sync(), definition=liar.definition)
    assert shaped.is_error is True
    assert facts(shaped)["kind"] == "TOOL_RUNTIME_BAD_OUTPUT_VALUE"


# -- 7. the command line and the module served -----------------------------------------------


@contextlib.contextmanager
def interrupted_after(seconds: float) -> Iterator[list[bool]]:
    """SIGINT to this process if the block still runs after ``seconds`` (a ``tdk serve`` that
    serves instead of refusing its arguments then returns 130); the list yielded then holds
    True."""
    done = threading.Event()
    fired: list[bool] = []

    def watch() -> None:
        if not done.wait(seconds):
            fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield fired
    finally:
        done.set()
        watcher.join(STOP_TIMEOUT)


@pytest.mark.parametrize(
    "port",
    [
        pytest.param("0", id="zero"),
        pytest.param("70000", id="above-65535"),
        pytest.param("65536", id="just-above"),
        pytest.param("-1", id="negative"),
        pytest.param("x", id="not-a-number"),
        pytest.param("80.5", id="fraction"),
    ],
)
@pytest.mark.parametrize("http", [True, False], ids=["http", "without-http"])
def test_a_port_out_of_range_is_a_usage_error(
    tools_file: Path, capsys: pytest.CaptureFixture[str], port: str, http: bool
) -> None:
    """``tdk serve --port`` outside 1..65535 (or no number) exits 2 as a usage error, naming
    the option, before serving anything."""
    argv = ["serve", str(tools_file), *(["--http"] if http else []), "--port", port]
    with interrupted_after(CALL_TIMEOUT) as fired, pytest.raises(SystemExit) as exited:
        main(argv)
    assert fired == []
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "argument --port" in err
    assert "tdk serve: http://" not in err


def test_a_port_in_use_is_no_usage_error(
    tools_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port in range that another socket holds is no usage error: ``tdk serve --http``
    ends with status 1, saying it cannot serve there."""
    with socket.socket() as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        with interrupted_after(CALL_TIMEOUT) as fired:
            status = main(["serve", str(tools_file), "--http", "--port", str(port)])
    assert (status, fired) == (1, [])
    assert f"tdk serve: cannot serve on {HOST}:{port}: " in capsys.readouterr().err


#: Modules that misbehave while imported, and what each prints on the way (to stderr).
IMPORT_TIME = [
    pytest.param(
        "import os\nimport sys\n"
        'print("import-time print 7c1e")\n'
        'sys.stdout.write("import-time write 7c1e\\n")\n'
        'os.write(1, b"import-time fd write 7c1e\\n")\n',
        ["import-time print 7c1e", "import-time write 7c1e", "import-time fd write 7c1e"],
        id="prints",
    ),
    pytest.param(
        'import sys\nREAD = sys.stdin.read()\nprint(f"read {len(READ)} characters 7c1e")\n',
        ["read 0 characters 7c1e"],
        id="reads-stdin",
    ),
    pytest.param(
        "import sys\nLINE = sys.stdin.buffer.readline()\n"
        'print(f"read a line of {len(LINE)} bytes 7c1e")\n',
        ["read a line of 0 bytes 7c1e"],
        id="reads-a-line-of-stdin",
    ),
]
IMPORT_TOOL = '''

from typing import Annotated

from tdk import tool


@tool(read_only=True)
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
    """Add two numbers."""
    return a + b
'''


def import_time_module(folder: Path, name: str, code: str) -> Path:
    """A tool module ``name`` in ``folder`` running ``code`` when imported."""
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(f'"""A module that misbehaves while imported."""\n\n{code}{IMPORT_TOOL}')
    return path


@pytest.mark.parametrize(("code", "printed"), IMPORT_TIME)
def test_a_module_misbehaving_at_import_over_stdio(
    tmp_path: Path, code: str, printed: list[str]
) -> None:
    """Over stdio, a module that prints or reads stdin at import is served: the SDK client's
    session lists and calls its tool, nothing it printed reaches the protocol (every line the
    client reads is JSON-RPC), it is on the server's stderr, and nothing hangs."""
    target = import_time_module(tmp_path / "served", "import_time_tools", code)
    log = tmp_path / "stdio.log"
    received: list[Any] = []

    async def handler(message: Any) -> None:
        received.append(message)

    async def scenario() -> tuple[list[str], Answer]:
        async with stdio_session(target, log, message_handler=handler) as client:
            names = [item.name for item in (await client.list_tools()).tools]
            return names, await attempt(client, "add", {"a": 1})

    names, answered = run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))  # (a hang guard)
    assert names == ["add"]
    assert success(answered).structured_content == {"result": 3}
    assert [each for each in received if isinstance(each, Exception)] == []
    stderr = log.read_text()
    for line in printed:
        assert line in stderr


@pytest.mark.parametrize(("code", "printed"), IMPORT_TIME)
def test_a_module_misbehaving_at_import_leaves_stdout_to_the_protocol(
    tmp_path: Path, code: str, printed: list[str]
) -> None:
    """The same, byte for byte: stdout holds only the answer to ``initialize``, and the
    server exits 0 when its stdin closes."""
    target = import_time_module(tmp_path / "served", "import_time_tools", code)
    status, out, err = initialize_once(serve_argv(target), cwd=tmp_path)
    assert status == 0, err
    [line] = out.decode().splitlines()
    assert json.loads(line)["result"]["serverInfo"]["name"] == "import_time_tools"
    for each in printed:
        assert each in err.decode()
        assert each not in out.decode()


#: A tool that prints while it is called: a line, and text without a newline that Python
#: keeps in its buffer (both would reach the client once fd 1 is the protocol's again).
CALL_TIME_PRINTS = """import io
import sys
from typing import Annotated

from tdk import tool

{gesture}

@tool(read_only=True)
def chatty(text: Annotated[str, "Anything."]) -> str:
    \"\"\"Print while called.\"\"\"
    print("call-time print 7c1e")
    sys.stdout.write("call-time write without a newline 7c1e")
    return text
"""


#: What a module does to ``sys.stdout`` while it is imported, before its tool prints.
STDOUT_GESTURES = [
    pytest.param("", id="leaves-it"),
    pytest.param(
        'sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")', id="rewraps"
    ),
    pytest.param("sys.stdout = sys.stderr", id="swaps-to-stderr"),
    pytest.param("sys.stdout = io.StringIO()", id="swaps-to-stringio"),
    pytest.param("sys.stdout.close()", id="closes-it"),
    pytest.param("sys.stdout = None", id="drops-it"),
]


@pytest.mark.parametrize("gesture", STDOUT_GESTURES)
def test_what_a_tool_prints_while_called_never_reaches_the_protocol(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, gesture: str
) -> None:
    """Over stdio, with the SDK's client (which closes stdin, then ends the process), a tool
    printing during its calls (a line, and buffered text without a newline) is answered, its
    text goes to stderr, and the client never reads a line that is not JSON-RPC: what Python
    still buffered is flushed before fd 1 is the protocol's again. The same whatever the
    module did to ``sys.stdout`` while imported (a stdout of its own then, which the server
    takes back)."""
    # Buffered, as a host launches it (the SDK's default environment has no such variable).
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    target = tmp_path / "chatty_tools.py"
    target.write_text(CALL_TIME_PRINTS.replace("{gesture}", gesture))
    log = tmp_path / "stderr.log"

    async def scenario() -> list[Any]:
        async with stdio_session(target, log) as client:
            return [
                (await client.call_tool("chatty", {"text": text})).structured_content
                for text in ("hi", "again")
            ]

    with caplog.at_level(logging.WARNING, logger="mcp"):
        answers = run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    assert answers == [{"result": "hi"}, {"result": "again"}]
    assert not [record.getMessage() for record in caplog.records]
    stderr = log.read_text()
    assert stderr.count("call-time print 7c1e") == 2
    assert stderr.count("call-time write without a newline 7c1e") == 2


#: A module that re-wraps ``sys.stdout`` for UTF-8 when imported (a common idiom: the wrapper
#: closes the stream it wraps once it is dropped), and a tool that raises.
REWRAPS_STDOUT = """import io
import sys
from typing import Annotated

from tdk import tool

sys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")


@tool(read_only=True)
def broken(text: Annotated[str, "Anything."]) -> str:
    \"\"\"Fail.\"\"\"
    raise RuntimeError("broken 7c1e")
"""


def test_a_module_rewrapping_stdout_at_import_is_served(tmp_path: Path) -> None:
    """Over stdio, a module that replaces ``sys.stdout`` with a wrapper of its buffer while
    imported never wraps (and so never closes) stderr: its failing tool is answered with its
    FATAL result, and the failure is logged on stderr."""
    target = tmp_path / "rewrapping_tools.py"
    target.write_text(REWRAPS_STDOUT)
    log = tmp_path / "stderr.log"

    async def scenario() -> types.CallToolResult:
        async with stdio_session(target, log) as client:
            return await client.call_tool("broken", {"text": "hi"})

    answered = run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    assert answered.is_error
    assert facts(answered)["kind"] == "TOOL_RUNTIME_FATAL"
    stderr = log.read_text()
    assert "kind=TOOL_RUNTIME_FATAL tool=broken" in stderr
    assert "closed file" not in stderr


#: Tool files named as a package ``tdk serve`` needs, and the options that need it.
CLASHES = [
    pytest.param("mcp", [], id="mcp-stdio"),
    pytest.param("mcp", ["--http"], id="mcp-http"),
    pytest.param("uvicorn", ["--http"], id="uvicorn-http"),
]


@pytest.mark.parametrize(("module", "options"), CLASHES)
def test_a_tool_file_named_as_a_package_of_the_server(
    tmp_path: Path, module: str, options: list[str]
) -> None:
    """``tdk serve .../mcp.py`` (or ``uvicorn.py`` with ``--http``) ends with status 1 and says
    that the name is taken, not that the mcp package is missing; it serves nothing."""
    target = import_time_module(tmp_path / "tools", module, 'print("imported 7c1e")\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    port = str(free_port())
    done = subprocess.run(
        serve_argv(target, *options, *(["--port", port] if options else [])),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=elsewhere,
        timeout=SCENARIO_TIMEOUT,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "needs the mcp package" not in done.stderr
    assert f"cannot import {target}" in done.stderr
    assert f"as module '{module}': that name is already used by" in done.stderr
    assert "rename the file" in done.stderr
    assert "imported 7c1e" not in done.stdout


def test_a_tool_file_named_mcp_in_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same through ``main()`` in this process (where the SDK is already imported):
    status 1, and the clash is what stderr says."""
    target = import_time_module(tmp_path / "tools", "mcp", "")
    assert main(["serve", str(target)]) == 1
    err = capsys.readouterr().err
    assert "needs the mcp package" not in err
    assert "as module 'mcp': that name is already used by" in err


def test_http_serve_without_uvicorn(
    tools_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tdk serve --http`` where uvicorn cannot be imported ends with status 1, saying so on
    stderr, before loading the module."""
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    status = main(["serve", str(tools_file), "--http", "--port", str(free_port())])
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("tdk serve: ")
    assert "uvicorn" in err


# -- 8. who may reach the HTTP server --------------------------------------------------------


async def serving_briefly(
    toolkit: Toolkit, host: str, body: Callable[[int], Awaitable[T]], *, reach: str = HOST
) -> T:
    """``body(port)`` while ``serve(toolkit, "http", host=host)`` runs in a task on a free
    port (reached at ``reach``); then the task is cancelled, as ``serve()`` says it stops."""
    port = free_port(host)
    task = asyncio.create_task(tdk_mcp.serve(toolkit, "http", host=host, port=port))
    try:
        async with asyncio.timeout(SCENARIO_TIMEOUT):
            while not await can_connect(port, reach):
                assert not task.done(), task
                await asyncio.sleep(0.02)
            return await body(port)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def post_initialize(reach: str, port: int, host_header: str) -> Awaitable[httpx.Response]:
    """A raw ``initialize`` POST to ``http://reach:port/mcp`` naming ``host_header``."""

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.post(
                f"http://{reach}:{port}/mcp",
                json=INITIALIZE,
                headers={**RAW_HEADERS, "Host": host_header},
            )

    return post()


@pytest.mark.parametrize(
    ("host", "warned"),
    [pytest.param("0.0.0.0", True, id="every-interface"), pytest.param(HOST, False, id=HOST)],
)
def test_serving_every_interface_warns(
    toolkit: Toolkit, caplog: pytest.LogCaptureFixture, host: str, warned: bool
) -> None:
    """``serve(..., "http", host="0.0.0.0")`` logs a WARNING on ``tdk.hosts.mcp`` that it
    serves without DNS-rebinding protection (and serves any ``Host``); on loopback, no
    warning."""
    caplog.set_level(logging.WARNING, logger="tdk.hosts.mcp")

    async def body(port: int) -> int:
        return (await post_initialize(HOST, port, f"attacker.example:{port}")).status_code

    status = run(serving_briefly(toolkit, host, body))
    said = [
        record.getMessage()
        for record in caplog.records
        if record.name == "tdk.hosts.mcp" and record.levelno == logging.WARNING
    ]
    if warned:
        assert len(said) == 1, said
        assert "DNS-rebinding protection" in said[0]
        assert "'0.0.0.0'" in said[0]
        assert status == 200
    else:
        assert said == []
        assert status == 421


def test_a_request_naming_another_host_is_refused(toolkit: Toolkit) -> None:
    """Served on 127.0.0.2, a POST naming ``Host: attacker.example`` (with or without a port)
    gets 421; one naming the address served, or a loopback name, does not, and the SDK's
    client calls a tool there."""
    host = "127.0.0.2"  # (Linux routes all of 127/8 to the loopback)

    async def body(port: int) -> dict[str, int]:
        named = {
            "attacker": "attacker.example",
            "attacker-with-port": f"attacker.example:{port}",
            "served": f"{host}:{port}",
            "localhost": f"localhost:{port}",
        }
        statuses = {
            label: (await post_initialize(host, port, header)).status_code
            for label, header in named.items()
        }
        async with mcp.Client(f"http://{host}:{port}/mcp") as client:
            answered = success(await attempt(client, "add", {"a": 1}))
            statuses["sdk-client"] = 200 if answered.structured_content == {"result": 3} else 0
        return statuses

    statuses = run(serving_briefly(toolkit, host, body, reach=host))
    assert statuses["attacker"] == 421
    assert statuses["attacker-with-port"] == 421
    assert statuses["served"] != 421
    assert statuses["served"] == 200
    assert statuses["localhost"] == 200
    assert statuses["sdk-client"] == 200  # (the SDK's own client, naming the address served)


# -- 9. signals ------------------------------------------------------------------------------


#: What was read of each stream past the line asked for (lines that arrived together).
_UNREAD: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()


def read_line(stream: Any, timeout: float) -> bytes:
    """One line of a subprocess's stdout, or b"" after ``timeout`` seconds. Read from the
    descriptor (a buffered ``readline()`` would keep a second line where ``select`` does not
    see it), keeping what follows the line for the next call."""
    pending = _UNREAD.pop(stream, b"")
    deadline = time.monotonic() + timeout
    while b"\n" not in pending:
        ready, _, _ = select.select([stream], [], [], max(deadline - time.monotonic(), 0))
        chunk = os.read(stream.fileno(), 1 << 16) if ready else b""
        if not chunk:
            _UNREAD[stream] = pending
            return b""
        pending += chunk
    line, newline, _UNREAD[stream] = pending.partition(b"\n")
    return line + newline


class RawSession:
    """A raw streamable HTTP session (no SDK) whose one call runs in a thread, so that the
    server can be signalled mid-call; every failure of the thread is kept, not raised."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(timeout=SCENARIO_TIMEOUT)
        self.problem: BaseException | None = None
        self.thread: threading.Thread | None = None

    def start_call(self, name: str, arguments: dict[str, Any]) -> None:
        """Open the session, then call ``name`` in a thread."""
        opened = self.client.post(self.url, json=INITIALIZE, headers=RAW_HEADERS)
        headers = {**RAW_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        self.client.post(self.url, json=INITIALIZED, headers=headers)

        def call() -> None:
            try:
                self.client.post(self.url, json=call_request(1, name, arguments), headers=headers)
            except BaseException as gone:  # the server went away: expected
                self.problem = gone

        self.thread = threading.Thread(target=call, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Wait for the call's thread (the server is gone), then close the client."""
        if self.thread is not None:
            self.thread.join(STOP_TIMEOUT)
        self.client.close()


def wait_for_text(log: Path, text: str, process: subprocess.Popen[Any]) -> None:
    """Wait until ``text`` is in ``log`` (the server's stderr)."""
    wait_until(lambda: text in log.read_text(), process, log)


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        pytest.param(signal.SIGINT, 130, id="SIGINT"),
        pytest.param(signal.SIGTERM, 130, id="SIGTERM"),
    ],
)
@pytest.mark.parametrize("busy", [False, True], ids=["idle", "mid-call"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_signal_stops_tdk_serve(
    tools_file: Path, tmp_path: Path, transport: str, busy: bool, sent: int, status: int
) -> None:
    """SIGINT or SIGTERM to ``python -m tdk serve`` (stdio or ``--http``; idle, or while a
    sync body sleeps) ends it within 10 s with status 130, and no traceback on stderr."""
    log = tmp_path / "server.log"
    port = free_port()
    options = ["--http", "--port", str(port)] if transport == "http" else []
    session: RawSession | None = None
    with log.open("w") as err:
        process = subprocess.Popen(
            serve_argv(tools_file, *options),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=tools_file.parent,
        )
    try:
        if transport == "http":
            wait_until(lambda: accepts(port), process, log)
            if busy:
                session = RawSession(f"http://{HOST}:{port}/mcp")
                session.start_call("slow", {"seconds": 60})
        else:
            assert process.stdin is not None
            assert process.stdout is not None
            process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
            process.stdin.flush()
            assert b'"id":"init"' in read_line(process.stdout, START_TIMEOUT)
            if busy:
                for message in (INITIALIZED, call_request(1, "slow", {"seconds": 60})):
                    process.stdin.write(json.dumps(message).encode() + b"\n")
                process.stdin.flush()
        if busy:
            wait_for_text(log, "slow: started", process)
        process.send_signal(sent)
        try:
            process.wait(timeout=SIGNAL_EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"tdk serve did not exit {SIGNAL_EXIT_TIMEOUT} s after {sent!r}")
    finally:
        stop(process)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
        if session is not None:
            session.close()
    stderr = log.read_text()
    assert process.returncode == status, stderr
    assert "Traceback" not in stderr
    assert "tdk: interrupted" in stderr


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_tdk_serve_http_in_process(
    tools_file: Path, capsys: pytest.CaptureFixture[str], sent: int
) -> None:
    """``main(["serve", FILE, "--http"])`` in this process: the signal, once it serves, is
    the server's to handle: it returns 130 with the port closed, saying ``tdk: interrupted``,
    and leaves no handler of its own behind, nor its shutdown on the SSE streams of the
    process: a later server's 2025-era session (its answers streamed) is answered."""
    port = free_port()
    listening: list[bool] = []
    unhandled: list[int] = []

    def fallback(number: int, _frame: object) -> None:
        # The signal reached no handler of the server's: noted, and turned into what main()
        # answers 130 (an unhandled SIGTERM would end the test run).
        unhandled.append(number)
        raise KeyboardInterrupt

    def signal_when_listening() -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not accepts(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        listening.append(accepts(port))
        os.kill(os.getpid(), sent)

    previous = signal.signal(sent, fallback)
    helper = threading.Thread(target=signal_when_listening, daemon=True)
    try:
        helper.start()
        status = main(["serve", str(tools_file), "--http", "--port", str(port)])
        helper.join(START_TIMEOUT + STOP_TIMEOUT)
        left = signal.getsignal(sent)
    finally:
        signal.signal(sent, previous)
    assert (listening, unhandled) == ([True], [])
    assert status == 130
    assert not accepts(port)
    assert left is not fallback  # (the server put its own in place of the test's)
    assert left in (signal.SIG_DFL, signal.default_int_handler)
    err = capsys.readouterr().err
    assert f"tdk serve: http://{HOST}:{port}/mcp" in err
    assert "tdk: interrupted" in err
    assert run(streamed_after()) == {"result": 3}


@tool(read_only=True)
def plus_one(n: Annotated[int, "A number."]) -> int:
    """Add one."""
    return n + 1


async def streamed_after() -> Any:
    """A call of a new server over HTTP, in a 2025-era session (its answers come as SSE)."""
    async with (
        serving(tdk_mcp.server(Toolkit("after", [plus_one]))) as url,
        connected(url, mode="legacy") as client,
    ):
        return (await client.call_tool("plus_one", {"n": 2})).structured_content


# -- 10. a module that exits while imported --------------------------------------------------

#: Ways a module exits at import, each with a token-shaped secret.
IMPORT_EXITS = [
    pytest.param(f'sys.exit("bye token={TOKEN}")\n', id="message-with-a-token"),
    pytest.param(f'sys.exit("{TOKEN}")\n', id="bare-token"),
    pytest.param(f'raise SystemExit(["{TOKEN}", {{"api_key": "{TOKEN}"}}])\n', id="in-a-list"),
    pytest.param(f'sys.exit("failed: " + "{TOKEN} " * 50)\n', id="long"),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("code", IMPORT_EXITS)
def test_a_module_exiting_at_import(tmp_path: Path, transport: str, code: str) -> None:
    """``tdk serve`` of a module whose import raises ``SystemExit`` with a secret ends with
    status 1, saying so on stderr without the secret (nor a traceback)."""
    target = import_time_module(tmp_path / "tools", "exiting_tools", f"import sys\n{code}")
    options = ["--http", "--port", str(free_port())] if transport == "http" else []
    done = subprocess.run(
        serve_argv(target, *options),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=SCENARIO_TIMEOUT,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "raised SystemExit(" in done.stderr
    assert "a tool module must not exit when imported" in done.stderr
    assert TOKEN not in done.stderr + done.stdout
    assert TOKEN[3:] not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


#: Tools that leave the standard streams in a state the server's own exit must survive.
STREAM_BREAKERS = """import sys

from tdk import tool


@tool(read_only=True)
def drop_stdout() -> int:
    \"\"\"Leave no sys.stdout.\"\"\"
    sys.stdout = None
    return 1


@tool(read_only=True)
def close_stdout() -> int:
    \"\"\"Close sys.stdout.\"\"\"
    sys.stdout.close()
    return 1


@tool(read_only=True)
def drop_stderr() -> int:
    \"\"\"Leave no sys.stderr.\"\"\"
    sys.stderr = None
    return 1
"""


@pytest.mark.parametrize("breaker", ["drop_stdout", "close_stdout", "drop_stderr"])
def test_a_signal_stops_tdk_serve_whatever_a_tool_did_to_the_streams(
    tmp_path: Path, breaker: str
) -> None:
    """Over stdio, after a tool dropped or closed ``sys.stdout`` or dropped ``sys.stderr``,
    SIGINT still ends ``tdk serve`` within 10 s with status 130 (flushing a missing stream
    kept it running on the SDK's stdin thread)."""
    target = tmp_path / "stream_breakers.py"
    target.write_text(STREAM_BREAKERS)
    log = tmp_path / "server.log"
    with log.open("w") as err:
        process = subprocess.Popen(
            serve_argv(target), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        for message in (INITIALIZE, INITIALIZED, call_request(1, breaker, {})):
            process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
        answers = [read_line(process.stdout, START_TIMEOUT) for _ in range(2)]
        assert b'"id":1' in answers[1], answers
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=SIGNAL_EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"tdk serve did not exit {SIGNAL_EXIT_TIMEOUT} s after SIGINT")
    finally:
        stop(process)
        for stream in (process.stdin, process.stdout):
            stream.close()
    assert process.returncode == 130, log.read_text()
    assert "tdk: interrupted" in log.read_text()
