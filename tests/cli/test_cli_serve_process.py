"""The ``tdk serve`` process: its standard streams, its deadline, its end, who may reach it,
and its command line.

Each scenario runs ``python -m tdk serve`` in a subprocess (the SDK's ``stdio_client``
launches it, or ``subprocess.Popen`` for raw JSON-RPC lines) against a tool module written to
a temp dir; the client is the ``mcp`` SDK's own, or raw ``httpx`` for headers no SDK sends.
What is promised in docs/mcp.md: a host that never reads stderr never stops the server (lines
are dropped and counted), stdout carries JSON-RPC and nothing else (whatever the module or its
tools print, or do to ``sys.stdout``), a call is bounded by a default deadline, the server
leaves when its host has and ends on SIGINT or SIGTERM (whatever a tool did to the streams), an
address other than loopback is served only when asked for by name, and a port out of range or
a tool file named as a package the server needs is refused before anything is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import mcp
import pytest
from _mcp_live import connected, serving
from _mcp_support import (
    CALL_TIMEOUT,
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
    free_port,
    initialize_once,
    run,
    stdio_session,
    success,
)
from mcp import StdioServerParameters, types
from mcp.client.stdio import stdio_client

from tdk import Toolkit, tool
from tdk.__main__ import main
from tdk.hosts import mcp as tdk_mcp

T = TypeVar("T")

TOOLS = '''
"""Tools of the serve-process tests."""

import asyncio
import sys
import time
from typing import Annotated

import httpx

import tdk.http
from tdk import tool

LINE = "x" * 99  # with its newline, 100 bytes


def _upstream(request: httpx.Request) -> httpx.Response:
    return httpx.Response(429, headers={"Retry-After": "21600"}, json={"error": "come back"})


UPSTREAM = tdk.http.install(
    httpx.Client(base_url="https://up.example", transport=httpx.MockTransport(_upstream))
)


@tool(read_only=True)
def add(a: Annotated[int, "A number."]) -> int:
    """Add one."""
    return a + 1


@tool(read_only=True)
def fail(n: Annotated[int, "Anything."]) -> int:
    """Fail (and so log a line)."""
    raise ValueError("failing on purpose")


@tool(read_only=True)
async def shout(lines: Annotated[int, "How many lines to print."]) -> int:
    """Print lines, on the event loop."""
    for _ in range(lines):
        print(LINE)
    return lines


@tool(read_only=True)
async def shout_to_the_original_stderr(lines: Annotated[int, "How many lines to write."]) -> int:
    """Write lines to ``sys.__stderr__``, on the event loop."""
    for _ in range(lines):
        sys.__stderr__.write(LINE + "\\n")
        sys.__stderr__.flush()
    return lines


@tool(read_only=True)
def shout_in_a_thread(lines: Annotated[int, "How many lines to print."]) -> int:
    """Print lines, in a worker thread."""
    for _ in range(lines):
        print(LINE)
    return lines


@tool(read_only=True)
def rate_limited() -> str:
    """Ask an upstream that says to come back in six hours."""
    return UPSTREAM.get("/").text


@tool(read_only=True)
async def stubborn() -> str:
    """Ignore every cancellation."""
    print("stubborn: started", flush=True)
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass


@tool(read_only=True)
def blocked() -> str:
    """Block a worker thread for an hour."""
    print("blocked: started", flush=True)
    time.sleep(3600)
    return "late"


@tool(read_only=True)
def slow(seconds: Annotated[float, "How long."]) -> str:
    """Sleep in the body (sync: nothing can interrupt it), saying on stderr when it starts."""
    print("slow: started", file=sys.stderr, flush=True)
    time.sleep(seconds)
    return "slept"
'''

#: A module whose thread, started at import and never ended (not a daemon), writes to
#: stdout in every way Python and the OS offer.
PRINTING_THREAD = '''
"""A module with a thread that prints for ever."""

import os
import sys
import threading
from typing import Annotated

from tdk import tool


def chatter() -> None:
    while True:
        print("thread print")
        sys.stdout.write("thread write\\n")
        sys.__stdout__.write("thread dunder write\\n")
        sys.__stdout__.flush()
        os.write(1, b"thread fd write\\n")


threading.Thread(target=chatter, name="chatter").start()


@tool(read_only=True)
def add(a: Annotated[int, "A number."]) -> int:
    """Add one."""
    return a + 1
'''

#: A module whose thread (not a daemon) never ends, and never says anything.
WAITING_THREAD = '''
"""A module with a thread that waits for ever."""

import threading
from typing import Annotated

from tdk import tool

threading.Thread(target=threading.Event().wait, name="waiter").start()
print("waiting: started", flush=True)


@tool(read_only=True)
def add(a: Annotated[int, "A number."]) -> int:
    """Add one."""
    return a + 1
'''


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tool module (one file for the whole module: a module name is bound to one file
    per process, and the in-process tests load it in this one)."""
    path = tmp_path_factory.mktemp("serve-process") / "serve_process_tools.py"
    path.write_text(TOOLS.lstrip())
    return path


