"""A tool's answer is the same over every transport of ``tdk.hosts.mcp``, and the server serves
on: a value holding text that is not UTF-8 goes out with U+FFFD in place, a body that exits or
is interrupted is that call's ``TOOL_RUNTIME_FATAL`` result; and the HTTP transport answers
only requests naming the address it serves. What docs/mcp.md promises in "Bad clients, and
tools that misbehave".

Calls go through the ``mcp`` SDK's own client, which checks each success's
``structuredContent`` against the ``outputSchema`` it listed: in memory (``mcp.Client(server)``,
in its modern and legacy modes), against ``python -m tdk serve`` subprocesses over stdio (the
SDK's ``stdio_client`` launches them) and streamable HTTP, and ``main(["serve", ...])`` in this
process over pipes. The tools served are ``tests/hosts/_transport_tools.py``. Every subprocess
and every call is bounded, and each process is ended by the test or fixture that started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import mcp
import pytest
from _mcp_support import (
    HOST,
    INITIALIZE,
    INITIALIZED,
    RAW_HEADERS,
    SCENARIO_TIMEOUT,
    START_TIMEOUT,
    STOP_TIMEOUT,
    Answer,
    Pipes,
    accepts,
    attempt,
    call_request,
    can_connect,
    facts,
    failure,
    free_port,
    in_memory,
    run,
    run_contained,
    stdio_session,
    success,
    text_of,
)

from tdk import Toolkit, ToolRunner
from tdk.__main__ import main
from tdk.hosts import mcp as tdk_mcp

T = TypeVar("T")

MODES = ["auto", "legacy"]
TRANSPORTS = ["stdio", "http"]
TOOLS_SOURCE = Path(__file__).with_name("_transport_tools.py")


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


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tools in a folder of their own: one file for the whole module (a module name is
    bound to one file per process, and ``from_path`` loads it in this one)."""
    path = tmp_path_factory.mktemp("transports") / "mcp_transport_tools.py"
    shutil.copyfile(TOOLS_SOURCE, path)
    return path


@pytest.fixture(scope="module")
def toolkit(tools_file: Path) -> Toolkit:
    """The tools, loaded in this process as ``tdk serve`` loads them."""
    return Toolkit.from_path(tools_file)


@pytest.fixture(scope="module")
def http_url(tools_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of one ``tdk serve --http`` of the tools, for the module."""
    port = free_port()
    log = tmp_path_factory.mktemp("logs") / "http.log"
    with http_process(tools_file, log, port):
        yield f"http://{HOST}:{port}/mcp"


@contextlib.asynccontextmanager
async def subprocess_session(
    transport: str, tools_file: Path, http_url: str, log: Path
) -> AsyncIterator[mcp.Client]:
    """A session with ``tdk serve`` of the tools: a new stdio process, or the module's HTTP
    server."""
    if transport == "stdio":
        async with stdio_session(tools_file, log) as client:
            yield client
        return
    async with mcp.Client(http_url) as client:
        yield client


# -- 1. text that is not UTF-8 --------------------------------------------------------------


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


# -- 2. a body that exits -------------------------------------------------------------------


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


# -- 3. who may reach the HTTP transport ----------------------------------------------------


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
