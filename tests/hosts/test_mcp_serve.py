"""``tdk serve`` and ``tdk run`` end to end, with nothing of tdk on the client side.

A tool module is written to a temp dir and served by ``python -m tdk serve`` in a subprocess,
over stdio (the SDK's ``stdio_client`` launches it) and over streamable HTTP (``--http`` on a
free port, stopped by the fixture). The client is the ``mcp`` SDK's own ``Client``, or raw
``httpx`` for requests no SDK would send. In process, ``serve()`` and ``tdk serve`` run over
pipes standing in for stdin and stdout, and over HTTP in a task of the test's own loop, where
a bulkhead can be watched. ``tdk run`` is run in process and as a subprocess.

The environment of the servers plants a secret (``WX_KEY``); the tools return only its
length, and a tool raises errors full of it: it must never reach a client or the server's
stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import socket
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any, Generic, TypeVar

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
    Held,
    Pipes,
    call_request,
    facts,
    initialize_once,
    run,
    text_of,
)
from mcp import StdioServerParameters, types
from mcp.client.stdio import stdio_client

from tdk import ToolContext, Toolkit, ToolRunner, tool
from tdk.__main__ import main
from tdk.hosts import mcp as tdk_mcp

T = TypeVar("T")

SECRET_NAME = "WX_KEY"
SECRET = "planted-secret-9f3a"
#: ``tdk serve --deadline`` of the subprocess servers, as docs/mcp.md advises for a host that
#: waits: an upstream's ``Retry-After: 30`` does not fit, so its failure comes at once.
DEADLINE = "10"

TOOLS_MODULE = '''
"""Tools that ``tdk serve`` offers in the end-to-end tests."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import httpx

import tdk.http
from tdk import ToolContext, tool
from tdk.errors import RetryableToolError, UpstreamError


_FAILED_ONCE: set[str] = set()
_FORECASTS_ASKED: dict[str, int] = {}  # city -> requests the upstream received for it