def serve_argv(target: Path, *extra: str) -> list[str]:
    """The command line of ``python -m tdk serve target``."""
    return [sys.executable, "-m", "tdk", "serve", str(target), *extra]


def stop(process: subprocess.Popen[Any]) -> None:
    """End ``process`` if it still runs: terminated, then killed if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)


def send(process: subprocess.Popen[bytes], *messages: dict[str, Any]) -> None:
    """Raw JSON-RPC lines to the server's stdin."""
    assert process.stdin is not None
    for message in messages:
        process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def wait_for(ready: Callable[[], bool], what: str) -> None:
    """Wait (at most ``START_TIMEOUT`` s) until ``ready()``."""
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen in {START_TIMEOUT} s")
        time.sleep(0.05)


# -- 1. a host that never reads stderr -------------------------------------------------------


class Unread:
    """A pipe for a server's stderr that nobody reads until :meth:`read_all` starts a
    reader: then everything the server writes, until it ends, is kept."""

    def __init__(self) -> None:
        self._reading, writing = os.pipe()
        self.errlog = os.fdopen(writing, "w")
        self._data = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)

    def read_all(self) -> None:
        """Start reading (this process's own end for writing is closed: the reader sees the
        end once the server has ended)."""
        self.errlog.close()
        self._reader.start()

    def text(self) -> str:
        """Everything read, once the server has ended."""
        self._reader.join(SCENARIO_TIMEOUT)
        assert not self._reader.is_alive()
        return self._data.decode()

    def _read(self) -> None:
        while chunk := os.read(self._reading, 65536):
            self._data += chunk
        os.close(self._reading)


#: Calls whose output overflows a stderr nobody reads: failed calls (a log line each, on
#: the event loop), and tools printing on the event loop and in a worker thread. Each row:
#: the tool, its arguments, how many calls, and the marker of each line and the lines of
#: one call (the printing calls write 2.4 MB: more than the pipe and the queue hold). A
#: write to ``sys.__stderr__`` (Python's stream of fd 2, which a module may keep) too.
FLOODS = [
    pytest.param("fail", {"n": 1}, 1200, "tool=fail", 1, id="failed-calls-logged"),
    pytest.param("shout", {"lines": 200}, 120, "x" * 99, 200, id="async-tool-prints"),
    pytest.param("shout_in_a_thread", {"lines": 200}, 120, "x" * 99, 200, id="sync-tool-prints"),
    pytest.param(
        "shout_to_the_original_stderr",
        {"lines": 200},
        120,
        "x" * 99,
        200,
        id="async-tool-writes-sys.__stderr__",
    ),
]


@pytest.mark.parametrize(("name", "arguments", "count", "marker", "per_call"), FLOODS)
def test_a_host_that_never_reads_stderr_is_still_served(
    tools_file: Path, name: str, arguments: dict[str, Any], count: int, marker: str, per_call: int
) -> None:
    """With a stderr pipe that nobody reads, every call of the SDK client's is answered;
    once stderr is read again, each line written is there, or counted in a line saying how
    many were dropped where they were: together, every line."""
    unread = Unread()
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_argv(tools_file)[1:],
        env=dict(os.environ),
        cwd=tools_file.parent,
    )

    async def scenario() -> tuple[list[types.CallToolResult], types.CallToolResult]:
        async with mcp.Client(stdio_client(params, errlog=unread.errlog)) as client:
            answers = [await client.call_tool(name, arguments) for _ in range(count)]
            unread.read_all()
            return answers, await client.call_tool("add", {"a": 1})

    answers, last = run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
    assert len(answers) == count
    if name == "fail":
        assert {facts(each)["kind"] for each in answers} == {"TOOL_RUNTIME_FATAL"}
    else:
        assert {json.dumps(each.structured_content) for each in answers} == {'{"result": 200}'}
    assert last.structured_content == {"result": 2}
    stderr = unread.text()
    said = [int(each) for each in re.findall(r"tdk serve: (\d+) lines? of output dropped", stderr)]
    assert stderr.count(marker) + sum(said) == count * per_call
    if name != "fail":  # (1,200 log lines fit in the queue: none dropped)
        assert said
        assert "stderr was full" in stderr


