"""``tdk serve --http --workers N``: worker processes on one port, and their supervisor.

Each scenario runs ``python -m tdk serve`` in a subprocess against a tool module written to a
temp dir, and talks to it with the ``mcp`` SDK's own client (both eras: ``mode="auto"``
speaks 2026-07-28, ``mode="legacy"`` the 2025 handshake, whose requests may each reach
another worker). The shared limit is counted, never timed: its window outlasts the test, so
exactly ``calls`` calls run however the workers interleave, and a limit held per process
would have let every call run. Worker processes are found by the pids the supervisor says.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp
import pytest
from _mcp_support import HOST, SCENARIO_TIMEOUT, START_TIMEOUT, STOP_TIMEOUT, facts, free_port, run
from _redis_support import RedisServer, command, running_redis
from mcp import types

from tdk.__main__ import main
from tdk._cli.addresses import bound, listening_address

#: The shared runner of the load test: one quota (never refilled while the test runs) and
#: one circuit for every worker, on Redis; each call that runs notes itself in a file.
SHARED = '''
"""Tools of the workers test: a runner whose limit and circuit live on Redis."""

import os
from typing import Annotated

from tdk import CircuitBreaker, RateLimit, Toolkit, ToolRunner, tool
from tdk.runner import RedisStore


@tool(read_only=True)
async def hit(call: Annotated[str, "The call's own id."]) -> str:
    """Note the call in the log, once, and answer with this process's id."""
    line = f"{os.getpid()} {call}\\n".encode()
    fd = os.open(os.environ["WORKERS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return str(os.getpid())


# A generous timeout: on a busy machine a worker that fell back to per-process state would
# admit calls on its own (the test would see it: more than the quota).
store = RedisStore(os.environ["WORKERS_REDIS"], timeout=10.0)
runner = ToolRunner(
    Toolkit("shared", [hit]),
    rate_limit=RateLimit(calls=60, period=3600.0, scope="api"),
    circuit_breaker=CircuitBreaker(failure_threshold=5, reset_timeout=30.0, scope="api"),
    store=store,
)
'''

#: Plain tools: a default runner, the default deadline, and output for a stderr nobody reads.
PLAIN = '''
"""Tools of the workers test: no runner of their own."""

import os
from typing import Annotated

import httpx

import tdk.http
from tdk import tool

LINE = "x" * 99


def _upstream(request: httpx.Request) -> httpx.Response:
    return httpx.Response(429, headers={"Retry-After": "21600"}, json={"error": "come back"})


UPSTREAM = tdk.http.install(
    httpx.Client(base_url="https://up.example", transport=httpx.MockTransport(_upstream))
)


@tool(read_only=True)
def pid(n: Annotated[int, "Anything."]) -> int:
    """Answer this process's id."""
    return os.getpid()


@tool(read_only=True)
async def shout(lines: Annotated[int, "How many lines to print."]) -> int:
    """Print lines, on the event loop."""
    for _ in range(lines):
        print(LINE)
    return lines


@tool(read_only=True)
def rate_limited() -> str:
    """Ask an upstream that says to come back in six hours."""
    return UPSTREAM.get("/").text
'''

CLIENTS = 50
CALLS_PER_CLIENT = 2
QUOTA = 60
PIDS = re.compile(r"tdk serve: (\d+) worker processes \(pids ([\d, ]+)\)")


def serve_argv(target: str, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tdk", "serve", target, "--http", "--port", str(port), *extra]


class Supervisor:
    """A ``tdk serve --workers`` process whose stderr is read by a thread, line by line."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # (its own process group: a Ctrl-C can be sent to it)
        )
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            with self._changed:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self.lines.append("<end>")
            self._changed.notify_all()

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The first line matching ``pattern``, waited for (at most ``START_TIMEOUT`` s)."""
        compiled = re.compile(pattern)
        ends = time.monotonic() + START_TIMEOUT
        with self._changed:
            while True:
                for line in self.lines:
                    if found := compiled.search(line):
                        return found
                left = ends - time.monotonic()
                if left <= 0 or "<end>" in self.lines:
                    pytest.fail(f"no line matching {pattern!r}: {self.text}")
                self._changed.wait(left)

    def pids(self) -> list[int]:
        """The workers' pids, as the supervisor says them once they were started."""
        found = self.wait_for(PIDS.pattern)
        return [int(each) for each in found.group(2).split(", ")]

    def wait(self) -> int:
        """Its exit status (killed if it has not ended within ``STOP_TIMEOUT`` x 3 s)."""
        try:
            return self.process.wait(timeout=STOP_TIMEOUT * 3)
        finally:
            self.stop()

    def stop(self) -> None:
        """Kill it if it still runs; the reader ends with its stderr, which is closed."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT)
        self._reader.join(STOP_TIMEOUT)
        if self.process.stderr is not None:
            self.process.stderr.close()


@contextlib.contextmanager
def supervisor(
    argv: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> Iterator[Supervisor]:
    """A :class:`Supervisor` of ``argv``, stopped when the block ends, with any worker it
    said it started that still runs (no worker outlives a test, whatever it asserted)."""
    started = Supervisor(argv, cwd=cwd, env=env)
    try:
        yield started
    finally:
        said = [
            each for found in PIDS.finditer(started.text) for each in found.group(2).split(", ")
        ]
        for pid in map(int, said):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        started.stop()


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, waiting to be reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def until_gone(pids: list[int]) -> list[int]:
    """The pids still running after up to ``STOP_TIMEOUT`` s of waiting for them to end."""
    ends = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < ends:
        if not any(alive(pid) for pid in pids):
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


def accepts(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    return True


async def call(
    url: str, name: str, arguments: dict[str, Any], mode: str = "auto"
) -> types.CallToolResult:
    """One call in a client of its own (``mode``: the SDK's ``auto`` or ``legacy``)."""
    async with mcp.Client(url, mode=mode) as client:
        return await client.call_tool(name, arguments)


# -- 1. fifty clients, four workers, one limit on Redis -------------------------------------


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


def test_four_workers_answer_fifty_clients_once_under_one_shared_limit(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """Fifty clients of the SDK (half of them in the 2025 era, whose requests each go
    wherever the kernel puts them) make 100 calls of a runner with a RedisStore across four
    workers: every call is answered once, exactly the 60 the shared quota allows ran (each
    noted once, by the worker that answered it), the other 40 were refused by the limiter,
    and more than one worker served."""
    redis_server.flush()
    (tmp_path / "shared_tools.py").write_text(SHARED.lstrip())
    log = tmp_path / "calls.log"
    port = free_port()
    env = {**os.environ, "WORKERS_REDIS": redis_server.url, "WORKERS_LOG": str(log)}
    argv = serve_argv("shared_tools.py:runner", port, "--workers", "4")
    url = f"http://{HOST}:{port}/mcp"

    async def client(number: int) -> list[tuple[str, types.CallToolResult]]:
        mode = "legacy" if number % 2 else "auto"
        async with mcp.Client(url, mode=mode) as session:
            answers = []
            for each in range(CALLS_PER_CLIENT):
                call_id = f"c{number}-{each}"
                answers.append((call_id, await session.call_tool("hit", {"call": call_id})))
            return answers

    async def everyone() -> list[tuple[str, types.CallToolResult]]:
        batches = await asyncio.gather(*(client(number) for number in range(CLIENTS)))
        return [answer for batch in batches for answer in batch]

    with supervisor(argv, cwd=tmp_path, env=env) as served:
        pids = served.pids()
        answers = run(everyone())
        served.process.send_signal(signal.SIGTERM)
        assert served.wait() == 130, served.text
    assert len(pids) == 4
    assert len(answers) == CLIENTS * CALLS_PER_CLIENT
    ran = {call_id: result for call_id, result in answers if not result.is_error}
    refused = [result for _, result in answers if result.is_error]
    assert {facts(each)["kind"] for each in refused} == {"TOOL_RUNTIME_RATE_LIMITED"}
    assert len(ran) == QUOTA
    noted = [line.split() for line in log.read_text().splitlines()]
    assert sorted(call_id for _, call_id in noted) == sorted(ran)  # each once, no other
    by_call = {call_id: pid for pid, call_id in noted}
    for call_id, result in ran.items():  # answered by the worker that ran it
        assert result.structured_content == {"result": by_call[call_id]}
    assert {int(pid) for pid, _ in noted} <= set(pids)
    assert len({pid for pid, _ in noted}) > 1
    key = "{tdk:scope:api/60/3600.0}:rate_limit"
    assert command(redis_server.port, "ZCARD", key) == b":60\r\n"
    assert "tdk serve: http://" in served.text
    assert served.text.count(f"tdk serve: {url}") == 1
    assert "share no state" not in served.text  # (the RedisStore is shared)


# -- 2. usage ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "said"),
    [
        pytest.param(["--workers", "2"], "--workers serves HTTP", id="without-http"),
        pytest.param(["--workers", "1"], "--workers serves HTTP", id="one-without-http"),
        pytest.param(["--http", "--workers", "0"], "invalid workers value", id="zero"),
        pytest.param(["--http", "--workers", "-2"], "invalid workers value", id="negative"),
        pytest.param(["--http", "--workers", "many"], "invalid workers value", id="not-a-number"),
        pytest.param(["--http", "--workers", "100000"], "invalid workers value", id="too-many"),
    ],
)
def test_bad_workers_are_a_usage_error(tmp_path: Path, options: list[str], said: str) -> None:
    """``--workers`` without ``--http``, or not a number of processes from 1 to 256, is a
    usage error: status 2, and nothing served."""
    (tmp_path / "plain_tools.py").write_text(PLAIN.lstrip())
    done = subprocess.run(
        [sys.executable, "-m", "tdk", "serve", "plain_tools.py", *options],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert "tdk serve: http://" not in done.stderr


# -- 3. the supervisor: signals, dead workers, its own death -----------------------------------


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    (tmp_path / "plain_tools.py").write_text(PLAIN.lstrip())
    return tmp_path


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("sigterm", id="sigterm-to-the-supervisor"),
        pytest.param("sigint", id="sigint-to-the-supervisor"),
        pytest.param("ctrl-c", id="ctrl-c-to-its-process-group"),
    ],
)
def test_a_signal_stops_every_worker_and_the_supervisor(plain: Path, how: str) -> None:
    """SIGTERM or SIGINT to the supervisor, or a Ctrl-C to its process group, is passed on
    to every worker once: each ends, the port closes, and the supervisor ends with 130."""
    port = free_port()
    with supervisor(serve_argv("plain_tools.py", port, "--workers", "2"), cwd=plain) as served:
        pids = served.pids()
        assert run(call(f"http://{HOST}:{port}/mcp", "pid", {"n": 1})).structured_content
        if how == "ctrl-c":
            os.killpg(served.process.pid, signal.SIGINT)
        else:
            served.process.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGINT)
        assert served.wait() == 130, served.text
        assert until_gone(pids) == []
    assert not accepts(port)
    assert "was ended by" not in served.text
    assert "killed" not in served.text  # (each ended by the signal passed on)
    assert "Traceback" not in served.text


def test_a_dead_worker_is_said_and_not_replaced(plain: Path) -> None:
    """A worker killed is said on stderr (which, how, how many still serve) and not
    replaced: the others go on answering; once none is left the supervisor ends, status 1."""
    port = free_port()
    url = f"http://{HOST}:{port}/mcp"
    with supervisor(serve_argv("plain_tools.py", port, "--workers", "2"), cwd=plain) as served:
        first, second = served.pids()
        # (their runner keeps its state per process: said once, before anything is served)
        served.wait_for(r"^tdk serve: WARNING: the workers share no state: each keeps its own")
        os.kill(first, signal.SIGKILL)
        served.wait_for(
            rf"worker 1 \(pid {first}\) was ended by SIGKILL: not replaced; 1 of 2 workers serve"
        )
        answers = [run(call(url, "pid", {"n": n})) for n in range(4)]
        assert {each.structured_content["result"] for each in answers} == {second}
        os.kill(second, signal.SIGKILL)
        assert served.wait() == 1
    assert "tdk serve: no worker left" in served.text
    assert len(PIDS.findall(served.text)) == 1  # (no worker started again)


def test_workers_leave_when_the_supervisor_is_killed(plain: Path) -> None:
    """A supervisor killed (it can pass nothing on) leaves no worker behind: each sees its
    control socket close and stops, and the port closes."""
    port = free_port()
    with supervisor(serve_argv("plain_tools.py", port, "--workers", "2"), cwd=plain) as served:
        pids = served.pids()
        served.process.kill()
        served.process.wait(timeout=STOP_TIMEOUT)
        assert until_gone(pids) == []
    assert not accepts(port)


@pytest.mark.parametrize(
    ("target", "status", "said"),
    [
        pytest.param("plain_tools.py:nothing", 2, "has no attribute 'nothing'", id="no-such-name"),
        pytest.param("missing_tools.py", 1, "missing_tools.py", id="no-such-file"),
    ],
)
def test_a_target_that_cannot_be_served_is_said_once(
    plain: Path, target: str, status: int, said: str
) -> None:
    """A target that names nothing to serve is said once (the first worker starts alone and
    says it), with that worker's status, and no other worker starts."""
    port = free_port()
    with supervisor(serve_argv(target, port, "--workers", "3"), cwd=plain) as served:
        assert served.wait() == status
    assert served.text.count(said) == 1, served.text
    assert "tdk serve: http://" not in served.text
    assert not PIDS.search(served.text)


def test_a_port_in_use_is_said_once_and_starts_no_worker(plain: Path) -> None:
    """The supervisor binds the port itself: one taken is said once, status 1."""
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with supervisor(serve_argv("plain_tools.py", port, "--workers", "2"), cwd=plain) as served:
            assert served.wait() == 1
    assert served.text.count(f"tdk serve: cannot serve on {HOST}:{port}") == 1
    assert not PIDS.search(served.text)


# -- 4. every worker drains its stderr and holds its deadline ---------------------------------


def test_every_worker_drains_its_stderr_and_holds_the_deadline(plain: Path) -> None:
    """With a stderr pipe that nobody reads, calls that print far more than it holds are all
    answered by two workers, and the default deadline answers an upstream's six-hour
    ``Retry-After`` at once, in every worker."""
    port = free_port()
    url = f"http://{HOST}:{port}/mcp"
    reading, writing = os.pipe()
    try:
        process = subprocess.Popen(
            serve_argv("plain_tools.py", port, "--workers", "2"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=writing,
            cwd=plain,
        )
        try:
            ends = time.monotonic() + START_TIMEOUT
            while not accepts(port):
                assert time.monotonic() < ends, "the workers did not serve in time"
                time.sleep(0.05)

            async def scenario() -> tuple[list[types.CallToolResult], list[types.CallToolResult]]:
                shouts = await asyncio.gather(
                    *(call(url, "shout", {"lines": 500}, mode) for mode in ["auto", "legacy"] * 12)
                )
                waits = await asyncio.gather(
                    *(call(url, "rate_limited", {}, mode) for mode in ["auto", "legacy"] * 3)
                )
                return list(shouts), list(waits)

            shouts, waits = run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=STOP_TIMEOUT * 3) == 130
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT)
    finally:
        os.close(writing)
        os.close(reading)
    assert [each.structured_content for each in shouts] == [{"result": 500}] * 24
    for each in waits:
        assert facts(each)["kind"] == "UPSTREAM_RUNTIME_RATE_LIMIT"
        assert facts(each)["retry_after_ms"] == 21_600_000


# -- 5. the listening socket ------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"], ids=["ipv4", "ipv6"])
def test_connections_of_the_listening_socket_have_nagle_off(host: str) -> None:
    """The socket ``tdk serve --http`` listens on (and its workers share) says it is TCP, so
    asyncio turns Nagle's algorithm off on each connection it accepts: with it on, a response
    written in two parts (headers, then body) waited for the client's delayed ACK, some 40 ms
    a call."""

    async def accepted_nodelay(listener: socket.socket) -> int:
        loop = asyncio.get_running_loop()
        said: asyncio.Future[int] = loop.create_future()

        def connected(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            said.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(connected, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection(host, listener.getsockname()[1])
            try:
                return await said
            finally:
                writer.close()
                await writer.wait_closed()

    with bound(listening_address(host, 0)) as listener:
        listener.listen()
        assert run(accepted_nodelay(listener)) != 0


# -- 6. the supervisor in this process (main() called by a program) ---------------------------


class Said(io.TextIOBase):
    """A ``sys.stderr`` of the program's own (no descriptor), read by another thread."""

    def __init__(self) -> None:
        self.text = ""
        self._changed = threading.Condition()

    def write(self, text: str) -> int:
        with self._changed:
            self.text += text
            self._changed.notify_all()
        return len(text)

    def wait_for(self, pattern: re.Pattern[str], stop: threading.Event) -> re.Match[str] | None:
        """The first match of ``pattern`` (waited for at most ``START_TIMEOUT`` s, or until
        ``stop`` is set)."""
        ends = time.monotonic() + START_TIMEOUT
        with self._changed:
            while not (found := pattern.search(self.text)):
                if stop.is_set() or time.monotonic() > ends:
                    return None
                self._changed.wait(0.1)
            return found


def test_main_supervises_workers_in_process(plain: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``main()`` called in a program supervises its workers as the command does: it says the
    URL and the pids on the program's ``sys.stderr``, the workers answer in both eras, and a
    SIGINT to the program stops them all and returns 130."""
    port = free_port()
    url = f"http://{HOST}:{port}/mcp"
    said = Said()
    monkeypatch.setattr(sys, "stderr", said)
    done = threading.Event()
    answered: list[int] = []

    def drive() -> None:
        if said.wait_for(PIDS, done) is None:
            return
        for mode in ("auto", "legacy"):
            answered.append(run(call(url, "pid", {"n": 1}, mode)).structured_content["result"])
        if not done.is_set():  # (the supervisor's handler is in place while it serves)
            os.kill(os.getpid(), signal.SIGINT)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    try:
        target = str(plain / "plain_tools.py")
        status = main(["serve", target, "--http", "--port", str(port), "--workers", "2"])
    finally:
        done.set()
        driver.join(SCENARIO_TIMEOUT)
    assert status == 130, said.text
    assert f"tdk serve: {url}" in said.text
    found = PIDS.search(said.text)
    assert found is not None, said.text
    pids = [int(each) for each in found.group(2).split(", ")]
    assert len(answered) == 2
    assert set(answered) <= set(pids)
    assert until_gone(pids) == []
    assert not accepts(port)