def _upstream(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/forecast":
        city = request.url.params.get("city", "")
        _FORECASTS_ASKED[city] = _FORECASTS_ASKED.get(city, 0) + 1
        return httpx.Response(429, headers={"Retry-After": "30"}, json={"error": "slow down"})
    if request.url.path.startswith("/flaky/"):
        token = request.url.path.removeprefix("/flaky/")
        if token not in _FAILED_ONCE:  # a transient failure, the first time only
            _FAILED_ONCE.add(token)
            return httpx.Response(503, json={"error": "try again"})
        return httpx.Response(200, json={"ok": token})
    key = request.headers.get("x-api-key", "")
    return httpx.Response(401, json={"error": f"invalid key {key}"})  # echoes what it got


UPSTREAM = tdk.http.install(
    httpx.Client(base_url="https://wx.example", transport=httpx.MockTransport(_upstream))
)


@tool(read_only=True)
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
    """Add two numbers."""
    return a + b


@tool(read_only=True)
def forecast(city: Annotated[str, "The city."]) -> dict[str, str]:
    """The forecast, from an upstream that is over its rate limit."""
    UPSTREAM.get("/forecast", params={"city": city})
    return {"city": city}


@tool(read_only=True)
def forecasts_asked(city: Annotated[str, "The city."]) -> int:
    """How many forecast requests for ``city`` reached the upstream."""
    return _FORECASTS_ASKED.get(city, 0)


@tool(read_only=True)
def flaky(token: Annotated[str, "Names the request."]) -> str:
    """Ask an upstream that fails each request once (503), then answers."""
    return UPSTREAM.get(f"/flaky/{token}").json()["ok"]


@tool(read_only=True)
def chatty(word: Annotated[str, "What to say."]) -> str:
    """Print to stdout, then answer."""
    print(f"stray print: {word}")
    return word


@tool(read_only=True, requires_secrets=["WX_KEY"])
def key_length(context: ToolContext) -> int:
    """The length of the key: never the key."""
    return len(context.get_secret("WX_KEY"))


@tool(read_only=True, requires_secrets=["WX_KEY", "WX_USER"])
def pair(context: ToolContext) -> dict[str, int]:
    """The lengths of the key and of the user."""
    return {
        "key": len(context.get_secret("WX_KEY")),
        "user": len(context.get_secret("WX_USER")),
    }


@tool(read_only=True, requires_secrets=["WX_KEY"])
def leak(
    how: Annotated[Literal["retry", "upstream", "echo", "plain"], "How to fail."],
    context: ToolContext,
) -> str:
    """Fail with the key in every field of the error."""
    secret = context.get_secret("WX_KEY")
    options = {
        "developer_message": f"the key was {secret}",
        "additional_prompt_content": f"retry without {secret}",
        "details": {"key": secret, "nested": [{"inner": f"x{secret}x"}]},
    }
    if how == "retry":
        raise RetryableToolError(f"the key {secret} is cooling down", retry_after_ms=100, **options)
    if how == "upstream":
        raise UpstreamError(f"the upstream refused {secret}", status_code=503, **options)
    if how == "echo":
        UPSTREAM.get("/account", headers={"x-api-key": secret})
        return "unreachable"
    raise ValueError(f"bad key {secret}")


@tool(read_only=True)
async def slow(seconds: Annotated[float, "How long."]) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return "slept"
'''

#: Every way ``leak`` fails, with the kind of its result.
LEAKS = [
    pytest.param("retry", "TOOL_RUNTIME_RETRY", id="retryable"),
    pytest.param("upstream", "UPSTREAM_RUNTIME_SERVER_ERROR", id="upstream"),
    pytest.param("echo", "UPSTREAM_RUNTIME_AUTH_ERROR", id="upstream-echoes-the-key"),
    pytest.param("plain", "TOOL_RUNTIME_FATAL", id="plain-exception"),
]


def free_port() -> int:
    """A TCP port on ``HOST`` that nothing listens on (as far as the OS knows now)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def accepts(port: int) -> bool:
    """Whether something accepts a connection on ``port``."""
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    return True


def server_env(*, key: bool) -> dict[str, str]:
    """The environment of a server: the test's, with ``WX_KEY`` planted or removed."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("WX_")}
    if key:
        env[SECRET_NAME] = SECRET
    return env


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tool module, one file for the whole module: a module name is bound to one file
    per process (``tdk run`` and ``tdk serve`` also load it in this one)."""
    path = tmp_path_factory.mktemp("served") / "mcp_serve_tools.py"
    path.write_text(TOOLS_MODULE.lstrip())
    return path


@contextlib.contextmanager
def http_process(tools_file: Path, env: dict[str, str], log: Path) -> Iterator[str]:
    """``tdk serve --http`` in a subprocess on a free port: its URL until the block ends,
    when the process is terminated (then killed, if it lingers)."""
    port = free_port()
    command = [sys.executable, "-m", "tdk", "serve", str(tools_file), "--deadline", DEADLINE]
    command += ["--http", "--port", str(port)]
    with log.open("w") as err:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
            cwd=tools_file.parent,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not accepts(port):
            if process.poll() is not None:
                pytest.fail(f"tdk serve ended ({process.returncode}): {log.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"tdk serve did not listen in {START_TIMEOUT} s: {log.read_text()}")
            time.sleep(0.05)
        yield f"http://{HOST}:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)


@dataclass
class Served:
    """A ``tdk serve`` of the tool module that clients connect to, and its stderr."""

    transport: str
    tools_file: Path
    env: dict[str, str]
    log: Path
    url: str = ""
    errlog: IO[str] | None = field(default=None, repr=False)

    def client(self, **options: Any) -> mcp.Client:
        """A new SDK client of this server (over stdio: a new server process)."""
        if self.transport == "http":
            return mcp.Client(self.url, **options)
        assert self.errlog is not None
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "tdk", "serve", str(self.tools_file), "--deadline", DEADLINE],
            env=self.env,
            cwd=self.tools_file.parent,
        )
        return mcp.Client(stdio_client(params, errlog=self.errlog), **options)

    def stderr(self) -> str:
        """What the server (every process of it, for stdio) wrote on stderr so far."""
        if self.errlog is not None:
            self.errlog.flush()
        return self.log.read_text()


@contextlib.contextmanager
def serving(transport: str, tools_file: Path, log: Path, *, key: bool) -> Iterator[Served]:
    """A ``Served`` of ``transport``, with or without the secret in its environment."""
    env = server_env(key=key)
    if transport == "http":
        with http_process(tools_file, env, log) as url:
            yield Served(transport, tools_file, env, log, url=url)
        return
    with log.open("w") as errlog:
        yield Served(transport, tools_file, env, log, errlog=errlog)


@pytest.fixture(scope="module", params=["stdio", "http"])
def served(
    request: pytest.FixtureRequest, tools_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """``tdk serve`` with ``WX_KEY`` set, over each transport."""
    log = tmp_path_factory.mktemp("logs") / f"{request.param}-with-key.log"
    with serving(request.param, tools_file, log, key=True) as server:
        yield server


@pytest.fixture(scope="module", params=["stdio", "http"])
def served_without_key(
    request: pytest.FixtureRequest, tools_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """``tdk serve`` with no ``WX_KEY`` in its environment, over each transport."""
    log = tmp_path_factory.mktemp("logs") / f"{request.param}-without-key.log"
    with serving(request.param, tools_file, log, key=False) as server:
        yield server


@pytest.fixture(scope="module")
def http_served(tools_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``tdk serve --http`` with ``WX_KEY`` set, for the raw HTTP tests."""
    log = tmp_path_factory.mktemp("logs") / "raw-http.log"
    with serving("http", tools_file, log, key=True) as server:
        yield server


def calls(
    server: Served, wanted: list[tuple[str, dict[str, Any]]], **options: Any
) -> list[types.CallToolResult]:
    """The results of ``wanted`` calls, in one session with ``server``."""

    async def scenario() -> list[types.CallToolResult]:
        async with server.client(**options) as client:
            return [await client.call_tool(name, arguments) for name, arguments in wanted]

    return run(scenario())


# -- over stdio and HTTP, against a subprocess -----------------------------------------------


def test_the_tools_are_listed(served: Served) -> None:
    """``tools/list`` names every tool, with object output schemas and read-only hints."""

    async def scenario() -> types.ListToolsResult:
        async with served.client() as client:
            return await client.list_tools()

    listed = {item.name: item for item in run(scenario()).tools}
    assert sorted(listed) == [
        "add",
        "chatty",
        "flaky",
        "forecast",
        "forecasts_asked",
        "key_length",
        "leak",
        "pair",
        "slow",
    ]
    assert listed["add"].output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert listed["add"].input_schema["required"] == ["a"]
    assert "context" not in listed["key_length"].input_schema.get("properties", {})
    annotations = listed["add"].annotations
    assert annotations is not None
    assert annotations.read_only_hint is True


def test_a_success(served: Served) -> None:
    """A call answers its value, wrapped, and the same as text."""
    [answered] = calls(served, [("add", {"a": 40})])
    assert answered.is_error is False
    assert answered.structured_content == {"result": 42}
    assert text_of(answered) == "42"


def test_a_rate_limited_upstream_is_answered_at_once(served: Served) -> None:
    """An upstream's 429 with ``Retry-After: 30`` (a wait that does not fit the deadline) is
    a failure at once, whose ``_meta`` carries the wait, the status and the category: the
    upstream heard one request (the runner neither waited nor retried)."""
    answered, asked = calls(
        served, [("forecast", {"city": "Bergen"}), ("forecasts_asked", {"city": "Bergen"})]
    )
    assert asked.structured_content == {"result": 1}
    assert answered.is_error is True
    assert answered.structured_content is None
    assert facts(answered) == {
        "kind": "UPSTREAM_RUNTIME_RATE_LIMIT",
        "category": "rate_limit",
        "retryable": True,
        "retry_after_ms": 30000,
        "status_code": 429,
        "additional_prompt_content": None,
    }
    assert json.loads(text_of(answered))["retry_after_ms"] == 30000


def test_a_transient_failure_is_retried(served: Served) -> None:
    """As docs/mcp.md says, each call of ``tdk serve`` goes through a runner with the default
    policies, which retry a transient failure of a read-only tool: an upstream's one 503
    is retried and the call succeeds."""
    token = uuid.uuid4().hex
    [answered] = calls(served, [("flaky", {"token": token})])
    assert (answered.is_error, answered.structured_content) == (False, {"result": token}), (
        answered.meta
    )


def test_invalid_arguments(served: Served) -> None:
    """Arguments that fail validation are a result the model can act on, not a protocol
    error, and it does not echo the value submitted."""
    submitted = "not-a-number-5c1e"
    [answered] = calls(served, [("add", {"a": submitted})])
    assert answered.is_error is True
    assert answered.structured_content is None
    assert facts(answered)["kind"] == "TOOL_RUNTIME_BAD_INPUT_VALUE"
    assert facts(answered)["category"] == "validation"
    assert "'a'" in text_of(answered)
    assert submitted not in answered.model_dump_json()


def test_an_unknown_tool_is_a_result_with_a_suggestion(served: Served) -> None:
    """An unknown name is ``TOOL_NOT_FOUND``, suggesting the tool meant."""
    [answered] = calls(served, [("ad", {"a": 1})])
    assert answered.is_error is True
    assert answered.structured_content is None
    assert facts(answered)["kind"] == "TOOL_NOT_FOUND"
    assert "Did you mean 'add'?" in text_of(answered)


def test_a_secret_from_the_environment(served: Served) -> None:
    """A secret the tool requires is read from the variable of its name."""
    [answered] = calls(served, [("key_length", {})])
    assert answered.is_error is False
    assert answered.structured_content == {"result": len(SECRET)}
    assert "WX_KEY is not set" not in served.stderr()


def test_a_secret_missing_from_the_environment(served_without_key: Served) -> None:
    """Without the variable, the call is ``TOOL_RUNTIME_MISSING_REQUIREMENT`` and the server
    said at start which variable is missing and which tools it stops."""
    [answered] = calls(served_without_key, [("key_length", {})])
    assert answered.is_error is True
    assert facts(answered)["kind"] == "TOOL_RUNTIME_MISSING_REQUIREMENT"
    assert facts(answered)["category"] == "configuration"
    stderr = served_without_key.stderr()
    for tool_name in ("key_length", "leak", "pair"):
        assert (
            f"tdk serve: WX_KEY is not set in the environment: calls of {tool_name} will "
            "answer TOOL_RUNTIME_MISSING_REQUIREMENT"
        ) in stderr
    assert "tdk serve: WX_USER is not set in the environment: calls of pair" in stderr


def test_http_serve_says_where(served: Served) -> None:
    """``tdk serve --http`` says its URL on stderr (and over stdio, says nothing of HTTP)."""
    calls(served, [("add", {"a": 1})])
    if served.transport == "http":
        assert f"tdk serve: {served.url}" in served.stderr()
    else:
        assert "http://" not in served.stderr()


@pytest.mark.parametrize(("how", "kind"), LEAKS)
def test_a_planted_secret_never_leaves_the_server(served: Served, how: str, kind: str) -> None:
    """Errors carrying the secret in message, details, developer message, hint and the
    upstream's own words reach the client and stderr without it; the secret is nowhere."""
    answered, after = calls(served, [("leak", {"how": how}), ("key_length", {})])
    assert answered.is_error is True
    assert facts(answered)["kind"] == kind
    assert answered.structured_content is None
    dumped = answered.model_dump_json(by_alias=True)
    assert SECRET not in dumped
    assert SECRET[:12] not in dumped  # nor a good part of it
    for developer_side in ("the key was", '"inner"', '"nested"', "Traceback"):
        assert developer_side not in dumped
    assert after.structured_content == {"result": len(SECRET)}
    assert SECRET not in after.model_dump_json()
    stderr = served.stderr()
    assert SECRET not in stderr
    assert "the key was" not in stderr  # the developer message is not logged in full either


# -- raw HTTP: what no SDK client would send -------------------------------------------------


def still_serves(server: Served) -> None:
    """A proper SDK session on ``server`` lists the tools and calls one."""

    async def scenario() -> tuple[list[str], types.CallToolResult]:
        async with server.client() as client:
            names = [item.name for item in (await client.list_tools()).tools]
            return names, await client.call_tool("add", {"a": 1, "b": 1})

    names, answered = run(scenario())
    assert "add" in names
    assert answered.structured_content == {"result": 2}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        pytest.param(b"{not json", -32700, id="malformed-json"),
        pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700, id="truncated-json"),
        pytest.param(b"[1, 2]", -32602, id="not-json-rpc"),
        pytest.param(b'{"hello": "world"}', -32602, id="an-object-not-a-message"),
        pytest.param("\udcff".encode("utf-8", "surrogatepass"), -32700, id="not-utf-8"),
    ],
)
def test_a_malformed_body_is_refused_and_the_server_goes_on(
    http_served: Served, body: bytes, code: int
) -> None:
    """A body that is not a JSON-RPC message is a 400 with a JSON-RPC error; the server
    then serves a proper session."""
    with httpx.Client(timeout=10) as raw:
        response = raw.post(http_served.url, content=body, headers=RAW_HEADERS)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    still_serves(http_served)


def test_a_call_before_initialize_is_refused(http_served: Served) -> None:
    """A ``tools/call`` without a session (no initialize) is refused, runs nothing, and the
    server then serves a proper session."""
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 1}},
    }
    with httpx.Client(timeout=10) as raw:
        response = raw.post(http_served.url, json=call, headers=RAW_HEADERS)
        unknown = raw.post(
            http_served.url, json=call, headers={**RAW_HEADERS, "mcp-session-id": "no-such-id"}
        )
    assert response.status_code == 400
    assert "error" in response.json()
    assert "result" not in response.json()
    assert unknown.status_code == 404
    assert "result" not in unknown.json()
    still_serves(http_served)


def test_a_client_gone_mid_call_leaves_the_server_serving(http_served: Served) -> None:
    """A session whose call is given up (timed out, then its task cancelled) does not stop
    another session's calls."""

    async def scenario() -> list[types.CallToolResult]:
        async def given_up() -> None:
            async with http_served.client() as client:
                await client.call_tool("slow", {"seconds": 30})

        task = asyncio.create_task(given_up())
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with http_served.client() as client:
            with pytest.raises(mcp.MCPError, match="timed out"):
                await client.call_tool("slow", {"seconds": 30}, read_timeout_seconds=0.5)
            first = await client.call_tool("add", {"a": 2})
        async with http_served.client() as client:
            return [first, await client.call_tool("slow", {"seconds": 0})]

    first, second = run(asyncio.wait_for(scenario(), SCENARIO_TIMEOUT))  # (a hang guard)
    assert first.structured_content == {"result": 4}
    assert second.structured_content == {"result": "slept"}


# -- in process: serve() over pipes and over HTTP --------------------------------------------


STDIO_SESSION: list[dict[str, Any] | str] = [
    "this line is no JSON-RPC",
    INITIALIZE,
    INITIALIZED,
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    call_request(2, "add", {"a": 1}),
    call_request(3, "key_length", {}),
    call_request(4, "add", {"a": SECRET}),
    call_request(5, "nosuch", {}),
]


def check_stdio_session(pipes: Pipes, key: bool) -> None:
    """The answers of ``STDIO_SESSION``: the garbage line ignored, the calls answered."""
    assert pipes.problem is None
    answers = pipes.answers
    assert answers["init"]["result"]["serverInfo"]["name"] == "mcp_serve_tools"
    assert [item["name"] for item in answers[1]["result"]["tools"]][:2] == ["add", "forecast"]
    assert answers[2]["result"]["structuredContent"] == {"result": 3}
    keyed = answers[3]["result"]
    if key:
        assert keyed["structuredContent"] == {"result": len(SECRET)}
    else:
        assert keyed["_meta"]["tdk/error"]["kind"] == "TOOL_RUNTIME_MISSING_REQUIREMENT"
        assert "structuredContent" not in keyed
    assert answers[4]["result"]["_meta"]["tdk/error"]["kind"] == "TOOL_RUNTIME_BAD_INPUT_VALUE"
    assert answers[5]["result"]["isError"] is True
    assert SECRET not in json.dumps(answers)


def test_serve_over_stdio_in_process(tools_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve()`` reads requests from stdin, answers on stdout and returns when stdin ends."""
    toolkit = Toolkit.from_path(tools_file)
    with Pipes(STDIO_SESSION) as pipes:
        monkeypatch.setattr(sys, "stdin", pipes.stdin)
        monkeypatch.setattr(sys, "stdout", pipes.stdout)
        context = ToolContext(secrets={SECRET_NAME: SECRET})
        run(tdk_mcp.serve(toolkit, context=context))
    check_stdio_session(pipes, key=True)


@pytest.mark.parametrize("key", [True, False], ids=["key-set", "key-unset"])
def test_tdk_serve_over_stdio_in_process(
    tools_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: bool,
) -> None:
    """``tdk serve FILE`` serves stdio with the secrets of the environment, warns on stderr of
    each one missing, and ends with status 0 when the client goes."""
    monkeypatch.delenv("WX_USER", raising=False)
    if key:
        monkeypatch.setenv(SECRET_NAME, SECRET)
    else:
        monkeypatch.delenv(SECRET_NAME, raising=False)
    with Pipes(STDIO_SESSION) as pipes:
        monkeypatch.setattr(sys, "stdin", pipes.stdin)
        monkeypatch.setattr(sys, "stdout", pipes.stdout)
        status = main(["serve", str(tools_file)])
    assert status == 0
    check_stdio_session(pipes, key=key)
    stderr = capsys.readouterr().err
    assert ("tdk serve: WX_KEY is not set" in stderr) is not key
    assert "tdk serve: WX_USER is not set in the environment: calls of pair" in stderr
    assert "http://" not in stderr
    assert SECRET not in stderr


def test_tdk_serve_warns_of_a_secret_set_empty(
    tools_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A variable set to the empty string gives no secret (calls answer
    ``TOOL_RUNTIME_MISSING_REQUIREMENT``), so ``tdk serve`` warns of it as of one unset."""
    monkeypatch.setenv(SECRET_NAME, "")
    monkeypatch.setenv("WX_USER", "someone")
    with Pipes([INITIALIZE, INITIALIZED, call_request(1, "key_length", {})]) as pipes:
        monkeypatch.setattr(sys, "stdin", pipes.stdin)
        monkeypatch.setattr(sys, "stdout", pipes.stdout)
        assert main(["serve", str(tools_file)]) == 0
    assert pipes.problem is None
    answered = pipes.answers[1]["result"]
    assert answered["_meta"]["tdk/error"]["kind"] == "TOOL_RUNTIME_MISSING_REQUIREMENT"
    assert "WX_KEY" in capsys.readouterr().err


def test_tdk_serve_http_on_a_port_in_use(
    tools_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tdk serve --http`` on a port already taken says where it tried and why, and ends
    with a failure status; it never said it served there (the URL comes once the socket is
    bound)."""
    with socket.socket() as taken:
        taken.bind((HOST, 0))
        taken.listen()
        port = taken.getsockname()[1]
        status = main(["serve", str(tools_file), "--http", "--port", str(port)])
    assert status == 1
    stderr = capsys.readouterr().err
    assert f"http://{HOST}:{port}/mcp" not in stderr
    assert f"tdk serve: cannot serve on {HOST}:{port}: Address already in use" in stderr


def test_a_deadline_bounds_each_call(
    tools_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tdk serve --deadline 0.5``: a call that would take 30 s fails after about half a
    second, and the server answers the next call."""
    requests: list[dict[str, Any] | str] = [
        INITIALIZE,
        INITIALIZED,
        call_request(1, "slow", {"seconds": 30}),
        call_request(2, "add", {"a": 1}),
    ]
    with Pipes(requests) as pipes:
        monkeypatch.setattr(sys, "stdin", pipes.stdin)
        monkeypatch.setattr(sys, "stdout", pipes.stdout)
        assert main(["serve", str(tools_file), "--deadline", "0.5"]) == 0
    assert pipes.problem is None
    timed_out = pipes.answers[1]["result"]
    assert timed_out["isError"] is True
    assert timed_out["_meta"]["tdk/error"]["kind"] == "TOOL_RUNTIME_TIMEOUT"
    assert pipes.answers[2]["result"]["structuredContent"] == {"result": 3}
    capsys.readouterr()


@pytest.mark.parametrize("given", ["0", "-1", "nan", "inf", "soon", ""])
def test_a_bad_deadline_is_a_usage_error(
    tools_file: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    """``--deadline`` takes a positive, finite number of seconds; anything else ends with
    status 2 before serving."""
    with pytest.raises(SystemExit) as exited:
        main(["serve", str(tools_file), "--deadline", given])
    assert exited.value.code == 2
    assert "--deadline" in capsys.readouterr().err


def test_serve_without_the_mcp_package(
    tools_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the ``mcp`` package (the extra not installed), ``tdk serve`` says which extra
    to install and ends with status 1."""
    import tdk.hosts

    monkeypatch.delattr(tdk.hosts, "mcp")
    monkeypatch.delitem(sys.modules, "tdk.hosts.mcp")
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp now raises ImportError
    status = main(["serve", str(tools_file)])
    assert status == 1
    assert "tdk serve: tdk.hosts.mcp needs the mcp package: pip install 'tdk-tools[mcp]'" in (
        capsys.readouterr().err
    )


def test_a_print_of_a_tool_goes_to_stderr_over_stdio(tools_file: Path, tmp_path: Path) -> None:
    """Over stdio, what a tool prints lands on the server's stderr and the protocol goes on."""
    with serving("stdio", tools_file, tmp_path / "stdio.log", key=True) as server:
        first, second = calls(server, [("chatty", {"word": "hello-4e1f"}), ("add", {"a": 1})])
        stderr = server.stderr()
    assert first.structured_content == {"result": "hello-4e1f"}
    assert second.structured_content == {"result": 3}
    assert "stray print: hello-4e1f" in stderr


@dataclass
class InProcess(Generic[T]):
    """What a scenario against ``serve(..., "http")`` in a task of this loop gave, and what
    the server left once its task was cancelled."""

    value: T
    still_listening: bool
    leftover_tasks: list[str]
    caught: list[warnings.WarningMessage]

    def other_warnings(self) -> list[str]:
        """The warnings caught but the ResourceWarning of an unclosed socket (see
        ``test_cancelling_http_serve_closes_everything``)."""
        return [
            str(each.message)
            for each in self.caught
            if not (each.category is ResourceWarning and "socket" in str(each.message))
        ]


def in_process_http(
    toolkit: Toolkit, scenario: Callable[[str], Awaitable[T]], **options: Any
) -> InProcess[T]:
    """``scenario(url)`` against ``serve(toolkit, "http", **options)`` run in a task of a new
    loop; then the task is cancelled, as ``serve()`` says it stops. Warnings are recorded
    (and the loop's garbage collected) so that what the server leaves is seen here."""
    port = free_port()

    async def main_task() -> tuple[T, bool, list[str]]:
        server = asyncio.create_task(tdk_mcp.serve(toolkit, "http", port=port, **options))
        try:
            async with asyncio.timeout(SCENARIO_TIMEOUT):
                while not await can_connect(port):
                    assert not server.done(), server
                    await asyncio.sleep(0.02)
                value = await scenario(f"http://{HOST}:{port}/mcp")
        finally:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server
        await asyncio.sleep(0.2)
        this = asyncio.current_task()
        leftovers = [repr(task.get_coro()) for task in asyncio.all_tasks() if task is not this]
        return value, await can_connect(port), leftovers

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value, listening, leftovers = asyncio.run(main_task())
        gc.collect()
    return InProcess(value, listening, leftovers, caught)


async def can_connect(port: int) -> bool:
    """Whether a connection to ``port`` is accepted, from inside a loop."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    await writer.wait_closed()
    return True


@tool(read_only=True)
def add(a: Annotated[int, "First."], b: Annotated[int, "Second."] = 2) -> int:
    """Add two numbers."""
    return a + b


@tool(read_only=True)
def whoami(context: ToolContext) -> str:
    """Who the call is for."""
    return f"{context.user_id}"


def test_serve_over_http_in_process() -> None:
    """``serve(..., "http")`` serves a session with the options of ``server()``: the name, a
    context made per call, the runner's policies."""
    toolkit = Toolkit("inproc", [add, whoami])
    runner = ToolRunner(toolkit)
    made: list[int] = []

    def context() -> ToolContext:
        made.append(len(made) + 1)
        return ToolContext(user_id=f"user-{made[-1]}")

    async def scenario(url: str) -> tuple[str, list[Any]]:
        async with mcp.Client(url) as client:
            info = client.server_info
            assert info is not None
            values = [
                (await client.call_tool("whoami", {})).structured_content,
                (await client.call_tool("whoami", {})).structured_content,
                (await client.call_tool("add", {"a": "x"})).meta,
            ]
            return info.name, values

    outcome = in_process_http(toolkit, scenario, runner=runner, context=context, name="custom")
    name, values = outcome.value
    assert name == "custom"
    assert values[:2] == [{"result": "user-1"}, {"result": "user-2"}]
    assert values[2]["tdk/error"]["kind"] == "TOOL_RUNTIME_BAD_INPUT_VALUE"
    assert runner.stats().calls == 3
    assert outcome.other_warnings() == []


def test_cancelling_http_serve_closes_everything() -> None:
    """Cancelling the task of ``serve(..., "http")`` (the way it is documented to stop)
    stops the server: the port no longer accepts connections, no task of it runs on, and
    no socket is left for the garbage collector to find unclosed."""

    async def scenario(url: str) -> Any:
        async with mcp.Client(url) as client:
            return (await client.call_tool("add", {"a": 1})).structured_content

    outcome = in_process_http(Toolkit("stopping", [add]), scenario)
    assert outcome.value == {"result": 3}
    left = {
        "tasks": outcome.leftover_tasks,
        "listening": outcome.still_listening,
        "warnings": [str(each.message) for each in outcome.caught],
    }
    assert left == {"tasks": [], "listening": False, "warnings": []}


def test_a_client_cancelled_mid_call_frees_the_bulkhead_slot_over_http() -> None:
    """With a bulkhead of one slot, a call whose client is cancelled mid-call is cancelled in
    the server, so a new session's call gets the slot (not ``TOOL_RUNTIME_BULKHEAD_FULL``);
    while a call holds the slot, another is refused."""
    held = Held("held")
    runner = held.runner

    async def scenario(url: str) -> tuple[types.CallToolResult, types.CallToolResult]:
        async def doomed() -> None:
            async with mcp.Client(url) as client:
                await client.call_tool("hold", {"label": "doomed"})

        task = asyncio.create_task(doomed())
        await held.entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        held.entered.clear()
        async with mcp.Client(url) as first, mcp.Client(url) as second:
            running = asyncio.create_task(first.call_tool("hold", {"label": "next"}))
            await held.entered.wait()
            refused = await second.call_tool("hold", {"label": "crowded"})
            held.release.set()
            return await running, refused

    outcome = in_process_http(held.toolkit, scenario, runner=runner)
    answered, refused = outcome.value
    assert answered.is_error is False
    assert answered.structured_content == {"result": "next"}
    assert facts(refused)["kind"] == "TOOL_RUNTIME_BULKHEAD_FULL"
    assert held.ended == ["cancelled", "done"]
    assert outcome.other_warnings() == []


# -- tdk run --secret ------------------------------------------------------------------------


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``tdk`` in process: its status, stdout and stderr."""
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    ("flags", "environ", "expected"),
    [
        pytest.param(["--secret", "WX_KEY=abc"], {}, 3, id="flag"),
        pytest.param([], {"WX_KEY": "abcd"}, 4, id="environment"),
        pytest.param(["--secret", "WX_KEY=ab"], {"WX_KEY": "abcd"}, 2, id="flag-first"),
        pytest.param(["--secret", "WX_KEY=a=b=c"], {}, 5, id="equals-in-the-value"),
        pytest.param(["--secret", "WX_KEY=old", "--secret", "WX_KEY=newer"], {}, 5, id="last-wins"),
        pytest.param(["--secret", "OTHER=x"], {"WX_KEY": "abcdef"}, 6, id="other-flag-and-env"),
    ],
)
def test_run_with_a_secret_table(
    tools_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    environ: dict[str, str],
    expected: int,
) -> None:
    """``tdk run --secret NAME=VALUE`` gives the call a secret; a secret the tool requires
    and not given comes from the variable of its name."""
    monkeypatch.delenv(SECRET_NAME, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    status, out, err = run_main(["run", str(tools_file), "key_length", *flags], capsys)
    assert (status, err) == (0, "")
    assert json.loads(out)["value"] == expected


def test_run_with_two_secrets(
    tools_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two secrets: one from its flag, one from the environment, or both from flags."""
    monkeypatch.delenv(SECRET_NAME, raising=False)
    monkeypatch.setenv("WX_USER", "ada")
    status, out, _ = run_main(["run", str(tools_file), "pair", "--secret", "WX_KEY=k"], capsys)
    assert (status, json.loads(out)["value"]) == (0, {"key": 1, "user": 3})
    flags = ["--secret", "WX_KEY=kk", "--secret", "WX_USER=grace"]
    status, out, _ = run_main(["run", str(tools_file), "pair", *flags], capsys)
    assert (status, json.loads(out)["value"]) == (0, {"key": 2, "user": 5})


def test_run_of_an_unknown_tool_with_a_secret(
    tools_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A secret given to an unknown tool: ``TOOL_NOT_FOUND`` with a suggestion, status 1,
    and the secret (known to the context) is not printed even in the name."""
    monkeypatch.setenv(SECRET_NAME, SECRET)
    flags = ["--secret", f"OTHER={SECRET}"]
    status, out, err = run_main(["run", str(tools_file), "key_lenght", *flags], capsys)
    assert status == 1
    assert json.loads(out)["error"]["kind"] == "TOOL_NOT_FOUND"
    assert "key_length" in out
    status, out, err = run_main(["run", str(tools_file), SECRET, *flags], capsys)
    assert status == 1
    assert SECRET not in out + err


def test_run_without_the_secret(
    tools_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Neither flag nor variable: the call fails ``TOOL_RUNTIME_MISSING_REQUIREMENT``, status 1."""
    monkeypatch.delenv(SECRET_NAME, raising=False)
    status, out, _ = run_main(["run", str(tools_file), "key_length"], capsys)
    assert status == 1
    assert json.loads(out)["error"]["kind"] == "TOOL_RUNTIME_MISSING_REQUIREMENT"


@pytest.mark.parametrize(
    "given",
    [
        pytest.param("novalue-7d2b", id="no-equals"),
        pytest.param("=value-7d2b", id="no-name"),
        pytest.param("", id="empty"),
    ],
)
def test_a_secret_flag_without_a_name_is_a_usage_error(
    tools_file: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    """``--secret`` without ``NAME=`` ends with status 2, never echoing what was given (it
    may be the value itself), and runs nothing."""
    status, out, err = run_main(
        ["run", str(tools_file), "add", '{"a": 1}', "--secret", given], capsys
    )
    assert status == 2
    assert out == ""
    assert "--secret takes NAME=VALUE" in err
    if given:
        assert given.lstrip("=") not in err


@pytest.mark.parametrize(("how", "kind"), LEAKS)
@pytest.mark.parametrize("stacktrace", [False, True], ids=["plain", "stacktrace"])
def test_run_never_prints_the_secret(
    tools_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    how: str,
    kind: str,
    stacktrace: bool,
) -> None:
    """``tdk run`` of a tool whose errors carry the secret (given by flag or by the
    environment) prints them without it, stack trace included."""
    for source in ("flag", "environment"):
        monkeypatch.delenv(SECRET_NAME, raising=False)
        flags = ["--stacktrace"] if stacktrace else []
        if source == "flag":
            flags += ["--secret", f"{SECRET_NAME}={SECRET}"]
        else:
            monkeypatch.setenv(SECRET_NAME, SECRET)
        status, out, err = run_main(
            ["run", str(tools_file), "leak", json.dumps({"how": how}), *flags], capsys
        )
        assert status == 1
        assert json.loads(out)["error"]["kind"] == kind
        assert SECRET not in out
        assert SECRET not in err


def test_run_as_a_command(tools_file: Path) -> None:
    """``python -m tdk run`` with ``--secret``, with the environment, and a bad flag."""
    base = [sys.executable, "-m", "tdk", "run", str(tools_file), "key_length"]

    def command(*extra: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=SCENARIO_TIMEOUT,
            check=False,
        )

    flagged = command("--secret", "WX_KEY=abc", env=server_env(key=False))
    assert (flagged.returncode, json.loads(flagged.stdout)["value"]) == (0, 3)
    from_env = command(env=server_env(key=True))
    assert (from_env.returncode, json.loads(from_env.stdout)["value"]) == (0, len(SECRET))
    bad = command("--secret", SECRET, env=server_env(key=False))
    assert bad.returncode == 2
    assert SECRET not in bad.stdout + bad.stderr


# -- the stdio server's process --------------------------------------------------------------


def test_a_stdio_server_ends_when_its_client_goes(tools_file: Path, tmp_path: Path) -> None:
    """``tdk serve`` over stdio ends with status 0 once stdin closes."""
    status, out, err = initialize_once(
        [sys.executable, "-m", "tdk", "serve", str(tools_file)],
        env=server_env(key=True),
        cwd=tmp_path,
    )
    assert status == 0, err
    [line] = out.decode().splitlines()
    assert json.loads(line)["result"]["serverInfo"]["name"] == "mcp_serve_tools"
    assert SECRET.encode() not in out + err