# -- 2. stdout is the protocol's alone -------------------------------------------------------


def json_rpc_lines(target: Path, tmp_path: Path) -> tuple[list[dict[str, Any]], int]:
    """Every line ``tdk serve target`` writes on stdout while it answers ``initialize`` and
    three calls (each must be JSON-RPC), and its exit status once stdin is closed."""
    process = subprocess.Popen(
        serve_argv(target),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    assert process.stdout is not None
    out = process.stdout.fileno()
    lines: list[dict[str, Any]] = []
    pending = b""
    try:
        send(
            process, INITIALIZE, INITIALIZED, *(call_request(n, "add", {"a": n}) for n in (1, 2, 3))
        )
        deadline = time.monotonic() + SCENARIO_TIMEOUT
        while {message.get("id") for message in lines} < {"init", 1, 2, 3}:
            ready, _, _ = select.select([out], [], [], 1.0)
            assert time.monotonic() < deadline, lines
            if ready:
                chunk = os.read(out, 65536)
                assert chunk, lines
                *complete, pending = (pending + chunk).split(b"\n")
                for line in complete:
                    message = json.loads(line)  # (a stray line fails here)
                    assert message["jsonrpc"] == "2.0", line
                    lines.append(message)
        assert process.stdin is not None
        process.stdin.close()
        status = process.wait(timeout=SCENARIO_TIMEOUT)
        assert pending + process.stdout.read() == b""
    finally:
        stop(process)
        process.stdout.close()
    return lines, status


def test_a_thread_printing_from_the_import_on_never_reaches_the_protocol(tmp_path: Path) -> None:
    """A thread the module starts while imported, printing for ever in every way (``print``,
    ``sys.stdout``, ``sys.__stdout__``, fd 1): over three runs, every line the host reads is
    JSON-RPC, each call is answered, and the server exits 0 once its stdin closes (the
    thread, which is no daemon, does not keep it running)."""
    target = tmp_path / "printing_thread_tools.py"
    target.write_text(PRINTING_THREAD.lstrip())
    for _ in range(3):
        lines, status = json_rpc_lines(target, tmp_path)
        answers = {message["id"]: message for message in lines}
        assert [answers[n]["result"]["structuredContent"] for n in (1, 2, 3)] == [
            {"result": 2},
            {"result": 3},
            {"result": 4},
        ]
        assert status == 0


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


# -- 3. a default deadline -------------------------------------------------------------------


def test_without_deadline_a_six_hour_retry_after_is_answered_at_once(tools_file: Path) -> None:
    """``tdk serve`` without ``--deadline``: an upstream's ``Retry-After: 21600`` is not
    waited for (the default deadline cannot hold it); the host gets the rate limit and its
    ``retry_after_ms`` at once."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_argv(tools_file)[1:],
        env=dict(os.environ),
        cwd=tools_file.parent,
    )

    async def scenario() -> types.CallToolResult:
        with open(os.devnull, "w") as errlog:
            async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
                return await client.call_tool("rate_limited", {})

    answered = run(asyncio.wait_for(scenario(), 30))
    assert answered.is_error
    assert facts(answered)["kind"] == "UPSTREAM_RUNTIME_RATE_LIMIT"
    assert facts(answered)["retry_after_ms"] == 21_600_000


@pytest.mark.parametrize("given", ["none", "None", "12.5"])
def test_a_deadline_of_none_or_seconds_is_taken(
    tools_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    given: str,
) -> None:
    """``--deadline none`` (any case) turns the default deadline off; seconds set it."""
    with Pipes([INITIALIZE, INITIALIZED, call_request(1, "add", {"a": 1})]) as pipes:
        monkeypatch.setattr(sys, "stdin", pipes.stdin)
        monkeypatch.setattr(sys, "stdout", pipes.stdout)
        assert main(["serve", str(tools_file), "--deadline", given]) == 0
    assert pipes.problem is None
    assert pipes.answers[1]["result"]["structuredContent"] == {"result": 2}
    capsys.readouterr()


def test_help_tells_the_default_deadline_and_the_host_rules() -> None:
    """``tdk serve --help`` says the default deadline and how to turn it off, and that a host
    other than loopback needs ``--allow-unauthenticated``."""
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "serve", "--help"],
        env={**os.environ, "COLUMNS": "1000"},  # (one line per option: no word cut)
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0
    text = " ".join(done.stdout.split())
    assert "(default 50, a little under the 60 s after which hosts commonly give up" in text
    assert "'none': no deadline" in text
    assert "is refused without --allow-unauthenticated" in text


# -- 4. the server leaves when its host has --------------------------------------------------


LEAVINGS = [
    pytest.param("tools", "stubborn", "stubborn: started", id="call-ignoring-cancellation"),
    pytest.param("tools", "blocked", "blocked: started", id="sync-call-blocked"),
    pytest.param("waiting", None, "waiting: started", id="module-thread-never-ending"),
]


@pytest.mark.parametrize(("module", "name", "started"), LEAVINGS)
def test_the_server_leaves_once_its_host_has(
    tools_file: Path, tmp_path: Path, module: str, name: str | None, started: str
) -> None:
    """Over stdio, once the host closes stdin the server exits with status 0, even while a
    call ignores its cancellation (after a bounded grace, saying so), a sync body blocks its
    thread, or a thread of the module (no daemon) never ends."""
    target = tools_file
    if module == "waiting":
        target = tmp_path / "waiting_thread_tools.py"
        target.write_text(WAITING_THREAD.lstrip())
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        process = subprocess.Popen(
            serve_argv(target), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err
        )
    try:
        send(process, INITIALIZE, INITIALIZED)
        if name is not None:
            send(process, call_request(1, name, {}))
        wait_for(lambda: started in log.read_text(), started)
        assert process.stdin is not None
        process.stdin.close()
        status = process.wait(timeout=SCENARIO_TIMEOUT)
    finally:
        stop(process)
    assert status == 0, log.read_text()
    if name == "stubborn":
        assert "tdk serve: the host left; a call still running 5 s after its cancellation" in (
            log.read_text()
        )


# -- 5. who may reach the HTTP server --------------------------------------------------------

#: Every interface, in the spellings the resolver takes.
EVERY_INTERFACE = ["0", "0x0", "0.0.0.0", "", "::", "::0", "[::]", "0:0:0:0:0:0:0:0"]
#: Addresses that are not loopback (TEST-NET and unique-local: never bound in these tests).
NOT_LOOPBACK = ["192.0.2.1", "fd00::1"]


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
    "host", [*EVERY_INTERFACE, *NOT_LOOPBACK], ids=lambda host: host or "empty"
)
def test_a_host_other_than_loopback_is_refused_without_the_flag(
    tools_file: Path, capsys: pytest.CaptureFixture[str], host: str
) -> None:
    """``tdk serve --http --host H`` for every spelling of every interface, and for an
    address that is not loopback, exits 2 before loading anything, saying why and how to
    serve it anyway."""
    with interrupted_after(SCENARIO_TIMEOUT) as fired, pytest.raises(SystemExit) as exited:
        main(["serve", str(tools_file), "--http", "--host", host, "--port", str(free_port())])
    assert (exited.value.code, fired) == (2, [])
    err = " ".join(capsys.readouterr().err.split())
    assert f"--host {host or repr(host)} is " in err
    assert "tdk serve has no authentication" in err
    assert "give --allow-unauthenticated to serve it anyway" in err


def test_the_refusal_is_status_2_of_the_process(tools_file: Path) -> None:
    """The same from the command: status 2, the reason on stderr, nothing served."""
    done = subprocess.run(
        serve_argv(tools_file, "--http", "--host", "0", "--port", str(free_port())),
        capture_output=True,
        text=True,
        timeout=SCENARIO_TIMEOUT,
        check=False,
    )
    assert done.returncode == 2
    assert "--host 0 is every interface of this machine" in done.stderr
    assert "tdk serve: http://" not in done.stderr


@contextlib.contextmanager
def http_server(
    target: Path, log: Path, port: int, *options: str, reach: str = HOST
) -> Iterator[subprocess.Popen[bytes]]:
    """``tdk serve target --http --port port OPTIONS``, yielded once it accepts at ``reach``,
    stopped when the block ends."""
    with log.open("w") as err:
        process = subprocess.Popen(
            serve_argv(target, "--http", "--port", str(port), *options),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=target.parent,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not accepts(port, reach):
            if process.poll() is not None:
                pytest.fail(f"tdk serve ended ({process.returncode}): {log.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"tdk serve did not listen in {START_TIMEOUT} s: {log.read_text()}")
            time.sleep(0.05)
        yield process
    finally:
        stop(process)


async def add_over_http(url: str) -> types.CallToolResult:
    """``add(1)`` in a session of the SDK's client at ``url``."""
    async with mcp.Client(url) as client:
        return await client.call_tool("add", {"a": 1})


@pytest.mark.parametrize(
    ("host", "reach"), [("0.0.0.0", HOST), ("::0", "::1")], ids=["every-ipv4", "every-ipv6"]
)
def test_every_interface_when_asked_for_by_name(
    tools_file: Path, tmp_path: Path, host: str, reach: str
) -> None:
    """``--allow-unauthenticated`` serves every interface, with a WARNING that nobody is
    authenticated (and the library's, that no DNS-rebinding check can hold)."""
    port = free_port()
    log = tmp_path / "stderr.log"
    with http_server(tools_file, log, port, "--host", host, "--allow-unauthenticated", reach=reach):
        named = f"[{reach}]" if ":" in reach else reach
        answered = run(add_over_http(f"http://{named}:{port}/mcp"))
    assert answered.structured_content == {"result": 2}
    stderr = log.read_text()
    assert f"tdk serve: WARNING: serving on {host} without authentication" in stderr
    assert "no DNS-rebinding protection" in stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "localhost", "::1", "[::1]"])
