"""Progress: ``await context.progress(done, total, message)`` and the runner's own waits, as
MCP ``notifications/progress`` received by the SDK client's progress callback: in process (the
2026-07-28 direct dispatch and the 2025 stream), over stdio against a ``tdk serve``
subprocess and over streamable HTTP against ``tdk serve --http``, in both eras.

Notifications are counted, never timed: the throttle's bound (4 a second) is checked against
the length of the same call, measured by the tool itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import mcp
import pytest
from _mcp_support import HOST, START_TIMEOUT, STOP_TIMEOUT, accepts, free_port, run
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client

from tdk import Bulkhead, RateLimit, RetryPolicy, ToolContext, Toolkit, ToolRunner, tool
from tdk.errors import UpstreamRateLimitError
from tdk.hosts import mcp as tdk_mcp

MODES = ["auto", "legacy"]
#: One notification: ``(progress, total, message)``.
Note = tuple[float, float | None, str | None]

TOOLS = '''
"""Tools that report progress, and one that an upstream rate-limits once."""

import asyncio
import time
from typing import Annotated

from tdk import ToolContext, tool
from tdk.errors import UpstreamRateLimitError

_LIMITED: set[str] = set()


@tool(read_only=True)
async def steps(n: Annotated[int, "How many steps."], context: ToolContext) -> float:
    """Report each of ``n`` steps, 10 ms apart; the seconds it took."""
    started = time.monotonic()
    for step in range(1, n + 1):
        await asyncio.sleep(0.01)
        await context.progress(step, n, f"step {step} of {n}")
    return time.monotonic() - started


@tool(read_only=True)
def limited(token: Annotated[str, "Names the call."]) -> str:
    """Rate-limited by the upstream once (Retry-After 0.3 s), then answers."""
    if token not in _LIMITED:
        _LIMITED.add(token)
        raise UpstreamRateLimitError("slow down", retry_after_ms=300)
    return token
'''


@tool(read_only=True)
async def steps(n: Annotated[int, "How many steps."], context: ToolContext) -> float:
    """Report each of ``n`` steps, 10 ms apart; the seconds it took."""
    started = time.monotonic()
    for step in range(1, n + 1):
        await asyncio.sleep(0.01)
        await context.progress(step, n, f"step {step} of {n}")
    return time.monotonic() - started


@tool(read_only=True)
async def burst(n: Annotated[int, "How many reports."], context: ToolContext) -> int:
    """Report ``n`` steps at once, without waiting between them."""
    for step in range(1, n + 1):
        await context.progress(step, n)
    return n


@tool(read_only=True)
def sync_burst(n: Annotated[int, "How many reports."], context: ToolContext) -> int:
    """A sync tool (in a worker thread) reporting ``n`` steps, without ``await``."""
    for step in range(1, n + 1):
        context.progress(step, n)
    return n


@tool(read_only=True)
async def backwards(context: ToolContext) -> str:
    """Report 5, then 3 and 3 again (each after the throttle's interval), then 8."""
    for done in (5, 3, 3, 8):
        await context.progress(done, 10, f"at {done}")
        await asyncio.sleep(0.3)
    return "done"


def collector() -> tuple[list[Note], Any]:
    """A list of the notifications received, and the progress callback that fills it."""
    notes: list[Note] = []

    async def callback(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    return notes, callback


def called(
    server: Any, mode: str, name: str, arguments: dict[str, Any], *, progress: bool = True
) -> tuple[Any, list[Note]]:
    """One call of ``name`` in process, with a progress callback: its structured result and
    the notifications received."""
    notes, callback = collector()

    async def scenario() -> Any:
        async with mcp.Client(server, mode=mode) as client:  # type: ignore[arg-type]
            answered = await client.call_tool(
                name, arguments, progress_callback=callback if progress else None
            )
            return answered.structured_content

    return run(scenario()), notes


def assert_increasing(notes: list[Note]) -> None:
    """Each notification's progress is above the one before (as MCP wants)."""
    values = [note[0] for note in notes]
    assert all(later > earlier for earlier, later in itertools.pairwise(values))


@pytest.mark.parametrize("mode", MODES)
def test_reports_are_throttled_to_four_a_second(mode: str) -> None:
    """A tool reporting every 10 ms is heard at most once a quarter of a second of its own
    length (the first at once, and its last report as it ends), more than once, ever
    increasing, and its last report arrives whole."""
    toolkit = Toolkit("progress", [steps])
    (result, notes) = called(tdk_mcp.server(toolkit), mode, "steps", {"n": 120})
    seconds = result["result"]
    assert 2 <= len(notes) <= 4 * seconds + 2, (len(notes), seconds)
    assert notes[-1] == (120, 120, "step 120 of 120")
    assert_increasing(notes)


BURSTS = [
    pytest.param("burst", id="async-tool"),
    pytest.param("sync_burst", id="sync-tool-in-a-thread"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", BURSTS)
def test_a_burst_is_dropped_but_its_last_report(mode: str, name: str) -> None:
    """A thousand reports in a row: the intermediate ones are dropped (a handful at most go
    out), the last never is."""
    toolkit = Toolkit("progress", [burst, sync_burst])
    result, notes = called(tdk_mcp.server(toolkit), mode, name, {"n": 1000})
    assert result == {"result": 1000}
    assert 1 <= len(notes) <= 3
    assert notes[-1] == (1000, 1000, None)
    assert_increasing(notes)


@pytest.mark.parametrize("mode", MODES)
def test_done_never_goes_down(mode: str) -> None:
    """Reports of 5, 3, 3, 8: the 3s are sent just above 5 (never below, never equal), with
    their own messages."""
    result, notes = called(tdk_mcp.server(Toolkit("progress", [backwards])), mode, "backwards", {})
    assert result == {"result": "done"}
    assert [note[2] for note in notes] == ["at 5", "at 3", "at 3", "at 8"]
    assert notes[0][0] == 5
    assert 5 < notes[1][0] < notes[2][0] < 5.001
    assert notes[3][0] == 8
    assert all(note[1] == 10 for note in notes)


@pytest.mark.parametrize("mode", MODES)
def test_no_progress_token_no_notification(mode: str) -> None:
    """A client that asks for no progress gets none, and the call's result as ever."""
    result, notes = called(
        tdk_mcp.server(Toolkit("progress", [burst])), mode, "burst", {"n": 5}, progress=False
    )
    assert (result, notes) == ({"result": 5}, [])


LIMITED_ONCE: set[str] = set()


@tool(read_only=True)
def rate_limited(token: Annotated[str, "Names the call."]) -> str:
    """Rate-limited by the upstream once (Retry-After 0.3 s), then answers."""
    if token not in LIMITED_ONCE:
        LIMITED_ONCE.add(token)
        raise UpstreamRateLimitError("slow down", retry_after_ms=300)
    return token


@tool(read_only=True)
async def quick(label: Annotated[str, "A label."]) -> str:
    """Answer after a short while (long enough for another call to queue behind it)."""
    await asyncio.sleep(0.3)
    return label


def test_the_runner_says_why_it_waits_for_a_retry() -> None:
    """A retry after the upstream's Retry-After is reported before the runner waits, saying
    why, how long and which attempt comes."""
    toolkit = Toolkit("waits", [rate_limited])
    runner = ToolRunner(toolkit, retry=RetryPolicy())
    server = tdk_mcp.server(toolkit, runner=runner)
    result, notes = called(server, "auto", "rate_limited", {"token": "retry"})
    assert result == {"result": "retry"}
    assert notes == [(0, None, "rate limited upstream: retrying in 0.3 s, attempt 2 of 3")]


def test_the_runner_says_why_it_waits_for_its_limiter_and_a_slot() -> None:
    """Two calls at once, twice: the one that comes second waits for the limiter (one call
    per 0.5 s, waiting allowed), or for the bulkhead's slot; it is told why it waits, the
    other hears nothing."""
    toolkit = Toolkit("waits", [quick])
    runner = ToolRunner(toolkit)
    runner.configure("quick", rate_limit=RateLimit(calls=1, period=0.5, max_wait=5))
    queued = ToolRunner(toolkit, bulkhead=Bulkhead(max_concurrent=1, max_wait=5))
    limited_notes, limited_callback = collector()
    queued_notes, queued_callback = collector()

    async def scenario() -> None:
        async with (
            mcp.Client(tdk_mcp.server(toolkit, runner=runner)) as first,
            mcp.Client(tdk_mcp.server(toolkit, runner=queued)) as second,
        ):
            await asyncio.gather(
                *(
                    client.call_tool("quick", {"label": label}, progress_callback=callback)
                    for client, callback in ((first, limited_callback), (second, queued_callback))
                    for label in ("a", "b")
                )
            )

    run(scenario())
    [(done, total, message)] = limited_notes
    assert (done, total) == (0, None)
    assert message is not None
    assert message.startswith("rate limited here: waiting ")
    assert message.endswith(" s for a turn")
    assert queued_notes == [(0, None, "busy: waiting up to 5.0 s for a free slot")]


def test_progress_without_a_host_does_nothing() -> None:
    """Outside MCP (``tool.run``, a runner) a report goes nowhere: the call is as ever, and
    a sync tool's report that is never awaited warns of nothing."""
    assert burst.run_sync({"n": 3}).value == 3
    assert sync_burst.run_sync({"n": 3}).value == 3
    assert ToolRunner(Toolkit("quiet", [burst])).run_sync("burst", {"n": 2}).value == 2


BAD_REPORTS = [
    pytest.param((-1,), {}, ValueError, id="negative"),
    pytest.param((float("nan"),), {}, ValueError, id="nan"),
    pytest.param(("3",), {}, TypeError, id="text-done"),
    pytest.param((True,), {}, TypeError, id="bool-done"),
    pytest.param((1,), {"total": float("inf")}, ValueError, id="infinite-total"),
    pytest.param((10**400,), {}, ValueError, id="an-int-too-large-for-a-float"),
    pytest.param((1,), {"message": 3}, TypeError, id="message-not-text"),
]


@pytest.mark.parametrize(("args", "options", "error"), BAD_REPORTS)
def test_a_bad_report_is_the_tools_bug(
    args: tuple[Any, ...], options: dict[str, Any], error: type[Exception]
) -> None:
    """``progress()`` refuses what is not a report (the tool's own bug, raised at once)."""
    with pytest.raises(error):
        ToolContext().progress(*args, **options)


def test_a_message_is_redacted_with_the_calls_secrets() -> None:
    """A report's message never carries a secret of the call's context."""
    secret = "planted-progress-secret-77"

    @tool(read_only=True)
    async def leaky(context: ToolContext) -> str:
        """Report a message quoting a secret."""
        await context.progress(1, 2, f"using key {context.get_secret('KEY')}")
        return "ok"

    server = tdk_mcp.server(Toolkit("leaky", [leaky]), context=ToolContext(secrets={"KEY": secret}))
    _, notes = called(server, "legacy", "leaky", {})
    [(_, _, message)] = notes
    assert message is not None
    assert secret not in message
    assert message.startswith("using key ")


# -- over stdio and HTTP, against tdk serve ---------------------------------------------------


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module ``tdk serve`` serves."""
    path = tmp_path_factory.mktemp("progress") / "progress_tools.py"
    path.write_text(TOOLS)
    return path


@contextlib.contextmanager
def http_served(tools_file: Path) -> Iterator[str]:
    """``tdk serve --http`` of the module in a subprocess: its URL until the block ends."""
    port = free_port()
    log = tools_file.with_suffix(".http.log")
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tdk", "serve", str(tools_file), "--http", "--port", str(port)],
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
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)


def served_calls(server: Any, mode: str, token: str) -> tuple[list[Note], list[Note], float]:
    """``steps`` and ``limited`` called with progress callbacks: the notifications of each,
    and the seconds ``steps`` took."""
    step_notes, step_callback = collector()
    wait_notes, wait_callback = collector()

    async def scenario() -> float:
        async with mcp.Client(server, mode=mode) as client:
            answered = await client.call_tool("steps", {"n": 60}, progress_callback=step_callback)
            await client.call_tool("limited", {"token": token}, progress_callback=wait_callback)
        seconds: float = answered.structured_content["result"]  # type: ignore[index]
        return seconds

    seconds = run(scenario())
    return step_notes, wait_notes, seconds


def assert_served(step_notes: list[Note], wait_notes: list[Note], seconds: float) -> None:
    assert 2 <= len(step_notes) <= 4 * seconds + 2, (len(step_notes), seconds)
    assert step_notes[-1] == (60, 60, "step 60 of 60")
    assert_increasing(step_notes)
    assert wait_notes == [(0, None, "rate limited upstream: retrying in 0.3 s, attempt 2 of 3")]


@pytest.mark.parametrize("mode", MODES)
def test_progress_over_stdio(tools_file: Path, mode: str) -> None:
    """``tdk serve`` over stdio: the tool's reports and its runner's retry wait reach the
    SDK client's progress callback."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tdk", "serve", str(tools_file)], cwd=tools_file.parent
    )
    with tools_file.with_suffix(f".{mode}.log").open("w") as errlog:
        notes = served_calls(stdio_client(params, errlog=errlog), mode, f"stdio-{mode}")
    assert_served(*notes)


def test_progress_over_http(tools_file: Path) -> None:
    """``tdk serve --http``: the same, for a client of each era."""
    with http_served(tools_file) as url:
        for mode in MODES:
            assert_served(*served_calls(url, mode, f"http-{mode}"))