def test_loopback_in_any_spelling_is_served(tools_file: Path, tmp_path: Path, host: str) -> None:
    """A loopback ``--host`` in any spelling needs no flag: the URL said (an IPv6 address in
    brackets) is where the SDK's client calls a tool."""
    port = free_port()
    log = tmp_path / "stderr.log"
    reach = "::1" if ":" in host else HOST
    with http_server(tools_file, log, port, "--host", host, reach=reach):
        [url] = re.findall(r"tdk serve: (http://\S+)", log.read_text())
        answered = run(add_over_http(url))
    assert answered.structured_content == {"result": 2}
    plain = host.strip("[]")
    assert url == f"http://{'[' + plain + ']' if ':' in plain else plain}:{port}/mcp"
    assert "WARNING" not in log.read_text()


@tool(read_only=True)
def add(a: Annotated[int, "A number."]) -> int:
    """Add one."""
    return a + 1


TOOLKIT = Toolkit("reach", [add])


async def serving_briefly(host: str, body: Callable[[int], Awaitable[T]], reach: str) -> T:
    """``body(port)`` while ``serve(TOOLKIT, "http", host=host)`` runs in a task on a free
    port (reached at ``reach``); then the task is cancelled."""
    port = free_port(reach)
    task = asyncio.create_task(tdk_mcp.serve(TOOLKIT, "http", host=host, port=port))
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


async def statuses(reach: str, port: int, headers: dict[str, dict[str, str]]) -> dict[str, int]:
    """The status of a raw ``initialize`` POST to ``reach:port`` with each set of headers."""
    found = {}
    async with httpx.AsyncClient(timeout=10) as client:
        for label, extra in headers.items():
            answer = await client.post(
                f"http://{reach}:{port}/mcp", json=INITIALIZE, headers={**RAW_HEADERS, **extra}
            )
            found[label] = answer.status_code
    return found


def test_a_request_naming_loopback_without_a_port_is_served() -> None:
    """On loopback, ``Host`` and ``Origin`` naming the server without a port (as standard
    clients send them for port 80, or through a proxy on 443) are served; another name, with
    or without a port, is refused."""

    async def body(port: int) -> dict[str, int]:
        return await statuses(
            HOST,
            port,
            {
                "host-bare": {"Host": HOST},
                "localhost-bare": {"Host": "localhost"},
                "origin-bare": {"Host": f"{HOST}:{port}", "Origin": f"http://{HOST}"},
                "origin-https-localhost": {"Host": HOST, "Origin": "https://localhost"},
                "attacker": {"Host": "attacker.example"},
                "attacker-origin": {"Host": HOST, "Origin": "http://attacker.example"},
            },
        )

    found = run(serving_briefly(HOST, body, HOST))
    assert found == {
        "host-bare": 200,
        "localhost-bare": 200,
        "origin-bare": 200,
        "origin-https-localhost": 200,
        "attacker": 421,
        "attacker-origin": 403,
    }


def lan_address() -> str | None:
    """An address of this machine that is not loopback, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # (UDP: nothing is sent)
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_an_address_other_than_loopback_does_not_answer_to_loopback_names() -> None:
    """Served on an address of the machine's network, a request must name that address: a
    client of the network naming ``localhost`` (which the check let through before) is
    refused."""
    address = lan_address()
    # (a test that cannot get its component fails, never skips)
    assert address is not None, "this machine has no address other than loopback"

    async def body(port: int) -> dict[str, int]:
        return await statuses(
            address,
            port,
            {
                "served": {"Host": f"{address}:{port}"},
                "localhost": {"Host": f"localhost:{port}"},
                "loopback": {"Host": f"{HOST}:{port}"},
            },
        )

    found = run(serving_briefly(address, body, address))
    assert found == {"served": 200, "localhost": 421, "loopback": 421}


@pytest.mark.parametrize(
    "host", ["0", "::0", "[::]", "0:0:0:0:0:0:0:0", ""], ids=lambda host: host or "empty"
)
def test_serve_warns_of_every_spelling_of_every_interface(
    caplog: pytest.LogCaptureFixture, host: str
) -> None:
    """``serve(..., "http", host=H)`` logs the every-interface WARNING for each spelling of
    it (and serves without the DNS-rebinding check it cannot hold)."""
    caplog.set_level(logging.WARNING, logger="tdk.hosts.mcp")

    async def body(port: int) -> dict[str, int]:
        return await statuses(HOST, port, {"other": {"Host": f"somewhere.example:{port}"}})

    found = run(serving_briefly(host, body, HOST))
    said = [
        record.getMessage()
        for record in caplog.records
        if record.name == "tdk.hosts.mcp" and record.levelno == logging.WARNING
    ]
    assert len(said) == 1, said
    assert "no DNS-rebinding protection" in said[0]
    assert found == {"other": 200}


def test_port_80_serves_standard_clients(tools_file: Path, tmp_path: Path) -> None:
    """On port 80, the SDK's client (which names the server without the default port) is
    served."""
    address = f"127.0.{os.getpid() % 250 + 1}.{int(time.time()) % 250 + 2}"
    with socket.socket() as probe:
        try:
            probe.bind((address, 80))
        except OSError as cannot:  # (a test that cannot get its port fails, never skips)
            raise AssertionError(f"cannot listen on {address}:80 here: {cannot.strerror}") from None
    log = tmp_path / "stderr.log"
    with http_server(tools_file, log, 80, "--host", address, reach=address):
        answered = run(add_over_http(f"http://{address}/mcp"))
    assert answered.structured_content == {"result": 2}


# -- 6. a signal ----------------------------------------------------------------------------


#: How long a signalled server may take to exit, in seconds.
SIGNAL_EXIT_TIMEOUT = 10.0


TRANSPORTS = ["stdio", "http"]


def wait_until(ready: Callable[[], bool], process: subprocess.Popen[Any], log: Path) -> None:
    """Wait (at most ``START_TIMEOUT`` s) until ``ready()``, failing if ``process`` ends."""
    deadline = time.monotonic() + START_TIMEOUT
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"tdk serve ended ({process.returncode}): {log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"tdk serve was not ready in {START_TIMEOUT} s: {log.read_text()}")
        time.sleep(0.05)


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


# -- 7. the command line, and the module served ---------------------------------------------


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
